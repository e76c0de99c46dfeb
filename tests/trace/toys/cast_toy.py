"""Casts in a bf16 model: a Meta-LLaMA-style complex rotary that computes in float32 (``x.float()``)
and, in its bad build, returns without casting back; a stray float16 buffer meeting bf16 (type
promotion of bfloat16 and float16 gives float32); a ``type_as`` that copies a float32 buffer's
dtype; and a ``type_as`` that copies the dtype of a tensor promoted elsewhere."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def precompute(dim, end):
    freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(end).float()
    return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs))


def rope(x, freqs_cis, cast):
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))  # FLOAT
    out = torch.view_as_real(x_ * freqs_cis).flatten(3)  # ROPE
    return out.type_as(x) if cast else out


class Block(nn.Module):
    def __init__(self, cast, mixed=False, follow=False, follow_k=False):
        super().__init__()
        self.cast, self.mixed, self.follow, self.follow_k = cast, mixed, follow, follow_k
        self.qkv = nn.Linear(64, 192)
        self.freqs_cis = precompute(16, 128)  # a plain attribute: module.to() leaves it complex64
        self.register_buffer("scale", torch.ones(16), persistent=False)

    def forward(self, x):
        B, L, _ = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, 4, 16).unbind(2)
        fc = self.freqs_cis[:L].view(1, L, 1, 8)
        q, k = rope(q, fc, self.cast), rope(k, fc, self.cast)
        if self.mixed:
            q = q * self.scale  # MIXED
        if self.follow:
            q = q.type_as(self.scale)  # FOLLOW
        if self.follow_k:
            k = k * self.scale  # PROMOTE-K
            q = q.type_as(k)  # FOLLOW-K
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)  # SINK
        return o


def _b(cast, mixed=False, follow=False, sdt=None, follow_k=False):
    m = Block(cast, mixed, follow, follow_k).to(torch.bfloat16)
    if sdt:
        m.scale = m.scale.to(sdt)
    return m, torch.randn(2, 128, 64, dtype=torch.bfloat16)

def build_bug():
    return _b(False)


def build_fixed():
    return _b(True)


def build_mixed():
    return _b(True, mixed=True, sdt=torch.float16)


def build_follow():
    return _b(True, follow=True, sdt=torch.float32)


def build_follow_k():
    return _b(True, follow_k=True, sdt=torch.float32)
