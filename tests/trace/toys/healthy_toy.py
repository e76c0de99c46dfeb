"""A Llama-like decoder done right: fp32 residual stream under autocast, RMSNorm, rotary table
cast to the activations' dtype, SDPA and flash_attn_func (with its fp32 log-sum-exp output),
explicit casts. Must produce zero findings."""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Rotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x, seq_len):
        t = torch.arange(seq_len, device=x.device, dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq.float())
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, heads, use_flash):
        super().__init__()
        self.heads, self.head_dim, self.use_flash = heads, dim // heads, use_flash
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.rotary = Rotary(self.head_dim)

    def forward(self, x):
        B, L, C = x.shape
        q = self.q_proj(x).view(B, L, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, L, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, L, self.heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(v, L)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.use_flash and flash_attn_func is not None:
            out, lse, _ = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True,
                                          return_attn_probs=True)
            out = out * torch.exp(lse - lse).transpose(1, 2)[..., None].to(out.dtype)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        return self.o_proj(out.reshape(B, L, C))


class Block(nn.Module):
    def __init__(self, dim, heads, use_flash):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.attn = Attention(dim, heads, use_flash)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.SiLU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Decoder(nn.Module):
    def __init__(self, dim=64, heads=4, depth=2, use_flash=False, vocab=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, use_flash) for _ in range(depth))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.norm(x))
        return F.softmax(logits.float(), dim=-1)


def build(dtype=None, use_flash=False, device=None):
    model = Decoder(use_flash=use_flash)
    if dtype:
        model = model.to(getattr(torch, dtype))
    return model, torch.randint(0, 128, (2, 10))


build_fp32 = functools.partial(build)
build_bf16 = functools.partial(build, "bfloat16")
build_fp16 = functools.partial(build, "float16")
build_fp32_flash = functools.partial(build, None, True)
build_bf16_flash = functools.partial(build, "bfloat16", True)
