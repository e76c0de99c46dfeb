"""What the meta device, or a machine without a kernel, cannot run: said as a limit of the trace, not
as a fault of the model. No torch needed: the exceptions are read as text."""

from __future__ import annotations


_MISSING_KERNEL = ("not installed", "is not available", "not available on", "No module named", "kernels",
                   "Could not find", "CUDA", "cuda")


def _kernel_missing(exc):
    """transformers could not get a flash kernel here (no package, no GPU, no Hub access)."""
    text = str(exc)
    return isinstance(exc, ImportError) or any(s in text for s in _MISSING_KERNEL)


def _meta_limitation(exc):
    return meta_limitation(exc) is not None


def meta_limitation(exc):
    """Why the meta device could not run what raised ``exc`` (data-dependent Python, a meta kernel
    stricter than the real ones), or None where the exception is the model's own."""
    text = str(exc)
    lower = text.lower()
    if ("meta tensor" in lower or "cannot copy out of meta" in lower or "register_meta" in text
            or "data-dependent" in text or "no fake impl or meta kernel" in lower):
        return "the forward pass does data-dependent Python (.item(), .tolist(), a tensor in an if) that meta cannot run"
    if "invalid type: 'torch.meta." in text:
        # x.type(y.type()): the type name of a meta tensor names no tensor type torch can make
        return "the forward pass casts with a tensor type name (x.type(y.type())), which meta tensors have none of"
    if "device type for autocast" in text:
        return "the forward pass opens an autocast region for the meta device, which has none"
    if "Expected inputs of BF16 type but got mat_a.dtype" in text:
        # torch's meta kernel for grouped matmul (MoE experts) takes bf16 only; CPU and CUDA take more
        return "torch's meta kernel for grouped matmul (the MoE experts) takes only bf16"
    return None
