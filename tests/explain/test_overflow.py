"""Values beyond float16's range: a fill value or a logit written into a half tensor (AD661), with
what wrote it and what kind of value it was, and attention scores past 65504 (AD662). The claims the
remedies make about the dtypes are held against real torch."""

from __future__ import annotations

import io

import pytest

from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()


def _first(text: str):
    matches = [m for m in explain(io.BytesIO(text.encode()), RECIPES, kind="text").matches if not m.harmless]
    return matches[0] if matches else None


@pytest.mark.parametrize(
    ("text", "dtype", "kind"),
    [
        # NVIDIA/apex#1052: an attention mask filled with -1e9
        ("  File \"/home/w/docre/code/models/MPR.py\", line 169, in forward\n"
         "    scores_mask = scores.masked_fill(~path_mask.unsqueeze(-1),-1e9)\n"
         "RuntimeError: value cannot be converted to type at::Half without overflow: -1e+09", "Half", "a constant beyond float16's range"),
        # InternLM/lmdeploy#3152: the limit read from another tensor's dtype
        ("[rank0]: attention_scores = attention_scores.masked_fill(~(attention_mask), torch.finfo(query_layer.dtype).min)\n"
         "[rank0]: RuntimeError: value cannot be converted to type at::Half without overflow", "Half", "the limit of query_layer's dtype"),
        # QwenLM/Qwen#32: a logits processor writing float(2**30)
        ("    scores[i, self.eos_token_id] = float(2**30)\nRuntimeError: value cannot be converted to type at::Half without overflow",
         "Half", "a constant beyond float16's range"),
        ("    w = w.masked_fill(mask, torch.finfo(torch.float32).min)\nRuntimeError: value cannot be converted to type c10::BFloat16 without overflow",
         "BFloat16", "float32's limit"),
    ],
)
def test_a_value_the_half_tensor_cannot_hold_names_what_wrote_it(text, dtype, kind):
    m = _first(text)
    assert m.rule == "AD661" and m.cause == "fp16-range" and m.likelihood == "confirmed"
    assert m.captures["half_dtype"] == dtype and kind in m.message
    assert "torch.finfo(scores.dtype).min" in m.remedies[0].summary


def test_other_overflows_are_not_this():
    assert _first("RuntimeError: value cannot be converted to type int64_t without overflow") is None


def test_the_remedies_claims_hold_in_torch():
    torch = pytest.importorskip("torch")
    mask = torch.tensor([True, False])
    half, bf16 = torch.zeros(2, dtype=torch.float16), torch.zeros(2, dtype=torch.bfloat16)
    for tensor, value in ((half, -1e9), (half, float(2**30)), (half, torch.finfo(torch.float32).min), (bf16, torch.finfo(torch.float32).min)):
        with pytest.raises(RuntimeError) as exc:
            tensor.masked_fill(mask, value)
        assert _first(f"RuntimeError: {exc.value}").rule == "AD661"  # the message torch prints is the one recognised
    # what the remedies offer does fit: the tensor's own limit, and -1e9 / 2**30 in bfloat16
    half.masked_fill(mask, torch.finfo(half.dtype).min)
    bf16.masked_fill(mask, -1e9)
    bf16.masked_fill(mask, float(2**30))
    # and scaling q before the product keeps in range what the product after overflows
    q = torch.full((1, 128), 60.0, dtype=torch.float16)
    scale = 128 ** -0.5
    assert torch.isinf(q @ q.T).any() and torch.isfinite((q * scale) @ q.T).all()


def test_attention_scores_past_65504():
    m = _first("step 3120: loss nan\nthe attention scores overflow in fp16: attn_weights contain inf (float16 max 65504)")
    assert m.rule == "AD662" and m.cause == "fp16-range"
    assert "(q * scale) @ k.transpose(-2, -1)" in m.remedies[0].summary
    assert _first("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0 (fp16)") is None or \
        _first("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0 (fp16)").rule != "AD662"
