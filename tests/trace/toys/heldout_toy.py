"""Cases the first tracer got wrong: a mask of the other half dtype, a float64 rotary table, a
model with no attention at all, factories with arguments or written for CUDA, attention written
inline (matmul, softmax, matmul), and a model that falls back to SDPA without flash-attn."""
import functools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None


class MaskedAttention(nn.Module):
    """SDPA with an additive float mask built in bf16 while the model runs in fp16."""

    def __init__(self, dim=64, heads=4, mask_dtype=torch.bfloat16):
        super().__init__()
        self.heads, self.head_dim, self.mask_dtype = heads, dim // heads, mask_dtype
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        mask = torch.zeros(L, L, device=x.device).to(self.mask_dtype)  # MASK
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(B, L, C)  # SINK-MASK


class Float64Rotary(nn.Module):
    """A rotary table kept in float64 (as ``torch.from_numpy`` of a numpy table gives): q and k
    come out float64, v stays half."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        table = torch.arange(32, dtype=torch.float64)[:, None] * torch.ones(self.head_dim, dtype=torch.float64)
        self.register_buffer("rope_cos", table.cos())

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        cos = self.rope_cos[:L]
        q, k = q * cos, k * cos  # PROMOTE-F64
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, L, C)  # SINK-F64


class InlineAttention(nn.Module):
    """Attention written out, as T5, BERT-era and much research code do. ``bad`` keeps an fp32
    value gain, so v turns float32 in a half model and ``probs @ v`` raises."""

    def __init__(self, dim=64, heads=4, bad=False):
        super().__init__()
        self.heads, self.head_dim, self.bad = heads, dim // heads, bad
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.v_gain = nn.Parameter(torch.ones(self.head_dim))

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.bad:
            v = v * self.v_gain  # PROMOTE-V
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = F.softmax(scores.float(), dim=-1).type_as(scores)
        probs = F.dropout(probs, p=0.0, training=self.training)
        out = torch.matmul(probs, v)  # SINK-INLINE
        return out.transpose(1, 2).reshape(B, L, C)


class FallbackAttention(nn.Module):
    """flash_attn_func when flash-attn imports, else SDPA; rotary from an fp32 table with autocast
    off (x-transformers < 1.30.2): under CUDA autocast SDPA casts its inputs and runs, flash-attn
    gets float32 q/k and raises."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.head_dim).unbind(2)
        with torch.autocast(device_type=x.device.type, enabled=False):
            t = torch.arange(L, device=x.device, dtype=torch.float32)
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat((freqs, freqs), -1)[None, :, None, :]
            q, k = q * emb.cos(), k * emb.cos()  # PROMOTE-FB
        if flash_attn_func is not None:
            o = flash_attn_func(q, k, v, causal=True)  # SINK-FB-FLASH
        else:
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=True).transpose(1, 2)  # SINK-FB-SDPA
        return o.reshape(B, L, C)


class Stack(nn.Module):
    def __init__(self, make, depth=2, dim=64):
        super().__init__()
        self.layers = nn.ModuleList(make() for _ in range(depth))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(self.norm(x))
        return x


def _half(model, x, dtype):
    dt = getattr(torch, dtype)
    return model.to(dt), x.to(dt)


def build_mask(dtype="float16", mask_dtype="bfloat16"):
    model = Stack(lambda: MaskedAttention(mask_dtype=getattr(torch, mask_dtype)))
    return _half(model, torch.randn(1, 8, 64), dtype)


def build_float64_rotary(dtype="bfloat16"):
    model = Stack(Float64Rotary).to(getattr(torch, dtype))
    for layer in model.layers:  # .to() cast the table; keep it float64 as numpy made it
        layer.rope_cos = layer.rope_cos.double()
    return model, torch.randn(1, 8, 64, dtype=getattr(torch, dtype))


def build_inline(dtype="bfloat16", bad=False):
    model = Stack(lambda: InlineAttention(bad=bad)).to(getattr(torch, dtype))
    if bad:
        for layer in model.layers:
            layer.v_gain.data = layer.v_gain.data.float()
    return model, torch.randn(1, 8, 64, dtype=getattr(torch, dtype))


def build_fallback():
    return Stack(FallbackAttention), torch.randn(1, 8, 64)


def build_no_attention():
    return nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16)), torch.randn(2, 16)


def build_sized(depth=2, dim=64, heads=4, dtype="float32"):
    """A factory with arguments: ``--factory-arg depth=3 --factory-arg dtype=bfloat16``."""
    model = Stack(lambda: MaskedAttention(dim, heads, mask_dtype=torch.bool), depth=depth, dim=dim)
    return model.to(getattr(torch, dtype)), torch.randn(1, 8, dim, dtype=getattr(torch, dtype))


def build_on_cuda():
    """Written for a GPU: ``.cuda()`` on the model and its inputs."""
    model = Stack(lambda: MaskedAttention(mask_dtype=torch.bool)).cuda().half()
    return model, torch.randn(1, 8, 64, device="cuda").half()


def build_asks_cuda():
    """Reads the current CUDA device: nothing to map, the factory needs a GPU."""
    torch.cuda.set_device(torch.cuda.current_device())
    return build_on_cuda()


build_mask_fp16_bf16 = functools.partial(build_mask, "float16", "bfloat16")
build_mask_ok = functools.partial(build_mask, "float16", "float16")
build_inline_bad = functools.partial(build_inline, "bfloat16", True)
