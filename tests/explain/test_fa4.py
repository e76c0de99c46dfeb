"""FlashAttention 4's failures in a log: the DSL runtime that does not import gets the install for
the torch CUDA the log shows (flash-attn-4[cu13] on CUDA 13; flash-attn-4 4.0.0b36 has no cu12 extra,
its plain install is the CUDA 12 one); its dtype assertion is the promotion rule."""

from __future__ import annotations

import pytest

import attn_doctor

NO_CUTLASS = "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n" \
             "    from flash_attn.cute import flash_attn_func\nModuleNotFoundError: No module named 'cutlass'\n"


@pytest.mark.parametrize("versions,requirement", [
    ("torch==2.11.0+cu130\n", "flash-attn-4[cu13]"),
    ("torch==2.8.0+cu128\n", "flash-attn-4"),
    ("", "flash-attn-4"),  # CUDA unknown: the plain install, the summary says which extra fits which CUDA
])
def test_cute_dsl_not_importable_installs_flash_attn_4_for_the_logs_cuda(versions, requirement):
    first = attn_doctor.explain(versions + NO_CUTLASS).matches[0]
    assert first.rule == "AD322"
    assert [r.requirement for r in first.remedies if r.kind == "pip"] == [requirement]


def test_flash_attn_4s_dtype_assertion_is_a_promotion():
    text = "    out, lse = flash_attn_func(q, k, v, causal=True)\nAssertionError: q, k, v, and qv must have the same dtype\n"
    assert attn_doctor.explain(text).matches[0].rule == "AD601"
