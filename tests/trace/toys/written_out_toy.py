"""bf16 models whose float32 does not reach q/k/v of an attention kernel but breaks the path anyway:
attention written out (matmul, softmax, matmul) with a float32 mask added to its scores or a
softmax asked for float32 and not cast back, and a float32 position table that meets a bf16
Linear or LayerNorm (which raise on a GPU where elementwise ops would promote)."""
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, bug, dim=64, heads=4):
        super().__init__()
        self.bug, self.heads = bug, heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.norm = nn.LayerNorm(dim)
        self.q, self.k = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        if self.bug == "pos_linear":
            x = x + torch.linspace(0, 1, d)  # POS
            q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).transpose(1, 3).unbind(2)  # LINEAR
        elif self.bug == "pos_two_linears":
            table = torch.linspace(0, 1, d)  # TABLE
            table = table.cos()  # TABLE-COS
            table = table[None, None]  # TABLE-VIEW
            x = x + table  # POS-2
            q = self.q(x).view(b, n, self.heads, -1).transpose(1, 2)  # LINEAR-Q
            k = self.k(x).view(b, n, self.heads, -1).transpose(1, 2)  # LINEAR-K
            v = self.qkv(x.to(torch.bfloat16))[..., :d].view(b, n, self.heads, -1).transpose(1, 2)
        elif self.bug == "pos_norm":
            x = self.norm(x + torch.linspace(0, 1, d))  # NORM
            q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).transpose(1, 3).unbind(2)
        else:
            q, k, v = self.qkv(self.norm(x)).view(b, n, 3, self.heads, -1).transpose(1, 3).unbind(2)
        if self.bug == "upcast_scores":
            # GPT-J's and CodeGen's eager attention: the scores in float32, the weights cast back to v's
            # dtype before they meet v (healthy: each product has one dtype)
            q, k = q.to(torch.float32), k.to(torch.float32)
        scores = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
        if self.bug == "mask":
            mask = torch.zeros(n, n)  # MASK
            mask.masked_fill_(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
            scores = scores + mask  # SCORES
        if self.bug == "softmax":
            weights = scores.softmax(dim=-1, dtype=torch.float32)  # SOFTMAX
        else:
            weights = scores.softmax(dim=-1)
        if self.bug == "upcast_scores":
            weights = weights.to(v.dtype)
        out = weights @ v  # PV
        return out.transpose(1, 2).reshape(b, n, d)


def build(bug="none"):
    return Block(bug).to(torch.bfloat16), torch.randn(2, 16, 64, dtype=torch.bfloat16)
