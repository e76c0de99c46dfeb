"""RWKV-7 in fla before 0.2.2 (fla-org/flash-linear-attention#301): ``k.addcmul(k * (a - 1),
self.k_a)`` with an fp32 ``k_a`` makes k float32 while r and v stay half precision."""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None


class RWKV7Attention(nn.Module):
    def __init__(self, dim=64, heads=4, sink="flash"):
        super().__init__()
        self.heads, self.head_dim, self.sink = heads, dim // heads, sink
        self.r_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.a_proj = nn.Linear(dim, dim, bias=False)
        self.k_a = nn.Parameter(torch.ones(dim))
        self.o_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        r, k, v = self.r_proj(x), self.k_proj(x), self.v_proj(x)
        a = torch.sigmoid(self.a_proj(x))
        k = k.addcmul(k * (a - 1), self.k_a)  # PROMOTE
        r, k, v = (t.view(B, T, self.heads, self.head_dim) for t in (r, k, v))
        if self.sink == "flash":
            o = flash_attn_func(r, k, v, causal=True)  # SINK-FLASH
        else:
            o = F.scaled_dot_product_attention(r.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)  # SINK-SDPA
        return self.o_proj(o.reshape(B, T, C))


class RWKV7Toy(nn.Module):
    def __init__(self, sink="flash", layers=2):
        super().__init__()
        self.emb = nn.Embedding(100, 64)
        self.layers = nn.ModuleList(RWKV7Attention(sink=sink) for _ in range(layers))

    def forward(self, ids):
        x = self.emb(ids)
        for layer in self.layers:
            x = x + layer(x)
        return x


def build(sink="flash", dtype=None, keep_k_a_fp32=True, device=None):
    model = RWKV7Toy(sink)
    if dtype is not None:
        model = model.to(getattr(torch, dtype))
        if keep_k_a_fp32:
            for layer in model.layers:
                layer.k_a.data = layer.k_a.data.float()
    return model, torch.randint(0, 100, (2, 8))


build_flash = functools.partial(build, "flash")
build_sdpa_bf16 = functools.partial(build, "sdpa", "bfloat16")
build_sdpa_fp16 = functools.partial(build, "sdpa", "float16")
build_sdpa_bf16_clean = functools.partial(build, "sdpa", "bfloat16", False)
