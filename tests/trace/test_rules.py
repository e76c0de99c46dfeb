"""Sinks, kernel rules and the CUDA autocast emulation, on real torch."""
import pytest
import torch
import torch.nn.functional as F

from attn_doctor.tracing.calls import policy, sinks
from attn_doctor.tracing.standins import fa3
from attn_doctor.tracing.runs.mode import activate
from attn_doctor.tracing.dtype_path.tracer import Tracer


def test_flash_attn_rules_in_flash_api_order():
    hd = (64, 64)
    j = sinks.judge
    assert j("flash_attn2", {"q": "bfloat16", "k": "bfloat16", "v": "bfloat16"}, hd) == []
    assert j("flash_attn2", {"q": "float32", "k": "bfloat16", "v": "bfloat16"}, hd)[0]["kernel_message"] == \
        "FlashAttention only support fp16 and bf16 data type"
    assert j("flash_attn2", {"q": "bfloat16", "k": "float32", "v": "bfloat16"}, hd)[0]["kernel_message"] == \
        "query and key must have the same dtype"
    assert j("flash_attn2", {"q": "float16", "k": "float16", "v": "bfloat16"}, hd)[0]["kernel_message"] == \
        "query and value must have the same dtype"
    big = j("flash_attn2", {"q": "bfloat16", "k": "bfloat16", "v": "bfloat16"}, (512, 512))
    assert [(p["id"], p["severity"]) for p in big] == [("AD603", "error")]
    old = j("flash_attn2", {"q": "float16", "k": "float16", "v": "float16"}, hd, capability=(7, 5))
    assert [p["id"] for p in old] == ["AD605"]
    # FlashAttention 3's rules live with its stand-in, on its calls' specs: the tracer judges by them.
    fa3_call = fa3.SPECS["flash_attn_func"]
    assert sinks.judge_call(fa3_call, "flash_attn3", {"q": "float32", "k": "float32", "v": "float32"}, hd)[0][
        "kernel_message"] == "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type"


def test_every_library_call_carries_its_librarys_rules():
    from attn_doctor.tracing.standins.hub import hub_specs
    from attn_doctor.tracing.standins.registry import LIBRARIES

    mixed = {"q": "bfloat16", "k": "float32", "v": "bfloat16"}
    for library in LIBRARIES:
        for name, spec in library.specs.items():
            assert spec.family == library.family, (library.top, name)
            # a mix of dtypes is refused by every library's kernel
            assert [p["id"] for p in sinks.judge_call(spec, spec.family, mixed, (64, 64))][:1] in (["AD602"], ["AD604"]), \
                (library.top, name)
    for kind in ("fa2", "fa3", "vllm_fa3", "sage"):
        for name, spec in hub_specs("kernels-community/x", kind).items():
            assert spec.name == "kernels-community/x:" + name and sinks.judge_call(spec, spec.family, mixed, (64, 64))


def test_sdpa_rules_and_messages():
    p = sinks.judge("sdpa", {"q": "bfloat16", "k": "float32", "v": "bfloat16"}, (64, 64))
    assert p[0]["kernel_message"] == ("Expected query, key, and value to have the same dtype, but got query.dtype: "
                                      "c10::BFloat16 key.dtype: float and value.dtype: c10::BFloat16 instead.")
    assert sinks.judge("sdpa", {"q": "float32", "k": "float32", "v": "float32"}, (64, 64))[0]["severity"] == "warning"
    assert sinks.judge("sdpa", {"q": "float16", "k": "float16", "v": "float16"}, (512, 512))[0]["id"] == "AD603"
    assert sinks.judge("fla", {"q": "float32", "k": "float32", "v": "float32"}, (64, 64)) == []


def _trace_fn(fn, autocast_dtype=None, emulate=True, device="meta"):
    tracer = Tracer(autocast_dtype=autocast_dtype, emulate_autocast=emulate)
    with torch.device(device), activate(tracer, autocast_dtype if emulate else None):
        out = fn()
    return tracer, out


@pytest.mark.parametrize("op,expected", [
    (lambda x: F.normalize(x, dim=-1), torch.float32),
    (lambda x: F.layer_norm(x, (8,)), torch.float32),
    (lambda x: F.softmax(x, dim=-1), torch.float32),
    (lambda x: x.exp(), torch.float32),
    (lambda x: x ** 2, torch.float32),
    (lambda x: x.sum(-1), torch.float32),
    # rms_norm joined CUDA autocast's fp32 list in torch 2.12: the installed torch decides
    (lambda x: F.rms_norm(x, (8,)), torch.float32 if tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 12)
     else torch.bfloat16),
    (lambda x: x * 2, torch.bfloat16),
    (lambda x: F.linear(x.float(), torch.ones(4, 8)), torch.bfloat16),
    (lambda x: x.float() @ torch.ones(8, 4), torch.bfloat16),
])
def test_cuda_autocast_policy_is_emulated_on_meta(op, expected):
    x = torch.zeros(2, 8, dtype=torch.bfloat16, device="meta")
    _, out = _trace_fn(lambda: op(x), torch.bfloat16)
    assert out.dtype == expected


def test_emulation_respects_autocast_disabled_regions_and_restores_state():
    x = torch.zeros(2, 8, dtype=torch.float32, device="meta")

    def fn():
        with torch.autocast("cuda", enabled=False):
            inside = F.linear(x, torch.ones(4, 8))
        return inside, F.linear(x, torch.ones(4, 8))

    _, (inside, outside) = _trace_fn(fn, torch.float16)
    assert inside.dtype == torch.float32 and outside.dtype == torch.float16
    assert not torch.is_autocast_enabled("cuda")


def test_policy_table_is_data_for_a_gpu_comparison():
    assert policy.expected_output("layer_norm", "bfloat16", "bfloat16") == "float32"
    assert policy.expected_output("linear", "float32", "float16") == "float16"
    assert policy.expected_output("mul", "bfloat16", "bfloat16") is None
    t = policy.table()
    assert "normalize" in t["fp32"] and "scaled_dot_product_attention" in t["lower"]
    assert ("rms_norm" in t["fp32"]) == (tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 12))


def test_sdpa_is_recorded_before_its_dtype_check_raises():
    q = torch.zeros(1, 2, 4, 8, dtype=torch.bfloat16)
    k = torch.zeros(1, 2, 4, 8, dtype=torch.float32)
    tracer = Tracer(continue_after_bad_sink=False)
    with pytest.raises(RuntimeError, match="Expected query, key, and value to have the same dtype"):
        with activate(tracer):
            F.scaled_dot_product_attention(q, k, q)
    (rec,) = tracer.sinks
    assert rec["inputs"]["k"]["dtype"] == "float32" and rec["problems"][0]["id"] == "AD602"


def test_flash_attn_custom_op_is_a_sink():
    # flash-attn >= 2.7 calls torch.ops.flash_attn._flash_attn_forward; define an op of that name here.
    try:
        lib = torch.library.Library("flash_attn", "FRAGMENT")
        lib.define("_flash_attn_forward(Tensor q, Tensor k, Tensor v) -> Tensor")
        lib.impl("_flash_attn_forward", lambda q, k, v: q.clone(), "CompositeExplicitAutograd")
    except RuntimeError as exc:
        pytest.skip("cannot define flash_attn ops here: %s" % exc)
    q = torch.zeros(1, 4, 2, 8, dtype=torch.float16)
    tracer = Tracer()
    with activate(tracer):
        torch.ops.flash_attn._flash_attn_forward(q, q.float(), q)
    (rec,) = tracer.sinks
    assert rec["name"] == "flash_attn::_flash_attn_forward"
    assert rec["problems"][0]["kernel_message"] == "query and key must have the same dtype"


def test_standin_enforces_flash_attn_checks_outside_a_trace():
    from attn_doctor.tracing.standins import fa2 as fa2_standin

    q = torch.randn(1, 4, 2, 8, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="^FlashAttention only support fp16 and bf16 data type$"):
        fa2_standin.flash_attn_func(q.float(), q, q)
    with pytest.raises(RuntimeError, match="^query and value must have the same dtype$"):
        fa2_standin.flash_attn_func(q, q, q.half())
    with pytest.raises(RuntimeError, match="head dimension at most 256"):
        big = torch.randn(1, 2, 1, 320, dtype=torch.float16)
        fa2_standin.flash_attn_func(big, big, big)
    out = fa2_standin.flash_attn_func(q, q, q, causal=True)
    ref = F.scaled_dot_product_attention(q.transpose(1, 2), q.transpose(1, 2), q.transpose(1, 2), is_causal=True)
    assert torch.allclose(out.transpose(1, 2).float(), ref.float())


def test_module_hooks_do_not_change_outputs():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 8))
    x = torch.randn(3, 8)
    with torch.no_grad():
        ref = model(x)
        tracer = Tracer()
        tracer.label_model(model)
        with activate(tracer):
            out = model(x)
    assert torch.equal(ref, out)
