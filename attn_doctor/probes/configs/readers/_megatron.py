"""What Megatron Core and Transformer Engine make of the precision, attention and fp8 settings that
NeMo (1.x and 2.x), NeMo-RL's Megatron back end and Megatron-Bridge hand them; shared by those three
readers (nemo.py, nemo_rl.py, megatron_bridge.py), as _hf.py is by the Hugging Face ones.

Sources (read at these commits):
- NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553
  megatron/core/transformer/enums.py AttnBackend (flash=1, fused=2, unfused=3, local=4, auto=5);
  megatron/core/transformer/transformer_config.py: attention_backend defaults to AttnBackend.auto,
  fp8 (None | "e4m3" | "hybrid") through Transformer Engine, fp8_recipe defaults to "delayed"
  ("tensorwise", "delayed", "mxfp8" for Blackwell only, "blockwise", "custom"), fp8_param,
  flash_attention_version (2 | 3 | 4, None: TE's choice);
  megatron/core/models/common/language_module/language_module.py: the backend becomes TE's
  NVTE_FLASH_ATTN / NVTE_FUSED_ATTN / NVTE_UNFUSED_ATTN switches (flash: only FlashAttention;
  fused: only cuDNN fused attention; unfused: only TE's PyTorch attention; auto: all three, TE
  picks; local: none of TE's, Megatron's own DotProductAttention: baddbmm + softmax + bmm).
- NVIDIA/TransformerEngine f2b6810c5a7df9c443e53e685253387e2d5c133c
  transformer_engine/pytorch/quantization.py: fp8 (delayed / current scaling) needs compute
  capability 8.9; "FP8 block scaled GEMM requires compute capability 9.0 or higher and CUDA >= 12.9."
  (blockwise); "Device compute capability 10.0 or higher required for MXFP8 execution."; NVFP4 needs
  10.0 too. TE's FlashAttention backend is the flash-attn package (FlashAttention-2; FA3 on Hopper
  where flash_attn_3 is installed), which needs sm80: forced alone on an older GPU TE finds no backend.
- Megatron's optimizer keeps fp32 main parameters (Float16OptimizerWithFloat16Params, the distributed
  optimizer) for a bf16 / fp16 model; with fp16 it scales the loss dynamically (DynamicGradScaler,
  initial scale 2**32) unless a static loss_scale is given.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ..plan import Reading, dtype_of, get

# AttnBackend name -> the plan's attention value
ATTENTION = {"flash": "flash_attention_2", "fused": "te-fused", "unfused": "eager", "local": "eager", "auto": "auto"}
_ENUM_VALUES = {1: "flash", 2: "fused", 3: "unfused", 4: "local", 5: "auto"}
ATTENTION_NOTES = {
    "flash": "Transformer Engine's FlashAttention backend only (the flash-attn package: FlashAttention-2, "
             "FA3 on Hopper where installed); it needs sm80",
    "fused": "Transformer Engine's cuDNN fused attention only",
    "unfused": "Transformer Engine's unfused PyTorch attention only",
    "local": "Megatron's own DotProductAttention (baddbmm + softmax + bmm), no Transformer Engine kernel",
    "auto": "Transformer Engine picks: FlashAttention (flash-attn) where installed and supported (sm80+), "
            "else cuDNN fused attention, else its unfused attention",
}
AUTO_NOTE = "Megatron Core's attention_backend defaults to auto: " + ATTENTION_NOTES["auto"]

# fp8_recipe -> the lowest compute capability Transformer Engine runs it on (None: 8.9, fp8's own floor)
FP8_RECIPE_FLOOR = {"blockwise": "9.0", "mxfp8": "10.0"}
FP8_RECIPE_WHY = {
    "blockwise": "Transformer Engine: 'FP8 block scaled GEMM requires compute capability 9.0 or higher and CUDA >= 12.9.'",
    "mxfp8": "Transformer Engine: 'Device compute capability 10.0 or higher required for MXFP8 execution.'",
}


def backend_name(value: Any) -> Optional[str]:
    """An AttnBackend as a config spells it ("flash", "AttnBackend.flash", 1, a serialised enum)."""
    if isinstance(value, dict):
        for key in ("_args_", "value", "name"):
            inner = value.get(key)
            if isinstance(inner, list) and inner:
                inner = inner[0]
            if inner is not None:
                return backend_name(inner)
        target = value.get("_target_")
        return backend_name(str(target).rsplit(".", 1)[-1]) if target and "AttnBackend." in str(target) else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return _ENUM_VALUES.get(value)
    if isinstance(value, str):
        text = value.strip().rsplit(".", 1)[-1].lower()
        return text if text in ATTENTION else None
    return None


def set_attention(r: Reading, value: Any, key: str, flash_version: Any = None, flash_version_key: Optional[str] = None) -> bool:
    """The plan's attention from an attention_backend value; False where it is not one."""
    name = backend_name(value)
    if name is None:
        return False
    impl = ATTENTION[name]
    note = ATTENTION_NOTES[name]
    if name in ("flash", "auto") and str(flash_version) in ("3", "4"):
        impl = "flash_attention_3" if str(flash_version) == "3" else impl
        note += f"; flash_attention_version {flash_version} pins that FlashAttention generation"
    r.set("attention", impl, key=key, raw=value if not isinstance(value, dict) else name, note=note)
    if flash_version_key and flash_version is not None:
        r.understood(flash_version_key)
    return True


def set_fp8(r: Reading, fmt: Any, recipe: Any, key: str, recipe_key: Optional[str] = None, source: str = "file",
            recipe_default: Optional[str] = "delayed") -> None:
    """fp8 through Transformer Engine, with the floor its scaling recipe needs."""
    recipe_text = str(recipe).strip().lower() if recipe not in (None, "") else recipe_default
    floor = FP8_RECIPE_FLOOR.get(recipe_text or "")
    note = f"fp8 {fmt} matrix multiplies through Transformer Engine, {recipe_text or 'default'} scaling"
    if floor:
        note += "; " + FP8_RECIPE_WHY[recipe_text]
    r.set("fp8", True, key=key, raw=fmt, source=source, note=note, requires=floor)
    r.set("fp8_backend", "te", source="default", note="Megatron Core's fp8 is Transformer Engine's")
    if recipe_key:
        r.understood(recipe_key)


def set_fp4(r: Reading, fmt: Any, key: str, source: str = "file") -> None:
    """NVFP4 through Transformer Engine: the plan has no fp4 key; it is fp8's kind of hazard with a
    Blackwell floor."""
    r.set("fp8", True, key=key, raw=fmt, source=source, requires="10.0",
          note="fp4 (NVFP4) matrix multiplies through Transformer Engine, not fp8: "
               "'Device compute capability 10.0 or higher required for NVFP4 execution.'")
    r.set("fp8_backend", "te", source="default", note="Megatron Core's fp4 is Transformer Engine's")


def torch_dtype(value: Any) -> Optional[str]:
    """A torch dtype as a config serialises it: "torch.bfloat16", "bf16", {_target_: torch.bfloat16, _call_: false}."""
    if isinstance(value, dict):
        value = value.get("_target_")
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    return dtype_of(text) or dtype_of(text.replace("torch.", "")) or ({"torch.half": "float16"}.get(text))


_INTERPOLATION = re.compile(r"^\$\{([A-Za-z_][\w.]*)\}$")


def resolve(doc: dict, value: Any, depth: int = 0) -> tuple[Any, Optional[str]]:
    """(the value, the dotted key it came from) with an OmegaConf `${a.b}` reference followed through
    the same file (absolute first, then with its first part dropped: the NeMo Framework Launcher
    composes files under `training:` / `fine_tuning:` / `peft:`); (the value as written, None) where
    it is no plain reference or does not resolve."""
    if not isinstance(value, str) or depth > 8:
        return value, None
    match = _INTERPOLATION.match(value.strip())
    if not match:
        return value, None
    dotted = match.group(1)
    for candidate in (dotted, dotted.split(".", 1)[1] if "." in dotted else None):
        if candidate and _present(doc, candidate):
            inner, via = resolve(doc, get(doc, candidate), depth + 1)
            return inner, via or candidate
    return value, None


def _present(doc: dict, dotted: str) -> bool:
    node: Any = doc
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def target_name(node: Any) -> str:
    """The class a `_target_` names ("nemo.collections.llm.Llama32Config1B" -> "Llama32Config1B"), or ""."""
    if isinstance(node, dict) and isinstance(node.get("_target_"), str):
        return node["_target_"].rsplit(".", 1)[-1]
    return ""
