"""Model bugs whose fix is on another line than the one that fails: the trace must name that line.
Each class is one that real models shipped (a KV cache whose dtype tests the device, a padding mask
one axis short, 5-D q/k/v, a float32 mask promoting an fp16 model's scores, an all-True mask)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class KVCache(nn.Module):
    def __init__(self, batch, heads, max_len, head_dim, dtype, device=None):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(batch, heads, max_len, head_dim, dtype=dtype, device=device))  # MADE
        self.register_buffer("v_cache", torch.zeros(batch, heads, max_len, head_dim, dtype=dtype, device=device))

    def update(self, k, v):
        n = k.shape[2]
        self.k_cache[:, :, :n] = k
        self.v_cache[:, :, :n] = v
        return self.k_cache[:, :, :n], self.v_cache[:, :, :n]


class CachedAttention(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.cache = None

    def setup_cache(self, batch, device):
        cache_dtype = torch.bfloat16 if device.type == "cuda" else torch.float32  # DECIDED
        self.cache = KVCache(batch, self.heads, 32, self.qkv.in_features // self.heads, cache_dtype, device)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.cache is None:
            self.setup_cache(b, x.device)
        k, v = self.cache.update(k, v)
        return F.scaled_dot_product_attention(q, k, v)


def padding_mask(lengths, max_len):
    mask = torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]
    return mask[:, None, :]  # MASK-MAKER


class PaddedAttention(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, lengths):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = padding_mask(lengths, t)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class FiveDAttention(nn.Module):
    def __init__(self, dim=128, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (y.transpose(1, 2)[:, None] for y in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v)  # FIVE-D


class EagerMaskedAttention(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = torch.triu(torch.full((t, t), float("-inf"), device=x.device), 1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        scores = scores + mask  # PROMOTES
        probs = scores.softmax(-1)
        return probs.to(v.dtype) @ v


class AllTrueMaskAttention(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = torch.ones(b, 1, t, t, dtype=torch.bool, device=x.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # ALL-TRUE


def build_cache():
    return CachedAttention(), torch.randn(1, 8, 64)


def build_padded():
    return PaddedAttention(), (torch.randn(3, 16, 64), torch.tensor([16, 10, 3]))


def build_five_d():
    return FiveDAttention(), torch.randn(2, 64, 128)


def build_eager_masked():
    return EagerMaskedAttention().half(), torch.randn(2, 16, 64).half()


def build_all_true():
    return AllTrueMaskAttention(), torch.randn(2, 32, 64)
