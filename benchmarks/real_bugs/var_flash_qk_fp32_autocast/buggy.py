"""FoundationVision/VAR, models/basic_var.py (SelfAttention), at 74138aa^.

VAR samples under torch.autocast('cuda', dtype=torch.float16) with float32 weights. With
attn_l2_norm, q is F.normalize'd (autocast runs the norm in float32) and multiplied by the float32
parameter scale_mul_1H11, k is F.normalize'd: q and k reach flash_attn_func in float32 while v is
float16, and flash-attn raises "FlashAttention only support fp16 and bf16 data type" (issue #30).
The fix (74138aa) casts q, k, v to qkv's dtype at the call. Cut down to SelfAttention (the
xformers branch and the kv cache dropped) in a pre-norm block.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

flash_attn_func = None
try: from flash_attn import flash_attn_func
except ImportError: pass
try: from torch.nn.functional import scaled_dot_product_attention as slow_attn
except ImportError:
    def slow_attn(query, key, value, scale: float, attn_mask=None, dropout_p=0.0):
        attn = query.mul(scale) @ key.transpose(-2, -1)
        if attn_mask is not None: attn.add_(attn_mask)
        return (F.dropout(attn.softmax(dim=-1), p=dropout_p, inplace=True) if dropout_p > 0 else attn.softmax(dim=-1)) @ value


class SelfAttention(nn.Module):
    def __init__(
        self, block_idx, embed_dim=768, num_heads=12,
        attn_drop=0., proj_drop=0., attn_l2_norm=False, flash_if_available=True,
    ):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.block_idx, self.num_heads, self.head_dim = block_idx, num_heads, embed_dim // num_heads
        self.attn_l2_norm = attn_l2_norm
        if self.attn_l2_norm:
            self.scale = 1
            self.scale_mul_1H11 = nn.Parameter(torch.full(size=(1, self.num_heads, 1, 1), fill_value=4.0).log(), requires_grad=True)
            self.max_scale_mul = torch.log(torch.tensor(100)).item()
        else:
            self.scale = 0.25 / math.sqrt(self.head_dim)

        self.mat_qkv = nn.Linear(embed_dim, embed_dim * 3, bias=False)
        self.q_bias, self.v_bias = nn.Parameter(torch.zeros(embed_dim)), nn.Parameter(torch.zeros(embed_dim))
        self.register_buffer('zero_k_bias', torch.zeros(embed_dim))

        self.proj = nn.Linear(embed_dim, embed_dim)
        self.proj_drop = nn.Dropout(proj_drop, inplace=True) if proj_drop > 0 else nn.Identity()
        self.attn_drop: float = attn_drop
        self.using_flash = flash_if_available and flash_attn_func is not None

    def forward(self, x, attn_bias):
        B, L, C = x.shape

        qkv = F.linear(input=x, weight=self.mat_qkv.weight, bias=torch.cat((self.q_bias, self.zero_k_bias, self.v_bias))).view(B, L, 3, self.num_heads, self.head_dim)

        using_flash = self.using_flash and attn_bias is None and qkv.dtype != torch.float32
        if using_flash: q, k, v = qkv.unbind(dim=2); dim_cat = 1
        else: q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(dim=0); dim_cat = 2

        if self.attn_l2_norm:
            scale_mul = self.scale_mul_1H11.clamp_max(self.max_scale_mul).exp()
            if using_flash: scale_mul = scale_mul.transpose(1, 2)
            q = F.normalize(q, dim=-1).mul(scale_mul)
            k = F.normalize(k, dim=-1)

        dropout_p = self.attn_drop if self.training else 0.0
        if using_flash:
            assert attn_bias is None and qkv.dtype != torch.float32
            oup = flash_attn_func(q, k, v, dropout_p=dropout_p, softmax_scale=self.scale).view(B, L, C)  # BUG
        else:
            oup = slow_attn(query=q, key=k, value=v, scale=self.scale, attn_mask=attn_bias, dropout_p=dropout_p).transpose(1, 2).reshape(B, L, C)

        return self.proj_drop(self.proj(oup))


class Block(nn.Module):
    def __init__(self, block_idx, embed_dim, num_heads, flash_if_available):
        super().__init__()
        self.ln = nn.LayerNorm(embed_dim, elementwise_affine=False)
        self.attn = SelfAttention(block_idx, embed_dim, num_heads, attn_l2_norm=True, flash_if_available=flash_if_available)

    def forward(self, x):
        return x + self.attn(self.ln(x), attn_bias=None)


class TinyVAR(nn.Module):
    def __init__(self, depth=2, embed_dim=128, num_heads=2, flash_if_available=True):
        super().__init__()
        self.blocks = nn.ModuleList([Block(i, embed_dim, num_heads, flash_if_available) for i in range(depth)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def build(dtype="float32", device="cpu", flash_if_available=True):
    """VAR at sampling: float32 weights, run under CUDA autocast float16 (trace with --autocast fp16).
    30 tokens = the first four scales (1 + 4 + 9 + 16)."""
    torch.manual_seed(0)
    model = TinyVAR(flash_if_available=flash_if_available).to(device=device, dtype=getattr(torch, dtype)).eval()
    x = torch.randn(2, 30, 128).to(device=device, dtype=getattr(torch, dtype))
    return model, (x,)
