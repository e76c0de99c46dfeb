"""Switching a trace on in this process: the TorchFunctionMode that routes every torch call through
the tracer, ``torch.from_numpy`` watched, the module hooks installed and (for a CPU or meta trace
of an autocast run) CUDA autocast's state switched on."""

from __future__ import annotations

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
            return tracer.sink_call(spec, func, args, kwargs)
        return tracer.handle_op(func, args, kwargs)


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
