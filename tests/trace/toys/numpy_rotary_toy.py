"""A rotary table computed with numpy (float64) and turned into a tensor in the forward pass:
``torch.from_numpy`` keeps float64, so q and k come out float64 in a bf16 model."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def rotary_table(length, dim):
    inv = 1.0 / (10000 ** (np.arange(0, dim, 2) / dim))
    freqs = np.outer(np.arange(length), inv)
    return np.cos(np.concatenate([freqs, freqs], axis=-1))


class Attention(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        cos = torch.from_numpy(rotary_table(L, self.head_dim)).to(x.device)  # ORIGIN-NP
        q, k = q * cos, k * cos  # PROMOTE-NP
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, L, C)  # SINK-NP


def build():
    model = nn.Sequential(Attention(), Attention()).to(torch.bfloat16)
    return model, torch.randn(1, 8, 64, dtype=torch.bfloat16)
