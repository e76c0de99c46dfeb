"""Hypothesis strategies shared by the fuzz tests: JSON values, YAML-ish scalars, log lines."""

from __future__ import annotations

import json

from hypothesis import strategies as st

# Strings that reach code paths: empty, huge, NUL bytes, paths, versions, dtypes, attn spellings.
INTERESTING_TEXT = st.sampled_from([
    "", " ", "\x00", "a\x00b", "~", "~nosuchuser/x", "/", ".", "..", "x" * 5000, "/" + "a/" * 3000,
    "2.5.1+cu121", "2.6.3", "9.0", "7.5", "12.2", "13.0", "abc", "-1", "0", "1e400", "nan", "inf", "None",
    "bfloat16", "float16", "float32", "torch.bfloat16", "bf16", "fp16", "fp32", "auto", "sdpa", "fa2", "fa3",
    "flash_attention_2", "eager", "disabled", "off", "on", "yes", "no", "true", "false", "no", "TRUE",
    "meta-llama/Llama-2-7b-hf", "{x}", "{{", "}", "%s", "[red]", "[/]", "\x1b[31m", "\u202e", "\r", "line\nbreak",
])
TEXT = st.one_of(INTERESTING_TEXT, st.text(max_size=40))
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 64, 128, 256, 512, 2**31, 2**63, 2**64, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)


def json_values(max_leaves: int = 12):
    return st.recursive(
        SCALARS,
        lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(TEXT, children, max_size=4)),
        max_leaves=max_leaves,
    )


def dumps(value) -> str:
    """JSON text for any value the strategies make (NaN and inf as Python's json writes them)."""
    return json.dumps(value, ensure_ascii=False)
