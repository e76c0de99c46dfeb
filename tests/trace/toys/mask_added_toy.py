"""Attention written out whose scores a float32 causal mask widens (torch.zeros without a dtype,
added to bf16 scores): the weights reach the last product in float32."""
import torch


class Attn(torch.nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.h = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        mask = torch.zeros(t, t).masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        scores = q @ k.transpose(-1, -2) + mask  # MASK-ADDED
        return scores.softmax(-1) @ v


def build():
    m = Attn().to(torch.bfloat16)
    return m, (torch.randn(2, 8, 32, dtype=torch.bfloat16),)
