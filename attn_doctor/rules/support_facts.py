"""The facts a refusal states, read for the support matrix (attn_doctor/support): which kernel refused
(named in the line, around it, or implied by the frames), what the refusal speaks of (the GPU, the
head size, the dtype, a feature) and the values the lines around it give. The guards here keep a
"not supported" line only where an attention kernel is named and the line speaks of that fact;
explaining/matrix_judge.py then judges the facts against the matrix."""

from __future__ import annotations

import re
from itertools import zip_longest
from typing import Optional

from ..gpus import amd_gpus_in
from ..support import matrix

# what a refusal line speaks of
_ARCH_WORDS = re.compile(r"(?i)\b(?:gpus?|devices?|cpu|arch(?:itecture)?s?|capability|sm[_ ]?\d{2,3}|gfx\d|hardware|platforms?|cards?|"
                         r"compute|ampere|turing|volta|hopper|blackwell|ada|navi|rdna\d?|cdna\d?|instinct|radeon|mps|metal)\b")
_HEAD_WORDS = re.compile(r"(?i)head[_ ]?(?:size|dim(?:ension)?)s?|headdim|head_size|embed(?:ding)? per head|hdim")
_DTYPE = re.compile(r"(?i)(?<![\w.])(?:torch\.)?(?P<t>bfloat16|bf16|float16|fp16|half|float32|fp32|float8_e4m3fn\w*|float8_e5m2\w*|fp8(?:_e4m3|_e5m2)?|e4m3|e5m2)\b"
                    r"|c10::(?P<c>BFloat16|Half)\b")
_DTYPE_WORDS = re.compile(r"(?i)\b(?:dtype|data ?type|precision)s?\b")
# refusals that do not say what they refuse: every stated fact is judged
_UNSPECIFIC = re.compile(r"(?i)no (?:valid )?execution plans?|does not support this problem|not supported for (?:these|the given|this) inputs?"
                         r"|cannot be enabled")
_HEAD = re.compile(r"(?i)(?:head[_ ]?(?:size|dim(?:ension)?)s?|headdim|head_size|hdim)[^0-9\n(\[]{0,20}?(?P<d>\d{2,4})\b"
                   r"|\b(?P<d2>\d{2,4})\s+(?:is not a supported |as )?head[_ ]?(?:size|dim)")
_SM = re.compile(r"(?i)(?<![\w.])(?:sm[_ ]?(?P<sm>\d{2,3})[af]?|compute capability (?:of )?(?P<cc>\d{1,2}\.\d)|capability (?:is )?\(?(?P<ma>\d{1,2}), ?(?P<mi>\d)\)?)(?!\d)")
FEATURES = {
    "sliding_window": re.compile(r"(?i)sliding[ _-]?window|window_size|local attention"),
    "softcap": re.compile(r"(?i)soft[ _-]?cap|softcapping|logit[s]? soft[ -]?capping"),
    "alibi": re.compile(r"(?i)\balibi\b"),
    "dropout": re.compile(r"(?i)\bdropout\b"),
    "paged_kv": re.compile(r"(?i)paged[ _-]?(?:kv|attention)|block_tables?\b"),
    "varlen": re.compile(r"(?i)\bvarlen\b|variable[ -]length|cu_seqlens"),
    "fp8": re.compile(r"(?i)fp8[ _-]?kv|kv[_ ]cache[_ ]dtype\W{0,4}fp8|fp8 kv cache|fp8_e\dm\d kv"),
    "gqa": re.compile(r"(?i)\bgqa\b|grouped[ -]query|enable_gqa"),
}
_DTYPE_OF = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16", "float32": "fp32", "fp32": "fp32",
             "e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2", "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
_MODULE_PATH = re.compile(r"(?:site|dist)-packages[/\\]+(?P<name>[A-Za-z_][\w]*)")


def dtype_of(word: str) -> Optional[str]:
    w = word.lower()
    if w.startswith("float8_e4m3"):
        return "fp8_e4m3"
    if w.startswith("float8_e5m2"):
        return "fp8_e5m2"
    return _DTYPE_OF.get(w)


def _nearest(lines: list[str], finder) -> Optional[str]:
    """What `finder` finds on the line nearest the refusal (the lines ordered nearest first)."""
    for line in lines:
        found = finder(line)
        if found:
            return found
    return None


def kernel_named(line: str, around: list[str]) -> Optional[str]:
    """The matrix kernel the refusal line names, else the nearest line around it, else the nearest
    frame of a library the matrix knows."""
    table = matrix()
    for text in [line] + around:
        named = table.named_in(text)
        if named:
            return named[0].id
    for text in around:
        for m in _MODULE_PATH.finditer(text):
            k = table.for_module(m.group("name"))
            if k is not None:
                return k.id
    return None


def arch_stated(text: str) -> Optional[str]:
    """An architecture a line states of the GPU in use: sm_75, compute capability 7.5, (7, 5), gfx1100,
    an AMD model name. A floor ("requires sm80 or newer") is no GPU: read by explaining/stated.py."""
    if re.search(r"(?i)\b(?:requires?|needs?|at least|or (?:newer|higher|later)|pre|below|prior to|older than)\b", text) and not re.search(r"(?i)\b(?:got|your|this|current|detected|found|but)\b", text):
        return None
    amd = amd_gpus_in(text)
    if amd:
        return amd[0][1]
    if re.search(r"(?i)\b(?:on|for) (?:the )?cpu\b|device(?: type)?[=: ]+['\"]?cpu\b|\bcpu (?:device|tensors?)\b", text):
        return "cpu"
    m = _SM.search(text)
    if not m:
        return None
    if m.group("sm"):
        return "sm" + m.group("sm")
    if m.group("cc"):
        return "sm" + m.group("cc").replace(".", "")
    return "sm%s%s" % (m.group("ma"), m.group("mi"))


def facts(line: str, before: list[str], after: list[str]) -> dict:
    """The kernel, the head size, the dtype, the feature and the GPU a refusal and its neighbours
    state, nearest first (the line, then alternately the lines after and before it)."""
    around = [x for pair in zip_longest(after[:8], reversed(before[-8:])) for x in pair if x is not None]
    around += after[8:] + list(reversed(before[:-8]))  # then the rest of the window
    near = [line] + around
    out: dict = {}
    kernel = kernel_named(line, around)
    if kernel:
        out["support_kernel"] = kernel

    def head(text):
        m = _HEAD.search(text)
        return (m.group("d") or m.group("d2")) if m else None

    def dtype(text):
        m = _DTYPE.search(text)
        return dtype_of(m.group("t") or m.group("c")) if m else None

    def feature(text):
        return next((name for name, rx in FEATURES.items() if rx.search(text)), None)

    for key, finder, lines in (("support_head_dim", head, near[:12]), ("support_dtype", dtype, near[:6]),
                               ("support_feature", feature, [line]), ("support_arch", arch_stated, near)):
        found = _nearest(lines, finder)
        if found:
            out[key] = str(found)
    return out


def speaks_of(kind: str, line: str) -> bool:
    """Whether a refusal line speaks of this kind of fact (or of none in particular)."""
    if _UNSPECIFIC.search(line):
        return kind in ("arch", "head_dim", "dtype")
    if kind == "arch":
        return bool(_ARCH_WORDS.search(line) or amd_gpus_in(line))
    if kind == "head_dim":
        return bool(_HEAD_WORDS.search(line))
    if kind == "dtype":
        return bool(_DTYPE.search(line) or _DTYPE_WORDS.search(line))
    if kind == "feature":
        return any(rx.search(line) for rx in FEATURES.values())
    return False


def _guard(kind: str):
    def guard(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
        line = groups.get("refusal_line") or ""
        if not speaks_of(kind, line):
            return None
        found = facts(line, before, after)
        if "support_kernel" not in found:
            return None  # no attention kernel named or implied: not the matrix's to judge
        found["support_class"] = kind
        return found

    guard.__name__ = "matrix_" + kind
    guard.__doc__ = f"A refusal that speaks of the {kind.replace('_', ' ')}, with an attention kernel named or implied."
    return guard


GUARDS = {"matrix_" + kind: _guard(kind) for kind in ("arch", "head_dim", "dtype", "feature")}
