"""Cases the first tracer got wrong, each traced for real (meta and CPU) through the API and the CLI:
a mask of the other half dtype, a float64 table, a model without attention, attention written
inline, factories with arguments or written for CUDA."""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, marker_line, toy_target

TOY = "heldout_toy.py"


def cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "trace", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


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


def test_mask_of_the_same_dtype_and_a_bool_mask_are_fine(trace):
    assert trace(toy_target(TOY, "build_mask_ok"))["findings"] == []
    assert trace(toy_target(TOY, "build_mask"), factory_kwargs={"mask_dtype": "bool"})["findings"] == []


def test_mask_under_autocast_is_cast_like_q(trace):
    # CUDA autocast casts every floating argument of SDPA, the mask too: an fp32 model with a bf16 mask
    # under fp16 autocast reaches the kernel as fp16 / fp16.
    r = trace(toy_target(TOY, "build_mask"), factory_kwargs={"dtype": "float32", "mask_dtype": "bfloat16"},
              autocast="fp16")
    assert r["findings"] == [] and r["summary"]["sinks"] == 2


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
    route = {rt["name"]: rt for rt in r["routes"]}["flash_attn_standin"]
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


def test_no_attention_call_is_no_pass():
    code, out, err = cli(toy_target(TOY, "build_no_attention"))
    assert code == 3, out + err
    assert "nothing judged" in out and "no dtype problems" not in out and "✓" not in out
    code, out, _ = cli(toy_target(TOY, "build_no_attention"), "--json")
    report = json.loads(out)
    assert code == 3 and report["status"] == "no_attention" and report["exit_code"] == 3
    assert "reached no attention call" in report["error"]["message"]


def test_factory_arguments_from_the_cli():
    code, out, err = cli(toy_target(TOY, "build_sized"), "-a", "depth=3", "--factory-arg", "dtype=bfloat16",
                         "--json")
    report = json.loads(out)
    assert code == 0, err
    assert report["factory_kwargs"] == {"depth": 3, "dtype": "bfloat16"}
    assert report["summary"]["sinks"] == 3
    assert {s["effective_dtypes"]["q"] for s in report["sinks"]} == {"bfloat16"}


@pytest.mark.parametrize("args,needle", [
    (["-a", "depth"], "is not KEY=VALUE"),
    (["-a", "2depth=3"], "is not KEY=VALUE"),
    (["-a", "width=3"], "the factory does not take width"),
])
def test_bad_factory_arguments_are_usage_errors(args, needle):
    code, out, err = cli(toy_target(TOY, "build_sized"), *args)
    assert code == 2, out + err
    assert needle in (out + err).replace("\n", " ") and "Traceback" not in out + err
    if "width" in needle:
        assert "its parameters: depth, dim, heads, dtype" in (out + err).replace("\n", " ")


def test_attn_implementation_without_hf_is_a_usage_error():
    code, out, err = cli(toy_target(TOY, "build_sized"), "--attn-implementation", "eager")
    assert code == 2 and "--attn-implementation goes with --hf" in (out + err).replace("\n", " ")


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_factory_written_for_cuda_runs_on_the_trace_device(trace, device):
    r = trace(toy_target(TOY, "build_on_cuda"), device=device)
    assert r["status"] == "ok", r["error"]
    assert r["summary"]["sinks"] == 2 and r["findings"] == []
    assert {s["effective_dtypes"]["q"] for s in r["sinks"]} == {"float16"}
    assert any("went to %s, the trace device" % device in n for n in r["notes"])


def _have_cuda():
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(_have_cuda(), reason="on a GPU the factory's CUDA calls simply work")
def test_factory_that_needs_cuda_says_what_to_do():
    code, out, err = cli(toy_target(TOY, "build_asks_cuda"))
    text = " ".join(out.split())
    assert code == 3 and "Traceback" not in out
    assert "the factory raised" in text and "take a `device` parameter" in text and "--device cuda" in text


def test_autocast_region_named_after_the_trace_device_runs_on_meta(trace):
    # `torch.autocast(device_type=x.device.type, enabled=False)` (transformers' rotary code) raises on
    # meta in plain torch; in a trace it stands for the GPU's CUDA region.
    r = trace(toy_target(TOY, "build_fallback"), autocast="bf16")
    assert r["status"] == "ok", r["error"]
    assert r["device"] == "meta"
