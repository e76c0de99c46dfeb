"""The framework-neutral training plan a reader makes of a config, and the helpers every reader shares.

The plan (ConfigFile.plan), each value a PlanSetting saying where it came from:

- compute_dtype: what the matrix multiplies and attention run in: "bfloat16" | "float16" | "float32"
- param_dtype: what the weights are kept in; equal to a half compute_dtype it is a pure (true) half
  plan, with no fp32 master copy; "float32" under a half compute_dtype is mixed precision
- loss_scaling: True where fp16 gradients are scaled (the trainer's GradScaler, DeepSpeed's loss scale)
- tf32: True where TF32 matrix multiplies are asked for
- fp8: True where fp8 matrix multiplies are asked for; fp8_backend: "te" | "torchao" | "msamp" | ...
- attention: the implementation asked for: "eager" | "sdpa" | "flash_attention_2" | "flash_attention_3" |
  "flex_attention" | "xformers" | a kernels-hub repository ("kernels-community/flash-attn") | "auto"
- compile: True where torch.compile is asked for
- distributed: "fsdp" | "fsdp2" | "deepspeed" | "ddp" where the file chooses; reduce_dtype: FSDP's or
  DeepSpeed's gradient reduction dtype
- quantization: how the frozen base weights are stored: "nf4" | "fp4" | "int8" | "fp8-weights" | ... (storage,
  not compute: an fp8-stored base computes in a half dtype); quant_compute_dtype: what a quantised base
  computes in (bitsandbytes' bnb_4bit_compute_dtype)
- adapter: "lora" | "qlora" | "dora" | ... where only adapters train; adapter_dtype: what their weights are
  kept in (PEFT's get_peft_model upcasts bf16/fp16 adapter weights to fp32 by default)

Remedies are intents (`precision=fp16`, `precision=fp32`, `attention=sdpa`, `tf32=off`, `fp8=off`, `weights=fp32`: the
weights loaded in fp32 under a half autocast); a
reader writes each in its own keys (ConfigFile.edits), or leaves out one its framework cannot take.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from ...facts import PlanSetting

PLAN_KEYS = ("compute_dtype", "param_dtype", "loss_scaling", "tf32", "fp8", "fp8_backend", "attention", "compile",
             "distributed", "reduce_dtype", "quantization", "quant_compute_dtype", "adapter", "adapter_dtype")
INTENTS = ("precision=fp16", "precision=fp32", "precision=bf16", "attention=sdpa", "tf32=off", "fp8=off", "weights=fp32")

_DTYPES = {
    "bf16": "bfloat16", "bfloat16": "bfloat16", "torch.bfloat16": "bfloat16", "bfloat": "bfloat16",
    "fp16": "float16", "float16": "float16", "half": "float16", "torch.float16": "float16", "torch.half": "float16", "16": "float16",
    "fp32": "float32", "float32": "float32", "float": "float32", "torch.float32": "float32", "torch.float": "float32", "32": "float32",
    "tf32": "float32",
}


def dtype_of(value: Any) -> Optional[str]:
    """A dtype as any framework spells it, normalised; None for anything else ("auto" included)."""
    if isinstance(value, bool) or value is None:
        return None
    return _DTYPES.get(str(value).strip().lower())


def truthy(value: Any) -> Optional[bool]:
    """A boolean as YAML 1.1, JSON or a string spells it; None for anything else ("auto")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "yes", "on", "1", "y"):
            return True
        if text in ("false", "no", "off", "0", "n", "none", "null", ""):
            return False
    return None


def get(doc: Any, dotted: str) -> Any:
    """doc["a"]["b"] for "a.b"; None where any step is missing."""
    for part in dotted.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def has(doc: Any, dotted: str) -> bool:
    *parents, last = dotted.split(".")
    node = get(doc, ".".join(parents)) if parents else doc
    return isinstance(node, dict) and last in node


# transformers' own names, and the spellings frameworks use for them
_ATTENTION = {
    "eager": "eager", "sdpa": "sdpa", "flash_attention_2": "flash_attention_2", "flash_attention_3": "flash_attention_3",
    "flash_attn": "flash_attention_2", "flash_attn2": "flash_attention_2", "fa2": "flash_attention_2", "flashattn2": "flash_attention_2",
    "flash_attn3": "flash_attention_3", "fa3": "flash_attention_3", "flex_attention": "flex_attention", "flex": "flex_attention",
    "xformers": "xformers", "paged_attention": "sdpa", "sdpa_paged": "sdpa", "flash_paged": "flash_attention_2",
    "auto": "auto",
}


def attention_of(value: Any) -> Optional[str]:
    """An attention implementation, normalised to transformers' names; a kernels-hub repository
    ("kernels-community/flash-attn3", with or without a revision) is kept as written."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if "/" in text and re.fullmatch(r"[\w.\-]+/[\w.\-]+(@[\w.\-]+)?(:[\w.\-]+)?", text):
        return text
    return _ATTENTION.get(text.lower())


def needs_library(attention: str) -> Optional[str]:
    """The package an attention implementation needs installed (the kernels hub's `kernels`)."""
    if attention in ("flash_attention_2",):
        return "flash-attn"
    if attention == "flash_attention_3":
        return "flash-attn-3"
    if attention == "xformers":
        return "xformers"
    if "/" in attention:
        return "kernels"
    return None


def flash_generation(attention: Optional[str]) -> Optional[int]:
    """2 or 3 for a FlashAttention implementation (a kernels-hub build of it too), else None."""
    if not attention:
        return None
    if attention == "flash_attention_2":
        return 2
    if attention == "flash_attention_3":
        return 3
    repo = attention.lower()
    if "/" in repo and "flash" in repo and "attn" in repo:
        return 3 if ("attn3" in repo or "attention3" in repo or "fa3" in repo) else 2
    return None


@dataclass
class Reading:
    """What a reader made of one file."""

    plan: dict[str, PlanSetting] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)  # the raw keys that rules and fix read
    read: set[str] = field(default_factory=set)  # dotted keys understood (their subkeys too)
    edits: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # key -> the framework's own message
    refused_by: dict[str, str] = field(default_factory=dict)  # key -> the releases that refuse it ("trl>=0.27")
    conflicts: dict[str, str] = field(default_factory=dict)  # "bf16, fp16" -> the framework's message for both on

    def set(self, name: str, value: Any, key: Optional[str] = None, raw: Any = None, source: str = "file",
            note: Optional[str] = None, requires: Optional[str] = None) -> None:
        assert name in PLAN_KEYS, name
        if isinstance(value, str) and type(value) is not str:
            value = str(value)
        self.plan[name] = PlanSetting(value=value, source=source, key=key, raw=None if raw == value else _plain(raw),
                                      note=note, requires=requires)
        if key and source == "file":
            self.read.add(key)

    def default(self, name: str, value: Any, note: str) -> None:
        """A value the framework applies when the file does not say."""
        if name not in self.plan:
            self.set(name, value, source="default", note=note)

    def understood(self, *keys: str) -> None:
        self.read.update(keys)

    def exclusive(self, doc: Any, pairs: tuple[tuple[tuple[str, ...], str], ...]) -> None:
        """Record each group of (dotted) keys that the file turns on together although the framework
        refuses that (its own message, from its code): bf16 and fp16 both true."""
        for keys, message in pairs:
            on = [k for k in keys if truthy(get(doc, k))]
            if len(on) > 1:
                self.conflicts[", ".join(on)] = message


def _plain(value: Any) -> Any:
    """A scalar as the report holds it: a str subclass (a Python config's symbol or unevaluated
    expression) as its text."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, str):
        return str(value)
    return str(value)[:200]


# Key names that look like a precision or attention setting. A key the reader did not read that
# matches is reported as not understood: the user learns that the doctor did not judge it.
_LOOKS = re.compile(r"(^|[_.\-])(bf16|fp16|fp32|fp8|float8|float16|bfloat16|half|precision|dtype|tf32|amp|autocast|"
                    r"attn|attention|flash|sdpa|xformers|flex|compile|mixed)($|[_.\-])", re.IGNORECASE)
_NOT_PRECISION = re.compile(r"(dropout|pdrop|heads|head_dim|window|bias|layers|softmax_scale|logit|sink|type_vocab|"
                            r"hidden|size|mask|rope|rotary|multiple_of|norm|eps|chunk|block|sequence|stride|half_life|resolution)", re.IGNORECASE)
UNREAD_MAX = 20


def looks_like_setting(dotted: str) -> bool:
    """Whether the last part of a dotted key looks like a precision or attention setting."""
    leaf = dotted.rsplit(".", 1)[-1]
    return bool(_LOOKS.search(leaf)) and not _NOT_PRECISION.search(leaf)


def unread_keys(doc: dict, read: set[str], max_depth: int = 8) -> list[str]:
    """Dotted keys that look like precision or attention settings and that the reader did not read
    (nor read a parent of), at most UNREAD_MAX."""
    out: list[str] = []
    for dotted, value in _walk(doc, "", max_depth):
        if len(out) >= UNREAD_MAX:
            break
        leaf = dotted.rsplit(".", 1)[-1]
        if not _LOOKS.search(leaf) or _NOT_PRECISION.search(leaf):
            continue
        if isinstance(value, dict):
            continue  # its own keys are judged one by one
        if any(dotted == r or dotted.startswith(r + ".") for r in read):
            continue
        if value is None or value is False or value == "" or value == []:
            continue  # a setting left off asks for nothing
        out.append(dotted)
    return out


def _walk(doc: Any, prefix: str, depth: int) -> Iterator[tuple[str, Any]]:
    if depth <= 0 or not isinstance(doc, dict):
        return
    for key, value in doc.items():
        dotted = f"{prefix}{key}"
        yield dotted, value
        if isinstance(value, dict):
            yield from _walk(value, dotted + ".", depth - 1)
