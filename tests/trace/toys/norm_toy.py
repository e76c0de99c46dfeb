"""CUDA autocast runs LayerNorm in float32 where CPU autocast does not: a q/k norm right before
flash_attn_func sends float32 q and k to flash-attn on the GPU only."""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None


class QKNormAttention(nn.Module):
    def __init__(self, dim=64, heads=4, sink="flash"):
        super().__init__()
        self.heads, self.head_dim, self.sink = heads, dim // heads, sink
        self.qkv = nn.Linear(dim, 3 * dim)
        self.q_norm = nn.LayerNorm(self.head_dim)
        self.k_norm = nn.LayerNorm(self.head_dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.head_dim).unbind(2)
        q = self.q_norm(q)  # PROMOTE-Q
        k = self.k_norm(k)  # PROMOTE-K
        if self.sink == "flash":
            o = flash_attn_func(q, k, v)  # SINK-FLASH
        else:
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)  # SINK-SDPA
        return self.out(o.reshape(B, L, C))


def build(dtype=None, sink="flash", device=None):
    model = nn.Sequential(QKNormAttention(sink=sink), QKNormAttention(sink=sink))
    if dtype:
        model = model.to(getattr(torch, dtype))
    return model, torch.randn(2, 6, 64, dtype=getattr(torch, dtype) if dtype else torch.float32)


build_fp32 = functools.partial(build)
build_bf16 = functools.partial(build, "bfloat16")
build_fp32_sdpa = functools.partial(build, None, "sdpa")
