"""The tensors of an op's arguments and outputs, as the tracer reads and casts them."""

from __future__ import annotations

import torch

from ..calls.nodes import dtype_name, traced


def _floating_tensors(args, kwargs):
    out = []
    for seq in (args, kwargs.values() if kwargs else ()):
        for a in seq:
            if isinstance(a, torch.Tensor):
                if traced(a):
                    out.append(a)
            elif isinstance(a, (list, tuple)):
                for b in a:
                    if isinstance(b, torch.Tensor) and traced(b):
                        out.append(b)
    return out


def _output_tensors(out):
    if isinstance(out, torch.Tensor):
        return (out,) if traced(out) else ()
    if isinstance(out, (list, tuple)):
        return tuple(o for o in out if isinstance(o, torch.Tensor) and traced(o))
    return ()


def _cast_args(args, kwargs, pred, dtype):
    def conv(a):
        if isinstance(a, torch.Tensor):
            return a.to(dtype) if pred(a) else a
        if isinstance(a, (list, tuple)) and any(isinstance(b, torch.Tensor) for b in a):
            return type(a)(conv(b) for b in a)
        return a

    return tuple(conv(a) for a in args), {k: conv(v) for k, v in kwargs.items()}


def _lower_eligible(t):
    return t.is_floating_point() and t.dtype != torch.float64


def _cast_in_place(call_args, call_kwargs, spots, dtype, pred):
    """Cast the tensors at ``spots`` ({(pos, key): role}) of a call's arguments to ``dtype``."""
    for (pos, key) in spots:
        if key in call_kwargs and isinstance(call_kwargs[key], torch.Tensor):
            if pred(call_kwargs[key]):
                call_kwargs[key] = call_kwargs[key].to(dtype)
        elif pos is not None and pos < len(call_args) and isinstance(call_args[pos], torch.Tensor):
            if pred(call_args[pos]):
                call_args[pos] = call_args[pos].to(dtype)


def _transformers_flash_effective(args, effective, autocast_now):
    """What transformers' flash-attention wrapper hands to flash-attn: float32 q/k/v are cast to
    the autocast dtype, else the model's pre-quantization dtype, else the dtype of the module's
    first Linear weight (transformers/modeling_flash_attention_utils.py, get_target_dtype
    [src, version range unverified]); half inputs pass unchanged."""
    if "float32" not in effective.values():
        return effective
    target = autocast_now
    module = args[0] if args else None
    if target is None and module is not None:
        cfg = getattr(module, "config", None)
        pre = getattr(cfg, "_pre_quantization_dtype", None)
        if pre is not None:
            target = dtype_name(pre)
        else:
            for m in module.modules():
                if isinstance(m, torch.nn.Linear):
                    target = dtype_name(m.weight.dtype)
                    break
    if target is None:
        return effective
    return {r: (target if d == "float32" else d) for r, d in effective.items()}
