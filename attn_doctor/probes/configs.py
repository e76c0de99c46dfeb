"""The config probe: read training configs given with ``--config`` and say what they ask for.

Kinds, detected from the keys (not the file name, which users choose freely):

- ``llamafactory``: a LLaMA-Factory training YAML (or JSON): ``model_name_or_path``, ``stage``,
  ``finetuning_type``, ``flash_attn``...; settings ``flash_attn``, ``bf16``, ``fp16``, ``pure_bf16``,
  and ``head_dim`` / ``model_config`` when ``model_name_or_path`` is a local folder with a config.json.
- ``transformers``: a model's ``config.json`` (``model_type`` / ``architectures``); settings
  ``torch_dtype``, ``dtype`` (transformers >= 4.56 writes ``dtype``), ``attn_implementation``,
  and ``head_dim`` (its own key, else ``hidden_size / num_attention_heads``; ``text_config``'s for
  multimodal models).
- ``accelerate``: an ``accelerate config`` YAML (``compute_environment``, ``distributed_type``);
  setting ``mixed_precision``.
- ``deepspeed``: a DeepSpeed JSON (``zero_optimization``, ``train_batch_size``, ``bf16``/``fp16``
  blocks); settings ``bf16.enabled``, ``fp16.enabled`` (``bfloat16`` is DeepSpeed's alias of ``bf16``).

YAML is read as the tools themselves read it: LLaMA-Factory and accelerate use PyYAML's
``safe_load`` (YAML 1.1), where ``off``/``on``/``yes``/``no`` are booleans; so is it here.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Optional

from ..facts import ConfigFile
from ..inputs import CONFIG_MAX_BYTES, MAX_DEPTH, YAML_MAX_BYTES, InputError, check_structure, located, read_bounded, text_of

KINDS = ("llamafactory", "transformers", "accelerate", "deepspeed")

LLAMAFACTORY_KEYS = ("flash_attn", "bf16", "fp16", "pure_bf16")
TRANSFORMERS_KEYS = ("torch_dtype", "dtype", "attn_implementation", "_attn_implementation")
ACCELERATE_KEYS = ("mixed_precision",)
DEEPSPEED_BLOCKS = {"bf16": ("bf16", "bfloat16"), "fp16": ("fp16",)}

_LLAMAFACTORY_MARKERS = {"model_name_or_path", "stage", "finetuning_type", "flash_attn", "template", "dataset"}
_ACCELERATE_MARKERS = {"compute_environment", "distributed_type", "num_processes", "machine_rank", "use_cpu"}
_DEEPSPEED_MARKERS = {
    "zero_optimization",
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "zero_allow_untested_optimizer",
}


class ConfigReadError(Exception):
    pass


def is_yaml(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


def load_document(path: Path) -> Any:
    """The file's data, as the training tools would read it (YAML 1.1 / JSON as Python's json
    reads it), within the bounds of attn_doctor/inputs.py: a regular file, CONFIG_MAX_BYTES
    (YAML_MAX_BYTES for YAML), MAX_DEPTH levels, MAX_VALUES values with YAML aliases expanded."""
    yaml_file = is_yaml(path)
    try:
        raw = read_bounded(path, YAML_MAX_BYTES if yaml_file else CONFIG_MAX_BYTES, allow_stdin=False)
        text = text_of(raw)
    except InputError as exc:
        raise ConfigReadError(str(exc)) from None
    try:
        doc = _parse_yaml(text) if yaml_file else _parse_json(text)
    except RecursionError:
        raise ConfigReadError(f"nested deeper than {MAX_DEPTH} levels") from None
    try:
        check_structure(doc)
    except InputError as exc:
        raise ConfigReadError(str(exc)) from None
    return doc


def _parse_yaml(text: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)  # PyYAML's safe_load: `off` is False, as LLaMA-Factory sees it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a reused anchor is loaded as PyYAML loads it; no stderr noise
            return yaml.load(text)
    except YAMLError as exc:
        raise ConfigReadError(f"not valid YAML{yaml_error_place(exc, text)}") from None


def yaml_error_place(exc: Exception, text: str) -> str:
    """` at line L, column C: <that line> (the problem)` for a ruamel.yaml error, or `: the problem`
    where it knows no place."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if mark is None:
        return f": {problem}"
    return f" at {located(text, mark.line + 1, mark.column + 1)} ({problem})"


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigReadError(f"not valid JSON at {located(text, exc.lineno, exc.colno)} ({exc.msg})") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4300 by default)
        raise ConfigReadError(f"not a usable JSON config: {exc}") from None


def detect_kind(doc: dict) -> str:
    keys = set(doc)
    if "model_type" in keys or "architectures" in keys:
        return "transformers"
    if "model_name_or_path" in keys or {"stage", "finetuning_type"} <= keys:
        return "llamafactory"  # before DeepSpeed: training YAMLs share keys such as gradient_accumulation_steps
    if keys & _DEEPSPEED_MARKERS or any(isinstance(doc.get(b), dict) for b in ("bf16", "bfloat16", "fp16")):
        return "deepspeed"
    if keys & _ACCELERATE_MARKERS or ("mixed_precision" in keys and "model_name_or_path" not in keys):
        return "accelerate"
    if keys & _LLAMAFACTORY_MARKERS:
        return "llamafactory"
    return "unknown"


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


def settings_of(kind: str, doc: dict, base: Optional[Path] = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if kind == "llamafactory":
        out = {k: doc[k] for k in LLAMAFACTORY_KEYS if k in doc}
        model_config = local_model_config(doc.get("model_name_or_path"), base or Path.cwd())
        if model_config is not None:
            try:
                model_doc = load_document(model_config)
            except ConfigReadError:
                model_doc = None
            head_dim = head_dim_of(model_doc) if isinstance(model_doc, dict) else None
            if head_dim:
                out.update(head_dim=head_dim, model_config=os.path.abspath(model_config))
    elif kind == "transformers":
        out = {k.lstrip("_"): doc[k] for k in TRANSFORMERS_KEYS if k in doc and doc[k] is not None}
        head_dim = head_dim_of(doc)
        if head_dim:
            out["head_dim"] = head_dim
    elif kind == "accelerate":
        out = {k: doc[k] for k in ACCELERATE_KEYS if k in doc}
    elif kind == "deepspeed":
        for name, aliases in DEEPSPEED_BLOCKS.items():
            for alias in aliases:
                block = doc.get(alias)
                if isinstance(block, dict) and "enabled" in block:
                    out[f"{name}.enabled"] = block["enabled"]
                    break
    return {k: _plain(v) for k, v in out.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value)


def probe_config(path: str) -> ConfigFile:
    """One config file; never raises: an unreadable file is a ConfigFile with status error."""
    p = Path(path).expanduser()
    absolute = os.path.abspath(p)
    try:
        doc = load_document(p)
    except ConfigReadError as exc:
        return ConfigFile(path=absolute, status="error", error=str(exc))
    if not isinstance(doc, dict):
        return ConfigFile(path=absolute, status="error", error="not a mapping of settings (expected key: value pairs)")
    kind = detect_kind(doc)
    return ConfigFile(path=absolute, kind=kind, settings=settings_of(kind, doc, Path(absolute).parent))


def probe_configs(paths: Optional[list[str]]) -> list[ConfigFile]:
    return [probe_config(p) for p in (paths or [])]


def attention_shapes(configs: list[ConfigFile]) -> list[dict[str, Any]]:
    """The attention inputs the given configs will feed the kernel: [{"head_dim", "dtype",
    "source"}], dtype "bfloat16" / "float16", or None where the config does not pin a half
    precision (an fp32 checkpoint trained under autocast: each native dtype is asked about)."""
    shapes: list[dict[str, Any]] = []
    for config in configs:
        settings = config.settings
        head_dim = settings.get("head_dim")
        if config.status != "ok" or not _positive_int(head_dim):
            continue
        if config.kind == "llamafactory":
            bf16 = settings.get("bf16") is True or settings.get("pure_bf16") is True
            dtype = "bfloat16" if bf16 else "float16" if settings.get("fp16") is True else None
        else:
            declared = str(settings.get("dtype") or settings.get("torch_dtype") or "").replace("torch.", "")
            dtype = declared if declared in ("bfloat16", "float16") else None
        shape = {"head_dim": head_dim, "dtype": dtype, "source": os.path.basename(config.path)}
        if all((s["head_dim"], s["dtype"]) != (head_dim, dtype) for s in shapes):
            shapes.append(shape)
    return shapes
