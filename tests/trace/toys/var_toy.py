"""VAR (FoundationVision/VAR#30) before commit 74138aa: an fp32 ``scale_mul`` parameter and
F.normalize on q/k right before flash_attn_func. Under CUDA fp16/bf16 autocast q and k reach
flash-attn as float32."""
import functools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None


class SelfAttention(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.mat_qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.scale_mul_1H11 = nn.Parameter(torch.full((1, 1, heads, 1), 4.0).log())
        self.max_scale_mul = math.log(100)
        self.scale = 1.0

    def forward(self, x):
        B, L, C = x.shape
        qkv = self.mat_qkv(x).view(B, L, 3, self.heads, self.head_dim)
        q, k, v = qkv.unbind(dim=2)
        scale_mul = self.scale_mul_1H11.clamp_max(self.max_scale_mul).exp()  # ORIGIN
        q = F.normalize(q, dim=-1).mul(scale_mul)  # PROMOTE-Q
        k = F.normalize(k, dim=-1)  # PROMOTE-K
        oup = flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=self.scale)  # SINK
        return self.proj(oup.reshape(B, L, C))


class Block(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads)

    def forward(self, x):
        return x + self.attn(self.ln(x))


class VARToy(nn.Module):
    def __init__(self, depth=2, dim=64, heads=4):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def build(dtype=None, keep_scale_fp32=False, device=None):
    model = VARToy()
    if dtype is not None:
        model = model.to(getattr(torch, dtype))
        if keep_scale_fp32:
            for b in model.blocks:
                b.attn.scale_mul_1H11.data = b.attn.scale_mul_1H11.data.float()
    x = torch.randn(2, 8, 64, dtype=getattr(torch, dtype) if dtype else torch.float32)
    return model, x


build_fp32 = functools.partial(build)
build_bf16 = functools.partial(build, "bfloat16")
build_fp16 = functools.partial(build, "float16")
build_bf16_fp32_scale = functools.partial(build, "bfloat16", True)
build_fp16_fp32_scale = functools.partial(build, "float16", True)
