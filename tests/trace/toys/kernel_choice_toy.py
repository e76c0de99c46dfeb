"""One attention block per call pattern of issue 32's table: the same attention, called in a way
that gets SDPA's fastest kernel (is_causal=True) or one that falls back. Each call's line ends with
a marker the tests look for. Shapes default to the issue's (B=4, H=16, T=2048, D=128); the CPU
tests make them small."""

import torch
import torch.nn.functional as F

PATTERNS = ("causal", "tril", "additive", "fp32", "headdim320", "strided", "dropout", "mqa", "gqa_mask")


class Block(torch.nn.Module):
    def __init__(self, pattern, heads, head_dim):
        super().__init__()
        self.pattern, self.heads, self.head_dim = pattern, heads, head_dim
        width = heads * head_dim
        kv = 1 if pattern == "mqa" else (heads // 4 if pattern == "gqa_mask" else heads)
        self.kv_heads = kv
        self.q = torch.nn.Linear(width, width, bias=False)
        self.kv = torch.nn.Linear(width, 2 * kv * head_dim, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2).contiguous()
        k, v = self.kv(x).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4).contiguous().unbind(0)
        p = self.pattern
        if p in ("causal", "fp32", "headdim320"):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # causal
        if p == "tril":
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # tril
        if p == "additive":
            mask = torch.zeros(t, t, device=x.device).masked_fill(
                torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf")).to(q.dtype)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # additive
        if p == "strided":
            q = torch.cat([q, q], dim=-1)[..., ::2]  # a view whose last dimension has stride 2
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # strided
        if p == "dropout":
            return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)  # dropout
        if p == "mqa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # mqa
        if p == "gqa_mask":
            keep = torch.ones(b, 1, t, t, dtype=torch.bool, device=x.device).tril()
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)  # gqa_mask
        raise ValueError(p)


def build(pattern="causal", batch=4, heads=16, seq=2048, head_dim=None, device=None, train=False):
    head_dim = head_dim or (320 if pattern == "headdim320" else 128)
    dtype = torch.float32 if pattern == "fp32" else torch.bfloat16
    model = Block(pattern, heads, head_dim).to(dtype)
    x = torch.randn(batch, seq, heads * head_dim, dtype=dtype)
    if device is not None:
        model, x = model.to(device), x.to(device)
    if train:
        model.train()
    return model, (x,)
