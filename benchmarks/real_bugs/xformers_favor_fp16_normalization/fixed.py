"""facebookresearch/xformers, xformers/components/attention/favor.py (FavorAttention) and
feature_maps/softmax.py (SMReg), at ba38f9cb (the fix applied).

FAVOR (Performer) linear attention: the positive random features exp(x W + offset) are small
numbers; in float16 the sums k'^T 1 and q' (k'^T 1) underflow and the normalisation att_raw /
att_normalization turns into 0/0 = NaN, and the loss NaNs at once in fp16 training (issue #96).
The fix (ba38f9cb, PR #98) runs the normalisation and the two products in float32 with autocast
off. Cut down to SMReg, FavorAttention (non-causal) and a multi-head wrapper that folds heads into
the batch as MultiHeadDispatch does.
"""
import math
from typing import Optional

import torch
import torch.nn as nn
from torch.cuda.amp import autocast  # FIX


class SMReg(nn.Module):
    """SoftMaxPositiveEstimators.pre_scale + SMReg.forward ("regularized softmax kernel")."""

    def __init__(self, dim_features: int, epsilon: float = 1e-6, softmax_temp: float = -1):
        super().__init__()
        assert dim_features % 2 == 0
        self.dim_features = dim_features
        self.dim_feature_map = dim_features // 2
        self.features: Optional[torch.Tensor] = None
        self.epsilon = epsilon
        self.softmax_temp = softmax_temp
        self.offset = -1.0
        self.h_scale = math.log(math.sqrt(self.dim_features))

    @staticmethod
    @torch.no_grad()
    def _get_random_ortho_matrix(blocks: int, dim: int, device: torch.device) -> torch.Tensor:
        H = torch.randn((blocks, dim, dim), device=device, requires_grad=False)
        Q, R = torch.linalg.qr(H)
        Q = torch.diag_embed(torch.sign(torch.diagonal(R, dim1=1, dim2=2))) @ Q
        return Q

    @torch.no_grad()
    def _get_feature_map(self, dim_input: int, dim_features: int, device: torch.device):
        features = self._get_random_ortho_matrix(
            math.ceil(dim_input / dim_features), dim_features, device=device
        ).flatten(0, 1)
        norms = math.sqrt(dim_input) * torch.ones(features.shape[0], device=device)
        return (torch.diag(norms) @ features)[:dim_input]

    def pre_scale(self, x: torch.Tensor) -> torch.Tensor:
        if self.features is None or self.features.device != x.device:
            self.features = self._get_feature_map(x.shape[-1], self.dim_feature_map, x.device)
        features = self.features
        if features.dtype != x.dtype:
            self.features = features.to(x.dtype)
        if self.softmax_temp < 0:
            self.softmax_temp = x.shape[-1] ** -0.25
        x_scaled = x * self.softmax_temp
        norm_x_2 = torch.einsum("...d,...d->...", x_scaled, x_scaled).unsqueeze(-1)
        self.offset = -0.5 * norm_x_2 - self.h_scale + self.epsilon
        return x_scaled

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_scaled = self.pre_scale(x)
        x_scaled = x_scaled @ self.features
        return torch.cat(
            [torch.exp(x_scaled + self.offset), torch.exp(-x_scaled + self.offset)],
            dim=-1,
        )


class FavorAttention(nn.Module):
    def __init__(self, dim_head: int, dropout: float = 0.0):
        super().__init__()
        self.dim_features = math.ceil(dim_head * (1 + math.log2(dim_head)))
        self.dim_features = 2 * (self.dim_features // 2)
        self.attn_drop = nn.Dropout(dropout, inplace=True)
        self.feature_map_query = SMReg(self.dim_features)
        self.feature_map_key = SMReg(self.dim_features)

    @staticmethod
    def _maybe_promote(x: torch.Tensor) -> torch.Tensor:  # FIX
        return x.float() if x.dtype == torch.float16 else x  # FIX

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        k_prime = self.feature_map_key(k)
        q_prime = self.feature_map_query(q)
        with autocast(enabled=False):  # FIX
            # The random-feature products underflow and overflow in float16: keep them in float32  # FIX
            k_prime = self._maybe_promote(k_prime)  # FIX
            q_prime = self._maybe_promote(q_prime)  # FIX
            v = self._maybe_promote(v)  # FIX

            att_normalization = q_prime @ (  # FIX
                k_prime.transpose(-2, -1) @ torch.ones_like(v)  # FIX
            )  # FIX
            att_raw = q_prime @ (k_prime.transpose(-2, -1) @ v)  # FIX

            att = att_raw / att_normalization  # FIX

        if self.attn_drop is not None:
            att = self.attn_drop(att)

        return att


class MultiHeadDispatch(nn.Module):
    def __init__(self, dim_model=128, num_heads=2):
        super().__init__()
        self.num_heads = num_heads
        self.dim_head = dim_model // num_heads
        self.in_proj = nn.Linear(dim_model, 3 * dim_model)
        self.attention = FavorAttention(self.dim_head)
        self.proj = nn.Linear(dim_model, dim_model)

    def forward(self, x):
        B, S, E = x.shape
        q, k, v = self.in_proj(x).chunk(3, dim=-1)
        fold = lambda t: t.view(B, S, self.num_heads, self.dim_head).transpose(1, 2).flatten(0, 1)
        y = self.attention(fold(q), fold(k), fold(v))
        y = y.view(B, self.num_heads, S, self.dim_head).transpose(1, 2).reshape(B, S, E)
        return self.proj(y)


def build(dtype="float32", device="cpu", scale=3.0):
    """microGPT's setting: float32 weights trained under AMP float16 (Lightning precision=16, CUDA
    autocast; trace with --autocast fp16), 512 tokens whose q and k have the norms a trained
    model's reach (inputs scaled by `scale`)."""
    torch.manual_seed(0)
    model = MultiHeadDispatch().to(device=device, dtype=getattr(torch, dtype)).eval()
    x = (torch.randn(2, 512, 128) * scale).to(device=device, dtype=getattr(torch, dtype))
    return model, (x,)
