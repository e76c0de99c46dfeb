"""x-transformers 1.25.7 - 1.30.1 style rotary (lucidrains/x-transformers#254): the rotary code
runs with autocast disabled on an fp32 table (here made fp32 by a ``.float()`` a few lines up) and
does not cast back, so q and k come out float32 while v stays bf16."""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None


class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)

    @torch.autocast("cuda", enabled=False)
    def forward(self, seq_len, device):
        t = torch.arange(seq_len, device=device)
        inv_freq = self.inv_freq.float()  # ORIGIN
        freqs = torch.einsum("i , j -> i j", t.type_as(inv_freq), inv_freq)
        return torch.cat((freqs, freqs), dim=-1)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


@torch.autocast("cuda", enabled=False)
def apply_rotary_pos_emb(t, freqs):
    return (t * freqs.cos()) + (rotate_half(t) * freqs.sin())  # PROMOTE


@torch.autocast("cuda", enabled=False)
def apply_rotary_pos_emb_fixed(t, freqs):
    orig_dtype = t.dtype
    out = (t * freqs.cos()) + (rotate_half(t) * freqs.sin())
    return out.type(orig_dtype)


class Attention(nn.Module):
    def __init__(self, dim=64, heads=4, fixed=False, sink="sdpa"):
        super().__init__()
        self.heads, self.fixed, self.sink = heads, fixed, sink
        self.to_qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x, freqs):
        B, N, C = x.shape
        q, k, v = self.to_qkv(x).view(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        rot = apply_rotary_pos_emb_fixed if self.fixed else apply_rotary_pos_emb
        q, k = rot(q, freqs), rot(k, freqs)
        if self.sink == "sdpa":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # SINK-SDPA
        elif self.sink == "eager":
            # attention written out, as transformers' eager_attention_forward: two matmuls
            weights = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * q.shape[-1] ** -0.5, dim=-1)
            out = torch.matmul(weights.to(q.dtype), v)  # SINK-EAGER
        else:
            out = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True).transpose(1, 2)  # SINK-FLASH
        return self.to_out(out.transpose(1, 2).reshape(B, N, C))


class Decoder(nn.Module):
    def __init__(self, depth=2, dim=64, fixed=False, sink="sdpa"):
        super().__init__()
        self.emb = nn.Embedding(256, dim)
        self.rotary = RotaryEmbedding(dim // 4)
        self.layers = nn.ModuleList(Attention(dim, fixed=fixed, sink=sink) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids):
        x = self.emb(ids)
        freqs = self.rotary(ids.shape[1], ids.device)
        for layer in self.layers:
            x = x + layer(x, freqs)
        return self.norm(x)


def build(dtype=None, fixed=False, sink="sdpa", device=None):
    model = Decoder(fixed=fixed, sink=sink)
    if dtype:
        model = model.to(getattr(torch, dtype))
    return model, torch.randint(0, 256, (1, 12))


build_bf16 = functools.partial(build, "bfloat16")
build_fp16 = functools.partial(build, "float16")
build_bf16_fixed = functools.partial(build, "bfloat16", True)
build_fp32 = functools.partial(build)
build_fp32_flash = functools.partial(build, None, False, "flash")
build_fp32_eager = functools.partial(build, None, False, "eager")
build_bf16_eager = functools.partial(build, "bfloat16", False, "eager")
