"""Known kernel bugs at traced calls, off the GPU (attn_doctor/rules/known_calls.py): a training call
that SDPA would send to cuDNN on the GPU judged for meets pytorch#196678 (non-causal, key lengths 64
mod 128), cudnn-frontend#1072 (one query row) or pytorch#193893 (grouped-query heads on a B200), and
gets its warning at its line, with the fix; a causal call, a forward-only trace, an A100, or an
environment that takes cuDNN off the top of SDPA's order do not."""

from __future__ import annotations

import json
import os

import pytest

from conftest import cli, marker_line, toy_target

TOY = "numerics_toy.py"


def _trace(*args, env=None):
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        code, out, err = cli(toy_target(TOY, "make"), "--dtype", "bf16", "--json", *args)
    finally:
        os.environ.clear()
        os.environ.update(old)
    return code, json.loads(out)


def _ids(report):
    return {(f["id"], f["sink"]["line"]) for f in report["findings"]}


def test_a_masked_training_call_on_an_h100_stack_meets_the_tile_bug_at_its_line():
    code, report = _trace("--train", "--capability", "9.0", "-a", "seq=704")
    line = marker_line(TOY, "SINK-MASK")
    (found,) = [f for f in report["findings"] if f["id"] == "AD710"]
    assert found["sink"]["line"] == line and found["severity"] == "warning"
    assert "key length 704 is one of them" in found["message"] and "pytorch/pytorch#196678" in found["message"]
    assert "enable_cudnn_sdp(False)" in found["fix"] and "TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in found["fix"]
    assert "is_causal=True" in found["fix"]  # the mask only says causal
    assert code == 0  # a warning: the trace still passes without --fail-on warning
    # another length: still warned (training lengths vary), said as such
    _, report = _trace("--train", "--capability", "9.0", "-a", "seq=640")
    (found,) = [f for f in report["findings"] if f["id"] == "AD710"]
    assert "key length is 640, but a batch padded to 64 mod 128 meets it" in found["message"]


def test_causal_forward_only_ampere_or_a_deprioritized_cudnn_do_not_meet_it():
    assert "AD710" not in {i for i, _ in _ids(_trace("--train", "--capability", "9.0", "-a", "kind=causal")[1])}
    assert "AD710" not in {i for i, _ in _ids(_trace("--capability", "9.0")[1])}  # no backward
    assert "AD710" not in {i for i, _ in _ids(_trace("--train", "--capability", "8.0")[1])}  # A100: flash/mem-efficient first
    _, report = _trace("--train", "--capability", "9.0", env={"TORCH_CUDNN_SDPA_DEPRIORITIZED": "1"})
    assert "AD710" not in {i for i, _ in _ids(report)}


def test_a_single_query_row_meets_the_dk_dv_bug():
    _, report = _trace("--train", "--capability", "9.0", "-a", "kind=pool", "-a", "seq=128")
    line = marker_line(TOY, "SINK-POOL")
    assert ("AD711", line) in _ids(report)
    assert ("AD710", line) in _ids(report)  # no mask, not causal: the tile bug's pattern too


def test_the_api_trace_judges_the_same():
    import torch

    import importlib.util

    from attn_doctor import trace as api_trace

    spec = importlib.util.spec_from_file_location("numerics_toy_api", toy_target(TOY, "make").rsplit(":", 1)[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, (x,) = module.make(device="cpu", seq=192)
    report = api_trace(model.to(torch.bfloat16), (x.to(torch.bfloat16),), train=True, capability="9.0")
    assert any(f["id"] == "AD710" for f in report.findings)
