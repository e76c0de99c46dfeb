"""Switching a trace on in this process: the TorchFunctionMode that routes every torch call through
the tracer (SDPA off the GPU run as on the GPU, whatever backends the model allowed), ``torch.from_numpy``
watched, the module hooks installed and (for a CPU or meta trace of an autocast run) CUDA autocast's
state switched on."""

from __future__ import annotations

import contextlib

import torch
from torch.overrides import TorchFunctionMode

from .. import state
from ..calls.autocast import AUTOCAST_DTYPE, AUTOCAST_ENABLED, set_emulated_autocast


class TraceMode(TorchFunctionMode):
    """Routes every torch call through the tracer."""

    def __init__(self, tracer):
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        tracer = self.tracer
        if tracer.in_sink:
            return func(*args, **kwargs)
        try:
            spec = tracer.torch_sinks.get(func)
        except TypeError:
            spec = None
        if spec is None and isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            qual = getattr(func, "_qualified_op_name", None) or (func.name() if hasattr(func, "name") else "")
            qual = qual.split(".", 1)[0] if isinstance(qual, str) else ""
            spec = tracer.op_sinks.get(qual)
        if spec is not None:
            if spec.family == "sdpa" and not _on_cuda(args, kwargs):
                func = _sdpa_as_on_the_gpu(tracer, func)
            return tracer.sink_call(spec, func, args, kwargs)
        return tracer.handle_op(func, args, kwargs)


# What torch raises on a GPU where no backend the model allowed takes the call (sdp_utils.cpp)
GPU_NO_KERNEL = "No available kernel. Aborting execution."


def _on_cuda(args, kwargs):
    return any(isinstance(a, torch.Tensor) and a.device.type == "cuda" for a in list(args) + list(kwargs.values()))


def _sdpa_as_on_the_gpu(tracer, func):
    """SDPA off the GPU runs as on the GPU the trace stands for, whatever backends the model allowed
    (``sdpa_kernel``, ``enable_math_sdp(False)``): where the kernel choice emulated for that GPU (the
    call's record, made before it runs) finds none, it raises as torch raises there; else it computes
    with the trace device's own kernels, all allowed (CPU has neither the memory-efficient nor the
    cuDNN kernel, and would refuse a call the GPU runs)."""

    def sdpa(*args, **kwargs):
        record = tracer.sinks[-1] if tracer.sinks else {}
        kernel = (record.get("kernel") or {}) if record.get("family") == "sdpa" else {}
        if kernel.get("source") == "emulated" and kernel.get("name", "") is None:
            # torch warns each allowed backend's refusal first: said with the error here
            said = ["%s: %s" % (b, why) for b, why in (kernel.get("refused") or {}).items()
                    if "runtime disabled" not in why]
            raise RuntimeError(GPU_NO_KERNEL + (" (%s)" % "; ".join(said) if said else ""))
        with _every_backend():
            return func(*args, **kwargs)

    return sdpa


def _every_backend():
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch < 2.3: no backend the model allowed is checked off the GPU either
        return contextlib.nullcontext()
    names = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")
    return sdpa_kernel([getattr(SDPBackend, n) for n in names if hasattr(SDPBackend, n)])


def _watch_from_numpy(tracer):
    """``torch.from_numpy`` is no torch function a mode sees; its float64 tables (rotary, ALiBi)
    are a classic origin of a promotion, so it is wrapped for the trace. Returns the original."""
    original = getattr(torch, "from_numpy", None)
    if original is None:
        return None

    def from_numpy(array):
        out = original(array)
        if out.is_floating_point():
            tracer.record(original, (), {}, (out,), None)
        return out

    torch.from_numpy = from_numpy
    return original


class activate(object):
    """Context manager: make ``tracer`` the active one, with its mode, hooks and autocast state."""

    def __init__(self, tracer, emulated_autocast_dtype=None):
        self.tracer = tracer
        self.emulated = emulated_autocast_dtype
        self.mode = TraceMode(tracer)
        self._saved = None

    def __enter__(self):
        if state.ACTIVE[0] is not None:
            raise RuntimeError("a dtype trace is already running in this process")
        state.ACTIVE[0] = self.tracer
        if self.emulated is not None:
            self._saved = (AUTOCAST_ENABLED(), AUTOCAST_DTYPE())
            set_emulated_autocast(True, self.emulated)
        self.tracer.install_hooks()
        self._from_numpy = _watch_from_numpy(self.tracer)
        self.mode.__enter__()
        return self.tracer

    def __exit__(self, *exc):
        try:
            self.mode.__exit__(*exc)
        finally:
            if self._from_numpy is not None:
                torch.from_numpy = self._from_numpy
            self.tracer.remove_hooks()
            if self._saved is not None:
                set_emulated_autocast(*self._saved)
            state.ACTIVE[0] = None
        return False
