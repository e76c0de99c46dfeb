"""bf16 models that call attention libraries which do not import here: xformers, FlashAttention 3's
flash_attn_interface, SageAttention and a kernels-hub flash-attn. Each imports its library the way
model code does (so off the GPU the trace reaches it only through the doctor's stand-in) and, in its
bad build, promotes q to float32 with a buffer kept in float32."""
import torch
import torch.nn as nn


class LibBlock(nn.Module):
    def __init__(self, library, dim=64, heads=4, promote=True, bias_dtype=None):
        super().__init__()
        self.library, self.heads, self.head_dim, self.promote = library, heads, dim // heads, promote
        self.bias_dtype = bias_dtype
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.register_buffer("q_scale", torch.ones(self.head_dim), persistent=False)

    def forward(self, x):
        B, L, _ = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.head_dim).unbind(2)
        if self.promote:
            q = q * self.q_scale  # PROMOTE-Q
        o = getattr(self, "_" + self.library)(q, k, v)
        return self.out(o.reshape(B, L, -1))

    def _xformers(self, q, k, v):
        import xformers.ops as xops

        bias = None
        if self.bias_dtype is not None:
            # a float bias of another dtype than q: xformers' checks refuse it
            bias = torch.zeros(q.shape[0], self.heads, q.shape[1], k.shape[1], dtype=self.bias_dtype,
                               device=q.device)
        else:
            bias = xops.LowerTriangularMask()
        return xops.memory_efficient_attention(q, k, v, attn_bias=bias)  # SINK-XFORMERS

    def _fa3(self, q, k, v):
        from flash_attn_interface import flash_attn_func

        out = flash_attn_func(q, k, v, causal=True)  # SINK-FA3
        return out[0] if isinstance(out, tuple) else out

    def _sage(self, q, k, v):
        from sageattention import sageattn

        o = sageattn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)  # SINK-SAGE
        return o.transpose(1, 2)

    def _hub(self, q, k, v):
        from kernels import get_kernel

        flash = get_kernel("kernels-community/flash-attn2")
        out = flash.flash_attn_func(q, k, v, causal=True)  # SINK-HUB
        return out[0] if isinstance(out, (tuple, list)) else out


def _build(library, promote=True, bias_dtype=None, device=None):
    model = nn.Sequential(LibBlock(library, promote=promote, bias_dtype=bias_dtype)).to(torch.bfloat16)
    for block in model:
        block.q_scale = block.q_scale.float()  # a buffer kept in float32 (as rotary tables often are)
    x = torch.randn(2, 128, 64, dtype=torch.bfloat16)
    if device is not None:
        model, x = model.to(device), x.to(device)
    return model, x


def build_xformers(device=None):
    return _build("xformers", device=device)


def build_xformers_clean(device=None):
    return _build("xformers", promote=False, device=device)


def build_xformers_fp32_bias(device=None):
    return _build("xformers", promote=False, bias_dtype=torch.float32, device=device)


def build_fa3(device=None):
    return _build("fa3", device=device)


def build_fa3_clean(device=None):
    return _build("fa3", promote=False, device=device)


def build_sage(device=None):
    return _build("sage", device=device)


def build_sage_clean(device=None):
    return _build("sage", promote=False, device=device)


def build_hub(device=None):
    return _build("hub", device=device)


def build_hub_clean(device=None):
    return _build("hub", promote=False, device=device)
