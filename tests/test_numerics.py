"""The numerics sweep (attn_doctor/probes/target/numerics_child.py) on real torch kernels on the CPU: SDPA's
own CPU kernels pass every case (no false alarm), and kernels with real bug mechanisms are caught at
the cases that show them, and only there. The GPU runs it for real (tests/gpu/test_gpu_numerics.py).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


def _load(name):
    spec = importlib.util.spec_from_file_location(f"test_{name}", ROOT / "attn_doctor" / "probes" / "target" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nc = _load("numerics_child")
gc = _load("gpu_child")

DTYPES = [torch.bfloat16, torch.float16]


def _cpu_sdpa():
    backends = gc._sdpa_backends(torch)
    return [(name, nc.sdpa_call(torch, backends[name])) for name in ("sdpa-math", "sdpa-flash")]


def test_sdpas_cpu_kernels_pass_every_case_in_both_dtypes():
    """No false alarm: the CPU's math and flash kernels are right, and keep a margin under the
    tolerance (the worst error stays below half of what is allowed)."""
    results = nc.sweep(torch, _cpu_sdpa(), DTYPES, "cpu")
    assert len(results) == len(nc.CASES) * 2 * 2
    ran = [r for r in results if r["status"] == "ok"]
    assert not [r for r in results if r["status"] == "wrong"]
    assert len(ran) >= len(results) - 2 * len(nc.CASES)  # the flash kernel may refuse a few; math takes all
    assert max(r["worst"] for r in ran) < 1.0


class _TileBugAttention(torch.autograd.Function):
    """Attention with the mechanism of pytorch#196678: the backward walks keys in 128-wide tiles,
    zero-fills the tail and scores it 0 instead of -inf, so exp(0 - lse) overflows to inf for rows
    whose logsumexp is below -88.7, and inf * 0 (the zero-filled keys) is NaN in dQ."""

    @staticmethod
    def forward(ctx, q, k, v, allowed, buggy):
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if allowed is not None:
            s = s.masked_fill(~allowed, float("-inf"))
        lse = torch.logsumexp(s, -1, keepdim=True)
        out = (torch.exp(s - lse) @ v.float()).to(q.dtype)
        ctx.save_for_backward(q, k, v, lse, s)
        ctx.buggy = buggy
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, lse, s = ctx.saved_tensors
        sk = k.shape[-2]
        tail = (-sk) % 128 if sk % 128 == 64 and ctx.buggy else 0  # the bug: a 64-row tail of a 128-row tile
        p = torch.exp(s - lse)
        dv = p.transpose(-2, -1) @ grad.float()
        dp = grad.float() @ v.float().transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        kf = k.float()
        if tail:
            pad_p = torch.exp(torch.zeros(s.shape[:-1] + (tail,)) - lse)  # scored 0, not -inf
            ds = torch.cat([ds, pad_p * 0.0 + pad_p * (0.0 - (dp * p).sum(-1, keepdim=True))], -1)
            kf = torch.cat([kf, torch.zeros(k.shape[:-2] + (tail, k.shape[-1]))], -2)
        dq = (ds @ kf) / math.sqrt(q.shape[-1])
        dk = (ds[..., :sk].transpose(-2, -1) @ q.float()) / math.sqrt(q.shape[-1])
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None


def _tile_bug_kernel(q, k, v, mask, is_causal, enable_gqa):
    if enable_gqa:
        raise nc.NotApplicable("no grouped heads")
    sq, sk = q.shape[-2], k.shape[-2]
    allowed = torch.ones(sq, sk, dtype=torch.bool).tril() if is_causal else None
    if mask is not None:
        allowed = mask if mask.dtype == torch.bool else ~torch.isneginf(mask)
        if mask.dtype != torch.bool and (mask != 0).any() and not torch.isneginf(mask).any():
            raise nc.NotApplicable("a bias")
        if (~allowed.any(-1)).any():
            raise nc.NotApplicable("rows that see no key")
    if is_causal and mask is None:
        return _TileBugAttention.apply(q, k, v, allowed, False)  # the causal kernel is another one: its tail is masked
    return _TileBugAttention.apply(q, k, v, None if allowed is None else allowed.expand(q.shape[:-1] + (sk,)), True)


def test_the_tile_bug_is_caught_at_the_tile_cases_and_only_there():
    results = nc.sweep(torch, [("tile-bug", _tile_bug_kernel)], [torch.bfloat16], "cpu")
    wrong = {r["case"] for r in results if r["status"] == "wrong"}
    tile64 = {c["name"] for c in nc.CASES if c["sk"] % 128 == 64 and c["logits"] == "neglse" and c["mask"] != "causal"}
    assert tile64 and wrong == tile64
    first = next(r for r in results if r["case"] == "tile64-bool-mask-neglse")
    assert set(first["directions"]) == {"dq"} and first["directions"]["dq"]["nonfinite"] > 0
    # a multiple of 128, benign logits, the causal kernel: right
    for case in ("tile128-bool-mask-neglse", "odd-causal", "tile64-causal-neglse", "bool-padding"):
        assert next(r for r in results if r["case"] == case)["status"] in ("ok", "n/a"), case


def test_a_kernel_off_by_a_little_is_wrong_and_says_by_how_much():
    """A kernel whose softmax scale is 2% off: finite everywhere, wrong by more than the tolerance."""

    def skewed(q, k, v, mask, is_causal, enable_gqa):
        extra = {"enable_gqa": True} if enable_gqa else {}
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal,
                                                                scale=1.02 / math.sqrt(q.shape[-1]), **extra)

    results = nc.sweep(torch, [("skewed", skewed)], [torch.float16], "cpu", cases=[nc.CASE_BY_NAME["odd-causal"]])
    (r,) = results
    assert r["status"] == "wrong" and r["worst"] > 1
    assert all(d["nonfinite"] == 0 and d["err"] > d["allowed"] for d in r["directions"].values())


def test_rows_that_see_no_key_must_be_zeros():
    """SDPA promises zeros for a row that sees no key (pytorch#133882); a kernel that averages every
    value there instead (what the H100's cuDNN does) is wrong at that case only."""

    def averaging(q, k, v, mask, is_causal, enable_gqa):
        extra = {"enable_gqa": True} if enable_gqa else {}
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, **extra)
        if mask is not None and mask.dtype == torch.bool:
            empty = ~mask.any(-1, keepdim=True)
            out = torch.where(empty, v.mean(-2, keepdim=True).expand_as(out), out)
        return out

    cases = [nc.CASE_BY_NAME[n] for n in ("fully-masked-rows", "bool-padding")]
    results = {r["case"]: r for r in nc.sweep(torch, [("averaging", averaging)], [torch.bfloat16], "cpu", cases=cases)}
    assert results["fully-masked-rows"]["status"] == "wrong" and "out" in results["fully-masked-rows"]["directions"]
    assert results["bool-padding"]["status"] == "ok"


def test_a_kernel_that_raises_or_refuses_is_reported_as_such():
    def raising(q, k, v, mask, is_causal, enable_gqa):
        raise RuntimeError("CUDNN_STATUS_EXECUTION_FAILED")

    def refusing(q, k, v, mask, is_causal, enable_gqa):
        raise RuntimeError("No available kernel. Aborting execution.")

    case = [nc.CASE_BY_NAME["odd-causal"]]
    (r1,) = nc.sweep(torch, [("raising", raising)], [torch.bfloat16], "cpu", cases=case)
    (r2,) = nc.sweep(torch, [("refusing", refusing)], [torch.bfloat16], "cpu", cases=case)
    (r3,) = nc.sweep(torch, [("missing", ImportError("No module named 'xformers'"))], [torch.bfloat16], "cpu", cases=case)
    assert (r1["status"], r2["status"], r3["status"]) == ("error", "refused", "unavailable")
    assert "CUDNN_STATUS_EXECUTION_FAILED" in r1["error"] and "xformers" in r3["error"]


def test_the_reference_is_float64_and_the_inputs_are_the_rounded_ones():
    """float64 from the same (rounded) inputs: a kernel given bf16 inputs is not blamed for their
    rounding. The float64 reference of exact inputs reproduces SDPA's float64 math."""
    case = nc.CASE_BY_NAME["bool-padding"]
    inputs = nc.make_inputs(torch, case, torch.bfloat16, "cpu")
    out64 = nc.run_reference(torch, inputs, None)[0]
    q, k, v, _g, mask, is_causal, gqa = inputs
    expected = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
    assert out64.dtype == torch.float64 and torch.allclose(out64, expected, atol=1e-12)


def test_the_default_choice_is_recorded_on_sdpas_results():
    results = nc.sweep(torch, _cpu_sdpa(), [torch.bfloat16], "cpu", cases=[nc.CASE_BY_NAME["odd-causal"]],
                       choose=lambda *a: "sdpa-flash")
    assert {r["default"] for r in results} == {"sdpa-flash"}


def test_every_case_has_a_class_in_words_and_the_groups_split_by_dtype():
    assert len({c["name"] for c in nc.CASES}) == len(nc.CASES)
    for case in nc.CASES:
        facts = nc.case_facts(case)
        assert facts["cls"] and len(facts["shape"]) == 6
    assert nc.numerics_groups(["float16", "bfloat16"], ["flash_attn"]) == [
        "num:sdpa:float16", "num:sdpa-cudnn:float16", "num:sdpa:bfloat16", "num:sdpa-cudnn:bfloat16", "num:lib:flash_attn"]


# ---------------------------------------------------------------- judged: the real H100 recording


def _facts(name):
    import msgspec

    from attn_doctor.facts import Facts

    return msgspec.json.decode((ROOT / "tests" / "fixtures" / "facts" / f"{name}.json").read_bytes(), type=Facts)


def _results(name, **set_env):
    from attn_doctor.diagnosis.engine import evaluate
    from attn_doctor.rules.loader import load_recipes

    facts = _facts(name)
    facts.env.update(set_env)
    return {r.rule: r for r in evaluate(load_recipes(), facts)}


def test_the_recorded_h100_sweep_is_one_cudnn_error_naming_kernel_direction_shapes_and_default():
    results = _results("h100-numerics")
    ad704 = results["AD704"]
    assert ad704.status == "error"
    assert ad704.message.startswith("SDPA's cuDNN kernel (cuDNN 9.19.0) computes wrong results against float64: dQ: 45,056 of 45,056 values NaN or inf at key length 64 mod 128")
    assert "SDPA picks it by default there; pytorch/pytorch#196678" in ad704.message
    assert "dK: 16,384 of 16,384 values NaN or inf" in ad704.message and "NVIDIA/cudnn-frontend#1072" in ad704.message
    assert "fully masked query rows" in ad704.message
    remedies = [r.summary for r in ad704.remedies]
    assert remedies[0] == "Turn SDPA's cuDNN kernel off in the training script: torch.backends.cuda.enable_cudnn_sdp(False)"
    assert any("TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in r for r in remedies)
    assert ad704.remedies[0].detail.startswith("SDPA then runs its flash or memory-efficient kernel for these calls")
    # one cause, one finding: the known bugs the sweep measured are covered by it
    assert results["AD710"].status == "skipped" and "AD704" in results["AD710"].reason
    assert ad704.evidence["covers"] == "AD710"
    # the other kernels matched float64 on every case they ran
    assert results["AD705"].status == "pass" and results["AD706"].status == "pass"


def test_the_older_h100_report_without_a_sweep_warns_of_the_known_bug():
    results = _results("h100")
    assert results["AD704"].status == "skipped"
    ad710 = results["AD710"]
    assert ad710.status == "warning" and "cuDNN 9.19.0" in ad710.message and "Not measured here" in ad710.message
    assert _results("h100", TORCH_CUDNN_SDPA_DEPRIORITIZED="1")["AD710"].status == "pass"


def test_with_a_config_that_trains_through_flash_attn_the_known_bug_does_not_apply(tmp_path):
    from attn_doctor.diagnosis.engine import evaluate
    from attn_doctor.probes.configs import probe_config
    from attn_doctor.rules.loader import load_recipes

    sdpa, fa2 = tmp_path / "sdpa.yml", tmp_path / "fa2.yml"
    sdpa.write_text("base_model: Qwen/Qwen2.5-0.5B\nsequence_len: 2048\nmicro_batch_size: 2\ndatasets: []\nbf16: true\nsdp_attention: true\n")
    fa2.write_text("base_model: Qwen/Qwen2.5-0.5B\nsequence_len: 2048\nmicro_batch_size: 2\ndatasets: []\nbf16: true\nflash_attention: true\n")
    verdicts = {}
    for path in (sdpa, fa2):
        facts = _facts("h100")
        facts.configs = [probe_config(str(path))]
        verdicts[path.stem] = {r.rule: r for r in evaluate(load_recipes(), facts)}["AD710"]
    assert verdicts["sdpa"].status == "warning" and "attention sdpa" in verdicts["sdpa"].message
    assert verdicts["fa2"].status == "pass"


def test_preflight_numerics_without_a_gpu_says_nothing_was_measured():
    import attn_doctor

    model = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    x = torch.randn(2, 8, 32)
    result = attn_doctor.preflight(model, example_inputs=(x, x, x), quick=True, numerics=True, on_failure="warn",
                                   distributed=False)
    (said,) = [f for f in result.findings if f.title == "numerics not measured"]
    assert said.severity == "warning" and "needs a CUDA device" in said.message


# ---------------------------------------------------------------- a library's wrong numbers, found end to end

# A stand-in for flash-attn-4's package on sys.path: `flash_attn.cute.flash_attn_func` as the sweep's
# adapter calls it (BSHD tensors, causal=, returns (out, lse)), computing attention right except for
# the error the test injects into its backward at one head dim. Nothing of numerics_child is faked.
FAKE_FA4 = '''
import math
import torch

BAD_HEAD_DIM = {bad_head_dim}
MODE = "{mode}"


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))  # BHSD
        if kf.shape[1] != qf.shape[1]:
            kf = kf.repeat_interleave(qf.shape[1] // kf.shape[1], 1)
            vf = vf.repeat_interleave(qf.shape[1] // vf.shape[1], 1)
        s = qf @ kf.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
        p = torch.softmax(s, -1)
        ctx.save_for_backward(q, k, v, p)
        return (p @ vf).transpose(1, 2).to(q.dtype)

    @staticmethod
    def backward(ctx, grad):
        q, k, v, p = ctx.saved_tensors
        groups = q.shape[2] // k.shape[2]
        qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
        kf, vf = kf.repeat_interleave(groups, 1), vf.repeat_interleave(groups, 1)
        g = grad.float().transpose(1, 2)
        dv = p.transpose(-2, -1) @ g
        dp = g @ vf.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True)) / math.sqrt(q.shape[-1])
        dq, dk = ds @ kf, ds.transpose(-2, -1) @ qf
        if q.shape[-1] == BAD_HEAD_DIM:
            if MODE == "nan":
                dq[..., -8:] = float("nan")  # a tail of the head dim never written
            else:
                dq = dq * 1.05  # 5% off: finite, past the tolerance
        b, h = dk.shape[0], k.shape[2]
        dk = dk.reshape(b, h, groups, *dk.shape[2:]).sum(2)
        dv = dv.reshape(b, h, groups, *dv.shape[2:]).sum(2)
        return tuple(t.transpose(1, 2).to(q.dtype) for t in (dq, dk, dv)) + (None,)


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, **kwargs):
    out = _Attention.apply(q, k, v, causal)
    return out, torch.zeros(q.shape[0], q.shape[2], q.shape[1])
'''


@pytest.fixture
def fake_fa4(tmp_path, monkeypatch):
    """Put a flash-attn-4 with the given fault on sys.path; the sweep's own adapter imports it."""
    import sys

    def install(bad_head_dim, mode):
        pkg = tmp_path / "flash_attn" / "cute"
        pkg.mkdir(parents=True)
        (tmp_path / "flash_attn" / "__init__.py").write_text("")
        (pkg / "__init__.py").write_text(FAKE_FA4.format(bad_head_dim=bad_head_dim, mode=mode))
        for name in [m for m in sys.modules if m == "flash_attn" or m.startswith("flash_attn.")]:
            monkeypatch.delitem(sys.modules, name)
        monkeypatch.syspath_prepend(str(tmp_path))
        return nc.library_call(torch, "flash_attn_4")

    yield install
    for name in [m for m in sys.modules if m == "flash_attn" or m.startswith("flash_attn.")]:
        sys.modules.pop(name, None)


def _fa4_sweep(call):
    cases = nc.CASES + nc.LIBRARY_CASES["flash_attn_4"]
    return nc.sweep(torch, [("flash_attn_4", call)], [torch.float16, torch.bfloat16], "cpu", cases=cases), cases


def _judged(results, cases, head_dim=None, **packages):
    """The recorded H100 with these sweep results (and packages; a config whose model has this
    head dim): the engine's results by rule."""
    from attn_doctor.diagnosis.engine import evaluate
    from attn_doctor.facts import ConfigFile, NumericsCase, NumericsResult, Package
    from attn_doctor.rules.loader import load_recipes

    facts = _facts("h100")
    if head_dim is not None:
        facts.configs = [ConfigFile(path="/job/config.json", kind="transformers", settings={"head_dim": head_dim})]
    facts.smoke.numerics = msgspec.convert(results, list[NumericsResult])
    facts.smoke.numerics_cases = {c["name"]: NumericsCase(**nc.case_facts(c)) for c in cases}
    for name, version in packages.items():
        facts.packages[name] = Package(version=version)
    return {r.rule: r for r in evaluate(load_recipes(), facts)}


msgspec = pytest.importorskip("msgspec")


def test_a_fa4_release_with_a_wrong_dq_at_head_dim_160_is_an_error_naming_the_shape_the_direction_and_the_bug(fake_fa4):
    """The sweep's FA4 adapter, run against a flash-attn-4 whose backward is 5% off in dQ at head
    dim 160 only: that case alone is wrong, in dQ alone; judged on an H100 with flash-attn-4
    4.0.0b29 it is AD706's error, in the words of the case and the bug it is (pytorch-style
    numerics_bugs rows name the case), and AD714 does not say it again (one finding per cause)."""
    results, cases = _fa4_sweep(fake_fa4(160, "scale"))
    ran = [r for r in results if r["status"] != "n/a"]
    assert {r["dtype"] for r in ran} == {"bfloat16"}  # one dtype: FA4 compiles per dtype
    wrong = [r for r in results if r["status"] == "wrong"]
    assert [(r["case"], sorted(r["directions"])) for r in wrong] == [("fa4-head-dim-160", ["dq"])]
    assert all(r["status"] == "ok" for r in ran if r["case"] != "fa4-head-dim-160")
    assert {r["case"] for r in ran} >= {"fa4-head-dim-256-fused-qkv", "fa4-mla-128-96", "gqa-2", "odd-causal"}

    # graded by the job: its model's head dim 144 is an error, 128 a note, unknown a warning naming the trigger
    judged = _judged(results, cases, head_dim=144, **{"flash-attn-4": "4.0.0b29"})
    ad706 = judged["AD706"]
    assert ad706.status == "error"
    assert ad706.message.startswith("FlashAttention 4 (flash-attn-4) computes wrong results against float64: dQ: error ")
    assert "x the tolerance at head dims 136-176 not a multiple of 64" in ad706.message
    assert "the config's model has head dim 144; Dao-AILab/flash-attention#2482" in ad706.message
    assert ad706.evidence["packages"] == "flash-attn-4"
    assert judged["AD714"].status == "pass"  # measured here: the sweep's finding, not the rule's
    other = _judged(results, cases, head_dim=128, **{"flash-attn-4": "4.0.0b29"})["AD706"]
    assert other.status == "info" and "the config's model has head dim 128, which it does not hurt" in other.message
    unknown = _judged(results, cases, **{"flash-attn-4": "4.0.0b29"})["AD706"]
    assert unknown.status == "warning"
    assert "it hurts only where the job has head dim 136, 144, 152, 160, 168, 176, training (the backward)" in unknown.message


def test_nan_in_a_library_gradient_is_counted_and_the_clean_sweep_clears_the_known_bug(fake_fa4):
    results, cases = _fa4_sweep(fake_fa4(72, "nan"))
    (wrong,) = [r for r in results if r["status"] == "wrong"]
    assert wrong["case"] == "fa4-head-dim-72" and wrong["directions"]["dq"]["nonfinite"] > 0
    judged = _judged(results, cases, head_dim=72, **{"flash-attn-4": "4.0.0b36"})
    assert judged["AD706"].status == "error"
    assert "values NaN or inf at head dims up to 128 that are not a multiple of 32 (72, 104), backward on SM90 (bf16" in judged["AD706"].message
    assert "Dao-AILab/flash-attention#2896" in judged["AD706"].message and judged["AD714"].status == "pass"


def test_a_right_fa4_clears_its_known_bugs_and_an_unmeasured_one_stays_a_warning(fake_fa4):
    results, cases = _fa4_sweep(fake_fa4(0, "scale"))  # no head dim is wrong
    assert not [r for r in results if r["status"] == "wrong"]
    judged = _judged(results, cases, **{"flash-attn-4": "4.0.0b29"})
    assert judged["AD706"].status == "pass" and judged["AD714"].status == "pass"
    unmeasured = _judged([], [], **{"flash-attn-4": "4.0.0b29"})
    assert unmeasured["AD714"].status == "warning" and "Dao-AILab/flash-attention#2482" in unmeasured["AD714"].message


# ---------------------------------------------------------------- a library compiled per shape: parts and time


class _CpuAsGpu:
    """The CPU standing in for the GPU jit_library runs on (the one thing faked: no GPU here)."""

    def available(self):
        return True

    def start(self, index):
        return "cpu"

    def sync(self):
        pass

    def native(self, device):
        return True


def _smoke_row(torch, call, dtype, device):
    """A stand-in smoke test (gpu_child's times CUDA events): the call on the smoke shape, said ok."""
    q = torch.randn(2, 4, 256, 128, dtype=dtype)
    call(q, q, q)
    return {"backend": "flash_attn_4", "dtype": str(dtype).replace("torch.", ""), "status": "ok", "pid": os.getpid()}


_smoke_row.case = {"name": "smoke", "b": 2, "h": 4, "sq": 256, "sk": 256, "d": 128, "mask": "causal"}


@pytest.fixture
def compiles(tmp_path, monkeypatch):
    """Stand-in compiles for FA4 (its real ones need a GPU machine: tests/gpu/test_gpu_fa4.py): each
    writes which process compiled what, with which environment, into tmp_path; a case named in
    `fail` raises, in `crash` kills its process, in `slow` sleeps."""
    ahead = _load_sibling("ahead_compile")
    behaviour = {"fail": (), "crash": (), "slow": (), "fail_backward": ()}
    tmp_path = tmp_path / "compiled"
    tmp_path.mkdir()

    pid_dir = tmp_path.parent / "pids"
    pid_dir.mkdir()

    def make(direction):
        def compile_(torch, case, dtype):
            (pid_dir / str(os.getpid())).write_text("%s %s" % (direction, case["name"]))
            if case["name"] in behaviour["slow"]:
                time.sleep(60)
            if case["name"] in behaviour["crash"]:
                os.kill(os.getpid(), 11)
            if case["name"] in behaviour["fail"] or (direction == "bwd" and case["name"] in behaviour["fail_backward"]):
                raise RuntimeError("Operation creation failed:")
            (tmp_path / f"{direction}-{case['name']}-{dtype}").write_text(json.dumps(
                {"pid": os.getpid(), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "arch": os.environ.get("FLASH_ATTENTION_ARCH"),
                 "sms": os.environ.get("FLASH_ATTENTION_NUM_SMS")}))
        return compile_

    monkeypatch.setitem(ahead.COMPILERS, "flash_attn_4", (make("fwd"), make("bwd")))
    behaviour["pids"] = pid_dir
    monkeypatch.setenv("FLASH_ATTENTION_NUM_SMS", "132")  # the driver's answer: no driver here
    behaviour["dir"] = tmp_path
    return behaviour


def _load_sibling(stem):
    return nc._sibling(stem)


def _jit(fake_fa4, capability=(9, 0), budget_s=300, numerics=True):  # a hang fails in minutes, not the default hour
    fake_fa4(0, "scale")
    jit = _load_sibling("jit_library")
    return jit.run(torch, "flash_attn_4", nc, 0, capability, budget_s, _smoke_row, ["float16", "bfloat16"], numerics,
                   native=None, gpu=_CpuAsGpu())


def test_fa4s_units_compile_ahead_side_by_side_and_run_in_the_one_process(fake_fa4, compiles):
    """FlashAttention 4 compiles per head dim and causality. Each unit (the smoke test per dtype, each
    part of its sweep) is compiled ahead, its forward in a worker and its backward in a child of the
    worker with CUDA hidden, both told the GPU's architecture; the units then run in the group's own
    process, which gives the rows one whole sweep gives."""
    out = _jit(fake_fa4)
    parts = nc.LIBRARY_PARTS["flash_attn_4"]
    assert out["status"] == "ok"
    assert out["phases"]["units_compiled_ahead"] == 2 + len(parts) and out["phases"]["units_lost"] == 0
    assert [(r["dtype"], r["status"], r["pid"]) for r in out["results"]] == [("float16", "ok", os.getpid()), ("bfloat16", "ok", os.getpid())]
    written = {f.name: json.loads(f.read_text()) for f in compiles["dir"].iterdir()}
    assert len(written) == 2 * (2 + len(parts))
    for part in parts:
        fwd, bwd = written[f"fwd-{part[0]}-torch.bfloat16"], written[f"bwd-{part[0]}-torch.bfloat16"]
        assert os.getpid() not in (fwd["pid"], bwd["pid"]) and fwd["pid"] != bwd["pid"]
        assert bwd["cuda"] == "" and fwd["arch"] == bwd["arch"] == "sm_90" and fwd["sms"] == "132"
    assert "fwd-smoke-torch.float16" in written and "bwd-smoke-torch.bfloat16" in written
    # every case it runs is in exactly one part, and the rows are those of one whole sweep
    every = nc.CASES + nc.LIBRARY_CASES["flash_attn_4"]
    names = [c for part in parts for c in part]
    assert len(names) == len(set(names)) and set(names) <= {c["name"] for c in every}
    assert {c["name"] for c in nc.LIBRARY_CASES["flash_attn_4"]} <= set(names)  # its known bugs' shapes all run
    whole = nc.sweep(torch, [("flash_attn_4", nc.library_call(torch, "flash_attn_4"))], [torch.bfloat16], "cpu", cases=every)
    key = lambda r: (r["case"], r["dtype"], r["status"], r.get("why"))  # noqa: E731
    assert list(map(key, out["numerics"])) == list(map(key, whole))
    assert set(out["cases"]) == {c["name"] for c in every}


def test_a_unit_whose_compile_fails_runs_in_its_worker_and_says_what_the_real_call_does(fake_fa4, compiles):
    """FA4 refuses to compile the MLA shape on Hopper: that unit runs in its worker, which starts the
    GPU itself, so its rows are what the real call gives; the reason it did not compile ahead is kept."""
    compiles["fail"] = ("fa4-mla-128-96",)
    out = _jit(fake_fa4)
    assert out["phases"]["units_run_in_worker"] == 1 and out["phases"]["units_lost"] == 0
    assert out["not_ahead"] == {"part:%d" % (1 + [p[0] for p in nc.LIBRARY_PARTS["flash_attn_4"]].index("fa4-mla-128-96")):
                                "RuntimeError: Operation creation failed:"}
    mla = [r for r in out["numerics"] if r["case"] == "fa4-mla-128-96"]
    assert [r["status"] for r in mla] == ["ok"]  # the stand-in library runs it: the real call's answer


def test_without_the_gpu_s_architecture_each_unit_runs_in_a_process_of_its_own(fake_fa4, compiles):
    out = _jit(fake_fa4, capability=None)
    parts = nc.LIBRARY_PARTS["flash_attn_4"]
    assert out["phases"]["units_run_in_worker"] == 2 + len(parts) and not any(compiles["dir"].iterdir())
    assert set(out["not_ahead"].values()) == {"the GPU's architecture is not known here"}
    assert {r["pid"] for r in out["results"]} .isdisjoint({os.getpid()})
    assert all(r["status"] in ("ok", "n/a") for r in out["numerics"])


def test_a_unit_still_compiling_at_the_time_limit_is_said_and_its_process_killed(fake_fa4, compiles):
    """No case is lost: a part whose kernels were still compiling at the limit is 'timeout' rows that
    say why, a smoke test lost is an error of the group (said as a lost group was), and a compile
    that crashed is an error row naming the signal."""
    compiles["slow"] = ("fa4-head-dim-72", "smoke")
    compiles["crash"] = ("gqa-2",)
    started = time.monotonic()
    out = _jit(fake_fa4, budget_s=nc.TIME_MARGIN_S + 20)  # 20 s for the others: enough on a 2-core machine busy with other work
    assert time.monotonic() - started < 34
    late = [r for r in out["numerics"] if r["case"] == "fa4-head-dim-72"]
    assert [r["status"] for r in late] == ["timeout"] and late[0]["why"] == "not run: did not finish in the group's 32 s"
    crashed = [r for r in out["numerics"] if r["case"] == "gqa-2"]
    assert [(r["status"], r["error"]) for r in crashed] == [("error", "its process died (signal 11)")]
    assert out["results"] == [] and sorted(out["errors"]) == [
        "smoke group lib:flash_attn_4 (part:2) its process died (signal 11)",
        "smoke group lib:flash_attn_4 (smoke:bfloat16) did not finish in the group's 32 s",
        "smoke group lib:flash_attn_4 (smoke:float16) did not finish in the group's 32 s"]
    assert out["phases"]["units_lost"] == 4
    others = [r for r in out["numerics"] if r["case"] not in ("fa4-head-dim-72", "gqa-2")]
    assert others and all(r["status"] in ("ok", "n/a") for r in others)
    import subprocess

    left = subprocess.run(["pgrep", "-P", str(os.getpid())], capture_output=True, text=True).stdout.split()
    assert left == []  # the late workers were killed and reaped


def test_one_unit_s_failure_is_its_own_result_and_keeps_the_group_from_being_cached(fake_fa4, compiles, monkeypatch):
    """A unit that raises in the group's process, or in its own process after its compile failed, is
    error rows naming what it raised; the others are measured; the group says it lost them, so the
    stack's result is not kept (the next check measures them again)."""
    from attn_doctor.probes.torch_run import merge_groups

    group_pid, sweep = os.getpid(), nc.sweep

    def failing(torch, backends, dtypes, device, cases=nc.CASES, **kw):
        names = {c["name"] for c in cases}
        if ("gqa-2" in names and os.getpid() == group_pid) or ("fa4-head-dim-72" in names and os.getpid() != group_pid):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return sweep(torch, backends, dtypes, device, cases=cases, **kw)

    monkeypatch.setattr(nc, "sweep", failing)
    compiles["fail"] = ("fa4-head-dim-72",)  # its compile fails: its worker runs it, and that run raises
    out = _jit(fake_fa4)
    rows = {r["case"]: r for r in out["numerics"]}
    assert (rows["gqa-2"]["status"], rows["gqa-2"]["error"]) == (
        "error", "raised in the group's process: RuntimeError: CUDA error: an illegal memory access was encountered")
    assert (rows["fa4-head-dim-72"]["status"], rows["fa4-head-dim-72"]["error"]) == (
        "error", "raised in its own process: RuntimeError: CUDA error: an illegal memory access was encountered")
    assert rows["odd-causal"]["status"] == "ok" and rows["fa4-head-dim-160"]["status"] == "ok"
    assert len(out["errors"]) == 2 and out["phases"]["units_lost"] == 2
    merged = merge_groups({"lib:flash_attn_4": out})
    assert merged.status == "failed" and "(part:" in merged.error and len(merged.numerics) == len(out["numerics"])


def test_a_unit_whose_backward_alone_fails_to_compile_or_whose_worker_cannot_fork_is_still_measured(fake_fa4, compiles,
                                                                                                      monkeypatch):
    compiles["fail_backward"] = ("gqa-2",)
    ahead, started = _load_sibling("ahead_compile"), _load_sibling("ahead_compile").start_worker

    def no_fork_for_the_head_dim_72_part(torch, library, case, *args):
        if case["name"] == "fa4-head-dim-72":
            raise OSError(11, "Resource temporarily unavailable")
        return started(torch, library, case, *args)

    monkeypatch.setattr(ahead, "start_worker", no_fork_for_the_head_dim_72_part)
    out = _jit(fake_fa4)
    part = 1 + [p[0] for p in nc.LIBRARY_PARTS["flash_attn_4"]].index("gqa-2")
    assert out["not_ahead"] == {"part:%d" % part: "RuntimeError: the backward's compile failed"}
    assert out["phases"]["fork_error"] == 1 and out["phases"]["units_lost"] == 0 and "errors" not in out
    rows = {r["case"]: r["status"] for r in out["numerics"]}
    assert rows["gqa-2"] == rows["fa4-head-dim-72"] == "ok"


def test_a_worker_forked_after_this_process_ran_torchs_openmp_team_does_not_hang(fake_fa4, compiles):
    """A unit whose compile failed runs in its worker, on torch's CPU ops here; the group's process
    had run a parallel op before it forked (libgomp's team then waits in the fork forever)."""
    compiles["fail"] = ("gqa-2",)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.ones(1 << 22).sum()  # this process's OpenMP team runs
        out = _jit(fake_fa4, budget_s=nc.TIME_MARGIN_S + 60)
    finally:
        torch.set_num_threads(threads)
    part = 1 + [p[0] for p in nc.LIBRARY_PARTS["flash_attn_4"]].index("gqa-2")
    assert "errors" not in out, out.get("errors")
    assert out["not_ahead"] == {"part:%d" % part: "RuntimeError: Operation creation failed:"}
    assert {r["case"]: r["status"] for r in out["numerics"]}["gqa-2"] == "ok"


def test_no_compile_process_outlives_the_group(fake_fa4, compiles):
    """Every worker and every backward child is gone when the group returns, the late ones killed."""
    compiles["slow"] = ("gqa-2",)
    compiles["fail"] = ("fa4-head-dim-160",)
    _jit(fake_fa4, budget_s=nc.TIME_MARGIN_S + 6)
    pids = {int(f.name): f.read_text() for f in compiles["pids"].iterdir()}
    assert len(pids) >= 4
    for pid, what in pids.items():
        for _ in range(100):  # the parent-death signal is sent at once; the process may take a moment to go
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            if open(f"/proc/{pid}/stat").read().split()[2] == "Z":
                break  # dead, waiting for init to reap it
            time.sleep(0.02)
        else:
            raise AssertionError(f"the process that compiled {what} ({pid}) outlived the group")


def test_the_library_s_group_replaces_its_per_dtype_and_per_part_groups():
    groups = gc.smoke_groups(None, ["flash_attn_4", "xformers"], ["flex-compiled"])
    assert [g for g in groups if "flash_attn_4" in g] == ["lib:flash_attn_4"]
    assert "num:lib:xformers" in groups and "lib:xformers" in groups
    assert nc.numerics_groups(["bfloat16"], ["xformers"]) == ["num:sdpa:bfloat16", "num:sdpa-cudnn:bfloat16", "num:lib:xformers"]


def test_a_sweep_out_of_time_reports_what_it_ran_and_is_not_cached():
    """No case starts after the group's deadline: those left are "timeout" rows, the check says so
    on the numerics line, and the stack's answer is not cached (the next check measures them)."""
    import time

    from attn_doctor.facts import NumericsResult, Smoke
    from attn_doctor.probes.torch_run import stack_value
    from attn_doctor.render.human import _numerics

    cases = [nc.CASE_BY_NAME[n] for n in ("odd-causal", "odd-cross", "large-logits")]
    backends = _cpu_sdpa()
    done = nc.sweep(torch, backends, [torch.float16], "cpu", cases=cases, deadline=time.monotonic() + 3600)
    late = nc.sweep(torch, backends, [torch.float16], "cpu", cases=cases, deadline=time.monotonic() - 1)
    assert {r["status"] for r in done} == {"ok"} and len(done) == len(late) == 6
    assert {r["status"] for r in late} == {"timeout"} and all("time ran out" in r["why"] for r in late)
    line = _numerics(Smoke(status="ok", numerics=[msgspec.convert(r, NumericsResult) for r in done[:2] + late[2:]]))[0]
    assert "sdpa-math ✓ 1, 2 not reached in the sweep's time (measured by the next check)" in line
    assert "sdpa-flash ✓ 1, 2 not reached" in line

    def answer(rows):
        return {"torch": {"status": "ok", "version": "2.11.0"},
                "smoke": {"num:sdpa:float16": {"status": "ok", "numerics": rows, "cases": {}}}}

    assert stack_value(answer(done))[1] is True
    assert stack_value(answer(done[:2] + late[2:]))[1] is False


class _FlashOrder(torch.autograd.Function):
    """Attention with FlashAttention-2's backward order, on CPU: D from the half-precision output,
    dS = P * (dP - D) in float32, rounded to half before dS @ K (a fused kernel's roundings).
    `dq_error` scales dQ: a kernel that is wrong by that much."""

    @staticmethod
    def forward(ctx, q, k, v, dq_error):
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
        p = s.softmax(-1)
        out = (p.to(q.dtype).float() @ v.float()).to(q.dtype)
        ctx.save_for_backward(q, k, v, out, p)
        ctx.dq_error = dq_error
        return out

    @staticmethod
    def backward(ctx, go):
        q, k, v, out, p = ctx.saved_tensors
        dt, go = q.dtype, go.to(q.dtype)
        dv = (p.to(dt).float().transpose(-2, -1) @ go.float()).to(dt)
        dp = go.float() @ v.float().transpose(-2, -1)
        d = (go.float() * out.float()).sum(-1, keepdim=True)
        ds = (p * (dp - d)).to(dt).float() / math.sqrt(q.shape[-1])
        return ((ds @ k.float()) * (1 + ctx.dq_error)).to(dt), (ds.transpose(-2, -1) @ q.float()).to(dt), dv, None


def _flash_order(dq_error=0.0):
    return lambda q, k, v, mask, is_causal, enable_gqa: _FlashOrder.apply(q, k, v, dq_error)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_gradient_that_cancels_to_zero_is_judged_by_the_spread_of_its_roundings(dtype):
    """A call whose rows see one key has dQ = 0 exactly (dP - D cancels); a kernel that rounds dP and
    D before they cancel leaves rounding noise there. Held to a few roundings of zero it was wrong by
    ~1e25 times; held to the spread of the terms it adds up it is right, and a kernel 20% off in dQ on
    an ordinary call is still wrong."""
    gen = torch.Generator().manual_seed(0)

    def inputs(sq, sk, d=32, h=2):
        q, k, v = (torch.randn(1, h, n, d, generator=gen).to(dtype) for n in (sq, sk, sk))
        return q, k, v, torch.randn(1, h, sq, d, generator=gen).to(dtype), None, False, False

    name = str(dtype).replace("torch.", "")
    one_key = inputs(16, 1)
    refs = (nc.run_reference(torch, one_key, None), nc.run_reference(torch, one_key, dtype))
    assert float(refs[0][1].abs().max()) == 0.0  # dQ cancels exactly in float64
    assert nc.check_kernel(torch, _flash_order(), one_key, refs, name, lambda: None)["status"] == "ok"
    without_spreads = nc.check_kernel(torch, _flash_order(), one_key, (refs[0][:4], refs[1]), name, lambda: None)
    assert without_spreads["status"] == "wrong" and without_spreads["worst"] > 1e6  # what the spreads fix

    ordinary = inputs(128, 128)
    refs = (nc.run_reference(torch, ordinary, None), nc.run_reference(torch, ordinary, dtype))
    assert nc.check_kernel(torch, _flash_order(), ordinary, refs, name, lambda: None)["status"] == "ok"
    wrong = nc.check_kernel(torch, _flash_order(0.2), ordinary, refs, name, lambda: None)
    assert wrong["status"] == "wrong" and sorted(wrong["directions"]) == ["dq"]


def test_rounding_spreads_have_each_direction_s_shape_under_grouped_query_attention():
    q, k, v = torch.randn(2, 4, 8, 16), torch.randn(2, 2, 8, 16), torch.randn(2, 2, 8, 16)
    inputs = (q, k, v, torch.randn(2, 4, 8, 16), None, True, True)
    out, dq, dk, dv, spreads = nc.run_reference(torch, inputs, None)
    assert {d: tuple(spreads[d].shape) for d in spreads} == {"out": tuple(out.shape), "dq": tuple(dq.shape),
                                                            "dk": tuple(dk.shape), "dv": tuple(dv.shape)}
    assert all(bool((spreads[d] >= 0).all()) for d in spreads)
