"""The kernel each attention call runs on the target GPU, recorded on the tracer's sink records.

SDPA: on a CUDA device torch itself answers (``torch._fused_sdp_choice`` for the pick, and the
reasons of each refusing backend from probes/target/sdpa_verdicts.py's ``fused_verdicts``, which forces the
backend and catches torch's warnings); on meta and CPU the choice is emulated for ``--capability``
(else sm90) and the installed torch's rules (sdpa_select.py). Other entry points name the kernel
they run: FlashAttention 2/3/4, flex_attention compiled or not, xformers' operator, fla's Triton
kernels, attention written out.

``annotate`` is the tracer's hook at every sink; fallbacks.py turns the answers into findings and
cost.py times them on a GPU. Standard library plus torch.
"""

from __future__ import annotations

import sys

from . import sdpa_select
from .. import state
from ..probe_files import sdpa_verdicts

# SDPBackend's names as torch._fused_sdp_choice returns them -> sdpa_select's keys
_TORCH_NAMES = {"flash_attention": "flash", "efficient_attention": "mem_efficient", "cudnn_attention": "cudnn",
                "math": "math", "overrideable": "overrideable", "error": None}

NAMES = {
    "flash_attn2": "FlashAttention 2 (flash-attn)",
    "flash_attn3": "FlashAttention 3 (flash_attn_interface)",
    "flash_attn4": "FlashAttention 4 (flash_attn.cute)",
    "sage": "SageAttention (quantized QK)",
    "fla": "fla's Triton kernel",
    "eager": "eager attention (matmul, softmax, matmul)",
    "linear": "linear attention (k^T v, then q @ kv)",
    "mha": "F.multi_head_attention_forward (SDPA inside)",
}


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def tensor_info(t):
    return {"shape": [int(x) for x in t.shape], "stride": [int(x) for x in t.stride()], "dtype": dtype_name(t.dtype),
            "requires_grad": bool(t.requires_grad), "offset": int(t.storage_offset()), "itemsize": t.element_size()}


def sdpa_arguments(args, kwargs):
    """(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa) of an F.scaled_dot_product_attention call."""
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    defaults = (None, None, None, None, 0.0, False, None, False)
    values = dict(zip(names, defaults))
    values.update(zip(names, args))
    values.update({k: v for k, v in kwargs.items() if k in values})
    return (values["query"], values["key"], values["value"], values["attn_mask"], float(values["dropout_p"] or 0.0),
            bool(values["is_causal"]), bool(values["enable_gqa"]))


def describe(q, k, v, mask, dropout, is_causal, enable_gqa, grad_mode, effective=None):
    """A call as sdpa_select reads it; ``effective``: role -> dtype after autocast's cast."""
    call = {"q": tensor_info(q), "k": tensor_info(k), "v": tensor_info(v), "dropout": dropout, "is_causal": is_causal,
            "enable_gqa": enable_gqa, "grad_mode": bool(grad_mode),
            "mask": tensor_info(mask) if mask is not None else None}
    for role, dtype in (effective or {}).items():
        if role in ("q", "k", "v") and dtype:
            call[role]["dtype"] = dtype
    if mask is not None and (effective or {}).get("attn_mask"):
        call["mask"]["dtype"] = effective["attn_mask"]
    return call


def _enabled_backends(torch):
    out = {}
    for key, fn in (("flash", "flash_sdp_enabled"), ("mem_efficient", "mem_efficient_sdp_enabled"),
                    ("cudnn", "cudnn_sdp_enabled"), ("math", "math_sdp_enabled")):
        try:
            out[key] = bool(getattr(torch.backends.cuda, fn)())
        except Exception:  # noqa: BLE001 - an old torch without the switch
            pass
    return out


def target_of(tracer):
    """The GPU the trace judges for: the CUDA device, else --capability, else sm90 (said in the record)."""
    import torch

    cached = getattr(tracer, "_kernel_target", None)
    if cached is not None:
        return cached
    capability = tracer.capability or (9, 0)
    cuda = getattr(torch.version, "cuda", None)
    target = sdpa_select.target_for(capability, torch.__version__, cuda_major=int(cuda.split(".")[0]) if cuda else None,
                                    flash_compiled=sys.platform != "win32", enabled=_enabled_backends(torch))
    target["assumed_capability"] = tracer.capability is None
    tracer._kernel_target = target
    return target


# The newest torch whose kernel choice the emulation was held against on a GPU (tests/gpu/
# test_gpu_emulation_grid.py: every call of its grid agreed); newer releases' rules are read from
# torch's source and not yet measured, and the kernel line says so.
CHECKED_ON_GPU = (2, 11)


def judged_for(target):
    cap = "sm%d%d" % tuple(target["capability"])
    torch_version = tuple(target["torch"][:2])
    unchecked = "; the emulation is checked on a GPU up to torch %d.%d" % CHECKED_ON_GPU if torch_version > CHECKED_ON_GPU else ""
    return "%s%s, torch %d.%d%s" % (cap, " (no --capability: judged for it)" if target.get("assumed_capability") else "",
                                    torch_version[0], torch_version[1], unchecked)


def torch_choice(q, k, v, mask, dropout, is_causal, enable_gqa):
    """The kernel torch's SDPA dispatch picks for these tensors, by its private _fused_sdp_choice
    called as the installed torch declares it (scale and enable_gqa keyword-only; enable_gqa from
    torch 2.5)."""
    import torch
    from torch.nn.attention import SDPBackend

    gqa = {"enable_gqa": True} if enable_gqa else {}
    index = torch._fused_sdp_choice(q, k, v, mask, dropout, is_causal, scale=None, **gqa)
    return _TORCH_NAMES.get(SDPBackend(index).name.lower(), SDPBackend(index).name.lower())


def ask_torch(q, k, v, mask, dropout, is_causal, enable_gqa):
    """torch's own answer on a CUDA device: {"kernel", "refused": {backend: reason}, "accepts"}."""
    import torch

    kernel = torch_choice(q, k, v, mask, dropout, is_causal, enable_gqa)
    usable, reasons = sdpa_verdicts().fused_verdicts(torch, q, is_causal, k=k, v=v, mask=mask, dropout=dropout,
                                                 enable_gqa=enable_gqa)
    return {"kernel": kernel, "refused": {key: " ".join(why) for key, why in reasons.items()},
            "accepts": [key for key, ok in usable.items() if ok]}


def sdpa_choice(tracer, call, tensors):
    """The SDPA kernel for a described call: asked of torch on CUDA tensors, else emulated."""
    target = target_of(tracer)
    q = tensors[0]
    if getattr(q, "device", None) is not None and q.device.type == "cuda":
        tracer.in_sink += 1  # torch's own SDPA calls below are no model ops
        try:
            answer = ask_torch(*tensors)
        except Exception as exc:  # noqa: BLE001 - a private API changing must not stop the trace
            answer = dict(sdpa_select.select(call, target), error="%s: %s" % (type(exc).__name__, exc))
            answer["source"] = "emulated"
        else:
            answer["source"] = "torch"
        finally:
            tracer.in_sink -= 1
    else:
        answer = dict(sdpa_select.select(call, target), source="emulated")
    answer["for"] = judged_for(target) if answer["source"] == "emulated" else "this GPU"
    return answer


def call_facts(q, k, mask, dropout, is_causal, enable_gqa, effective):
    """What the known kernel bugs of recipes/numerics.toml are judged on at this call (off the GPU
    too): whether it is causal without a mask tensor, its lengths and heads, its dtype, whether it
    takes gradients."""
    import torch

    def dim(t, i):
        return int(t.shape[i]) if t.dim() >= -i else 1

    return {"is_causal": bool(is_causal), "mask": mask is not None, "dropout": dropout, "sq": dim(q, -2), "sk": dim(k, -2),
            "hq": dim(q, -3), "hkv": dim(k, -3), "enable_gqa": bool(enable_gqa), "dtype": effective.get("q"),
            "grad": bool(torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in (q, k)))}


def label(kernel):
    return "SDPA " + sdpa_select.LABELS.get(kernel, kernel or "none (No available kernel)")


def annotate(tracer, spec, record, args, kwargs):
    """The tracer's hook at a sink: ``record["kernel"]`` and the fallback findings in
    ``record["problems"]``. Never raises: a surprise here must not cost the dtype verdict."""
    try:
        _annotate(tracer, spec, record, args, kwargs)
    except Exception as exc:  # noqa: BLE001
        record["kernel"] = {"name": None, "label": "unknown", "error": "%s: %s" % (type(exc).__name__, exc)}


def _annotate(tracer, spec, record, args, kwargs):
    from . import fallbacks

    family = spec.family
    if family == "sdpa":
        import torch

        q, k, v, mask, dropout, is_causal, enable_gqa = sdpa_arguments(args, kwargs)
        if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
            return
        effective = dict(record["effective_dtypes"])
        if mask is not None and record.get("autocast") and mask.is_floating_point() and mask.dtype != torch.float64:
            effective["attn_mask"] = record["autocast"]
        call = describe(q, k, v, mask, dropout, is_causal, enable_gqa, torch.is_grad_enabled(), effective)
        choice = sdpa_choice(tracer, call, (q, k, v, mask, dropout, is_causal, enable_gqa))
        record["kernel"] = dict(choice, name=choice["kernel"], label=label(choice["kernel"]))
        from ..calls.sinks import sdpa_kernel_mask_problem

        mask_problem = sdpa_kernel_mask_problem(
            choice["kernel"], effective, effective.get("attn_mask") or (
                str(mask.dtype).replace("torch.", "") if isinstance(mask, torch.Tensor) else None))
        if mask_problem is not None and not any(p["id"] == "AD606" for p in record["problems"]):
            mask_problem["kernel_message"] += " (SDPA's memory-efficient kernel, which it picks for this call)"
            record["problems"].append(mask_problem)
        record["problems"].extend(fallbacks.sdpa_fallbacks(
            tracer, record, call, (q, k, v, mask), choice,
            choose=lambda eq_call, eq_tensors: sdpa_choice(tracer, eq_call, eq_tensors), target=target_of(tracer)))
        record["call"] = call_facts(q, k, mask, dropout, is_causal, enable_gqa, effective)
        if q.device.type == "cuda" and getattr(tracer, "train", False) and record["call"]["grad"]:
            from ..numerics import at_calls as numerics

            scale = kwargs.get("scale", args[6] if len(args) > 6 else None)
            measured, problem = numerics.check_call(tracer, record, q, k, v, mask, is_causal, enable_gqa, scale)
            record["numerics"] = measured
            if problem is not None:
                record["problems"].append(problem)
        return
    if family == "flex":
        compiled = bool(state.FLEX_COMPILED[0] or getattr(tracer, "compiled_model", False))
        record["kernel"] = {"name": "flex_compiled" if compiled else "flex_eager", "source": "call",
                            "label": "flex_attention, compiled (fused Triton kernel)" if compiled else
                            "flex_attention, not compiled (unfused: the whole score matrix in memory)"}
        if not compiled:
            record["problems"].append(fallbacks.flex_not_compiled(record))
        return
    if family == "xformers":
        record["kernel"] = xformers_operator(record, target_of(tracer))
        return
    name = NAMES.get(family)
    if name:
        record["kernel"] = {"name": family, "label": name + (" (judged with a stand-in)" if record.get("standin")
                                                              else ""), "source": "call"}


def xformers_operator(record, target):
    """The operator xformers' dispatcher picks (xformers/ops/fmha/dispatch.py: FlashAttention 3 on
    sm90, FlashAttention 2 on sm80+, for fp16/bf16 and head dim <= 256; else cutlass). Asked of
    xformers itself on a GPU where its private dispatcher imports."""
    from ...support import matrix as support_matrix

    eff = record.get("effective_dtypes") or {}
    half = eff.get("q") in sdpa_select.HALF and len(set(eff.values())) == 1
    dim = record.get("head_dim") or 0
    cap = target["capability"]
    fa2 = support_matrix().kernel("xformers-flash")  # its limits: the support matrix's row for xformers' operator
    fa3 = support_matrix().kernel("xformers-flash3")
    if half and dim <= fa2.limit("head_dim_max") and cap >= fa2.nvidia_range()[0]:
        op = ("fa3 (FlashAttention 3)" if cap[0] == 9 and dim <= fa3.limit("head_dim_max") else "fa2 (FlashAttention 2)")
    else:
        op = "cutlass (memory-efficient)"
    return {"name": "xformers", "label": "xformers %s%s" % (op, " (judged with a stand-in)" if record.get("standin")
                                                            else ""),
            "source": "emulated", "for": judged_for(target)}
