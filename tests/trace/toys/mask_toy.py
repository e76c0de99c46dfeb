"""Masks by where they come from: a causal mask kept as a buffer made in __init__ (GPT-2 / minGPT),
a mask made from the batch (padding), a sliding window, a learned bias and an ALiBi-style position
bias. Each call's line ends with a marker the tests look for; so does each mask's."""
import math

import torch
import torch.nn.functional as F


class Attention(torch.nn.Module):
    def __init__(self, kind, dim=64, heads=4, block=32, window=4):
        super().__init__()
        self.kind, self.heads, self.window = kind, heads, window
        self.emb = torch.nn.Embedding(16, dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        if kind == "buffer":
            self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))  # BUFFER
        if kind == "learned":
            self.rel = torch.nn.Parameter(torch.zeros(heads, block, block))
        if kind == "alibi":
            slopes = torch.tensor([2 ** (-8 * (h + 1) / heads) for h in range(heads)])
            self.register_buffer("slopes", slopes)

    def forward(self, tokens):
        x = self.emb(tokens)
        b, t, c = x.shape
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in self.qkv(x).split(c, dim=2))
        if self.kind == "buffer":
            mask = self.bias[:, :, :t, :t] == 1
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # SINK-BUFFER
        if self.kind == "padding":
            is_pad = tokens == 0  # PAD
            mask = (is_pad[:, :, None] == is_pad[:, None, :]).tril()[:, None]
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # SINK-PADDING
        if self.kind == "window":
            i = torch.arange(t, device=x.device)[:, None]
            j = torch.arange(t, device=x.device)[None, :]
            mask = (i - j >= 0) & (i - j < self.window)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # SINK-WINDOW
        if self.kind == "learned":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=self.rel[None, :, :t, :t].to(q.dtype))  # SINK-LEARNED
        if self.kind == "alibi":
            pos = torch.arange(t, device=x.device)
            distance = (pos[None, :] - pos[:, None]).to(q.dtype)
            bias = self.slopes[:, None, None].to(q.dtype) * distance
            bias = bias.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), -math.inf)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias[None])  # SINK-ALIBI
        raise ValueError(self.kind)


def build(kind="buffer", padded=False, device=None):
    model = Attention(kind).to(torch.bfloat16)
    tokens = torch.ones(2, 16, dtype=torch.long)
    if padded:
        tokens[1, 12:] = 0
    return model, (tokens,)
