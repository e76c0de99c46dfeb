"""Stability-AI/stablediffusion, ldm/modules/attention.py (CrossAttention), at 6e92cda (the fix applied).

The SD 2.x UNet runs its attention under CUDA autocast in float16. q @ k^T (the first einsum)
overflows float16 on SD 2.1's activations; the fix (6e92cda, PR #89) computes it in float32 with
autocast disabled. Cut down to the CrossAttention module (einops' rearrange written as
reshape/transpose, the masked branch kept) and two blocks; the factory makes large activations
such as SD 2.1's.
"""

import torch
from torch import nn, einsum


def exists(val):
    return val is not None


def default(val, d):
    if exists(val):
        return val
    return d


class CrossAttention(nn.Module):
    def __init__(self, query_dim, context_dim=None, heads=8, dim_head=64, dropout=0.):
        super().__init__()
        inner_dim = dim_head * heads
        context_dim = default(context_dim, query_dim)

        self.scale = dim_head ** -0.5
        self.heads = heads

        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(context_dim, inner_dim, bias=False)

        self.to_out = nn.Sequential(
            nn.Linear(inner_dim, query_dim),
            nn.Dropout(dropout)
        )

    def forward(self, x, context=None, mask=None):
        h = self.heads

        q = self.to_q(x)
        context = default(context, x)
        k = self.to_k(context)
        v = self.to_v(context)

        # rearrange(t, 'b n (h d) -> (b h) n d', h=h)
        q, k, v = map(lambda t: t.reshape(t.shape[0], t.shape[1], h, -1).transpose(1, 2)
                      .reshape(t.shape[0] * h, t.shape[1], -1), (q, k, v))

        # q k^T in float32 with autocast off
        with torch.autocast(enabled=False, device_type = 'cuda'):  # FIX
            q, k = q.float(), k.float()  # FIX
            sim = einsum('b i d, b j d -> b i j', q, k) * self.scale  # FIX
        del q, k

        if exists(mask):
            mask = mask.reshape(mask.shape[0], -1)
            max_neg_value = -torch.finfo(sim.dtype).max
            mask = mask.repeat_interleave(h, dim=0)[:, None, :]
            sim.masked_fill_(~mask, max_neg_value)

        sim = sim.softmax(dim=-1)

        out = einsum('b i j, b j d -> b i d', sim, v)
        # rearrange(out, '(b h) n d -> b n (h d)', h=h)
        out = out.reshape(-1, h, out.shape[1], out.shape[2]).transpose(1, 2).reshape(-1, out.shape[1], h * out.shape[2])
        return self.to_out(out)


class TinySpatialTransformer(nn.Module):
    """Self-attention then cross-attention to a text context, as in BasicTransformerBlock."""

    def __init__(self, dim=128, context_dim=64, heads=2, dim_head=64):
        super().__init__()
        self.attn1 = CrossAttention(dim, heads=heads, dim_head=dim_head)
        self.attn2 = CrossAttention(dim, context_dim=context_dim, heads=heads, dim_head=dim_head)

    def forward(self, x, context):
        x = self.attn1(x) + x
        x = self.attn2(x, context=context) + x
        return x


def build(dtype="float32", device="cpu"):
    """The model as SD 2.x samples it: float32 weights, run under CUDA autocast float16
    (trace with --autocast fp16). Activations of magnitude ~100, as SD 2.1's attention sees."""
    torch.manual_seed(0)
    model = TinySpatialTransformer().to(device=device, dtype=getattr(torch, dtype)).eval()
    x = (torch.randn(1, 256, 128) * 100).to(device=device, dtype=getattr(torch, dtype))
    context = (torch.randn(1, 77, 64) * 100).to(device=device, dtype=getattr(torch, dtype))
    return model, (x, context)
