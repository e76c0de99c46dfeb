"""``--hf``: a transformers model built from a local config as ``from_pretrained`` would build it
(its class, dtype and attention implementation; no weights, nothing downloaded), with inputs that
reach every tower. Off the GPU transformers refuses flash-attention: where flash_attn imports here
(really, or as the stand-in), the model is built with transformers' default and its attention
switched to the flash path (set_attn_implementation, the ``*_ATTENTION_CLASSES`` of older releases,
the flash helpers a GPU machine would have imported). Importing this module does not import
transformers."""

from __future__ import annotations

import copy
import inspect
import json
import os
import re
import sys

from ..errors import TraceError, _one_line
from .gpu_stand_in import flash_importable


def _transformers_version():
    mod = sys.modules.get("transformers")
    return getattr(mod, "__version__", "?")


def _hf_config_data(path):
    """(config file, its JSON) of --hf: a path that is missing or not a JSON object is a usage
    error (exit 2), checked before transformers is needed."""
    if not os.path.exists(path):
        raise TraceError("usage", "--hf %s: no such file or folder" % path)
    file = path if os.path.isfile(path) else os.path.join(path, "config.json")
    if not os.path.isfile(file):
        raise TraceError("usage", "--hf %s: no config.json in this folder (give a checkpoint folder or a config.json)"
                         % path)
    try:
        with open(file, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise TraceError("usage", "--hf %s: not a JSON config (%s)" % (file, _one_line(exc)), exc)
    if not isinstance(data, dict):
        raise TraceError("usage", "--hf %s: not a JSON object" % file)
    return file, data


def hf_config_problem(path):
    """The one-line usage error of an --hf path (missing, no config.json, not a JSON object), or None."""
    try:
        _hf_config_data(path)
    except TraceError as exc:
        return exc.message
    return None


def _read_hf_config(path, file, data, transformers):
    """The config object; anything transformers refuses is a failure with its own reason (exit 3)."""
    try:
        if os.path.isfile(path):
            if not data.get("model_type"):
                raise ValueError("the config has no model_type")
            return transformers.AutoConfig.for_model(**data)
        return transformers.AutoConfig.from_pretrained(path, local_files_only=True)
    except BaseException as exc:  # noqa: BLE001
        raise TraceError("build", "transformers %s cannot read %s: %s" % (_transformers_version(), file,
                                                                         _one_line(exc)), exc)


def _model_class(config, transformers):
    """The class from_pretrained would build: the config's own architecture where transformers
    has it, else the task head the Auto classes map this config to."""
    for name in getattr(config, "architectures", None) or ():
        cls = getattr(transformers, name, None)
        if cls is not None:
            return cls
    candidates = (["AutoModelForSeq2SeqLM"] if getattr(config, "is_encoder_decoder", False) else []) + [
        "AutoModelForCausalLM", "AutoModelForImageTextToText", "AutoModelForVision2Seq", "AutoModel"]
    for name in candidates:
        auto = getattr(transformers, name, None)
        if auto is not None and type(config) in getattr(auto, "_model_mapping", {}):
            return auto
    return transformers.AutoModel


def _instantiate(cls, config, kwargs):
    build = cls.from_config if hasattr(cls, "_model_mapping") else cls._from_config
    try:
        return build(config, **_dtype_kw(kwargs))
    except TypeError as exc:
        if "dtype" not in str(exc):
            raise
        return build(config, **kwargs)  # transformers < 4.56 knows torch_dtype only


# transformers refusing an implementation for the architecture itself (as opposed to this machine:
# no GPU, flash_attn not installed)
def _refusal_reason(exc):
    """transformers' reason for refusing an attention implementation, its first sentence whole
    ("FlashAttention2 is not available on CPU"), without the boilerplate around it."""
    text = " ".join(str(exc).split())
    text = re.split(r"due to the following error:\s*", text, maxsplit=1)[-1]
    first = re.split(r"(?<=[A-Za-z0-9)])\.\s", text, maxsplit=1)[0].rstrip(".")
    return first if len(first) <= 200 else first[:200].rsplit(" ", 1)[0] + " ..."


_ARCHITECTURE_REFUSAL = re.compile(r"does not support (?:Flash ?Attention|an attention implementation)", re.I)


def build_hf(path, device, dtype_name, attn_impl, seq_len, shrink=False):
    """Build a transformers model from a local config (folder or config.json); nothing downloaded.

    The attention implementation is what from_pretrained would use: ``attn_impl`` when given,
    else the config's own, else transformers' choice for the architecture. transformers refuses
    flash-attention without a GPU; when flash_attn imports here (really, or as the stand-in) the
    model is built with transformers' default and its attention switched to the flash path, which
    is what the forward pass reads."""
    import torch

    file, data = _hf_config_data(path)
    try:
        import transformers
    except ImportError as exc:  # the environment, not the command line: could not run
        raise TraceError("environment", "--hf needs transformers, which does not import in %s (%s); trace in the "
                                        "environment your training runs in: --python /path/to/its/bin/python"
                         % (sys.executable, _one_line(exc)), exc)
    except (Exception, SystemExit) as exc:  # a broken transformers install; Ctrl-C passes
        raise TraceError("environment", "transformers does not import here: %s" % _one_line(exc), exc)
    notes = []
    config = _read_hf_config(path, file, data, transformers)
    if shrink:
        for key in ("num_hidden_layers", "n_layer", "num_layers"):
            if getattr(config, key, None):
                setattr(config, key, min(2, getattr(config, key)))
        notes.append("built a 2-layer copy of the config for the CPU retry (head dim and dtypes unchanged)")
    want_dtype = dtype_name or _config_dtype(config)
    from ..calls.nodes import NAME_TO_DTYPE

    torch_dtype = NAME_TO_DTYPE.get(want_dtype) if want_dtype else None
    config_impl = getattr(config, "_attn_implementation_internal", None)
    if isinstance(config_impl, dict):
        config_impl = config_impl.get("") or None
    requested = attn_impl or config_impl
    cls = _model_class(config, transformers)
    kwargs = {}
    if torch_dtype is not None:
        kwargs["torch_dtype"] = torch_dtype
    version = _transformers_version()
    what = getattr(cls, "__name__", "the model")
    source = "--attn-implementation" if attn_impl else "the config's attn_implementation"

    def build(impl):
        kw = dict(kwargs)
        if impl:
            kw["attn_implementation"] = impl
        # transformers writes its choice into the config, also when it then refuses it
        cfg = copy.deepcopy(config)
        if not impl and config_impl:
            cfg._attn_implementation_internal = None
        with torch.device(device):
            return _instantiate(cls, cfg, kw)

    try:
        model = build(requested)
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        if not requested:
            raise TraceError("build", "transformers %s cannot build %s from %s: %s" % (version, what, path,
                                                                                      _one_line(exc)), exc)
        if "flash" not in requested or not isinstance(exc, (ImportError, ValueError)):
            raise TraceError("build", "transformers %s cannot build %s with attn_implementation=%r (%s): %s" % (
                version, what, requested, source, _one_line(exc)), exc)
        if not flash_importable():
            raise TraceError("build", "transformers %s refuses attn_implementation=%r here, as from_pretrained "
                                      "would: %s" % (version, requested, _one_line(exc)), exc)
        if _ARCHITECTURE_REFUSAL.search(str(exc)):
            # the architecture has no flash path in this release: from_pretrained refuses it on any
            # machine, so there is nothing to switch to (the forward would run another kernel)
            raise TraceError("build", "transformers %s has no %s path for %s: %s" % (
                version, requested, what, _one_line(exc)), exc)
        try:
            model = build(None)
        except BaseException as exc2:  # noqa: BLE001
            raise TraceError("build", "transformers %s cannot build %s from %s: %s" % (
                version, what, path, _one_line(exc2)), exc2)
        built_with = _impl_of(model, "its default")
        switched = set_attn_implementation(model, requested)
        notes.append("transformers refuses %s on this machine (%s): built with %s, then %s, as a GPU with "
                     "flash-attn runs it" % (requested, _refusal_reason(exc), built_with,
                                             "switched its attention to %s" % requested if switched
                                             else "no attention module took %s" % requested))
    used = requested if requested and "flash" in requested else _impl_of(model, requested)
    if used and "flash" in used and flash_importable():
        _ensure_flash_in_modeling_modules(model)
        _ensure_flash_utils()
    from .hf_inputs import input_problem, make_inputs

    # The first inputs go straight to the trace, whose forward pass tells whether they fit: a plain
    # forward to try them first would cost a second forward on every model. Where they do not fit,
    # the trace calls repair_inputs, which tries each candidate in a plain forward first.
    inputs, described, input_notes = make_inputs(model, model.config, seq_len, device, dry_run=False)
    notes.extend(input_notes)
    meta = {"attn_implementation": used, "attn_implementation_source": (
        "--attn-implementation" if attn_impl else ("config" if config_impl else "transformers default")),
        "dtype": want_dtype, "model_class": type(model).__name__, "transformers": version, "inputs": described,
        "repair_inputs": lambda: make_inputs(model, model.config, seq_len, device), "inputs_misfit": input_problem}
    return model, ((), inputs), notes, meta


def _impl_of(model, default=None):
    cfg = getattr(model, "config", None)
    impl = getattr(cfg, "_attn_implementation", None) if cfg is not None else None
    if isinstance(impl, dict):
        impl = impl.get("")
    return impl or default


def _dtype_kw(kwargs):
    # transformers >= 4.56 calls it dtype and warns about torch_dtype.
    out = dict(kwargs)
    if "torch_dtype" in out:
        out["dtype"] = out.pop("torch_dtype")
    return out


def set_attn_implementation(model, impl):
    """Point every transformers config inside `model` at attention implementation `impl`; returns
    how many attention modules will take it. transformers >= 4.48 reads the implementation from
    the config on every forward; older releases chose an attention class per implementation at
    build time (``*_ATTENTION_CLASSES``), so those modules change class instead."""
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is not None:
            for sub in [cfg] + [getattr(cfg, k, None) for k in ("text_config", "vision_config")]:
                if sub is None:
                    continue
                try:
                    sub._attn_implementation = impl
                except Exception:  # noqa: BLE001 - a config that refuses the attribute keeps its own
                    pass
    registry = getattr(sys.modules.get("transformers.modeling_utils"), "ALL_ATTENTION_FUNCTIONS", None)
    return _switch_attention_classes(model, impl) + (1 if registry is not None else 0)


def _switch_attention_classes(model, impl):
    swapped = 0
    for m in model.modules():
        mod = sys.modules.get(type(m).__module__)
        if mod is None:
            continue
        for name, table in vars(mod).items():
            if not (name.endswith("_ATTENTION_CLASSES") and isinstance(table, dict)):
                continue
            if type(m) in table.values() and impl in table and table[impl] is not type(m):
                m.__class__ = table[impl]
                if "flash" in impl and not hasattr(m, "_flash_attn_uses_top_left_mask"):
                    m._flash_attn_uses_top_left_mask = False
                swapped += 1
            break
    if swapped and "flash" in impl:
        _ensure_flash_utils()
    return swapped


def _ensure_flash_utils():
    """transformers < 4.48: the flash attention classes call the kernels through
    modeling_flash_attention_utils, which imports them only where transformers found a usable
    flash-attn at import time (a CUDA GPU). Give it flash_attn's functions (real or stand-in)."""
    utils = sys.modules.get("transformers.modeling_flash_attention_utils")
    if utils is None or not hasattr(utils, "_flash_attention_forward") or hasattr(utils, "flash_attn_func"):
        return
    import flash_attn
    import flash_attn.bert_padding as padding

    for name in ("flash_attn_func", "flash_attn_varlen_func"):
        setattr(utils, name, getattr(flash_attn, name))
    for name in ("index_first_axis", "pad_input", "unpad_input"):
        if not hasattr(utils, name):
            setattr(utils, name, getattr(padding, name))
    if not hasattr(utils, "_flash_supports_window_size"):
        utils._flash_supports_window_size = True


# Names some modeling modules import only where transformers found a usable flash-attn when the
# module was imported: `if is_flash_attn_available(): from ...modeling_flash_attention_utils import
# _flash_attention_forward` (falcon, gpt_neo, gptj, bark). Off the GPU that is never.
_GATED_FLASH_NAMES = ("_flash_attention_forward",)


def _ensure_flash_in_modeling_modules(model):
    """Give the model's modeling modules what their import-time flash gate would have imported on a
    GPU with flash-attn, which is the machine a flash trace stands for."""
    try:  # behind the same gate in some releases: imported here as the GPU would have
        import transformers.modeling_flash_attention_utils as utils
    except Exception:  # noqa: BLE001 - a release without it: its models import flash_attn directly
        return
    for name in {type(m).__module__ for m in model.modules()}:
        module = sys.modules.get(name)
        if module is None or not name.startswith("transformers.models."):
            continue
        for helper in _GATED_FLASH_NAMES:
            if helper not in vars(module) and hasattr(utils, helper):
                setattr(module, helper, getattr(utils, helper))


def _config_dtype(config):
    value = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)  # "torch_dtype" warns from 4.56
    if value is None:
        return None
    name = str(value).replace("torch.", "")
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(name)
