"""The model a config trains, where it is a local folder: the attention head dimension and dtype the
kernel will get (check's node probe asks SDPA which kernel such inputs get)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from ...facts import ConfigFile


def head_dim_of(doc: dict) -> Optional[int]:
    """A transformers config's attention head dimension, as its modeling code computes it."""
    value = doc.get("head_dim")
    if _positive_int(value):
        return value
    hidden, heads = doc.get("hidden_size"), doc.get("num_attention_heads")
    if _positive_int(hidden) and _positive_int(heads) and hidden % heads == 0:
        return hidden // heads
    text = doc.get("text_config")  # multimodal models (Llava, Gemma 3...): the language model's attention
    return head_dim_of(text) if isinstance(text, dict) else None


def head_dim_of_file(path: Path) -> Optional[int]:
    from .documents import ConfigReadError, load_document

    try:
        doc = load_document(path)
    except ConfigReadError:
        return None
    return head_dim_of(doc) if isinstance(doc, dict) else None


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def local_model_config(model: Any, base: Path) -> Optional[Path]:
    """The config.json of a `model_name_or_path` that is a local folder (relative paths: to the
    working folder, as LLaMA-Factory resolves them, else to the YAML's folder); None for a Hub id."""
    if not isinstance(model, str) or not model.strip():
        return None
    try:
        path = Path(model).expanduser()
        for folder in ([path] if path.is_absolute() else [Path.cwd() / path, base / path]):
            if (folder / "config.json").is_file():
                return folder / "config.json"
    except (OSError, ValueError, RuntimeError):
        return None  # not a path this system can have (too long, a NUL byte, ~user unknown): a Hub id
    return None


def attention_shapes(configs: list[ConfigFile]) -> list[dict[str, Any]]:
    """The attention inputs the given configs will feed the kernel: [{"head_dim", "dtype",
    "source"}], dtype "bfloat16" / "float16", or None where the config does not pin a half
    precision (an fp32 checkpoint trained under autocast: each native dtype is asked about)."""
    shapes: list[dict[str, Any]] = []
    for config in configs:
        head_dim = config.settings.get("head_dim")
        if config.status != "ok" or not _positive_int(head_dim):
            continue
        dtype = None
        for name in ("compute_dtype", "param_dtype"):
            setting = config.plan.get(name)
            if setting is not None and setting.value in ("bfloat16", "float16"):
                dtype = setting.value
                break
        shape = {"head_dim": head_dim, "dtype": dtype, "source": os.path.basename(config.path)}
        if all((s["head_dim"], s["dtype"]) != (head_dim, dtype) for s in shapes):
            shapes.append(shape)
    return shapes
