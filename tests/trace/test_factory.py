"""MODULE:FACTORY (attn_doctor/tracing/runs/factory.py), traced for real through the API and the CLI:
factory arguments from the command line and the mistakes in them, a factory written for CUDA (its
tensors go to the trace device) and one that needs CUDA itself (said, with what to do)."""
import json

import pytest

from conftest import cli, toy_target

TOY = "heldout_toy.py"


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
