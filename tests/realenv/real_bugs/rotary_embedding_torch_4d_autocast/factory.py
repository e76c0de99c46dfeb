"""rotary-embedding-torch 0.6.1: apply_rotary_emb runs with autocast off and never casts back,
so bf16 queries/keys of shape (b, n, h, d) come out float32 next to bf16 values."""
import torch
from torch import nn
from rotary_embedding_torch import RotaryEmbedding
import torch.nn.functional as F

try:
    from flash_attn import flash_attn_func
except ImportError:  # SDPA fallback, as most repos do
    flash_attn_func = None


class TinyRotaryAttention(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)
        # keys/queries laid out (batch, seq, heads, dim_head) as flash-attn wants them
        self.rotary = RotaryEmbedding(dim=dim // heads, seq_before_head_dim=True)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.to_qkv(x).view(b, n, 3, self.heads, -1).unbind(dim=2)
        q = self.rotary.rotate_queries_or_keys(q)
        k = self.rotary.rotate_queries_or_keys(k)
        if flash_attn_func is not None:
            out = flash_attn_func(q, k, v, causal=True)
        else:
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        return self.to_out(out.reshape(b, n, -1))


def build():
    # fp32 weights, run under bf16 autocast (the usual mixed-precision setup)
    model = TinyRotaryAttention()
    return model, torch.randn(2, 32, 64)
