"""``trace(...) -> dict``: load a model, run it under the dtype tracer, report findings.

Never raises for the user's mistakes or the user's code: every failure becomes a report with
``status`` "usage_error" (exit 2) or "failed" (exit 3), a one-line ``error.message`` naming the
cause and the fallback taken, and the traceback kept in ``error.traceback`` for ``-v``.
Standard library and torch only; the report is plain JSON-able data.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import time
import traceback

from . import report as report_mod

DTYPE_CHOICES = ("bf16", "fp16", "fp32")
AUTOCAST_CHOICES = ("bf16", "fp16")
DEVICE_CHOICES = ("meta", "cpu", "cuda")
# A model that cannot run on meta is retried on CPU only below this size (parameters + buffers).
CPU_RETRY_LIMIT_BYTES = int(os.environ.get("ATTN_DOCTOR_CPU_RETRY_LIMIT", str(4 * 1024 ** 3)))

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3


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
        except BaseException as exc:  # noqa: BLE001 - the user's module may raise anything
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
    except BaseException as exc:  # noqa: BLE001
        raise TraceError("import", "importing %s failed: %s" % (module, _one_line(exc)), exc)


def resolve_factory(mod, factory):
    obj = mod
    for part in factory.split("."):
        if not hasattr(obj, part):
            raise TraceError("usage", "%s has no attribute %r" % (getattr(mod, "__name__", "module"), factory))
        obj = getattr(obj, part)
    if not callable(obj):
        raise TraceError("usage", "%s is not callable" % factory)
    return obj


def call_factory(fn, device):
    import torch

    kwargs = {}
    try:
        params = inspect.signature(fn).parameters
        if "device" in params:
            kwargs["device"] = device
    except (TypeError, ValueError):
        pass
    try:
        with torch.device(device):
            return fn(**kwargs)
    except BaseException as exc:  # noqa: BLE001
        raise TraceError("factory", "the factory raised %s" % _one_line(exc), exc)


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


def build_hf(path, device, dtype_name, attn_impl, seq_len, shrink=False):
    """Build a transformers model from a local config (folder or config.json); nothing downloaded."""
    import torch

    try:
        import transformers
    except ImportError as exc:
        raise TraceError("usage", "--hf needs transformers, which does not import here (%s)" % _one_line(exc), exc)
    if not os.path.exists(path):
        raise TraceError("usage", "--hf %s: no such file or folder" % path)
    notes = []
    try:
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                import json

                data = json.load(fh)
            model_type = data.get("model_type")
            if not model_type:
                raise TraceError("usage", "--hf %s: config has no model_type" % path)
            config = transformers.AutoConfig.for_model(**data)
        else:
            config = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
    except TraceError:
        raise
    except BaseException as exc:  # noqa: BLE001
        raise TraceError("usage", "--hf %s: could not read the config: %s" % (path, _one_line(exc)), exc)
    if shrink:
        for key in ("num_hidden_layers", "n_layer", "num_layers"):
            if getattr(config, key, None):
                setattr(config, key, min(2, getattr(config, key)))
        notes.append("built a 2-layer copy of the config for the CPU retry (head dim and dtypes unchanged)")
    want_dtype = dtype_name or _config_dtype(config)
    impl = attn_impl or getattr(config, "_attn_implementation_internal", None) or getattr(
        config, "attn_implementation", None) or "sdpa"
    from .tracer import NAME_TO_DTYPE

    torch_dtype = NAME_TO_DTYPE.get(want_dtype) if want_dtype else None
    auto = transformers.AutoModelForCausalLM
    if type(config) not in getattr(auto, "_model_mapping", {}):
        auto = transformers.AutoModel
    kwargs = {"attn_implementation": impl}
    if torch_dtype is not None:
        kwargs["torch_dtype"] = torch_dtype
    try:
        with torch.device(device):
            try:
                model = auto.from_config(config, **_dtype_kw(kwargs))
            except TypeError:
                model = auto.from_config(config, **kwargs)
    except (ImportError, ValueError) as exc:
        if "flash" not in impl:
            raise TraceError("factory", "building %s from its config failed: %s" % (path, _one_line(exc)), exc)
        # transformers refuses flash_attention_2 without a CUDA GPU or the real package; build with
        # SDPA and switch the dispatch afterwards, which is what the forward pass reads.
        kwargs["attn_implementation"] = "sdpa"
        with torch.device(device):
            try:
                model = auto.from_config(config, **_dtype_kw(kwargs))
            except TypeError:
                model = auto.from_config(config, **kwargs)
        set_attn_implementation(model, impl)
        notes.append("transformers refused %s here (%s); built with sdpa and switched the attention dispatch to %s"
                     % (impl, _one_line(exc)[:160], impl))
    except BaseException as exc:  # noqa: BLE001
        raise TraceError("factory", "building %s from its config failed: %s" % (path, _one_line(exc)), exc)
    ids = torch.zeros(1, seq_len, dtype=torch.long, device=device)
    return model, ((), {"input_ids": ids}), notes, {"attn_implementation": impl, "dtype": want_dtype}


def _dtype_kw(kwargs):
    # transformers >= 4.56 calls it dtype and warns about torch_dtype.
    out = dict(kwargs)
    if "torch_dtype" in out:
        out["dtype"] = out.pop("torch_dtype")
    return out


def set_attn_implementation(model, impl):
    """Point every transformers config inside `model` at attention implementation `impl`."""
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is not None:
            try:
                cfg._attn_implementation = impl
            except Exception:  # noqa: BLE001 - a config that refuses the attribute keeps its own
                pass


def _config_dtype(config):
    value = getattr(config, "torch_dtype", None) or getattr(config, "dtype", None)
    if value is None:
        return None
    name = str(value).replace("torch.", "")
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(name)


# ---------------------------------------------------------------- running


def _is_meta_limitation(exc):
    text = str(exc)
    return ("meta tensor" in text or "meta tensors" in text or "Cannot copy out of meta" in text
            or "register_meta" in text or "data-dependent" in text)


def _result(status, **kw):
    out = {"schema": report_mod.SCHEMA, "status": status}
    out.update(kw)
    return out


def trace(target=None, model=None, inputs=None, hf=None, dtype=None, autocast=None, device="meta", train=False,
          capability=None, standins=None, emulate_autocast=None, seq_len=16, attn_implementation=None,
          continue_after_bad_sink=True, retry_on_cpu=True, cwd=None):
    """Trace one forward (and, with ``train``, backward) pass; return the JSON-able report.

    target: "MODULE:FACTORY" (or pass ``model`` and ``inputs`` directly); hf: a local transformers
    config file or checkpoint folder; dtype: cast the model ("bf16", "fp16", "fp32"); autocast:
    "bf16" / "fp16" region around the forward (CUDA's policy, emulated off CUDA); device: "meta",
    "cpu" or "cuda"; capability: (major, minor) of the GPU the kernels are judged for.
    """
    start = time.monotonic()
    notes = []
    info = {"target": target or (("hf:" + hf) if hf else (type(model).__name__ if model is not None else None)),
            "device": device, "dtype": dtype, "autocast": autocast, "train": bool(train)}
    try:
        _validate(target, model, hf, dtype, autocast, device)
        import torch  # noqa: F401
    except TraceError as exc:
        return _failure(exc, info, notes, start)
    except BaseException as exc:  # noqa: BLE001 - torch itself may fail to import
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
        if standins:
            from . import standins as standins_mod

            notes.extend(standins_mod.install_standins())
        builder = _builder(target, model, inputs, hf, dtype, device, seq_len, attn_implementation, info)
        built = builder(device, False)
    except TraceError as exc:
        return _failure(exc, info, notes, start)
    notes.extend(built["notes"])
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
                notes.extend(built["notes"])
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
    exit_code = EXIT_FINDINGS if summary["errors"] else (EXIT_FAILED if forward_error is not None else EXIT_CLEAN)
    out = _result(status, exit_code=exit_code, error=error, notes=notes, findings=findings, sinks=sink_list,
                  summary=summary, duration_s=round(time.monotonic() - start, 3))
    out.update(info)
    return out


def _validate(target, model, hf, dtype, autocast, device):
    sources = [x for x in (target, model, hf) if x is not None]
    if len(sources) != 1:
        raise TraceError("usage", "give exactly one of MODULE:FACTORY or --hf PATH")
    if dtype is not None and dtype not in DTYPE_CHOICES:
        raise TraceError("usage", "--dtype must be one of %s, not %r" % (", ".join(DTYPE_CHOICES), dtype))
    if autocast is not None and autocast not in AUTOCAST_CHOICES:
        raise TraceError("usage", "--autocast must be one of %s, not %r" % (", ".join(AUTOCAST_CHOICES), autocast))
    if device not in DEVICE_CHOICES:
        raise TraceError("usage", "--device must be one of %s, not %r" % (", ".join(DEVICE_CHOICES), device))
    if target is not None:
        parse_target(target)


def _builder(target, model, inputs, hf, dtype, device, seq_len, attn_impl, info):
    """A function (device, shrink) -> built model, so a failed meta run can be rebuilt on CPU."""
    if model is not None:
        def given(dev, shrink):
            return {"model": model, "inputs": normalize_inputs(inputs), "notes": []}

        return given
    if hf is not None:
        def from_hf(dev, shrink):
            m, inp, notes, meta = build_hf(hf, dev, dtype, attn_impl, seq_len, shrink)
            info.update(hf_attn_implementation=meta["attn_implementation"])
            return {"model": m, "inputs": inp, "notes": notes, "dtype": meta["dtype"]}

        return from_hf
    module, factory = parse_target(target)
    mod = import_target_module(module)
    fn = resolve_factory(mod, factory)

    def from_factory(dev, shrink):
        m, inp = split_result(call_factory(fn, dev))
        return {"model": m, "inputs": normalize_inputs(inp), "notes": []}

    return from_factory


def _prepare(built, device, dtype, seq_len=16):
    import torch

    from .tracer import NAME_TO_DTYPE

    model, inputs, notes = built["model"], built["inputs"], []
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
    standins_mod.wrap_installed()
    model.train(bool(train))
    forward_error = None
    emulated = ac_dtype if (emulate and ac_dtype is not None) else None
    real_autocast = (torch.autocast("cuda", dtype=ac_dtype) if (ac_dtype is not None and not emulate)
                     else contextlib.nullcontext())
    device_ctx = torch.device(device) if device != "cuda" else contextlib.nullcontext()
    grad_ctx = contextlib.nullcontext() if train else torch.no_grad()
    try:
        with device_ctx, grad_ctx, activate(tracer, emulated):
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
