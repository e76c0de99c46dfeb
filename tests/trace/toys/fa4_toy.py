"""FlashAttention 4 (flash-attn-4, `flash_attn.cute`) in a bf16 model whose fp32 scale (a buffer
left in float32) promotes q before flash_attn_func: FlashAttention 4 asserts one dtype."""
import torch
import torch.nn as nn

try:
    from flash_attn.cute import flash_attn_func
except ImportError:
    flash_attn_func = None


class FA4Block(nn.Module):
    def __init__(self, dim=64, heads=4, head_dim=None, promote=True):
        super().__init__()
        self.heads, self.head_dim, self.promote = heads, head_dim or dim // heads, promote
        self.qkv = nn.Linear(dim, 3 * heads * self.head_dim)
        self.out = nn.Linear(heads * self.head_dim, dim)
        self.register_buffer("q_scale", torch.ones(heads, 1, dtype=torch.float32), persistent=False)

    def forward(self, x):
        B, L, _ = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.head_dim).unbind(2)
        if self.promote:
            q = q * self.q_scale  # PROMOTE-Q
        o, _ = flash_attn_func(q, k, v, causal=True)  # SINK-FA4
        return self.out(o.reshape(B, L, -1))


def _build(promote=True, head_dim=None, dtype=torch.bfloat16, device=None):
    model = nn.Sequential(FA4Block(head_dim=head_dim, promote=promote)).to(dtype)
    for block in model:
        block.q_scale = block.q_scale.float()  # a buffer kept in float32 (as rotary tables often are)
    x = torch.randn(2, 128, 64, dtype=dtype)
    if device is not None:
        model, x = model.to(device), x.to(device)
    return model, x


def build(device=None):
    return _build(device=device)


def build_clean(device=None):
    return _build(promote=False, device=device)


def build_head_dim_512(device=None):
    return _build(promote=False, head_dim=512, device=device)


def build_head_dim_192(device=None):
    return _build(promote=False, head_dim=192, device=device)


def build_fp32(device=None):
    return _build(promote=False, dtype=torch.float32, device=device)
