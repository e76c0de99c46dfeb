"""A boolean added as a number: to attention scores (a bug: nothing is masked) and in a recurrent gate
(`reset + ~reset * x`, an intended select of 1 where reset is set), before the same attention."""
import torch


class Block(torch.nn.Module):
    def __init__(self, kind, dim=32, heads=4):
        super().__init__()
        self.kind, self.h = kind, heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.gate = torch.nn.Linear(dim, dim)

    def forward(self, x, reset):
        b, t, d = x.shape
        if self.kind == "gate":
            g = torch.sigmoid(self.gate(x))
            x = x * (reset + ~reset * g)  # GATE
        q, k, v = self.qkv(x).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / (d // self.h) ** 0.5
        if self.kind == "scores":
            keep = torch.ones(t, t, dtype=torch.bool).tril()
            scores = scores + keep  # BOOL-ADDED
        return scores.softmax(-1) @ v


def build(kind="scores"):
    x = torch.randn(2, 8, 32)
    reset = torch.zeros(2, 8, 1, dtype=torch.bool)
    reset[:, 0] = True
    return Block(kind), (x, reset)
