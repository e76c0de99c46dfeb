"""kohya-ss/musubi-tuner, src/musubi_tuner/ideogram4/ideogram4_model.py (Ideogram4Transformer),
at d509ab5^.

The forward casts the flow-matching time t in [0, 1] to the bfloat16 parameter dtype with the
inputs; the time embedding scales it by 1e4 and takes sin/cos, so the bfloat16 rounding of t
(steps of 1/256 near 1) moves the phases by up to tens of radians and the adaLN conditioning gets
another timestep's embedding. The fix (d509ab5) leaves t in float32 (the embedding computes in
float32 itself). Cut down to the time embedding, the adaLN modulation and one attention block.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _sinusoidal_embedding(t: torch.Tensor, dim: int, scale: float = 1e4) -> torch.Tensor:
    t = t.to(torch.float32)
    half = dim // 2
    freq = math.log(scale) / (half - 1)
    freq = torch.exp(torch.arange(half, dtype=torch.float32, device=t.device) * -freq)
    emb = t.unsqueeze(-1) * freq
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    if dim % 2 == 1:
        emb = F.pad(emb, (0, 1))
    return emb


class Ideogram4EmbedScalar(nn.Module):
    def __init__(self, dim: int, input_range) -> None:
        super().__init__()
        self.dim = dim
        self.range_min, self.range_max = input_range
        self.mlp_in = nn.Linear(dim, dim, bias=True)
        self.mlp_out = nn.Linear(dim, dim, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(torch.float32)
        scaled = 1e4 * (x - self.range_min) / (self.range_max - self.range_min)
        emb = _sinusoidal_embedding(scaled, self.dim)
        emb = emb.to(self.mlp_in.weight.dtype)
        emb = F.silu(self.mlp_in(emb))
        return self.mlp_out(emb)


class Block(nn.Module):
    def __init__(self, hidden_size, num_heads, adaln_dim):
        super().__init__()
        self.num_heads = num_heads
        self.norm = nn.LayerNorm(hidden_size, eps=1e-6, elementwise_affine=False)
        self.adaln_modulation = nn.Linear(adaln_dim, 3 * hidden_size, bias=True)
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size, bias=False)
        self.out = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, h, adaln_input):
        shift, scale, gate = self.adaln_modulation(adaln_input).chunk(3, dim=-1)
        x = self.norm(h) * (1 + scale) + shift
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, -1)
        return h + gate * self.out(a)


class Ideogram4Transformer(nn.Module):
    def __init__(self, in_channels=16, hidden_size=128, emb_dim=128, num_heads=2, depth=2):
        super().__init__()
        self.input_proj = nn.Linear(in_channels, hidden_size)
        self.t_embedding = Ideogram4EmbedScalar(emb_dim, input_range=(0.0, 1.0))
        self.adaln_proj = nn.Linear(emb_dim, emb_dim)
        self.layers = nn.ModuleList([Block(hidden_size, num_heads, emb_dim) for _ in range(depth)])
        self.final = nn.Linear(hidden_size, in_channels)

    def forward(self, x, t):
        param_dtype = self.input_proj.weight.dtype
        x = x.to(param_dtype)
        t = t.to(param_dtype)  # BUG

        h = self.input_proj(x)
        t_cond = self.t_embedding(t)
        if t.dim() == 1:
            t_cond = t_cond.unsqueeze(1)
        adaln_input = F.silu(self.adaln_proj(t_cond))
        for layer in self.layers:
            h = layer(h, adaln_input)
        return self.final(h).to(torch.float32)


def build(dtype="bfloat16", device="cpu"):
    """bfloat16 weights (--mixed_precision=no with a bf16 DiT): float32 latents and float32 flow
    times t = 0.9137 and 0.4471, 256 image tokens."""
    torch.manual_seed(0)
    model = Ideogram4Transformer().to(device=device, dtype=getattr(torch, dtype)).eval()
    x = torch.randn(2, 256, 16, device=device)
    t = torch.tensor([0.9137, 0.4471], device=device)
    return model, (x, t)
