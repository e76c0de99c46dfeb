"""Cases the first tracer got wrong, each traced for real (meta and CPU) through the API: a mask of
the other half dtype, an error raised at an attention call, a float64 table, attention written
inline. The model without attention and the factories with arguments or written for CUDA are in
test_run.py and test_factory.py."""
import pytest

from conftest import marker_line, toy_target

TOY = "heldout_toy.py"


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_mask_of_the_other_half_dtype_is_an_error_not_a_clean_pass(trace, device):
    r = trace(toy_target(TOY, "build_mask_fp16_bf16"), device=device)
    assert r["status"] == "ok", r["error"]  # judged, cast, and the forward went on past it
    (f,) = r["findings"]
    assert (f["id"], f["severity"], f["count"]) == ("AD606", "error", 2)
    assert f["kernel_message"] == ("Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                                   "attn_mask.dtype: c10::BFloat16 and  query.dtype: c10::Half instead.")
    mask = f["sink"]["other_inputs"]["attn_mask"]
    assert mask["dtype"] == "bfloat16" and mask["made_at"]["line"] == marker_line(TOY, "MASK")
    assert f["sink"]["line"] == marker_line(TOY, "SINK-MASK")
    assert "attn_mask bfloat16" in f["message"] and r["exit_code"] == 1


def _dtype_findings(report):
    # the toy's additive mask is all zeros: it masks nothing, a note of its own (AD619), not a dtype problem
    notes = [f for f in report["findings"] if f["id"] == "AD619"]
    assert all(f["severity"] in ("info", "warning") and "masks nothing" in f["message"] for f in notes), notes
    return [f for f in report["findings"] if f["id"] != "AD619"]


def test_mask_of_the_same_dtype_and_a_bool_mask_are_fine(trace):
    ok = trace(toy_target(TOY, "build_mask_ok"))
    assert _dtype_findings(ok) == [] and [f["id"] for f in ok["findings"]] == ["AD619"]
    assert trace(toy_target(TOY, "build_mask"), factory_kwargs={"mask_dtype": "bool"})["findings"] == []


def test_mask_under_autocast_is_cast_like_q(trace):
    # CUDA autocast casts every floating argument of SDPA, the mask too: an fp32 model with a bf16 mask
    # under fp16 autocast reaches the kernel as fp16 / fp16.
    r = trace(toy_target(TOY, "build_mask"), factory_kwargs={"dtype": "float32", "mask_dtype": "bfloat16"},
              autocast="fp16")
    assert _dtype_findings(r) == [] and r["summary"]["sinks"] == 2


def test_error_raised_at_an_attention_call_is_a_finding(trace, tmp_path):
    # A kernel error the rules do not predict (heads that do not divide): the kernel's own message,
    # as an error at the call, never "no dtype problems".
    path = tmp_path / "gqa.py"
    path.write_text(
        "import torch\n"
        "from flash_attn import flash_attn_func\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, q):\n"
        "        k = q[:, :, :3]\n"
        "        return flash_attn_func(q, k, k)  # SINK\n"
        "def build():\n"
        "    return M(), torch.randn(1, 8, 4, 16, dtype=torch.bfloat16)\n")
    r = trace(str(path) + ":build")
    route = {rt["name"]: rt for rt in r["routes"]}["standin"]
    (f,) = route["findings"]
    assert (f["id"], f["severity"]) == ("AD607", "error")
    assert f["kernel_message"] == "Number of heads in key/value must divide number of heads in query"
    assert f["sink"]["line"] == 6 and r["exit_code"] == 1
    # As installed (no flash_attn) the module does not even import: said, not hidden.
    installed = {rt["name"]: rt for rt in r["routes"]}["installed"]
    assert installed["verdict"] == "could not run" and "flash_attn" in installed["error"]


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_float64_table_is_named_with_its_origin(trace, device):
    r = trace(toy_target(TOY, "build_float64_rotary"), device=device)
    (f,) = r["findings"]
    assert f["id"] == "AD601" and f["count"] == 2
    assert (f["sink"]["q"]["dtype"], f["sink"]["k"]["dtype"], f["sink"]["v"]["dtype"]) == (
        "float64", "float64", "bfloat16")
    (entry,) = f["chain"]
    assert entry["dtype"] == "float64" and entry["line"] == marker_line(TOY, "PROMOTE-F64")
    assert entry["operand_origin"] == dict(entry["operand_origin"], kind="buffer", name="layers.0.rope_cos")
    assert "promoted to float64" in f["message"] and "float32" not in f["message"]


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_inline_attention_is_judged(trace, device):
    clean = trace(toy_target(TOY, "build_inline"), device=device)
    assert clean["findings"] == [] and clean["summary"]["sinks"] == 2
    assert {s["name"] for s in clean["sinks"]} == {"eager attention (inline)"}
    r = trace(toy_target(TOY, "build_inline_bad"), device=device)
    assert r["status"] == "ok", r["error"]  # continued past the first layer, found the second too
    (f,) = r["findings"]
    assert f["id"] == "AD601" and f["count"] == 2
    assert f["kernel_message"] == "expected scalar type BFloat16 but found Float"
    assert f["sink"]["line"] == marker_line(TOY, "SINK-INLINE")
    assert f["chain"][0]["line"] == marker_line(TOY, "PROMOTE-V") and f["chain"][0]["operand"] == "layers.0.v_gain"
