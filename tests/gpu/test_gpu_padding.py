"""--device cuda --train on a DPO-like padded batch (tests/trace/toys/dpo_toy.py): the kernel's
wrong values at query rows that see no key are graded as check grades them (a note where the labels
ignore those rows, a warning where nothing says so) and said as padding; at a length of 64 mod 128
the cuDNN kernel's NaN gradients for every row are an error (on the GPUs and releases that have it)."""

from __future__ import annotations

import pytest
import torch

from attn_doctor.tracing.runs.api import trace

from .conftest import toy_target

pytest.importorskip("transformers")


def _sm90_cudnn_bug():
    return torch.cuda.is_available() and torch.cuda.get_device_capability(0) == (9, 0)


@pytest.mark.parametrize("labels", [True, False])
def test_padding_rows_at_a_multiple_of_128_are_not_an_error(labels):
    r = trace(toy_target("dpo_toy.py", "build"), device="cuda", train=True,
              factory_kwargs={"seq": 768, "labels": labels})
    assert r["status"] == "ok", r["error"]
    assert not any(f["severity"] == "error" for f in r["findings"]), [f["message"] for f in r["findings"]]
    for f in r["findings"]:
        if f["id"] == "AD617":  # where the kernel is off at padding rows, it is said as padding
            assert "query rows that see no key" in f["message"] and "padding" in f["message"], f["message"]
            assert f["severity"] == ("info" if labels else "warning")


@pytest.mark.skipif(not _sm90_cudnn_bug(), reason="pytorch/pytorch#196678 is measured on sm90")
def test_nan_gradients_at_64_mod_128_are_an_error():
    r = trace(toy_target("dpo_toy.py", "build"), device="cuda", train=True, factory_kwargs={"seq": 704})
    errors = [f for f in r["findings"] if f["id"] == "AD617" and f["severity"] == "error"]
    if torch.backends.cudnn.version() and torch.backends.cudnn.version() < 91900:
        pytest.skip("cuDNN before 9.19: the NaN is not expected")
    assert errors, [f["message"] for f in r["findings"]]
    assert "NaN" in errors[0]["message"] and "enable_cudnn_sdp(False)" in (errors[0].get("fix") or "")
