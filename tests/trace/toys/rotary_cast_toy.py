"""A transformers-style rotary whose frequency buffer stays float32 (the library keeps it wide) and
whose angles are still computed in half: both operands cast to the activations' dtype before the
product (the bug), against the same code with the product in float32 and the result cast (healthy)."""
import torch
import torch.nn.functional as F


class Rotary(torch.nn.Module):
    def __init__(self, dim, cast_first):
        super().__init__()
        self.cast_first = cast_first
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        if self.cast_first:
            freqs = (inv.to(x.dtype) @ pos.to(x.dtype)).transpose(1, 2)  # HALF-ANGLES
        else:
            freqs = (inv @ pos).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)  # TRIG


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Block(torch.nn.Module):
    def __init__(self, cast_first, dim=64, heads=4):
        super().__init__()
        self.h = heads
        self.rotary = Rotary(dim // heads, cast_first)
        self.qkv = torch.nn.Linear(dim, 3 * dim)

    def forward(self, x, position_ids):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        cos, sin = self.rotary(x, position_ids)
        cos, sin = cos[:, None], sin[:, None]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def build(cast_first=True, seq=16):
    model = Block(cast_first).to(torch.bfloat16)
    # as transformers' from_config(dtype=...) leaves it: the frequencies computed in float32, not
    # rounded by the model's cast
    model.rotary.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 16, 2).float() / 16)), persistent=False)
    return model, (torch.randn(1, seq, 64, dtype=torch.bfloat16), torch.arange(seq)[None])
