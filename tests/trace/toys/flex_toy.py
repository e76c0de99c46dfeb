"""FlexAttention in a bf16 model whose fp32 scale (a buffer left in float32) promotes q before
flex_attention: compiled, flex_attention refuses the mixed dtypes; eager, it computes in fp32."""
import torch
import torch.nn as nn
from torch.nn.attention.flex_attention import flex_attention


def relative_bias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.01


class FlexBlock(nn.Module):
    def __init__(self, dim=64, heads=4, promote=True, compiled=False):
        super().__init__()
        self.heads, self.head_dim, self.promote = heads, dim // heads, promote
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.attend = torch.compile(flex_attention) if compiled else flex_attention
        self.register_buffer("q_scale", torch.ones(heads, 1, 1, dtype=torch.float32), persistent=False)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.promote:
            q = q * self.q_scale  # PROMOTE-Q
        o = self.attend(q, k, v, score_mod=relative_bias)  # SINK-FLEX
        return self.out(o.transpose(1, 2).reshape(B, L, C))


def _build(promote, compiled=False):
    model = nn.Sequential(FlexBlock(promote=promote, compiled=compiled)).to(torch.bfloat16)
    for block in model:
        block.q_scale = block.q_scale.float()  # a buffer kept in float32 (as rotary tables often are)
    return model, torch.randn(2, 8, 64, dtype=torch.bfloat16)


def build():
    return _build(True)


def build_clean():
    return _build(False)


def build_compiled():
    return _build(True, compiled=True)


def build_compiled_model():
    model, x = _build(True)
    return torch.compile(model), x
