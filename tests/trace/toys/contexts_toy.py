"""A zoo of small attention models, one per context their forward enters: autocast regions named
after the input's device, "cuda" or "cpu", as decorators, nested, switched off inside, fp16 and bf16;
no_grad and inference_mode; SDPA's backend choice; a custom autograd Function; explicit casts; and
attention libraries imported at module import (xformers, flash_attn) the way model code does. Each
factory returns (model, inputs). Some forwards raise (the same on the GPU), most run: the trace must
end as the plain forward ends (tests/trace/test_faithful_contexts.py says what each one expects)."""
import importlib.util
import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import xformers.ops as xops
except ImportError:
    xops = None

try:
    import xformers
except ImportError:
    xformers = None

try:
    from xformers.ops import memory_efficient_attention
except ImportError:
    memory_efficient_attention = None

try:
    from xformers import ops as xformers_ops
except ImportError:
    xformers_ops = None

XFORMERS_AVAILABLE = importlib.util.find_spec("xformers") is not None
if XFORMERS_AVAILABLE:
    from xformers.ops import LowerTriangularMask, memory_efficient_attention as xformers_attention

try:
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # torch < 2.3
    SDPBackend = sdpa_kernel = None

DIM, HEADS, SEQ, BATCH = 32, 4, 8, 2


class Base(nn.Module):
    """q, k, v projections into [batch, heads, seq, head_dim], and the output projection."""

    def __init__(self, dim=DIM, heads=HEADS):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def split(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.head_dim).unbind(2)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def merge(self, o):
        b, h, t, d = o.shape
        return self.out(o.transpose(1, 2).reshape(b, t, h * d))

    def written_out(self, q, k, v, fill=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(causal, torch.finfo(scores.dtype).min if fill is None else fill)
        return scores.softmax(-1) @ v


def _inputs(dtype=torch.float32):
    return (torch.randn(BATCH, SEQ, DIM, dtype=dtype),)


def _build(cls, dtype=torch.float32, input_dtype=None, **kw):
    torch.manual_seed(0)
    model = cls(**kw).to(dtype).eval()
    return model, _inputs(input_dtype or dtype)


# ---------------------------------------------------------------- autocast entered in the forward


class FillUnderFp16Autocast(Base):
    """The scores are fp16 under the region: -1e9 does not fit in fp16 (raises on CPU and GPU)."""

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.float16):
            q, k, v = self.split(x)
            scores = q @ k.transpose(-2, -1)
            mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(mask, -1e9)  # RAISES-FILL
            return self.merge(scores.softmax(-1) @ v)


class FillUnderFp16AutocastFixed(Base):
    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.float16):
            q, k, v = self.split(x)
            return self.merge(self.written_out(q, k, v))


class LinearUnderBf16Autocast(Base):
    """A bf16 model fed float32 activations: autocast casts them at the projections."""

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            q, k, v = self.split(x)
            return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class ManualMatmulAfterRegion(Base):
    """q, k, v are made inside the region (bf16), the scores outside it against a float32 bias:
    a matmul outside autocast is not cast (raises on CPU and GPU)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("rel", torch.randn(HEADS, DIM // HEADS, DIM // HEADS))

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            q, k, v = self.split(x)
        q = torch.matmul(q, self.rel)  # RAISES-MATMUL
        return self.merge(F.scaled_dot_product_attention(q, k, v))


class NormInRegionLinearOutside(Base):
    """The region ends with a layer_norm, a projection outside it reads that: on the GPU the norm's
    output is float32 (CUDA autocast runs layer_norm in float32) and the bf16 projection refuses
    it; CPU autocast keeps layer_norm in bf16, so the plain CPU forward runs."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            q, k, v = self.split(x)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = self.norm(o.transpose(1, 2).flatten(2))
        return self.out(h)  # RAISES-NORM-ON-GPU


class SoftmaxInRegionMatmulOutside(Base):
    """Attention written out whose softmax is inside the region and the product with v outside:
    CUDA autocast's softmax is float32, which then meets the bf16 v outside (raises on the GPU);
    CPU autocast's softmax stays bf16 (runs on CPU)."""

    def forward(self, x):
        q, k, v = self.split(x)
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            probs = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)
        return self.merge(probs @ v)  # RAISES-SOFTMAX-ON-GPU


class CudaRegion(Base):
    """`torch.autocast("cuda")`: a GPU model. The plain CPU forward disables it (CUDA is not
    available) and runs in float32; on the GPU the region is bf16."""

    def forward(self, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            q, k, v = self.split(x)
            return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class CpuRegion(Base):
    """`torch.autocast("cpu")`: bf16 on CPU tensors; on the GPU it leaves CUDA tensors alone."""

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            q, k, v = self.split(x)
            return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class DecoratedDeviceRegion(Base):
    """The region as a decorator, made when this module is imported (not in the forward)."""

    @torch.autocast("cuda", dtype=torch.bfloat16)
    def forward(self, x):
        q, k, v = self.split(x)
        return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class DecoratedCpuRegion(Base):
    @torch.amp.autocast("cpu", dtype=torch.bfloat16)
    def forward(self, x):
        q, k, v = self.split(x)
        return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # torch.cuda.amp.autocast is deprecated (still in use)

    class OldSpellingRegion(Base):
        @torch.cuda.amp.autocast(dtype=torch.float16)
        def forward(self, x):
            q, k, v = self.split(x)
            return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class DecoratedFp32Island(Base):
    """A bf16 region around the block; the attention in a function decorated to switch autocast
    off (a common way to keep a part in float32), which then casts its inputs itself."""

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            q, k, v = self.split(x)
            o = self.attend(q, k, v)
            return self.merge(o), o

    @torch.autocast("cuda", enabled=False)
    def attend(self, q, k, v):
        return self.written_out(q.float(), k.float(), v.float())


class DecoratedFp32IslandMixed(DecoratedFp32Island):
    """The same island without its casts: bf16 q against float32 k (raises on CPU and GPU)."""

    @torch.autocast("cuda", enabled=False)
    def attend(self, q, k, v):
        return q @ k.float().transpose(-2, -1) @ v  # RAISES-ISLAND


class NestedRegions(Base):
    """A bf16 region with an fp16 region inside: the inner attention runs in fp16."""

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            q, k, v = self.split(x)
            with torch.autocast(x.device.type, dtype=torch.float16):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.merge(o), o


class DisabledInside(Base):
    """autocast(enabled=False) inside an enabled region, the inputs cast as the docs say."""

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            q, k, v = self.split(x)
            with torch.autocast(x.device.type, enabled=False):
                o = self.written_out(q.float(), k.float(), v.float())
            return self.merge(o), o


class DisabledInsideUncast(Base):
    """The same without the casts: the bf16 q meets a float32 table in a matmul no autocast casts."""

    def __init__(self):
        super().__init__()
        self.register_buffer("rel", torch.randn(HEADS, DIM // HEADS, DIM // HEADS))

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            q, k, v = self.split(x)
            with torch.autocast(x.device.type, enabled=False):
                q = torch.matmul(q, self.rel)  # RAISES-DISABLED
            return self.merge(F.scaled_dot_product_attention(q, k, v))


class Fp16RegionSdpa(Base):
    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.float16):
            q, k, v = self.split(x)
            return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class DefaultDtypeRegion(Base):
    """No dtype: the device's default (CPU's is bf16, CUDA's fp16)."""

    def forward(self, x):
        with torch.autocast(x.device.type):
            q, k, v = self.split(x)
            return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class CustomFwdFunction(torch.autograd.Function):
    """Attention in a custom autograd Function whose forward runs in float32 under CUDA autocast."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        return grad, grad, grad


class CustomFwdRegion(Base):
    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            q, k, v = self.split(x)
            o = CustomFwdFunction.apply(q, k, v)
            return self.merge(o), o


# ---------------------------------------------------------------- grad modes, SDPA's backends


class NoGrad(Base):
    def forward(self, x):
        with torch.no_grad():
            q, k, v = self.split(x)
            return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class InferenceMode(Base):
    def forward(self, x):
        with torch.inference_mode():
            q, k, v = self.split(x)
            return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class InferenceModeMixed(Base):
    """inference_mode around a bf16 q promoted by a float32 table: SDPA refuses the mix."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(DIM // HEADS), persistent=False)

    def forward(self, x):
        with torch.inference_mode():
            q, k, v = self.split(x)
            q = q * self.scale.float()
            return self.merge(F.scaled_dot_product_attention(q, k, v))  # RAISES-SDPA


class SdpaMath(Base):
    def forward(self, x):
        q, k, v = self.split(x)
        with sdpa_kernel(SDPBackend.MATH):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.merge(o)


class SdpaFlash(Base):
    """Only the flash backend: bf16 runs it on the GPU and on CPU (torch has a CPU flash kernel)."""

    def forward(self, x):
        q, k, v = self.split(x)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.merge(o)


class SdpaEfficientOnly(Base):
    """Only the memory-efficient backend: the GPU runs it; CPU has no such kernel."""

    def forward(self, x):
        q, k, v = self.split(x)
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # RAISES-EFFICIENT-ON-CPU
        return self.merge(o)


class SdpaCudnnOnly(Base):
    """Only cuDNN's backend: an H100 or H200 runs it; CPU has no such kernel."""

    def forward(self, x):
        q, k, v = self.split(x)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # RAISES-CUDNN-ON-CPU
        return self.merge(o)


class SdpaFlashFp32(Base):
    """Only the flash backend for a float32 model: the GPU's flash kernel takes half only (no kernel
    left: SDPA raises there); CPU's flash kernel takes float32."""

    def forward(self, x):
        q, k, v = self.split(x)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # RAISES-FLASH-ON-GPU
        return self.merge(o)


class SdpaKernelOldSpelling(Base):
    def forward(self, x):
        q, k, v = self.split(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated for torch.nn.attention.sdpa_kernel
            ctx = torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True, enable_mem_efficient=False)
        with ctx:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.merge(o)


class SdpaFlashUnderAutocast(Base):
    """Only the flash backend, float32 model, bf16 autocast: SDPA's inputs are cast first."""

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            q, k, v = self.split(x)
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.merge(o)


# ---------------------------------------------------------------- a custom autograd Function


class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad, grad


class CustomFunction(Base):
    def forward(self, x):
        q, k, v = self.split(x)
        return self.merge(AttentionFunction.apply(q, k, v))


class CustomFunctionUnderAutocast(Base):
    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            q, k, v = self.split(x)
            return self.merge(AttentionFunction.apply(q, k, v))


# ---------------------------------------------------------------- casts in the forward


class CastsRoundTrip(Base):
    """Scores in float32 for the softmax, cast back with .to(q.dtype) and .type_as."""

    def forward(self, x):
        q, k, v = self.split(x)
        scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
        probs = scores.softmax(-1).to(q.dtype)
        o = probs @ v
        return self.merge(o.type_as(x))


class FloatNotCastBack(Base):
    """q.float() never cast back: SDPA gets float32 q with bf16 k, v."""

    def forward(self, x):
        q, k, v = self.split(x)
        return self.merge(F.scaled_dot_product_attention(q.float(), k, v))  # RAISES-FLOAT


class TypeAsFloat32(Base):
    """type_as a float32 tensor: v becomes float32 and meets the bf16 probabilities."""

    def forward(self, x, bias):
        q, k, v = self.split(x)
        probs = (q @ k.transpose(-2, -1)).softmax(-1)
        return self.merge(probs @ v.type_as(bias))  # RAISES-TYPE-AS


# ---------------------------------------------------------------- libraries imported at import


class XformersModule(Base):
    """`import xformers.ops as xops` at import; called on [batch, seq, heads, head_dim]."""

    def forward(self, x):
        q, k, v = (t.transpose(1, 2) for t in self.split(x))
        o = xops.memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask())
        return self.merge(o.transpose(1, 2))


class XformersTop(Base):
    """`import xformers` at import, the function reached through xformers.ops."""

    def forward(self, x):
        q, k, v = (t.transpose(1, 2) for t in self.split(x))
        o = xformers.ops.memory_efficient_attention(q, k, v)
        return self.merge(o.transpose(1, 2))


class XformersFunction(Base):
    """`from xformers.ops import memory_efficient_attention` at import."""

    def forward(self, x):
        q, k, v = (t.transpose(1, 2) for t in self.split(x))
        return self.merge(memory_efficient_attention(q, k, v).transpose(1, 2))


class XformersFromImport(Base):
    """`from xformers import ops as xops` at import."""

    def forward(self, x):
        q, k, v = (t.transpose(1, 2) for t in self.split(x))
        return self.merge(xformers_ops.memory_efficient_attention(q, k, v).transpose(1, 2))


class XformersIfAvailable(Base):
    """`XFORMERS_AVAILABLE = importlib.util.find_spec("xformers") is not None` at import, SDPA else."""

    def forward(self, x):
        q, k, v = self.split(x)
        if XFORMERS_AVAILABLE:
            o = xformers_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                   attn_bias=LowerTriangularMask()).transpose(1, 2)
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.merge(o)


class FlashAttnFunction(Base):
    """`from flash_attn import flash_attn_func` at import, SDPA where it did not import."""

    def forward(self, x):
        q, k, v = self.split(x)
        if flash_attn_func is not None:
            o = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True).transpose(1, 2)
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.merge(o)


class XformersUnderAutocast(Base):
    """A float32 model under an fp16 region calling xformers: autocast does not cast xformers'
    inputs, but the projections made them fp16 already."""

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=torch.float16):
            q, k, v = (t.transpose(1, 2) for t in self.split(x))
            return self.merge(xops.memory_efficient_attention(q, k, v).transpose(1, 2))


# ---------------------------------------------------------------- the factories


def build_fill_fp16_autocast():
    return _build(FillUnderFp16Autocast)


def build_fill_fp16_autocast_fixed():
    return _build(FillUnderFp16AutocastFixed)


def build_linear_bf16_autocast():
    return _build(LinearUnderBf16Autocast, torch.bfloat16, input_dtype=torch.float32)


def build_matmul_after_region():
    return _build(ManualMatmulAfterRegion)


def build_norm_in_region():
    return _build(NormInRegionLinearOutside, torch.bfloat16)


def build_softmax_in_region():
    return _build(SoftmaxInRegionMatmulOutside, torch.bfloat16)


def build_cuda_region():
    return _build(CudaRegion)


def build_cpu_region():
    return _build(CpuRegion)


def build_decorated_cuda():
    return _build(DecoratedDeviceRegion)


def build_decorated_cpu():
    return _build(DecoratedCpuRegion)


def build_old_spelling():
    return _build(OldSpellingRegion)


def build_fp32_island():
    return _build(DecoratedFp32Island)


def build_fp32_island_mixed():
    return _build(DecoratedFp32IslandMixed)


def build_nested():
    return _build(NestedRegions)


def build_disabled_inside():
    return _build(DisabledInside)


def build_disabled_inside_uncast():
    return _build(DisabledInsideUncast)


def build_fp16_region():
    return _build(Fp16RegionSdpa)


def build_default_dtype_region():
    return _build(DefaultDtypeRegion)


def build_custom_fwd():
    return _build(CustomFwdRegion)


def build_no_grad():
    return _build(NoGrad, torch.bfloat16)


def build_inference_mode():
    return _build(InferenceMode, torch.bfloat16)


def build_inference_mode_mixed():
    return _build(InferenceModeMixed, torch.bfloat16)


def build_sdpa_math():
    return _build(SdpaMath, torch.bfloat16)


def build_sdpa_flash():
    return _build(SdpaFlash, torch.bfloat16)


def build_sdpa_efficient():
    return _build(SdpaEfficientOnly, torch.bfloat16)


def build_sdpa_cudnn():
    return _build(SdpaCudnnOnly, torch.bfloat16)


def build_sdpa_flash_fp32():
    return _build(SdpaFlashFp32)


def build_sdp_kernel_old():
    return _build(SdpaKernelOldSpelling, torch.bfloat16)


def build_sdpa_flash_autocast():
    return _build(SdpaFlashUnderAutocast)


def build_custom_function():
    return _build(CustomFunction, torch.bfloat16)


def build_custom_function_autocast():
    return _build(CustomFunctionUnderAutocast)


def build_casts():
    return _build(CastsRoundTrip, torch.bfloat16)


def build_float_not_cast_back():
    return _build(FloatNotCastBack, torch.bfloat16)


def build_type_as_float32():
    model, (x,) = _build(TypeAsFloat32, torch.bfloat16)
    return model, (x, torch.zeros(1))


def build_xformers_module():
    return _build(XformersModule, torch.float16)


def build_xformers_top():
    return _build(XformersTop, torch.bfloat16)


def build_xformers_function():
    return _build(XformersFunction, torch.float16)


def build_xformers_from_import():
    return _build(XformersFromImport, torch.bfloat16)


def build_xformers_if_available():
    return _build(XformersIfAvailable, torch.float16)


def build_flash_attn():
    return _build(FlashAttnFunction, torch.bfloat16)


def build_xformers_autocast():
    return _build(XformersUnderAutocast)
