"""NVIDIA-NeMo/Automodel, nemo_automodel/components/models/deepseek_v4/layers.py
(build_causal_padding_mask), at fbfe8eb10 (the fix applied).

The 4-D additive mask is the causal/sliding-window plane (finfo(dtype).min where masked) PLUS a
padding plane (finfo(dtype).min on padded keys): a key masked by both holds min + min, which
overflows to -inf in bfloat16 (-3.39e38 + -3.39e38), the value the sibling builders avoid (the
report: NaN grad_norm at step 0 with a padded batch, NVBugs 6317402). The fix (fbfe8eb10,
PR #2658) overwrites padded key columns with torch.where instead of adding a second plane. Cut
down to the mask builder and eager_attention_with_sink (per-head sink logit), one attention layer.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def build_causal_padding_mask(
    attention_mask,
    seq_len: int,
    dtype: torch.dtype,
    device: torch.device,
    batch_size: int = 1,
    sliding_window=None,
):
    min_value = torch.finfo(dtype).min if dtype.is_floating_point else -1e9
    causal = torch.full((seq_len, seq_len), min_value, dtype=dtype, device=device)
    causal = torch.triu(causal, diagonal=1)
    if sliding_window is not None and sliding_window > 0:
        idx = torch.arange(seq_len, device=device)
        too_old = (idx.unsqueeze(1) - idx.unsqueeze(0)) >= sliding_window
        causal = causal.masked_fill(too_old, min_value)
    causal = causal.unsqueeze(0).unsqueeze(0)
    if attention_mask is None:
        return causal.expand(batch_size, 1, seq_len, seq_len).contiguous()
    if attention_mask.dim() == 4:
        return attention_mask.to(dtype)
    if attention_mask.dim() == 2:
        # 1=valid, 0=padding: write min_value into the padded key columns instead of adding a
        # second min_value plane (min + min overflows to -inf in bfloat16).
        causal = causal.expand(attention_mask.shape[0], 1, seq_len, seq_len)  # FIX
        is_pad_key = (attention_mask == 0).to(device).view(attention_mask.shape[0], 1, 1, seq_len)  # FIX
        return torch.where(is_pad_key, torch.full((), min_value, dtype=dtype, device=device), causal).to(dtype)  # FIX
    raise ValueError(f"Unsupported attention_mask rank: {attention_mask.dim()}")


def eager_attention_with_sink(module, query, key, value, attention_mask, scaling, dropout=0.0):
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask[:, :, :, : attn_weights.shape[-1]]
    sinks = module.sinks
    sinks = sinks.reshape(1, -1, 1, 1).expand(query.shape[0], -1, query.shape[-2], -1)
    combined = torch.cat([attn_weights, sinks.to(attn_weights.dtype)], dim=-1)
    combined = combined - combined.max(dim=-1, keepdim=True).values
    probs = F.softmax(combined, dim=-1, dtype=torch.float32)[..., :-1]
    probs = F.dropout(probs, p=dropout, training=module.training).to(value.dtype)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs


class Attention(nn.Module):
    def __init__(self, hidden_size=128, num_heads=2):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.sinks = nn.Parameter(torch.zeros(num_heads))
        self.scaling = self.head_dim ** -0.5

    def forward(self, hidden_states, attention_mask_4d):
        b, s, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(b, s, self.num_heads, -1).transpose(1, 2)
        k = self.k_proj(hidden_states).view(b, s, self.num_heads, -1).transpose(1, 2)
        v = self.v_proj(hidden_states).view(b, s, self.num_heads, -1).transpose(1, 2)
        out, _ = eager_attention_with_sink(self, q, k, v, attention_mask_4d, self.scaling)
        return self.o_proj(out.reshape(b, s, -1))


class TinyDSV4(nn.Module):
    def __init__(self, hidden_size=128, num_heads=2, depth=2, sliding_window=32):
        super().__init__()
        self.sliding_window = sliding_window
        self.layers = nn.ModuleList([Attention(hidden_size, num_heads) for _ in range(depth)])

    def forward(self, hidden_states, attention_mask):
        attention_mask_4d = build_causal_padding_mask(
            attention_mask,
            seq_len=hidden_states.shape[1],
            dtype=hidden_states.dtype,
            device=hidden_states.device,
            batch_size=hidden_states.shape[0],
            sliding_window=self.sliding_window,
        )
        for layer in self.layers:
            hidden_states = hidden_states + layer(hidden_states, attention_mask_4d)
        return hidden_states


def build(dtype="bfloat16", device="cpu"):
    """A bfloat16 model, a ragged batch of 2 x 64 tokens (the second right-padded after 40)."""
    torch.manual_seed(0)
    model = TinyDSV4().to(device=device, dtype=getattr(torch, dtype))
    hidden_states = torch.randn(2, 64, 128).to(device=device, dtype=getattr(torch, dtype))
    attention_mask = torch.ones(2, 64, dtype=torch.long, device=device)
    attention_mask[1, 40:] = 0
    return model, (hidden_states, attention_mask)
