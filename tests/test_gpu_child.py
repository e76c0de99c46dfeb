"""The GPU probe's plumbing, on any machine: CUDA facts and smoke test groups run as forks of the
torch probe, and a group that crashes or hangs is reported without losing the others. (On a GPU,
tests/gpu runs the real thing.)"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap

import pytest

from attn_doctor import cache
from attn_doctor.facts import BF16_NATIVE_FROM, Facts
from attn_doctor.probes.torch_run import apply_node, merge_groups, node_value
from attn_doctor.probes.runner import GPU_CHILD_SCRIPT, start_child
from attn_doctor.probes.target import sdpa_verdicts
from attn_doctor.diagnosis.engine import evaluate_rule
from attn_doctor.rules.loader import load_recipes


# torch.compile's GPU backend needs triton: where it is installed (a CUDA torch from PyPI brings
# it), compiled flex_attention gets a smoke process of its own too.
COMPILE = ["compile:flex-compiled"] if importlib.util.find_spec("triton") else []
# The numerics sweep: SDPA's kernels per native dtype (cuDNN's in a process of its own).
NUM_BF16 = ["num:sdpa:float16", "num:sdpa-cudnn:float16", "num:sdpa:bfloat16", "num:sdpa-cudnn:bfloat16"]
NUM_FP16 = ["num:sdpa:float16", "num:sdpa-cudnn:float16"]


def _torch_probe(script, monkeypatch=None, timeout=60, **config):
    config = {"script": str(script), "smoke": True, "capability": "9.0", "bf16_native_from": list(BF16_NATIVE_FROM), **config}
    return start_child(sys.executable, ["torch", "--gpu", json.dumps(config), "triton"]).result(timeout)


def test_real_gpu_script_without_a_gpu():
    data = _torch_probe(GPU_CHILD_SCRIPT)
    assert data["cuda"]["status"] == "ok" and data["cuda"]["cuda_available"] is False
    # sm90: the general group (fp16's cuDNN test included) and bf16's cuDNN test apart
    assert sorted(data["smoke"]) == sorted(["cudnn:bfloat16", "main"] + COMPILE + NUM_BF16)
    assert all(g["status"] == "error" and "not available" in g["error"]["message"] for g in data["smoke"].values())


def test_the_child_judges_bf16_by_the_threshold_it_is_given():
    """The child runs where attn-doctor cannot be imported: the capability from which bf16 is
    native travels in its configuration, and a different one changes what it plans."""
    below = "%d.%d" % (BF16_NATIVE_FROM[0] - 1, 5)
    at = "%d.%d" % BF16_NATIVE_FROM
    assert sorted(_torch_probe(GPU_CHILD_SCRIPT, capability=at)["smoke"]) == sorted(["cudnn:bfloat16", "main"] + COMPILE + NUM_BF16)
    assert sorted(_torch_probe(GPU_CHILD_SCRIPT, capability=below)["smoke"]) == sorted(["main"] + COMPILE + NUM_FP16)
    raised = [BF16_NATIVE_FROM[0] + 1, 0]
    assert sorted(_torch_probe(GPU_CHILD_SCRIPT, capability=at, bf16_native_from=raised)["smoke"]) == sorted(["main"] + COMPILE + NUM_FP16)
    # Without it the child refuses to guess (no second copy of the fact to drift).
    config = {"script": str(GPU_CHILD_SCRIPT), "smoke": True, "capability": at}
    data = start_child(sys.executable, ["torch", "--gpu", json.dumps(config), "triton"]).result(60)
    assert data["cuda"]["status"] == "error" and "bf16_native_from" in data["cuda"]["error"]["message"]


def test_the_doctor_hands_its_threshold_to_the_gpu_child(tmp_path, monkeypatch):
    import attn_doctor.probes as probes
    from attn_doctor.facts import Gpu, GpuInfo

    monkeypatch.setattr(probes, "probe_gpus", lambda: GpuInfo(source="nvml", driver_version="580.159.04", cuda_driver_version="13.0",
                                                             devices=[Gpu(index=0, name="Fake GPU", capability="9.0", memory_mib=81559)]))

    def groups():
        facts = probes.collect_facts(sample=False, use_cache=False, cache_root=str(tmp_path / "cache"))
        return sorted(facts.smoke.group_seconds)

    assert groups() == sorted(["cudnn:bfloat16", "main"] + COMPILE + NUM_BF16)  # sm90 has native bf16: its cuDNN test apart
    monkeypatch.setattr(probes, "BF16_NATIVE_FROM", (10, 0))
    assert groups() == sorted(["main"] + COMPILE + NUM_FP16)


def test_each_installed_library_gets_a_smoke_process_of_its_own(tmp_path, monkeypatch):
    from helpers import broken_env

    broken_env.install_flash_attn_4_only(tmp_path)  # flash_attn is a bare namespace here: not FA2
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    data = _torch_probe(GPU_CHILD_SCRIPT)
    # FA4 compiles each kernel at its first call: one group runs its smoke tests in each dtype and its
    # cases of the sweep, their kernels compiled ahead side by side (jit_library.py)
    assert sorted(data["smoke"]) == sorted(["cudnn:bfloat16", "lib:flash_attn_4", "main"] + COMPILE + NUM_BF16)
    below = "%d.%d" % (BF16_NATIVE_FROM[0] - 1, 5)
    assert sorted(_torch_probe(GPU_CHILD_SCRIPT, capability=below)["smoke"]) == sorted(
        ["lib:flash_attn_4", "main"] + COMPILE + NUM_FP16)
    # no CUDA here: said, not crashed
    assert data["smoke"]["lib:flash_attn_4"]["error"]["message"] == "CUDA is not available to torch", data["smoke"]["lib:flash_attn_4"]


def test_the_compiled_smoke_test_runs_only_where_its_compiler_is_installed(tmp_path, monkeypatch):
    """No triton, no Inductor on the GPU: no compile group (its absence is not a failure); a
    triton that is installed, even one that does not import, gets the test (which then says why)."""
    (tmp_path / "triton").mkdir()
    (tmp_path / "triton" / "__init__.py").write_text("raise ImportError('triton was built for another CUDA')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    data = _torch_probe(GPU_CHILD_SCRIPT)
    assert "compile:flex-compiled" in data["smoke"]
    assert data["smoke"]["compile:flex-compiled"]["status"] == "error"  # no CUDA here: said, not crashed


def test_kernel_caches_go_to_the_private_folder_unless_the_user_chose_one(tmp_path, monkeypatch):
    from attn_doctor.probes.runner import GPU_CHILD_SCRIPT as script
    import importlib.util as iu

    spec = iu.spec_from_file_location("gpu_child_under_test", script)
    gpu_child = iu.module_from_spec(spec)
    spec.loader.exec_module(gpu_child)
    for name in ("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR", "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "CUTE_DSL_CACHE_DIR",
                 "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", "/users/own/triton")
    gpu_child.kernel_caches(str(tmp_path))
    import os

    assert os.environ["FLASH_ATTENTION_CUTE_DSL_CACHE_DIR"] == str(tmp_path / "fa4")
    assert os.environ["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] == "1"
    assert os.environ["CUTE_DSL_CACHE_DIR"] == str(tmp_path / "cute-dsl")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
    assert os.environ["TRITON_CACHE_DIR"] == "/users/own/triton"  # the user's choice stands
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    gpu_child.kernel_caches(None)  # no private folder: the compilers' own defaults
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ


def test_the_kernel_folder_is_private_or_not_used(tmp_path, monkeypatch):
    import os

    from attn_doctor import bytecode
    from attn_doctor.probes import _kernel_cache

    monkeypatch.setattr(bytecode, "user_folder", lambda: str(tmp_path / "mine"))
    folder, note = _kernel_cache()
    assert folder == str(tmp_path / "mine" / "kernels") and note is None
    assert os.stat(folder).st_mode & 0o777 == 0o700
    os.chmod(folder, 0o777)  # writable by anyone: another user's kernels could be waiting there
    folder, note = _kernel_cache()
    assert folder is None and note.name == "kernels" and "can be written by others" in note.error


FAKE = """
import os, signal, time

def cuda_facts():
    return {"status": "ok", "cuda_available": True, "devices": [{"index": 0, "name": "Fake GPU", "capability": "9.0", "bf16_native": True}]}

LIBRARIES = {}
COMPILED = {}

def smoke_groups(capability, libraries=(), compiled=(), numerics=True, numerics_only=()):
    return ["main", "cudnn:float16", "cudnn:bfloat16"]

def run_smoke_group(group, index=0, groups=None, shapes=None, kernel_cache=None, capability=None, budget_s=None):
    if group == "cudnn:bfloat16":
        os.kill(os.getpid(), signal.SIGSEGV)   # a kernel that takes its process down
    if group == "cudnn:float16":
        time.sleep(60)                         # a kernel that never returns
    return {"status": "ok", "choices": [{"dtype": "bfloat16", "head_dim": 128, "backend": "flash_attention"}],
            "results": [{"backend": "sdpa-flash", "dtype": "bfloat16", "status": "ok", "rel_err": 0.004,
                         "rel_err_grad": 0.006, "tolerance": 0.04, "kernel_ms": 0.3}]}
"""


def test_a_crashing_and_a_hanging_group_lose_nothing_else(tmp_path, monkeypatch):
    script = tmp_path / "fake_gpu_child.py"
    script.write_text(textwrap.dedent(FAKE))
    monkeypatch.setenv("ATTN_DOCTOR_IMPORT_TIMEOUT", "3")
    data = _torch_probe(script)
    assert data["cuda"]["devices"][0]["name"] == "Fake GPU"
    assert data["smoke"]["cudnn:bfloat16"] == {"status": "crashed", "signal": 11, "duration_s": pytest.approx(0, abs=3)}
    assert data["smoke"]["cudnn:float16"]["status"] == "timeout"
    assert data["imports"]["triton"]["status"] in ("ok", "missing")  # the import probes still ran
    facts = Facts()
    apply_node(facts, node_value(data)[0], None)
    assert facts.torch.devices[0].name == "Fake GPU"
    assert facts.smoke.status == "failed"
    assert "cudnn:bfloat16 crashed (signal 11)" in facts.smoke.error
    assert "cudnn:float16 did not finish" in facts.smoke.error
    assert [r.backend for r in facts.smoke.results] == ["sdpa-flash"]  # the main group's result is kept
    result = evaluate_rule(load_recipes().get("AD701"), facts)
    assert result.status == "error" and "crashed (signal 11)" in result.message


def test_wrong_numbers_become_a_finding():
    facts = Facts()
    facts.smoke = merge_groups(
        {
            "main": {
                "status": "ok",
                "choices": [{"dtype": "bfloat16", "head_dim": 128, "backend": "flash_attention"}],
                "results": [
                    {"backend": "xformers", "dtype": "bfloat16", "status": "wrong", "rel_err": 0.5, "rel_err_grad": 0.7, "tolerance": 0.04},
                    {"backend": "sdpa-flash", "dtype": "bfloat16", "status": "ok", "rel_err": 0.004, "rel_err_grad": 0.006, "tolerance": 0.04},
                ],
            }
        }
    )
    assert facts.smoke.status == "ok" and [r.backend for r in facts.smoke.results] == ["sdpa-flash", "xformers"]
    result = evaluate_rule(load_recipes().get("AD701"), facts)
    assert result.status == "error" and result.message.startswith("xformers in bfloat16: relative error 0.5")


def test_smoke_backward_is_exact_and_imports_nothing_heavy():
    # backward(out, g) replaces out.backward(g), which imports sympy (0.5 s) in every smoke fork.
    code = textwrap.dedent("""
        import json, sys, torch
        from attn_doctor.probes.target.gpu_child import backward
        gen = torch.Generator().manual_seed(0)
        x = [torch.randn(2, 4, 64, 32, generator=gen) for _ in range(4)]
        dtypes = (torch.float64, torch.float16, torch.bfloat16)
        mine = {}
        for dtype in dtypes:
            q, k, v = (t.to(dtype).requires_grad_(True) for t in x[:3])
            backward(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), x[3].to(dtype))
            mine[dtype] = [t.grad for t in (q, k, v)]
        out = {"sympy": "sympy" in sys.modules}
        for dtype in dtypes:  # the reference: torch's own backward with a gradient tensor
            q, k, v = (t.to(dtype).requires_grad_(True) for t in x[:3])
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).backward(x[3].to(dtype))
            out[str(dtype)] = all(torch.equal(a, t.grad) for a, t in zip(mine[dtype], (q, k, v)))
        print(json.dumps(out))
    """)
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # bit-identical gradients to torch's own backward(g), and sympy never imported by ours
    assert result == {"sympy": False, "torch.float64": True, "torch.float16": True, "torch.bfloat16": True}


def test_refusal_reasons_are_torchs_warnings_from_a_forced_backend(monkeypatch):
    # On CUDA, SDPA forced to a backend that refuses the inputs warns why (a header line, then the
    # reason, as printed on an H100 for head dim 512) and raises "No available kernel". The CPU
    # dispatcher never warns, so that behaviour is reproduced here at the boundary.
    import warnings

    import torch

    from attn_doctor.probes.target import gpu_child

    reason = ("Flash attention requires q,k,v to have the same last dimension and to be less than or equal to 256. "
              "Got Query.size(-1): 512, Key.size(-1): 512, Value.size(-1): 512 instead.")

    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):  # what torch 2.11 printed on the H100, in its order
        where = " (Triggered internally at /pytorch/aten/src/ATen/native/transformers/sdp_utils_cpp.h:552.)"
        warnings.warn("Memory efficient kernel not used because:")
        warnings.warn("Memory Efficient attention has been runtime disabled." + where)
        warnings.warn("Flash attention kernel not used because:")
        warnings.warn(reason + where)
        warnings.warn("CuDNN attention kernel not used because:")
        warnings.warn("cuDNN attention has been runtime disabled." + where)
        raise RuntimeError("No available kernel. Aborting execution.")

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", sdpa)
    q = torch.zeros(1, 2, 16, 512)
    assert sdpa_verdicts._forced_reasons(torch, q, "flash", "FLASH_ATTENTION", True) == [reason]
    usable, reasons = gpu_child.fused_verdicts(torch, q)  # CPU tensors: no fused CUDA kernel is usable
    assert usable == {"flash": False, "mem_efficient": False, "cudnn": False}
    assert reasons["flash"] == [reason]
    # Every refusal has its reason. A CUDA build without a driver raises from the cuDNN check
    # itself, even for CPU tensors: that error is the reason, and the other verdicts survive it.
    assert all(reasons[key] for key in usable), reasons
    if torch.version.cuda and not torch.cuda.is_available():
        assert reasons["cudnn"][0].startswith("torch's can_use_cudnn_attention raised"), reasons["cudnn"]


COUNTING = """
import os

def cuda_facts():
    return {"status": "ok", "cuda_available": True, "devices": [{"index": 0, "name": "Fake GPU", "capability": "9.0", "bf16_native": True}]}

LIBRARIES = {}
COMPILED = {}

def smoke_groups(capability, libraries=(), compiled=(), numerics=True, numerics_only=()):
    return ["main"]

def run_smoke_group(group, index=0, groups=None, shapes=None, kernel_cache=None, capability=None, budget_s=None):
    with open(os.environ["SMOKE_RUNS"], "a") as fh:
        fh.write(group + "\\n")
    return {"status": "ok", "choices": [{"dtype": "bfloat16", "head_dim": 128, "backend": "flash_attention"}],
            "results": [{"backend": "sdpa-flash", "dtype": "bfloat16", "status": "ok", "rel_err": 0.004,
                         "rel_err_grad": 0.006, "tolerance": 0.04, "kernel_ms": 0.3}]}
"""


def test_smoke_results_are_reused_on_the_same_gpu_driver_code_and_boot(tmp_path, monkeypatch):
    import attn_doctor.probes as probes
    from attn_doctor.facts import Gpu, GpuInfo
    from attn_doctor.probes import keys

    script = tmp_path / "counting_gpu_child.py"
    script.write_text(textwrap.dedent(COUNTING))
    runs = tmp_path / "runs"
    monkeypatch.setenv("SMOKE_RUNS", str(runs))
    monkeypatch.setattr(probes, "GPU_CHILD_SCRIPT", script)
    driver = {"version": "580.159.04"}
    monkeypatch.setattr(probes, "probe_gpus", lambda: GpuInfo(source="nvml", driver_version=driver["version"], cuda_driver_version="13.0",
                                                             devices=[Gpu(index=0, name="Fake GPU", capability="9.0", memory_mib=81559)]))
    cache_root = str(tmp_path / "cache")

    def check(**kw):
        return probes.collect_facts(sample=False, cache_root=cache_root, **kw)

    first = check()
    assert first.smoke.status == "ok" and first.smoke.cached is None
    second = check()
    assert second.smoke.cached and second.smoke.results == first.smoke.results
    assert runs.read_text().split() == ["main"]  # the second check ran no smoke test
    third = check(use_cache=False)  # --no-cache: tested again
    assert third.smoke.cached is None and runs.read_text().split() == ["main", "main"]
    driver["version"] = "590.10"  # another driver: tested again
    assert check().smoke.cached is None and runs.read_text().split() == ["main", "main", "main"]
    def smoke_key(index):
        return cache.key("node", **keys.node_inputs("python", first, probes.probe_gpus(), index, [], True))

    key = smoke_key(0)
    monkeypatch.setattr(keys, "boot_id", lambda: "another-boot")
    assert smoke_key(0) != key
    assert smoke_key(1) != smoke_key(0)


def test_a_compile_failure_from_a_triton_that_does_not_import_is_one_finding():
    """The compile failure is the symptom of triton's import failure: AD318 names the cause and
    AD703 steps aside; with triton importing, AD703 reports the failure itself."""
    from attn_doctor.diagnosis.engine import evaluate
    from attn_doctor.rules.fixtures import build_facts
    from attn_doctor.rules.model import FixtureRef

    failed = {"status": "ok", "results": [{"backend": "flex-compiled", "dtype": "bfloat16", "status": "error",
                                           "error": "BackendCompilerFailed: backend='inductor' raised: RuntimeError: "
                                                    "Cannot find a working triton installation."}]}
    broken = {"status": "error", "error": {"type": "ImportError", "message": "libtriton.so: cannot open shared object file"}}
    recipes = load_recipes()

    def statuses(**changes):
        facts = build_facts(FixtureRef(base="h100", set={"smoke": failed, **changes}))
        return {r.rule: r for r in evaluate(recipes, facts) if r.rule in ("AD318", "AD701", "AD703")}

    alone = statuses()
    assert alone["AD703"].status == "error" and "Cannot find a working triton" in alone["AD703"].message
    assert alone["AD701"].status == "pass"  # not reported twice
    both = statuses(**{"imports.triton": broken})
    assert both["AD318"].status == "error"
    assert both["AD703"].status == "skipped" and "AD318" in both["AD703"].reason


def test_a_compile_failure_next_to_an_unpinned_triton_names_that_cause():
    from attn_doctor.diagnosis.engine import evaluate_rule
    from attn_doctor.rules.fixtures import build_facts
    from attn_doctor.rules.model import FixtureRef

    failed = {"status": "ok", "results": [{"backend": "flex-compiled", "dtype": "bfloat16", "status": "error",
                                           "error": "BackendCompilerFailed: backend='inductor' raised"}]}
    rule = load_recipes().get("AD703")
    pinned = evaluate_rule(rule, build_facts(FixtureRef(base="h100", set={"smoke": failed})))
    assert pinned.status == "error" and "AD201" not in pinned.message
    unpinned = evaluate_rule(rule, build_facts(FixtureRef(base="h100", set={"smoke": failed, "packages.triton": {"version": "3.1.0"}})))
    assert "(triton 3.1.0 is not the release torch 2.11.0 pins, 3.6.0: AD201)" in unpinned.message


def test_the_forced_call_gets_the_traced_calls_mask_and_dropout():
    # Real torch on CPU: its flash backend refuses a 3-d mask, and says so as a warning. The forced
    # call must carry the mask itself (a mask tensor once made the forced call fail before SDPA ran,
    # so no reason came back) and the dropout.
    import torch

    from attn_doctor.probes.target import gpu_child

    q = torch.randn(2, 4, 16, 8)
    mask = torch.ones(1, 16, 16, dtype=torch.bool).tril()
    (why,) = sdpa_verdicts._forced_reasons(torch, q, "flash", "FLASH_ATTENTION", False, k=q, v=q, mask=mask)
    assert why.startswith("Please use the following attn mask shapes")
    assert gpu_child.fused_verdicts(torch, q, False, k=q, v=q, mask=mask)[1]["flash"] == [why]
    assert sdpa_verdicts._forced_reasons(torch, q, "flash", "FLASH_ATTENTION", False, k=q, v=q,
                                     mask=torch.ones(16, 16, dtype=torch.bool).tril()) == []  # a 2-d mask runs
    dropout = sdpa_verdicts._forced_reasons(torch, q.clone().requires_grad_(True), "flash", "FLASH_ATTENTION", False,
                                        dropout=0.1)
    assert dropout == ["Both fused kernels do not support non-zero dropout."]


FAMILY = """
import os, sys, time

LIBRARIES = {"flash_attn_4": "flash_attn_4"}
COMPILED = {}

def cuda_facts():
    return {"status": "ok", "cuda_available": True, "devices": []}

def smoke_groups(capability, libraries=(), compiled=(), numerics=True, numerics_only=()):
    return ["main", "lib:flash_attn_4:bfloat16", "num:lib:flash_attn_4:1", "num:lib:flash_attn_4:2"]

def group_library(group):
    return "flash_attn_4" if "flash_attn_4" in group else None

def kernel_caches(folder):
    if folder and not os.environ.get("FAKE_KERNEL_CACHE"):
        os.environ["FAKE_KERNEL_CACHE"] = folder

def run_smoke_group(group, index=0, groups=None, shapes=None, kernel_cache=None, capability=None, budget_s=None):
    kernel_caches(kernel_cache)
    found = "flash_attn.cute" in sys.modules   # before this group imports anything
    if group == "num:lib:flash_attn_4:2" and os.environ.get("FAMILY_CRASH_MEMBER"):
        os.kill(os.getpid(), 11)
    if group == "num:lib:flash_attn_4:2" and os.environ.get("FAMILY_HANG_MEMBER"):
        open(os.environ["FAMILY_HANG_MEMBER"], "w").write(str(os.getpid()))
        time.sleep(120)
    imports = []
    if "flash_attn_4" in group:
        import flash_attn.cute
        imports = flash_attn.cute.IMPORTS
    return {"status": "ok", "results": [], "pid": os.getpid(), "ppid": os.getppid(), "imported_before": found,
            "imports": imports, "budget_s": budget_s, "quack_arch": os.environ.get("QUACK_ARCH"),
            "arch_at_import": getattr(sys.modules.get("flash_attn.cute"), "ARCH_AT_IMPORT", None),
            "cache_at_import": getattr(sys.modules.get("flash_attn.cute"), "CACHE_AT_IMPORT", None)}
"""


def _family_probe(tmp_path, monkeypatch, library_source):
    cute = tmp_path / "lib" / "flash_attn" / "cute"
    cute.mkdir(parents=True)
    (cute / "__init__.py").write_text(textwrap.dedent(library_source))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "lib"))
    script = tmp_path / "family_gpu_child.py"
    script.write_text(textwrap.dedent(FAMILY))
    config = {"script": str(script), "smoke": True, "capability": "8.0", "device_capability": "9.0",
              "bf16_native_from": list(BF16_NATIVE_FROM), "kernel_cache": str(tmp_path / "kernels")}
    return start_child(sys.executable, ["torch", "--gpu", json.dumps(config), "flash_attn_4", "triton"]).result(60)


SLOW_IMPORT = """
import os, time
time.sleep(1.0)   # an import that costs seconds, as the CuTe DSL's does
IMPORTS = [os.getpid()]
ARCH_AT_IMPORT = os.environ.get("QUACK_ARCH")
CACHE_AT_IMPORT = os.environ.get("FAKE_KERNEL_CACHE")   # FA4 reads its cache folder once, at import
"""


def test_a_library_is_imported_once_for_all_its_groups(tmp_path, monkeypatch):
    """Each group testing a library forks from the process of that library's import probe: the
    library is imported there once (one second here, as FA4's CuTe DSL costs seconds) and every
    group finds it imported; the groups of other libraries and SDPA's are not held up."""
    data = _family_probe(tmp_path, monkeypatch, SLOW_IMPORT)
    assert data["imports"]["flash_attn_4"]["status"] == "ok"
    members = [data["smoke"][g] for g in ("lib:flash_attn_4:bfloat16", "num:lib:flash_attn_4:1", "num:lib:flash_attn_4:2")]
    assert all(m["status"] == "ok" and m["imported_before"] for m in members)
    importer = {m["imports"][0] for m in members}
    assert len(importer) == 1 and {m["ppid"] for m in members} == importer  # imported once, in their parent
    assert not data["smoke"]["main"]["imported_before"] and data["smoke"]["main"]["ppid"] not in importer
    # the time limit each member is given counts from the common start: the import's second is spent
    assert all(m["budget_s"] < data["smoke"]["main"]["budget_s"] - 0.5 for m in members)
    # FA4's quack is told the tested GPU's architecture while it is imported (else it asks the GPU,
    # initialising CUDA where the groups fork from); the groups then run with the user's environment
    assert all(m["arch_at_import"] == "90" and m["quack_arch"] is None for m in members)
    # the kernel compilers' cache folders are set before the import, not only in each group after it
    assert all(m["cache_at_import"] == str(tmp_path / "kernels") for m in members)


def test_the_import_is_told_the_architecture_only_where_the_library_asks_for_it():
    from attn_doctor.probes.target.torch_probe import import_env

    nvml = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}  # torch.cuda.is_available() without initialising CUDA
    assert import_env("flash_attn_4", "9.0") == dict(nvml, QUACK_ARCH="90", CUTE_DSL_ARCH="sm_90a")
    assert import_env("flash_attn_4", "12.1") == dict(nvml, QUACK_ARCH="121", CUTE_DSL_ARCH="sm_121a")
    assert import_env("flash_attn_4", "8.6") == dict(nvml, QUACK_ARCH="86", CUTE_DSL_ARCH="sm_86")
    assert import_env("flash_attn_4", None) == nvml and import_env("flash_attn_4", "x.y; rm") == nvml
    assert import_env("xformers", "9.0") == nvml


THREADED_IMPORT = """
import os, threading, time
IMPORTS = [os.getpid()]
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()   # a fork would keep its locks, not it
"""


def test_an_import_that_leaves_its_process_unsafe_to_fork_runs_the_groups_as_before(tmp_path, monkeypatch):
    """An import that starts a thread (or initialises CUDA's driver) makes its process unsafe to
    fork: the groups then run in forks of the probe's parent, each importing the library itself."""
    data = _family_probe(tmp_path, monkeypatch, THREADED_IMPORT)
    assert data["imports"]["flash_attn_4"]["status"] == "ok"
    assert "thread" in data["imports"]["flash_attn_4"]["family_refork"]
    members = [data["smoke"][g] for g in ("lib:flash_attn_4:bfloat16", "num:lib:flash_attn_4:1", "num:lib:flash_attn_4:2")]
    assert all(m["status"] == "ok" and not m["imported_before"] for m in members)
    assert len({m["imports"][0] for m in members}) == 3  # each imported it itself


def test_a_crash_in_the_import_or_in_one_group_is_said_for_what_it_took_down(tmp_path, monkeypatch):
    crashing = "import os\nIMPORTS = [os.getpid()]\nos.kill(os.getpid(), 11)\n"
    data = _family_probe(tmp_path, monkeypatch, crashing)
    assert data["imports"]["flash_attn_4"]["status"] == "crashed" and data["imports"]["flash_attn_4"]["signal"] == 11
    for group in ("lib:flash_attn_4:bfloat16", "num:lib:flash_attn_4:1", "num:lib:flash_attn_4:2"):
        assert data["smoke"][group]["status"] == "crashed"  # the import they needed crashed
    assert data["smoke"]["main"]["status"] == "ok"
    monkeypatch.setenv("FAMILY_CRASH_MEMBER", "1")
    data = _family_probe(tmp_path / "again", monkeypatch, SLOW_IMPORT)
    assert data["smoke"]["num:lib:flash_attn_4:2"] == {"status": "crashed", "signal": 11, "duration_s": pytest.approx(0, abs=5)}
    assert data["smoke"]["num:lib:flash_attn_4:1"]["status"] == "ok" and data["imports"]["flash_attn_4"]["status"] == "ok"


CUDA_THREAD_IMPORT = """
import ctypes, os, threading, time
IMPORTS = [os.getpid()]
ARCH_AT_IMPORT = None

def driver_thread():   # named as the CUDA driver and NVML name theirs
    ctypes.CDLL(None).prctl(15, b"cuda00001800007", 0, 0, 0)   # PR_SET_NAME
    time.sleep(30)

threading.Thread(target=driver_thread, daemon=True).start()
time.sleep(0.2)
"""


def test_a_thread_of_cuda_s_own_is_tried_rather_than_refused(tmp_path, monkeypatch):
    """tvm_ffi's import (FA4's) leaves a thread named as the CUDA driver names its own: whether a
    fork can still start the driver is tried (here, without a driver, there is nothing to start)
    and the groups fork from the import's process."""
    data = _family_probe(tmp_path, monkeypatch, CUDA_THREAD_IMPORT)
    assert "family_refork" not in data["imports"]["flash_attn_4"]
    members = [data["smoke"][g] for g in ("lib:flash_attn_4:bfloat16", "num:lib:flash_attn_4:1", "num:lib:flash_attn_4:2")]
    assert all(m["status"] == "ok" and m["imported_before"] for m in members)



def test_a_family_that_fails_after_its_import_keeps_the_import_s_result_and_runs_its_groups(tmp_path, monkeypatch):
    """What fails in the family's fork after the import (here: SIGCHLD ignored, so its waits fail) is
    not the import's failure: the import's result stands and the groups run from the parent."""
    ignoring = SLOW_IMPORT.replace("time.sleep(1.0)", "import signal; signal.signal(signal.SIGCHLD, signal.SIG_IGN)")
    data = _family_probe(tmp_path, monkeypatch, ignoring)
    assert data["imports"]["flash_attn_4"]["status"] == "ok"
    assert "the family failed" in data["imports"]["flash_attn_4"]["family_refork"]
    for group in ("lib:flash_attn_4:bfloat16", "num:lib:flash_attn_4:1", "num:lib:flash_attn_4:2"):
        assert data["smoke"][group]["status"] == "ok"


def test_a_group_of_a_family_killed_at_the_time_limit_dies_with_it(tmp_path, monkeypatch):
    import os
    import time

    pid_file = tmp_path / "member.pid"
    monkeypatch.setenv("FAMILY_HANG_MEMBER", str(pid_file))
    monkeypatch.setenv("ATTN_DOCTOR_IMPORT_TIMEOUT", "4")
    data = _family_probe(tmp_path, monkeypatch, SLOW_IMPORT)
    assert data["smoke"]["num:lib:flash_attn_4:2"]["status"] == "timeout"
    assert data["smoke"]["num:lib:flash_attn_4:1"]["status"] in ("ok", "timeout")
    pid = int(pid_file.read_text())
    for _ in range(50):  # the kernel delivers the parent-death signal at once; reaping may take a moment
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if open(f"/proc/{pid}/stat").read().split()[2] == "Z":
            break  # a zombie: dead, waiting for init to reap it
        time.sleep(0.1)
    else:
        raise AssertionError(f"the hung group {pid} outlived its family")


def test_the_import_is_told_an_architecture_only_where_every_gpu_here_shares_it():
    """The smoke tests' GPU is a CUDA ordinal and the devices listed are NVML's: on a node of mixed
    GPUs the tested one's capability is not known from the list, and no architecture is given."""
    from attn_doctor.facts import Gpu, GpuInfo
    from attn_doctor.probes import _capability_of

    same = GpuInfo(devices=[Gpu(index=0, name="H100", capability="9.0"), Gpu(index=1, name="H100", capability="9.0")])
    mixed = GpuInfo(devices=[Gpu(index=0, name="A100", capability="8.0"), Gpu(index=1, name="H100", capability="9.0")])
    assert _capability_of(same) == "9.0" and _capability_of(mixed) is None and _capability_of(None) is None
