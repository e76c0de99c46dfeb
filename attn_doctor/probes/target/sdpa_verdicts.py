"""Whether SDPA's fused kernels (flash, memory-efficient, cuDNN) accept given inputs, and torch's own
reasons where one does not: asked by the CUDA facts and the smoke tests (gpu_child.py) and by the
tracer for each traced call (tracing/kernel_choice).

Standard library plus torch, Python 3.8+ syntax: loaded by path inside the target interpreter.
"""

from __future__ import annotations

# SDPA's fused backends: key -> (its check in torch.backends.cuda, its SDPBackend member).
_FUSED = (
    ("flash", "can_use_flash_attention", "FLASH_ATTENTION"),
    ("mem_efficient", "can_use_efficient_attention", "EFFICIENT_ATTENTION"),
    ("cudnn", "can_use_cudnn_attention", "CUDNN_ATTENTION"),
)


def _sdpa_params(torch, q, is_causal, k=None, v=None, mask=None, dropout=0.0, enable_gqa=False):
    cls = torch.backends.cuda.SDPAParams
    k, v = q if k is None else k, q if v is None else v
    try:  # torch >= 2.5: enable_gqa
        return cls(q, k, v, mask, dropout, is_causal, enable_gqa)
    except TypeError:
        return cls(q, k, v, mask, dropout, is_causal)


def fused_verdicts(torch, q, is_causal=True, k=None, v=None, mask=None, dropout=0.0, enable_gqa=False):
    """Whether SDPA's flash / memory-efficient / cuDNN kernels accept q (as q, k and v, or with the
    k, v, mask, dropout and enable_gqa of a traced call), and torch's reasons where one does not:
    ({key: usable}, {key: [reason, ...]}).

    The reasons come from forcing that backend alone on the same inputs: SDPA raises "No available
    kernel" before running anything, having warned why, as Python warnings. (can_use_*(params,
    debug=True) prints them from C++ to stderr, out of reach of the warnings module: an H100 run
    got no reason at all that way.)"""
    usable, reasons = {}, {}
    call = dict(k=q if k is None else k, v=q if v is None else v, mask=mask, dropout=dropout, enable_gqa=enable_gqa)
    params = _sdpa_params(torch, q, is_causal, **call)
    for key, check, member in _FUSED:
        if not hasattr(torch.backends.cuda, check):
            continue
        try:
            usable[key] = ok = bool(getattr(torch.backends.cuda, check)(params, False))
        except Exception as exc:  # noqa: BLE001
            # A CUDA build whose CUDA cannot start (no driver, a driver too old) raises from the
            # cuDNN check even for CPU tensors: that backend is unusable, and this is why.
            usable[key] = False
            reasons[key] = ["torch's %s raised %s: %s" % (check, type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:300])]
            continue
        if not ok:
            reasons[key] = _forced_reasons(torch, q, key, member, is_causal, **call) or ["refused (torch gave no reason)"]
    return usable, reasons


# SDPA's warnings when no kernel is left: a header per backend ("Memory efficient kernel not used
# because:", "Flash attention ...", "CuDNN attention ..."), each followed by that backend's reasons.
_HEADERS = (("memory efficient", "mem_efficient"), ("flash attention", "flash"), ("cudnn attention", "cudnn"))


def _forced_reasons(torch, q, key, member, is_causal, k=None, v=None, mask=None, dropout=0.0, enable_gqa=False):
    """The reasons SDPA gives for refusing backend `key`, from a call with it forced alone."""
    import re
    import warnings

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, member)
    except (ImportError, AttributeError):  # torch < 2.3
        return []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            # Exactly the call's arguments: the mask, dropout and GQA are what a backend refuses.
            extra = {"enable_gqa": True} if enable_gqa else {}  # a keyword from torch 2.5
            with sdpa_kernel(backend):
                torch.nn.functional.scaled_dot_product_attention(q, q if k is None else k, q if v is None else v,
                                                                 attn_mask=mask, dropout_p=dropout,
                                                                 is_causal=is_causal, **extra)
        except RuntimeError:
            pass  # "No available kernel. Aborting execution."
    owner, lines = None, []
    for w in caught:
        for line in str(w.message).strip().splitlines():
            line = re.sub(r"\s*\(Triggered internally at [^)]*\)\.?$", "", line.strip())
            low = line.lower()
            if "kernel not used because" in low:
                owner = next((k for prefix, k in _HEADERS if low.startswith(prefix)), None)
            elif line and owner == key and line[:300] not in lines:
                lines.append(line[:300])
    return lines[:4]
