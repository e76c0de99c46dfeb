"""InternLM/InternLM, internlm/model/embedding.py (RotaryEmbedding), at 6108135^.

inv_freq is a registered buffer, so casting the model to bfloat16 casts it too; the cache is then
built from positions made in inv_freq's dtype (torch.arange(..., dtype=self.inv_freq.dtype)) and
an outer product in bfloat16: positions above 256 are rounded and the rotary phases are wrong.
The fix (6108135, PR #239) keeps inv_freq as a plain float32 attribute. Cut down to the
RotaryEmbedding (no xPos scale), a torch version of flash-attn's apply_rotary_emb_qkv_ (the
CUDA kernel it calls) and a packed-qkv attention block with SDPA.
"""
import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def legacy_apply_rotary_embed_qkv(qkv, cos, sin):
    """qkv: (batch, seqlen, 3, nheads, headdim); cos, sin: (seqlen, rotary_dim / 2)."""
    seqlen = qkv.shape[1]
    cos = torch.cat((cos, cos), dim=-1)[:seqlen, None, :]
    sin = torch.cat((sin, sin), dim=-1)[:seqlen, None, :]
    q, k, v = qkv.unbind(dim=2)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    return torch.stack((q, k, v), dim=2)


class RotaryEmbedding(torch.nn.Module):

    def __init__(self, dim: int, base=10000, scale_base=0, device=None):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim))  # BUG
        self.register_buffer("inv_freq", inv_freq)  # BUG
        self.scale_base = scale_base
        self.scale = None

        self._seq_len_cached = 0
        self._cos_cached = None
        self._sin_cached = None

    def _update_cos_sin_cache(self, x, indexes):
        if not isinstance(indexes, int):
            seqlen = indexes.max().item() + 1
        else:
            seqlen = indexes + 1  # eval_forward
        if seqlen > self._seq_len_cached or self._cos_cached.device != x.device or self._cos_cached.dtype != x.dtype:
            self._seq_len_cached = seqlen
            t = torch.arange(seqlen, device=x.device, dtype=self.inv_freq.dtype)
            freqs = torch.outer(t, self.inv_freq.to(device=t.device))
            self._cos_cached = torch.cos(freqs).to(x.dtype)
            self._sin_cached = torch.sin(freqs).to(x.dtype)

    def forward(self, qkv: torch.Tensor, **kwargs):
        return self._eval_forward(qkv)

    def _eval_forward(self, qkv, seqlen_offset=0):
        self._update_cos_sin_cache(qkv, seqlen_offset + qkv.shape[1])
        return legacy_apply_rotary_embed_qkv(
            qkv, self._cos_cached[seqlen_offset:], self._sin_cached[seqlen_offset:]
        )


class MHA(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.rotary_emb = RotaryEmbedding(self.head_dim)
        self.Wqkv = nn.Linear(embed_dim, 3 * embed_dim, bias=True)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=True)

    def forward(self, x):
        b, s, _ = x.shape
        qkv = self.Wqkv(x).view(b, s, 3, self.num_heads, self.head_dim)
        qkv = self.rotary_emb(qkv)
        q, k, v = qkv.unbind(dim=2)
        context = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.out_proj(context.transpose(1, 2).reshape(b, s, -1))


class TinyInternLM(nn.Module):
    def __init__(self, vocab=128, embed_dim=128, num_heads=2, depth=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed_dim)
        self.blocks = nn.ModuleList([MHA(embed_dim, num_heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, vocab, bias=False)

    def forward(self, input_ids):
        x = self.embedding(input_ids)
        for blk in self.blocks:
            x = x + blk(x)
        return self.head(self.norm(x))


def build(dtype="bfloat16", device="cpu"):
    """The model cast to bfloat16 as InternLM trains it (model.to(bf16)), 1024 tokens."""
    torch.manual_seed(0)
    model = TinyInternLM().to(device=device, dtype=getattr(torch, dtype)).eval()
    input_ids = torch.randint(0, 128, (1, 1024), device=device)
    return model, (input_ids,)
