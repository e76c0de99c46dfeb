"""The trace device standing for the GPU, as every forward pass of a model sees it (the trace's own
and the plain ones that try its inputs first): the model's autocast regions switch CUDA autocast,
and transformers sees flash-attn where it imports here. Below run, hf_models and hf_inputs, which
all enter these contexts, so that none of them imports another to reach them."""

from __future__ import annotations

import contextlib
import sys


def autocast_on_trace_device(device):
    """``torch.autocast(device_type=x.device.type, ...)`` inside the model (transformers' rotary
    code does this) names the trace device, which stands for the GPU: meta has no autocast at all
    (torch raises), and on the GPU that region would switch CUDA autocast, which is the state the
    emulation reads. So the trace device's autocast regions, and "cuda" ones, switch CUDA
    autocast's state (calls/autocast.py's ``regions_on``: decorators made at import too)."""
    from ..calls.autocast import regions_on

    return regions_on(device)


def flash_importable():
    try:
        import flash_attn  # noqa: F401

        return True
    except BaseException:  # noqa: BLE001
        return False


@contextlib.contextmanager
def transformers_sees_flash_attn():
    """Off the GPU, transformers >= 5 finds no usable flash-attn (it asks for CUDA) and its flash
    wrapper then fetches a kernel from the Hub. Where flash_attn imports (really, or as the
    stand-in), the trace stands for a GPU that has it: the wrapper's own availability check says
    yes, so transformers' real flash path runs and calls flash_attn's functions."""
    utils = sys.modules.get("transformers.modeling_flash_attention_utils")
    if utils is None or not hasattr(utils, "lazy_import_flash_attention") or not flash_importable():
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
