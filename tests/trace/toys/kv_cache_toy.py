"""A decoder whose KV cache is a plain attribute allocated in __init__ with the default dtype
(float32): module.to(bfloat16) leaves it so, and the cached k/v reach SDPA in float32 beside a bf16
q. The fixed build allocates the cache in the model's dtype."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class KVCache(nn.Module):
    def __init__(self, b, h, n, d, dtype=None):
        super().__init__()
        self.k = torch.zeros(b, h, n, d, dtype=dtype)  # CACHE-K
        self.v = torch.zeros(b, h, n, d, dtype=dtype)  # CACHE-V
        self.pos = 0

    def update(self, k, v):
        n = k.shape[2]
        self.k[:, :, self.pos:self.pos + n] = k
        self.v[:, :, self.pos:self.pos + n] = v
        self.pos += n
        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]


class Decoder(nn.Module):
    def __init__(self, dtype=None):
        super().__init__()
        self.qkv = nn.Linear(64, 192)
        self.cache = KVCache(1, 4, 32, 16, dtype)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 4, 16).transpose(1, 3).unbind(2)
        k, v = self.cache.update(k, v)
        return F.scaled_dot_product_attention(q, k, v, is_causal=False)  # SINK


def build(fixed=0):
    m = Decoder(torch.bfloat16 if fixed else None).to(torch.bfloat16)
    return m, torch.randn(1, 8, 64, dtype=torch.bfloat16)
