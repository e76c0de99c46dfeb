"""CUDA autocast's thread-local state, read and switched across torch versions. The tracer reads it
at every op; a CPU or meta trace switches it on to emulate a GPU's autocast region: the one
``--autocast`` names (mode.py) and those the model enters itself (``regions_on``)."""

from __future__ import annotations

import contextlib
import sys
import warnings

import torch


def _autocast_state_fns():
    """(is_enabled(), get_dtype()) for CUDA autocast, across torch versions."""
    try:
        torch.is_autocast_enabled("cuda")

        def enabled():
            return torch.is_autocast_enabled("cuda")

        def get_dtype():
            return torch.get_autocast_dtype("cuda")
    except TypeError:  # torch < 2.4
        def enabled():
            return torch.is_autocast_enabled()

        def get_dtype():
            return torch.get_autocast_gpu_dtype()
    return enabled, get_dtype


AUTOCAST_ENABLED, AUTOCAST_DTYPE = _autocast_state_fns()


def set_emulated_autocast(enabled, dtype=None):
    """Switch CUDA autocast's thread-local state without a CUDA device. The dispatcher only applies
    it to CUDA tensors, so on CPU/meta it changes nothing by itself; the tracer reads it (and user
    code's ``autocast(enabled=False)`` regions turn it off, as on the GPU)."""
    try:
        torch.set_autocast_enabled("cuda", enabled)
        if dtype is not None:
            torch.set_autocast_dtype("cuda", dtype)
    except TypeError:  # torch < 2.4
        torch.set_autocast_enabled(enabled)
        if dtype is not None:
            torch.set_autocast_gpu_dtype(dtype)


# What each autocast region's code asked for, kept on the region (torch keeps only what it made of it).
_ASKED = "_attn_doctor_asked"


def record_regions():
    """From now on in this process, every autocast region keeps what its code asked for (its device
    and ``enabled``): torch switches a CUDA region off where CUDA is not available, and a decorator's
    region (``@torch.autocast("cuda", enabled=False)`` around a float32 island) is made when the
    model's module is imported, long before a trace enters it. The regions work as torch's otherwise.
    Once per process; stays, since regions made at import outlive any one trace."""
    cls = torch.amp.autocast_mode.autocast
    original = cls.__init__
    if getattr(original, "__attn_doctor_wrapper__", False):
        return

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not (device_type == "cuda" and enabled and _no_cuda()):
            original(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        else:
            # torch warns that it switches the region off: said at the line that made the region,
            # as torch says it, not at this wrapper's
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                original(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
            caller = sys._getframe(1)
            for w in said:
                warnings.warn_explicit(w.message, w.category, caller.f_code.co_filename, caller.f_lineno,
                                       module=caller.f_globals.get("__name__"),
                                       registry=caller.f_globals.setdefault("__warningregistry__", {}))
        setattr(self, _ASKED, (device_type, enabled))

    __init__.__wrapped__, __init__.__attn_doctor_wrapper__ = original, True
    cls.__init__ = __init__


def _no_cuda():
    check = getattr(getattr(getattr(torch.cuda, "amp", None), "common", None), "amp_definitely_not_available", None)
    return check() if check is not None else not torch.cuda.is_available()


def emulation(device, asked=None):
    """Whether a trace on ``device`` applies CUDA autocast's policy itself: off the GPU, unless the
    caller said. Not only for ``--autocast``: the model's own regions switch CUDA autocast on in a
    trace (``regions_on``), and an fp16 region's matmul must give fp16 scores there as it does on
    the GPU. Off the GPU, the regions made from now on (the model's import included) keep what they
    asked for (``record_regions``)."""
    if device != "cuda":
        record_regions()
    return device != "cuda" if asked is None else bool(asked)


@contextlib.contextmanager
def regions_on(device):
    """A forward on ``device`` (meta or CPU) standing for the GPU: every autocast region the model
    enters for that device (``torch.autocast(x.device.type)``, as transformers' rotary code does) or
    for "cuda" switches CUDA autocast's state instead, with what it asked for; that state is what the
    tracer's emulation reads. Meta has no autocast at all (torch raises), CPU autocast has another
    policy (softmax and layer_norm stay in half there, float32 under CUDA's), and on CPU torch
    switches a "cuda" region off. Regions for other devices stay torch's: a "cpu" region in a meta
    trace touches no meta tensor, as on the GPU it touches no CUDA tensor. ``torch.is_autocast_enabled(device)`` and
    ``torch.get_autocast_dtype(device)`` answer for CUDA, and ``custom_fwd(cast_inputs=...)`` casts
    the trace device's tensors as it casts CUDA ones."""
    mapped = (device, "cuda")
    module = torch.amp.autocast_mode
    cls = module.autocast
    init, enter, leave = cls.__init__, cls.__enter__, cls.__exit__
    cast = getattr(module, "_cast", None)  # custom_fwd's (torch 2.4 and newer)

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type not in mapped:
            return init(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        # made as a CUDA region, without torch's "CUDA is not available: disabling" (it stands for one)
        init(self, "cuda", dtype=dtype, enabled=False, cache_enabled=cache_enabled)
        self._enabled = enabled
        setattr(self, _ASKED, (device_type, enabled))

    def __enter__(self):
        saved = self.__dict__.setdefault("_attn_doctor_saved", [])
        saved.append(None)
        if self.device in mapped:  # wherever it was made (a decorator's at the model's import): CUDA's, as asked
            saved[-1] = (self.device, self._enabled)
            asked = getattr(self, _ASKED, None)
            self.device = "cuda"
            if asked is not None:
                self._enabled = asked[1]
        return enter(self)

    def __exit__(self, *exc):
        try:
            return leave(self, *exc)
        finally:
            saved = self.__dict__.get("_attn_doctor_saved")
            made = saved.pop() if saved else None
            if made is not None:  # as it was made: the region may be entered again after the trace
                self.device, self._enabled = made

    def _cast(value, device_type, dtype):
        return cast(value, device if device_type in mapped else device_type, dtype)

    queries = {}
    for name in ("is_autocast_enabled", "get_autocast_dtype"):
        fn = getattr(torch, name, None)
        if fn is None:
            continue

        def query(*args, _fn=fn, **kwargs):
            if args and args[0] in mapped:
                args = ("cuda",) + tuple(args[1:])
            if kwargs.get("device_type") in mapped:
                kwargs["device_type"] = "cuda"
            return _fn(*args, **kwargs)

        queries[name] = fn
        setattr(torch, name, query)
    cls.__init__, cls.__enter__, cls.__exit__ = __init__, __enter__, __exit__
    if cast is not None:
        module._cast = _cast
    try:
        yield
    finally:
        cls.__init__, cls.__enter__, cls.__exit__ = init, enter, leave
        if cast is not None:
            module._cast = cast
        for name, fn in queries.items():
            setattr(torch, name, fn)
