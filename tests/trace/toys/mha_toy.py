"""torch's own attention modules (nn.MultiheadAttention, nn.TransformerEncoderLayer) in an fp32
model: under CUDA autocast their fp32 projection weights meet half inputs inside
F.multi_head_attention_forward, and autocast casts each linear and SDPA there."""
import functools

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.emb = nn.Embedding(64, dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, batch_first=True)

    def forward(self, ids):
        x = self.emb(ids)
        y, _ = self.attn(x, x, x, need_weights=False)  # SINK-MHA
        return self.layer(x + y)


def build(dtype=None, device=None):
    model = Model()
    if dtype:
        model = model.to(getattr(torch, dtype))
    return model, torch.randint(0, 64, (1, 8))


build_fp32 = functools.partial(build)
build_bf16 = functools.partial(build, "bfloat16")
