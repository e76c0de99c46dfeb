"""``trace(...) -> dict``: load a model, run it under the dtype tracer, report findings.

Never raises for the user's mistakes or the user's code: every failure becomes a report with
``status`` "usage_error" (exit 2) or "failed" (exit 3), a one-line ``error.message`` naming the
cause and the fallback taken, and the traceback kept in ``error.traceback`` for ``-v``. A trace
that ran but reached no attention call judged nothing: ``status`` "no_attention", exit 3.

Routes: where flash_attn does not import, a stand-in takes its place (standins.py), so the model
takes the path it takes where flash-attn is installed. When the stand-in was called, that is not
the path the model takes here: the trace is run again without it in a fresh process, and both
routes are reported (``routes``). On ``--device cuda`` the installed route is the verdict and the
stand-in's is advice; on meta and CPU, which stand for a GPU machine that may or may not have
flash-attn, both count.
Standard library and torch only; the report is plain JSON-able data.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
import time
import traceback

from . import report as report_mod
from .state import say

DTYPE_CHOICES = ("bf16", "fp16", "fp32")
AUTOCAST_CHOICES = ("bf16", "fp16")
DEVICE_CHOICES = ("meta", "cpu", "cuda")
# A model that cannot run on meta is retried on CPU only below this size (parameters + buffers).
CPU_RETRY_LIMIT_BYTES = int(os.environ.get("ATTN_DOCTOR_CPU_RETRY_LIMIT", str(4 * 1024 ** 3)))

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3

ROUTE_INSTALLED = "installed"
ROUTE_STANDIN = "flash_attn_standin"


class TraceError(Exception):
    """A failure with a one-line message. kind: usage | import | factory | forward | environment."""

    def __init__(self, kind, message, exc=None):
        Exception.__init__(self, message)
        self.kind = kind
        self.message = message
        self.exc = exc


def _one_line(exc):
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, text[0][:400] if text else "")


def _tb(exc):
    if exc is None:
        return None
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:]


# ---------------------------------------------------------------- loading


def parse_target(target):
    if not target or ":" not in target:
        raise TraceError("usage", "target %r is not MODULE:FACTORY (for example mypkg.models:build or "
                                  "path/to/model.py:make_model)" % (target,))
    module, _, factory = target.rpartition(":")
    if not module or not factory or not factory.replace("_", "a").replace(".", "a").isalnum():
        raise TraceError("usage", "target %r is not MODULE:FACTORY" % (target,))
    return module, factory


def import_target_module(module):
    if module.endswith(".py") or os.sep in module:
        path = os.path.abspath(module)
        if os.path.isdir(path):
            raise TraceError("usage", "%s is a folder: give a Python file (path/to/model.py:FACTORY) or a module" % module)
        if not os.path.isfile(path):
            raise TraceError("usage", "no such file: %s" % module)
        name = "attn_doctor_target_" + os.path.splitext(os.path.basename(path))[0]
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise TraceError("usage", "%s is not a Python file (expected path/to/model.py:FACTORY)" % module)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except (Exception, SystemExit) as exc:  # the user's module may raise anything; Ctrl-C passes
            sys.modules.pop(name, None)
            raise TraceError("import", "importing %s failed: %s" % (module, _one_line(exc)), exc)
        return mod
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            raise TraceError("usage", "no module named %r (is it on sys.path? run from the project folder or "
                                      "pass a file path: path/to/model.py:FACTORY)" % exc.name, exc)
        raise TraceError("import", "importing %s failed: %s" % (module, _one_line(exc)), exc)
    except (Exception, SystemExit) as exc:
        raise TraceError("import", "importing %s failed: %s" % (module, _one_line(exc)), exc)


def resolve_factory(mod, factory, shown=None):
    """The callable FACTORY names in mod; a name that is not there gets the closest ones it has.
    shown: how the user named the module (./mymodel.py), not the name it was imported under."""
    import difflib

    obj = mod
    for part in factory.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n, None))]
            close = difflib.get_close_matches(part, names, n=3, cutoff=0.6)
            hint = "; did you mean %s?" % " or ".join(repr(c) for c in close) if close else ""
            raise TraceError("usage", "%s has no attribute %r%s" % (shown or getattr(mod, "__name__", "module"), factory, hint))
        obj = getattr(obj, part)
    if not callable(obj):
        raise TraceError("usage", "%s is not callable" % factory)
    return obj


def parse_factory_args(items):
    """["KEY=VALUE", ...] -> {KEY: value}; a value is a Python literal (3, 0.5, True, None, "x",
    [1, 2]) or else the string itself."""
    out = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise TraceError("usage", "--factory-arg %r is not KEY=VALUE (for example --factory-arg depth=2 "
                                      "--factory-arg dtype=bfloat16)" % (item,))
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def _bind_factory_args(fn, factory_kwargs):
    if not factory_kwargs:
        return
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind_partial(**factory_kwargs)
    except TypeError as exc:
        names = [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        raise TraceError("usage", "the factory does not take %s (%s); its parameters: %s" % (
            ", ".join(sorted(factory_kwargs)), exc, ", ".join(names) or "none"))


def _cuda_like(value):
    import torch

    if isinstance(value, torch.device):
        return value.type == "cuda"
    return isinstance(value, str) and (value == "cuda" or value.startswith("cuda:"))


def cuda_to(device):
    """A TorchFunctionMode that sends ``.cuda()``, ``.to("cuda")`` and ``device="cuda"`` to
    ``device``: off the GPU, a factory or forward written for CUDA runs on the trace device.
    ``mode.mapped`` counts the calls it redirected."""
    import torch
    from torch.overrides import TorchFunctionMode

    target = torch.device(device)

    class CudaToTraceDevice(TorchFunctionMode):
        mapped = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func is torch.Tensor.cuda:
                CudaToTraceDevice.mapped += 1
                return args[0].to(target)
            if "device" in kwargs and _cuda_like(kwargs["device"]):
                kwargs["device"] = target
                CudaToTraceDevice.mapped += 1
            if func is torch.Tensor.to and len(args) > 1 and _cuda_like(args[1]):
                args = (args[0], target) + tuple(args[2:])
                CudaToTraceDevice.mapped += 1
            return func(*args, **kwargs)

    return CudaToTraceDevice()


_CUDA_ERRORS = ("Torch not compiled with CUDA enabled", "Found no NVIDIA driver", "No CUDA GPUs are available",
                "CUDA is not available", "CUDA driver", "cudaGetDeviceCount", "no kernel image is available")


def call_factory(fn, device, factory_kwargs=None, notes=None):
    import torch

    kwargs = dict(factory_kwargs or {})
    try:
        params = inspect.signature(fn).parameters
        if "device" in params and "device" not in kwargs:
            kwargs["device"] = device
    except (TypeError, ValueError):
        pass
    mapper = cuda_to(device) if device != "cuda" else contextlib.nullcontext()
    try:
        with torch.device(device), mapper:
            result = fn(**kwargs)
    except (Exception, SystemExit) as exc:  # Ctrl-C passes
        message = "the factory raised %s" % _one_line(exc)
        if device != "cuda" and any(s in str(exc) for s in _CUDA_ERRORS):
            message += ("; it asks for CUDA (torch.cuda.*), which the %s trace has none of: take a `device` "
                        "parameter (the tracer passes device=%s), or trace on a GPU with --device cuda"
                        % (device, device))
        raise TraceError("factory", message, exc)
    if getattr(mapper, "mapped", 0) and notes is not None:
        notes.append("the factory put tensors on cuda (.cuda(), .to('cuda'), device='cuda'); they went to %s, "
                     "the trace device" % device)
    return result


def split_result(result):
    """A factory returns a model, or (model, inputs); inputs: tensor, tuple/list of args, dict of
    kwargs, or (args, kwargs)."""
    import torch

    if isinstance(result, torch.nn.Module):
        return result, None
    if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.nn.Module):
        if len(result) == 1:
            return result[0], None
        if len(result) == 2:
            return result[0], result[1]
        return result[0], tuple(result[1:])
    raise TraceError("usage", "the factory returned %s, not a torch.nn.Module or (module, example_inputs)"
                     % type(result).__name__)


def normalize_inputs(inputs):
    import torch

    if inputs is None:
        return None
    if isinstance(inputs, torch.Tensor):
        return (inputs,), {}
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if (isinstance(inputs, tuple) and len(inputs) == 2 and isinstance(inputs[0], (tuple, list))
            and isinstance(inputs[1], dict)):
        return tuple(inputs[0]), dict(inputs[1])
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


def guess_inputs(model, device, seq_len):
    """Token ids for a model that starts with an embedding (language models); else None."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.Embedding):
            ids = torch.zeros(1, seq_len, dtype=torch.long, device=device)
            params = {}
            try:
                params = inspect.signature(model.forward).parameters
            except (TypeError, ValueError):
                pass
            if "input_ids" in params:
                return (), {"input_ids": ids}
            return (ids,), {}
    return None


def _map_tensors(obj, fn):
    import torch

    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        return tuple(_map_tensors(o, fn) for o in obj)
    if isinstance(obj, list):
        return [_map_tensors(o, fn) for o in obj]
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    return obj


def _tensors(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            for t in _tensors(o):
                yield t
    elif isinstance(obj, dict):
        for o in obj.values():
            for t in _tensors(o):
                yield t
    elif hasattr(obj, "to_tuple"):  # transformers ModelOutput
        for t in _tensors(obj.to_tuple()):
            yield t


def model_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters()) + sum(
        b.numel() * b.element_size() for b in model.buffers())


# ---------------------------------------------------------------- transformers configs


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


def _flash_importable():
    try:
        import flash_attn  # noqa: F401

        return True
    except BaseException:  # noqa: BLE001
        return False


# transformers refusing an implementation for the architecture itself (as opposed to this machine:
# no GPU, flash_attn not installed)
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
    from .tracer import NAME_TO_DTYPE

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
        if not _flash_importable():
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
        switched = set_attn_implementation(model, requested)
        notes.append("transformers refused %s here (%s); built with %s and switched the attention to %s%s"
                     % (requested, _one_line(exc)[:160], _impl_of(model, "its default"), requested,
                        "" if switched else " (no attention module took it)"))
    used = requested if requested and "flash" in requested else _impl_of(model, requested)
    if used and "flash" in used and _flash_importable():
        _ensure_flash_in_modeling_modules(model)
        _ensure_flash_utils()
    inputs = {"input_ids": torch.zeros(1, seq_len, dtype=torch.long, device=device)}
    if getattr(model.config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = torch.zeros(1, max(1, seq_len // 2), dtype=torch.long, device=device)
    if getattr(config, "vision_config", None) is not None:
        image = _image_inputs(model, config, seq_len, device)
        if image is not None:
            count = image.pop("_count")
            inputs.update(image)
            notes.append("one image (pixel_values %s) and its %d image tokens in the input, so the vision tower "
                         "runs too" % (list(image["pixel_values"].shape), count))
        else:
            notes.append("text-only forward (token ids): the vision tower was not run")
    meta = {"attn_implementation": used, "attn_implementation_source": (
        "--attn-implementation" if attn_impl else ("config" if config_impl else "transformers default")),
        "dtype": want_dtype, "model_class": type(model).__name__, "transformers": version}
    return model, ((), inputs), notes, meta


def _image_token(config):
    for key in ("image_token_index", "image_token_id"):
        value = getattr(config, key, None)
        if isinstance(value, int):
            return value
    return None


def _image_inputs(model, config, seq_len, device):
    """input_ids with image tokens and pixel_values for a llava-style model (one image, its
    patches as tokens); None where the layout is another (tiles, grids): then text only."""
    import torch

    vision = config.vision_config
    token = _image_token(config)
    size, patch = getattr(vision, "image_size", None), getattr(vision, "patch_size", None)
    if token is None or not isinstance(size, int) or not isinstance(patch, int) or not patch:
        return None
    if "pixel_values" not in inspect.signature(model.forward).parameters:
        return None
    count = getattr(config, "image_seq_length", None) or getattr(vision, "num_image_tokens", None)
    if not isinstance(count, int):
        count = (size // patch) ** 2 + (1 if getattr(config, "vision_feature_select_strategy", "") == "full" else 0)
    ids = torch.zeros(1, count + seq_len, dtype=torch.long, device=device)
    ids[:, :count] = token
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    channels = getattr(vision, "num_channels", 3)
    return {"input_ids": ids, "pixel_values": torch.zeros(1, channels, size, size, dtype=dtype, device=device),
            "_count": count}


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
    value = getattr(config, "torch_dtype", None) or getattr(config, "dtype", None)
    if value is None:
        return None
    name = str(value).replace("torch.", "")
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(name)


# ---------------------------------------------------------------- running


def _is_meta_limitation(exc):
    from .tracer import _meta_limitation

    return _meta_limitation(exc)


def _result(status, **kw):
    from ..schemas import envelope

    return envelope("trace", dict(status=status, **kw))


def trace(target=None, model=None, inputs=None, hf=None, dtype=None, autocast=None, device="meta", train=False,
          capability=None, standins=None, emulate_autocast=None, seq_len=16, attn_implementation=None,
          continue_after_bad_sink=True, retry_on_cpu=True, cwd=None, factory_kwargs=None, routes=True,
          route_timeout=600):
    """Trace one forward (and, with ``train``, backward) pass; return the JSON-able report.

    target: "MODULE:FACTORY" (or pass ``model`` and ``inputs`` directly); factory_kwargs: keyword
    arguments for the factory; hf: a local transformers config file or checkpoint folder; dtype:
    cast the model ("bf16", "fp16", "fp32"); autocast: "bf16" / "fp16" region around the forward
    (CUDA's policy, emulated off CUDA); device: "meta", "cpu" or "cuda"; capability: (major, minor)
    of the GPU the kernels are judged for; routes: when the flash_attn stand-in changed the path the
    model takes, also trace the installed path (in a fresh process) and report both.
    """
    kwargs = dict(target=target, hf=hf, dtype=dtype, autocast=autocast, device=device, train=train,
                  capability=list(capability) if capability else None, emulate_autocast=emulate_autocast,
                  seq_len=seq_len, attn_implementation=attn_implementation,
                  continue_after_bad_sink=continue_after_bad_sink, retry_on_cpu=retry_on_cpu, cwd=cwd,
                  factory_kwargs=factory_kwargs)
    report = _trace_once(target, model, inputs, hf, dtype, autocast, device, train, capability, standins,
                         emulate_autocast, seq_len, attn_implementation, continue_after_bad_sink, retry_on_cpu, cwd,
                         factory_kwargs)
    via_standin = report.pop("standin_route", False) or bool(report.get("standin_calls"))
    name = ROUTE_STANDIN if via_standin else ROUTE_INSTALLED
    if not (routes and name == ROUTE_STANDIN and model is None and report["status"] != "usage_error"):
        report["routes"] = [route_entry(report, name, "verdict")]
        if routes and name == ROUTE_STANDIN and model is not None:
            report["notes"].append("the flash_attn stand-in was called; the installed route cannot be traced for a "
                                   "model object (give MODULE:FACTORY to trace both)")
        return report
    from .launch import run_child

    child_kwargs = dict(kwargs, standins=False, routes=False)
    installed = run_child("trace", child_kwargs, python=sys.executable, timeout=route_timeout,
                          cwd=cwd or os.getcwd())
    installed.setdefault("notes", [])
    installed.setdefault("summary", {"sinks": 0, "bad_sinks": 0, "errors": 0, "warnings": 0, "ops": 0})
    return combine_routes(report, installed, device)


def _standin_label(report=None):
    """Which stand-ins the route ran through: flash-attn 2's, FlashAttention 4's, or both."""
    from .standins import STANDIN_FLASH_ATTN_4_VERSION, STANDIN_FLASH_ATTN_VERSION

    families = {s.get("family") for s in (report or {}).get("sinks") or () if s.get("standin")}
    labels = ["flash-attn %s" % STANDIN_FLASH_ATTN_VERSION] if families - {"flash_attn4"} or not families else []
    if "flash_attn4" in families:
        labels.append("flash-attn-4 %s" % STANDIN_FLASH_ATTN_4_VERSION)
    return "with " + " and ".join(labels)


_KERNEL_LABELS = {"sdpa": "SDPA", "mha": "MHA (SDPA inside)", "flash_attn2": "flash-attn 2", "flash_attn3":
                  "FlashAttention 3", "flash_attn4": "FlashAttention 4", "xformers": "xformers", "fla": "fla",
                  "eager": "eager (matmul, softmax)", "transformers_flash": "flash_attention_2 (transformers)"}


def _kernels(sink_list):
    seen = []
    for s in sink_list or ():
        label = _KERNEL_LABELS.get(s.get("family"), s.get("name"))
        if label not in seen:
            seen.append(label)
    return seen


def route_entry(report, name, role):
    """One route's summary: which attention it reached and what became of it."""
    status = report.get("status")
    findings = report.get("findings") or []
    errors = [f for f in findings if f.get("severity") == "error"]
    err = report.get("error") or {}
    at = None
    if errors:
        sink = errors[0].get("sink") or {}
        at = {"file": sink.get("file"), "line": sink.get("line"), "id": errors[0].get("id"),
              "message": errors[0].get("message")}
        verdict = "fails"
    elif status in ("failed", "usage_error"):
        verdict = "could not run"
    elif status == "no_attention":
        verdict = "reached no attention call"
    elif status == "partial":
        verdict = "stopped"
    elif findings:
        verdict = "runs, with warnings"
    else:
        verdict = "clean"
    return {"name": name, "label": "as installed" if name == ROUTE_INSTALLED else _standin_label(report), "role": role,
            "status": status, "exit_code": report.get("exit_code"), "attention": _kernels(report.get("sinks")),
            "verdict": verdict, "at": at, "error": err.get("message"), "summary": report.get("summary"),
            "findings": findings}


def combine_routes(standin, installed, device):
    """One report from two traces of the same model: with the flash_attn stand-in and as installed.
    On cuda the installed route is the verdict and the stand-in's is advice; on meta/cpu both count
    (which one the training machine takes depends on whether it has flash-attn)."""
    verdict = [ROUTE_INSTALLED] if device == "cuda" else [ROUTE_STANDIN, ROUTE_INSTALLED]
    by_name = {ROUTE_INSTALLED: installed, ROUTE_STANDIN: standin}
    routes = [route_entry(installed, ROUTE_INSTALLED, "verdict"),
              route_entry(standin, ROUTE_STANDIN, "verdict" if ROUTE_STANDIN in verdict else "advice")]
    primary = installed if device == "cuda" else standin
    if device != "cuda" and installed.get("status") in ("failed", "no_attention"):
        routes[0]["note"] = ("not counted in the exit code: off the GPU the trace stands for a machine with "
                             "flash-attn, and that path ran")
    out = dict(primary)
    out["notes"] = list(standin.get("notes") or [])
    for note in installed.get("notes") or ():
        if note not in out["notes"]:
            out["notes"].append("as installed: " + note)
    out["notes"].append("the model takes another attention path where flash-attn is installed (the stand-in was "
                        "called); traced both: %s" % ("the installed path is the verdict, the stand-in's is advice"
                                                      if device == "cuda" else "both count"))
    findings, sink_list = [], []
    summary = {"sinks": 0, "bad_sinks": 0, "errors": 0, "warnings": 0, "ops": 0}
    for name in verdict:
        rep = by_name[name]
        findings += [dict(f, route=name) for f in rep.get("findings") or ()]
        sink_list += [dict(s, route=name) for s in rep.get("sinks") or ()]
        for key in summary:
            summary[key] += int((rep.get("summary") or {}).get(key) or 0)
    out.update(findings=findings, sinks=sink_list, summary=summary, routes=routes)
    if summary["errors"]:
        out["exit_code"] = EXIT_FINDINGS
    elif primary.get("exit_code") not in (None, EXIT_CLEAN, EXIT_FINDINGS):
        out["exit_code"] = primary["exit_code"]
    else:
        out["exit_code"] = EXIT_CLEAN
    out["duration_s"] = round(float(standin.get("duration_s") or 0) + float(installed.get("duration_s") or 0), 3)
    return out


def _trace_once(target, model, inputs, hf, dtype, autocast, device, train, capability, standins, emulate_autocast,
                seq_len, attn_implementation, continue_after_bad_sink, retry_on_cpu, cwd, factory_kwargs):
    start = time.monotonic()
    notes = []
    info = {"target": target or (("hf:" + hf) if hf else (type(model).__name__ if model is not None else None)),
            "device": device, "dtype": dtype, "autocast": autocast, "train": bool(train)}
    if factory_kwargs:
        info["factory_kwargs"] = dict(factory_kwargs)
    try:
        _validate(target, model, hf, dtype, autocast, device, factory_kwargs, attn_implementation)
        say("importing torch")
        import torch  # noqa: F401
    except TraceError as exc:
        return _failure(exc, info, notes, start)
    except (Exception, SystemExit) as exc:  # torch itself may fail to import; Ctrl-C passes
        return _failure(TraceError("environment", "torch does not import: %s" % _one_line(exc), exc), info, notes,
                        start)
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            return _failure(TraceError("environment", "--device cuda: CUDA is not available to torch %s; use --device "
                                                      "meta (default) or cpu" % torch.__version__), info, notes, start)
        if capability is None:
            capability = tuple(torch.cuda.get_device_capability())
    if standins is None:
        # Also on a GPU: install_standins acts only where flash_attn does not import, and then the
        # model's `try: from flash_attn import ...` must take the path it takes with flash-attn.
        standins = True
    if emulate_autocast is None:
        emulate_autocast = device != "cuda"
    info["autocast_mode"] = (None if not autocast else ("emulated-cuda" if emulate_autocast else "cuda"))
    info["capability"] = list(capability) if capability else None
    try:
        from . import standins as standins_mod

        if standins:
            notes.extend(standins_mod.install_standins())
        elif standins_mod.standin_installed():
            standins_mod.remove_standins()  # an earlier trace in this process put it there
        say("importing %s" % ("transformers" if hf else target.rpartition(":")[0]) if target or hf else "building the model")
        builder = _builder(target, model, inputs, hf, dtype, device, seq_len, attn_implementation, info,
                           factory_kwargs)
        say("building the model")
        built = builder(device, False)
    except TraceError as exc:
        return _failure(exc, info, notes, start)
    except Exception as exc:  # noqa: BLE001 - a bug here must still give a report
        return _failure(TraceError("internal", "attn-doctor internal error while building the model: %s (a bug; "
                                               "-v shows the traceback)" % _one_line(exc), exc), info, notes, start)
    notes.extend(built["notes"])
    say("tracing the forward pass")
    try:
        outcome = _run(built, info, device, dtype, autocast, train, capability, emulate_autocast,
                       continue_after_bad_sink, cwd)
    except TraceError as exc:
        if device == "meta" and retry_on_cpu and exc.kind == "meta":
            size = model_bytes(built["model"])
            if size > CPU_RETRY_LIMIT_BYTES and not hf:
                exc.message += ("; too large to retry on CPU (%.1f GB): return a smaller config from the factory"
                                % (size / 1e9))
                return _failure(exc, info, notes, start)
            notes.append(exc.message + "; retried on CPU" + (" with a 2-layer config" if hf and size >
                                                              CPU_RETRY_LIMIT_BYTES else ""))
            info["device"] = "cpu"
            try:
                built = builder("cpu", bool(hf) and size > CPU_RETRY_LIMIT_BYTES)
                notes.extend(n for n in built["notes"] if n not in notes)
                outcome = _run(built, info, "cpu", dtype, autocast, train, capability, emulate_autocast,
                               continue_after_bad_sink, cwd)
            except TraceError as exc2:
                return _failure(exc2, info, notes, start)
        else:
            return _failure(exc, info, notes, start)
    sink_list, findings, tracer, forward_error, prep_notes = outcome
    notes.extend(prep_notes)
    for s in sink_list:
        if s.get("fallback") and s["fallback"] not in notes:
            notes.append(s["fallback"])
    summary = report_mod.summarize(sink_list, findings)
    summary["ops"] = tracer.ops
    status = "ok" if forward_error is None else "partial"
    error = None
    if forward_error is not None:
        error = {"kind": "forward", "message": "the forward pass stopped: %s" % _one_line(forward_error),
                 "traceback": _tb(forward_error)}
    elif not sink_list:
        status = "no_attention"
        error = {"kind": "no_attention", "message": _no_attention_message(info, tracer.ops), "traceback": None}
    exit_code = EXIT_FINDINGS if summary["errors"] else (EXIT_FAILED if error is not None else EXIT_CLEAN)
    out = _result(status, exit_code=exit_code, error=error, notes=notes, findings=findings, sinks=sink_list,
                  summary=summary, standin_calls=sum(1 for r in tracer.sinks if r.get("standin")),
                  duration_s=round(time.monotonic() - start, 3))
    out.update(info)
    return out


def _no_attention_message(info, ops):
    head = "the forward pass ran (%d ops) but reached no attention call: nothing was judged" % ops
    hf = info.get("hf") or {}
    if hf.get("attn_implementation") == "eager":
        return head + ("; transformers %s builds %s with eager attention written inline (matmul, softmax), which "
                       "has no kernel dtype rules to judge: trace --attn-implementation sdpa to judge the SDPA path"
                       % (hf.get("transformers"), hf.get("model_class")))
    return head + (" (the tracer knows SDPA, flash-attn 2/3/4, xformers, fla and transformers' attention "
                   "functions): is the attention path the one you meant, or a kernel it does not know?")


def _validate(target, model, hf, dtype, autocast, device, factory_kwargs=None, attn_implementation=None):
    sources = [x for x in (target, model, hf) if x is not None]
    if len(sources) != 1:
        raise TraceError("usage", "give exactly one of MODULE:FACTORY or --hf PATH")
    if dtype is not None and dtype not in DTYPE_CHOICES:
        raise TraceError("usage", "--dtype must be one of %s, not %r" % (", ".join(DTYPE_CHOICES), dtype))
    if autocast is not None and autocast not in AUTOCAST_CHOICES:
        raise TraceError("usage", "--autocast must be one of %s, not %r" % (", ".join(AUTOCAST_CHOICES), autocast))
    if device not in DEVICE_CHOICES:
        raise TraceError("usage", "--device must be one of %s, not %r" % (", ".join(DEVICE_CHOICES), device))
    if factory_kwargs and target is None:
        raise TraceError("usage", "--factory-arg goes with MODULE:FACTORY")
    if attn_implementation and hf is None:
        raise TraceError("usage", "--attn-implementation goes with --hf (a factory builds its model itself)")
    if target is not None:
        parse_target(target)


def _builder(target, model, inputs, hf, dtype, device, seq_len, attn_impl, info, factory_kwargs=None):
    """A function (device, shrink) -> built model, so a failed meta run can be rebuilt on CPU."""
    if model is not None:
        def given(dev, shrink):
            return {"model": model, "inputs": normalize_inputs(inputs), "notes": []}

        return given
    if hf is not None:
        def from_hf(dev, shrink):
            m, inp, notes, meta = build_hf(hf, dev, dtype, attn_impl, seq_len, shrink)
            info.update(hf_attn_implementation=meta["attn_implementation"],
                        hf={k: meta[k] for k in ("attn_implementation", "attn_implementation_source", "model_class",
                                                 "transformers")})
            from .standins import standin_installed

            if "flash" in (meta["attn_implementation"] or "") and standin_installed():
                info["standin_route"] = True  # transformers' flash path exists here only through the stand-in
            return {"model": m, "inputs": inp, "notes": notes, "dtype": meta["dtype"]}

        return from_hf
    module, factory = parse_target(target)
    mod = import_target_module(module)
    fn = resolve_factory(mod, factory, shown=module)
    _bind_factory_args(fn, factory_kwargs)

    def from_factory(dev, shrink):
        notes = []
        m, inp = split_result(call_factory(fn, dev, factory_kwargs, notes))
        return {"model": m, "inputs": normalize_inputs(inp), "notes": notes}

    return from_factory


@contextlib.contextmanager
def transformers_sees_flash_attn():
    """Off the GPU, transformers >= 5 finds no usable flash-attn (it asks for CUDA) and its flash
    wrapper then fetches a kernel from the Hub. Where flash_attn imports (really, or as the
    stand-in), the trace stands for a GPU that has it: the wrapper's own availability check says
    yes, so transformers' real flash path runs and calls flash_attn's functions."""
    utils = sys.modules.get("transformers.modeling_flash_attention_utils")
    if utils is None or not hasattr(utils, "lazy_import_flash_attention") or not _flash_importable():
        yield
        return
    saved = {k: getattr(utils, k) for k in ("is_flash_attn_2_available", "_loaded_implementation")
             if hasattr(utils, k)}
    utils.is_flash_attn_2_available = lambda: True
    utils._loaded_implementation = None
    try:
        # from_pretrained loads the implementation when it builds a flash model on a GPU; callers
        # that pass none (falcon, gpt_neo, gptj: `_flash_attention_forward(...)` without
        # implementation=) rely on that. Here transformers refused, so load flash-attn 2 as it would.
        utils.lazy_import_flash_attention("flash_attention_2")
    except Exception:  # noqa: BLE001 - an older helper: those callers pass the implementation
        utils._loaded_implementation = None
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(utils, k, v)


@contextlib.contextmanager
def autocast_on_trace_device(device):
    """``torch.autocast(device_type=x.device.type, ...)`` inside the model (transformers' rotary
    code does this) names the trace device, which stands for the GPU: meta has no autocast at all
    (torch raises), and on the GPU that region would switch CUDA autocast, which is the state the
    emulation reads. So the trace device's autocast regions switch CUDA autocast's state."""
    import torch

    cls = torch.amp.autocast_mode.autocast
    orig = cls.__init__

    def init(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type != device:
            return orig(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        orig(self, "cuda", dtype=dtype, enabled=False, cache_enabled=cache_enabled)
        self._enabled = enabled

    # torch.is_autocast_enabled(x.device.type) and friends (transformers' flash wrapper) likewise
    queries = {}
    for name in ("is_autocast_enabled", "get_autocast_dtype"):
        fn = getattr(torch, name, None)
        if fn is None:
            continue

        def query(*args, _fn=fn):
            if args and args[0] == device:
                args = ("cuda",) + tuple(args[1:])
            return _fn(*args)

        queries[name] = fn
        setattr(torch, name, query)
    cls.__init__ = init
    try:
        yield
    finally:
        cls.__init__ = orig
        for name, fn in queries.items():
            setattr(torch, name, fn)


def _prepare(built, device, dtype, seq_len=16):
    import torch

    from .tracer import NAME_TO_DTYPE

    model, inputs, notes = built["model"], built["inputs"], []
    compiled = getattr(model, "_orig_mod", None)
    if compiled is not None and isinstance(model, getattr(torch._dynamo.eval_frame, "OptimizedModule", ())):
        # A torch.compile'd model: compiling cannot run under the tracer's TorchFunctionMode (nor on
        # meta). The model it wraps runs the same code eagerly; compiled, Inductor keeps each op's dtypes.
        notes.append("the model is torch.compile'd (%s); traced the model it wraps (_orig_mod, %s) eagerly"
                     % (type(model).__name__, type(compiled).__name__))
        model = built["model"] = compiled
    want = torch.device(device)
    devices = {p.device.type for p in model.parameters()} | {b.device.type for b in model.buffers()}
    if devices and devices != {want.type}:
        notes.append("the model is on %s; moved it to %s" % (", ".join(sorted(devices)), device))
        model = model.to(want)
        built["model"] = model
    if dtype is not None:
        model.to(NAME_TO_DTYPE[dtype])
    if inputs is None:
        inputs = guess_inputs(model, want, seq_len)
        if inputs is None:
            raise TraceError("usage", "the factory returned a model without example inputs and its first layer is "
                                      "not an embedding: return (model, example_inputs) from the factory")
        notes.append("no example inputs given; used token ids of shape (1, %d)" % seq_len)
    moved = set()

    def move(t):
        if t.device.type != want.type:
            moved.add(str(t.device))
            return t.to(want)
        return t

    inputs = _map_tensors(inputs, move)
    if dtype is not None:
        target = NAME_TO_DTYPE[dtype]
        cast = []

        def to_dtype(t):
            if t.is_floating_point() and t.dtype != target:
                cast.append(str(t.dtype).replace("torch.", ""))
                return t.to(target)
            return t

        inputs = _map_tensors(inputs, to_dtype)
        if cast:
            notes.append("cast the floating example inputs (%s) to --dtype %s, like the model"
                         % (", ".join(sorted(set(cast))), dtype))
    if moved:
        notes.append("example inputs were on %s; moved them to %s" % (", ".join(sorted(moved)), device))
    return model, inputs, notes


def _run(built, info, device, dtype, autocast, train, capability, emulate, continue_after, cwd):
    import torch

    from . import standins as standins_mod
    from .tracer import NAME_TO_DTYPE, Tracer, activate

    model, (args, kwargs), prep_notes = _prepare(built, device, dtype)
    expected = autocast and {"bf16": "bfloat16", "fp16": "float16"}[autocast]
    if not expected:
        expected = {"bf16": "bfloat16", "fp16": "float16"}.get(dtype or built.get("dtype") or "")
    ac_dtype = NAME_TO_DTYPE[autocast] if autocast else None
    tracer = Tracer(autocast_dtype=ac_dtype, emulate_autocast=emulate and bool(autocast), capability=capability,
                    continue_after_bad_sink=continue_after, expected_dtype=expected)
    tracer.label_model(model)
    for i, a in enumerate(args):
        tracer.label_input(a, "input[%d]" % i)
    for k, a in kwargs.items():
        tracer.label_input(a, "input %s" % k)
    prep_notes.extend(n for n in standins_mod.wrap_installed(model) if n.startswith("flex_attention"))
    model.train(bool(train))
    forward_error = None
    emulated = ac_dtype if (emulate and ac_dtype is not None) else None
    real_autocast = (torch.autocast("cuda", dtype=ac_dtype) if (ac_dtype is not None and not emulate)
                     else contextlib.nullcontext())
    device_ctx = torch.device(device) if device != "cuda" else contextlib.nullcontext()
    grad_ctx = contextlib.nullcontext() if train else torch.no_grad()
    off_gpu = device != "cuda"
    mapper = cuda_to(device) if off_gpu else contextlib.nullcontext()
    autocast_map = autocast_on_trace_device(device) if off_gpu else contextlib.nullcontext()
    flash_seen = transformers_sees_flash_attn() if off_gpu else contextlib.nullcontext()
    try:
        with device_ctx, grad_ctx, mapper, autocast_map, flash_seen, activate(tracer, emulated):
            with real_autocast:
                out = model(*args, **kwargs)
            if train:
                loss = next((t for t in _tensors(out) if t.is_floating_point() and t.requires_grad), None)
                if loss is not None:
                    loss.float().mean().backward()
    except BaseException as exc:  # noqa: BLE001 - the user's forward may raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        if device == "meta" and _is_meta_limitation(exc):
            raise TraceError("meta", "the forward pass does data-dependent Python (.item(), .tolist(), a tensor in "
                                     "an if) that meta cannot run (%s)" % _one_line(exc), exc)
        if not tracer.sinks:
            raise TraceError("forward", "the forward pass raised %s before reaching an attention call"
                             % _one_line(exc), exc)
        forward_error = exc
    if getattr(mapper, "mapped", 0):
        prep_notes.append("the forward pass put tensors on cuda; they went to %s, the trace device" % device)
    prep_notes.extend(standins_mod.fa4_standin_note(tracer.sinks))
    sink_list, findings = report_mod.build(tracer, expected_dtype=expected, cwd=cwd)
    return sink_list, findings, tracer, forward_error, prep_notes


def _failure(exc, info, notes, start):
    status = "usage_error" if exc.kind == "usage" else "failed"
    code = EXIT_USAGE if exc.kind == "usage" else EXIT_FAILED
    out = _result(status, exit_code=code, error={"kind": exc.kind, "message": exc.message, "traceback": _tb(exc.exc)},
                  notes=notes, findings=[], sinks=[], summary={"sinks": 0, "bad_sinks": 0, "errors": 0,
                                                               "warnings": 0, "ops": 0},
                  duration_s=round(time.monotonic() - start, 3))
    out.update(info)
    return out
