"""huggingface/diffusers, src/diffusers/models/transformers/transformer_ideogram4.py
(Ideogram4MRoPE), at 33c76774cc (the fix applied).

Ideogram4's image-token positions are IMAGE_POSITION_OFFSET (65536) + (t, h, w). The MRoPE casts
its operands to float32, but the frequency matmul is on autocast's lower-precision list, so under
torch.autocast(bfloat16) it runs in bfloat16, whose step at 65536 is 512: every image position
rounds to the same value and all image tokens get the same rotary embedding (issue #13920). The
fix (33c76774cc, PR #13922) computes the frequencies with autocast disabled. Cut down to the MRoPE,
the attention processor (q/k RMSNorm, rotary, SDPA for dispatch_attention_fn) and a plain
transformer block, with text + image positions built as the pipeline builds them.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

IMAGE_POSITION_OFFSET = 65536


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm, elementwise_affine=True."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        hidden_states = hidden_states * self.weight
        return hidden_states


class Ideogram4MRoPE(nn.Module):
    """Interleaved (t, h, w) rotary embedding."""

    inv_freq: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        base: int,
        mrope_section: tuple,
    ) -> None:
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.mrope_section = tuple(mrope_section)
        self.head_dim = head_dim

    def forward(self, position_ids: torch.Tensor):
        # position_ids: (B, L, 3) integer t, h, w
        if position_ids.ndim != 3 or position_ids.shape[-1] != 3:
            raise ValueError(f"`position_ids` must have shape (B, L, 3), got {tuple(position_ids.shape)}.")
        batch_size, seq_len, _ = position_ids.shape

        # frequencies in float32 whatever autocast is active (positions reach 65536 + grid)
        with torch.autocast(device_type=position_ids.device.type, enabled=False):  # FIX
            pos = position_ids.permute(2, 0, 1).to(dtype=torch.float32)
            inv_freq = self.inv_freq.to(dtype=torch.float32)[None, None, :, None].expand(3, batch_size, -1, 1)
            freqs = inv_freq @ pos.unsqueeze(2)  # FIX
            freqs = freqs.transpose(2, 3)  # (3, B, L, inv_freq_size)

            # interleave: h frequencies at 1 mod 3, w at 2 mod 3
            freqs_t = freqs[0].clone()
            for axis, offset in ((1, 1), (2, 2)):
                length = self.mrope_section[axis] * 3
                idx = torch.arange(offset, length, 3, device=freqs_t.device)
                freqs_t[..., idx] = freqs[axis][..., idx]

            emb = torch.cat((freqs_t, freqs_t), dim=-1)
            return emb.cos(), emb.sin()


class Ideogram4Attention(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.to_q = nn.Linear(hidden_size, hidden_size, bias=False)
        self.to_k = nn.Linear(hidden_size, hidden_size, bias=False)
        self.to_v = nn.Linear(hidden_size, hidden_size, bias=False)
        self.norm_q = RMSNorm(self.head_dim, eps=eps)
        self.norm_k = RMSNorm(self.head_dim, eps=eps)
        self.to_out = nn.ModuleList([nn.Linear(hidden_size, hidden_size, bias=False), nn.Dropout(0.0)])

    def forward(self, hidden_states, attention_mask, image_rotary_emb):
        # Ideogram4AttnProcessor.__call__
        query = self.to_q(hidden_states).unflatten(-1, (self.num_heads, self.head_dim))
        key = self.to_k(hidden_states).unflatten(-1, (self.num_heads, self.head_dim))
        value = self.to_v(hidden_states).unflatten(-1, (self.num_heads, self.head_dim))

        query = self.norm_q(query)
        key = self.norm_k(key)

        cos, sin = image_rotary_emb
        cos = cos.unsqueeze(2)
        sin = sin.unsqueeze(2)
        query = (query * cos) + (_rotate_half(query) * sin)
        key = (key * cos) + (_rotate_half(key) * sin)

        # dispatch_attention_fn (native backend): SDPA in (B, H, L, D)
        hidden_states = F.scaled_dot_product_attention(
            query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), attn_mask=attention_mask
        ).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        return self.to_out[0](hidden_states)


class Block(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.attention_norm1 = RMSNorm(hidden_size, eps=1e-5)
        self.attention = Ideogram4Attention(hidden_size, num_heads)
        self.ffn_norm1 = RMSNorm(hidden_size, eps=1e-5)
        self.feed_forward = nn.Sequential(nn.Linear(hidden_size, 4 * hidden_size), nn.SiLU(), nn.Linear(4 * hidden_size, hidden_size))

    def forward(self, x, rotary_emb):
        x = x + self.attention(self.attention_norm1(x), None, rotary_emb)
        return x + self.feed_forward(self.ffn_norm1(x))


class TinyIdeogram4(nn.Module):
    def __init__(self, hidden_size=128, num_heads=2, depth=2, rope_theta=5_000_000, mrope_section=(12, 10, 10)):
        super().__init__()
        self.rotary_emb = Ideogram4MRoPE(head_dim=hidden_size // num_heads, base=rope_theta, mrope_section=mrope_section)
        self.blocks = nn.ModuleList([Block(hidden_size, num_heads) for _ in range(depth)])

    def forward(self, hidden_states, position_ids):
        rotary_emb = self.rotary_emb(position_ids)
        for block in self.blocks:
            hidden_states = block(hidden_states, rotary_emb)
        return hidden_states


def make_position_ids(num_text, grid_h, grid_w, device="cpu"):
    text = torch.arange(num_text, device=device)[:, None].expand(-1, 3)
    h = torch.arange(grid_h, device=device)[:, None].expand(-1, grid_w).reshape(-1)
    w = torch.arange(grid_w, device=device)[None, :].expand(grid_h, -1).reshape(-1)
    image = IMAGE_POSITION_OFFSET + torch.stack((torch.zeros_like(h), h, w), dim=-1)
    return torch.cat((text, image), dim=0)[None]


def build(dtype="float32", device="cpu"):
    """float32 weights run under torch.autocast(bfloat16), as training and the pipelines wrapped in
    autocast run it (trace with --autocast bf16): 16 text tokens then a 16x16 image grid."""
    torch.manual_seed(0)
    model = TinyIdeogram4().to(device=device, dtype=getattr(torch, dtype)).eval()
    position_ids = make_position_ids(16, 16, 16, device=device)
    hidden_states = torch.randn(1, position_ids.shape[1], 128).to(device=device, dtype=getattr(torch, dtype))
    return model, (hidden_states, position_ids)
