"""``MODULE:FACTORY``: the target parsed, the user's module imported (a dotted module or a .py
file), the factory found, bound to its ``--factory-arg`` values and called on the trace device
(``.cuda()`` and ``device="cuda"`` sent there), and what it returns split into a model and example
inputs. Each mistake is a TraceError with one line naming it. Standard library and torch only;
torch is imported when a factory is called."""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import inspect
import os
import sys

from ..errors import TraceError, _one_line


def parse_target(target):
    if not target or ":" not in target:
        raise TraceError("usage", "target %r is not MODULE:FACTORY (for example mypkg.models:build or "
                                  "path/to/model.py:make_model)" % (target,))
    module, _, factory = target.rpartition(":")
    if not module or not factory or not factory.replace("_", "a").replace(".", "a").isalnum():
        raise TraceError("usage", "target %r is not MODULE:FACTORY" % (target,))
    return module, factory


def target_problem(target, cwd=None):
    """The one-line usage error of a MODULE:FACTORY whose file is missing or a folder, or None: said
    before torch is imported (seconds), as the trace would say it after."""
    try:
        module, _ = parse_target(target)
    except TraceError as exc:
        return exc.message
    if module.endswith(".py") or os.sep in module:
        path = os.path.join(cwd or os.getcwd(), module)
        if os.path.isdir(path):
            return "%s is a folder: give a Python file (path/to/model.py:FACTORY) or a module" % module
        if not os.path.isfile(path):
            return "no such file: %s" % module
    return None


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
