"""CUDA autocast's thread-local state, read and switched across torch versions. The tracer reads it
at every op; a CPU or meta trace switches it on to emulate a GPU's autocast region (mode.py)."""

from __future__ import annotations

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
