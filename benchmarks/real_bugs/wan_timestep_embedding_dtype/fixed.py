"""modelscope/DiffSynth-Studio, diffsynth/models/wan_video_dit.py (WanModel), at b8d7d555 (the fix applied).

sinusoidal_embedding_1d computes the timestep table in float64 and returns it in the timestep's
dtype. With the timestep kept in float32 (as it should: 998.39 in bfloat16 is 1000.0), a
bfloat16 Wan DiT's time_embedding Linear raises "mat1 and mat2 must have the same dtype"; the
pipeline's workaround, casting the timestep to bfloat16 first, loses its precision. The fix
(b8d7d555, PR #1025) casts the table to x's dtype. Cut down to the time embedding, the
modulation and one self-attention block (q/k RMSNorm, SDPA), no rope or cross-attention.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def sinusoidal_embedding_1d(dim, position):
    sinusoid = torch.outer(position.type(torch.float64), torch.pow(
        10000, -torch.arange(dim//2, dtype=torch.float64, device=position.device).div(dim//2)))
    x = torch.cat([torch.cos(sinusoid), torch.sin(sinusoid)], dim=1)
    return x.to(position.dtype)


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor):
    return (x * (1 + scale) + shift)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)

    def forward(self, x):
        dtype = x.dtype
        return self.norm(x.float()).to(dtype) * self.weight


class SelfAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int, eps: float = 1e-6):
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = RMSNorm(dim, eps=eps)
        self.norm_k = RMSNorm(dim, eps=eps)

    def forward(self, x):
        b, s, d = x.shape
        q = self.norm_q(self.q(x)).view(b, s, self.num_heads, -1).transpose(1, 2)
        k = self.norm_k(self.k(x)).view(b, s, self.num_heads, -1).transpose(1, 2)
        v = self.v(x).view(b, s, self.num_heads, -1).transpose(1, 2)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.o(x.transpose(1, 2).reshape(b, s, d))


class DiTBlock(nn.Module):
    def __init__(self, dim: int, num_heads: int, ffn_dim: int, eps: float = 1e-6):
        super().__init__()
        self.self_attn = SelfAttention(dim, num_heads, eps)
        self.norm1 = nn.LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(approximate='tanh'), nn.Linear(ffn_dim, dim))
        self.modulation = nn.Parameter(torch.randn(1, 6, dim) / dim**0.5)

    def forward(self, x, t_mod):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            self.modulation.to(dtype=t_mod.dtype, device=t_mod.device) + t_mod).chunk(6, dim=1)
        input_x = modulate(self.norm1(x), shift_msa, scale_msa)
        x = x + gate_msa * self.self_attn(input_x)
        input_x = modulate(self.norm2(x), shift_mlp, scale_mlp)
        x = x + gate_mlp * self.ffn(input_x)
        return x


class WanModel(torch.nn.Module):
    def __init__(self, dim=128, ffn_dim=256, freq_dim=256, num_heads=2, num_layers=2, eps=1e-6):
        super().__init__()
        self.dim = dim
        self.freq_dim = freq_dim
        self.time_embedding = nn.Sequential(
            nn.Linear(freq_dim, dim),
            nn.SiLU(),
            nn.Linear(dim, dim)
        )
        self.time_projection = nn.Sequential(
            nn.SiLU(), nn.Linear(dim, dim * 6))
        self.blocks = nn.ModuleList([DiTBlock(dim, num_heads, ffn_dim, eps) for _ in range(num_layers)])

    def forward(self, x, timestep):
        t = self.time_embedding(  # FIX
            sinusoidal_embedding_1d(self.freq_dim, timestep).to(x.dtype))  # FIX
        t_mod = self.time_projection(t).unflatten(1, (6, self.dim))
        for block in self.blocks:
            x = block(x, t_mod)
        return x


def build(dtype="bfloat16", device="cpu"):
    """The DiT in bfloat16 with the scheduler's float32 timestep (998.3897) and 256 latent tokens."""
    torch.manual_seed(0)
    model = WanModel().to(device=device, dtype=getattr(torch, dtype)).eval()
    x = torch.randn(1, 256, 128).to(device=device, dtype=getattr(torch, dtype))
    timestep = torch.tensor([998.3897], device=device)
    return model, (x, timestep)
