"""bghira/SimpleTuner, simpletuner/helpers/models/flux2/transformer.py (Flux2AttnProcessor),
at 18590a09f (the fix applied).

torch.nn.RMSNorm is on CUDA autocast's float32 list, so under autocast(bf16) the QK-norm returns
float32 q and k while v stays bfloat16; the rotary application keeps the wider dtype and a
flash-attn backend rejects the mixed dtypes. The fix (18590a09f, PR #3002) casts the normalised
q/k back to v's dtype. Cut down to Flux2Attention with its processor (joint text+image path with
the added projections; diffusers' apply_rotary_emb and dispatch_attention_fn written out: the
flash-attn backend when flash_attn imports, else SDPA) and a rotary table.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

flash_attn_func = None
try:
    from flash_attn import flash_attn_func
except ImportError:
    pass


def apply_rotary_emb(x, freqs_cis, sequence_dim=1):
    """diffusers.models.embeddings.apply_rotary_emb, use_real=True, use_real_unbind_dim=-1."""
    cos, sin = freqs_cis  # [S, D]
    if sequence_dim == 1:
        cos = cos[None, :, None, :]
        sin = sin[None, :, None, :]
    cos, sin = cos.to(x.device), sin.to(x.device)
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)  # [B, S, H, D//2]
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    out = (x.float() * cos + x_rotated.float() * sin).to(x.dtype)
    return out


def dispatch_attention_fn(query, key, value, attn_mask=None, backend=None):
    """(B, S, H, D) in and out."""
    if backend == "flash":
        return flash_attn_func(query, key, value)
    out = F.scaled_dot_product_attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), attn_mask=attn_mask)
    return out.transpose(1, 2)


class Flux2AttnProcessor:
    _attention_backend = None

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)
        if encoder_hidden_states is not None and attn.added_kv_proj_dim is not None:
            encoder_query = attn.add_q_proj(encoder_hidden_states)
            encoder_key = attn.add_k_proj(encoder_hidden_states)
            encoder_value = attn.add_v_proj(encoder_hidden_states)

        query = query.unflatten(-1, (attn.heads, -1))
        key = key.unflatten(-1, (attn.heads, -1))
        value = value.unflatten(-1, (attn.heads, -1))

        query = attn.norm_q(query).to(value.dtype)  # FIX
        key = attn.norm_k(key).to(value.dtype)  # FIX

        if attn.added_kv_proj_dim is not None:
            encoder_query = encoder_query.unflatten(-1, (attn.heads, -1))
            encoder_key = encoder_key.unflatten(-1, (attn.heads, -1))
            encoder_value = encoder_value.unflatten(-1, (attn.heads, -1))

            encoder_query = attn.norm_added_q(encoder_query).to(encoder_value.dtype)  # FIX
            encoder_key = attn.norm_added_k(encoder_key).to(encoder_value.dtype)  # FIX

            query = torch.cat([encoder_query, query], dim=1)
            key = torch.cat([encoder_key, key], dim=1)
            value = torch.cat([encoder_value, value], dim=1)

        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
            key = apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)

        hidden_states = dispatch_attention_fn(query, key, value, attn_mask=attention_mask, backend=self._attention_backend)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.to(query.dtype)

        if encoder_hidden_states is not None:
            encoder_hidden_states, hidden_states = hidden_states.split_with_sizes(
                [encoder_hidden_states.shape[1], hidden_states.shape[1] - encoder_hidden_states.shape[1]], dim=1
            )
            encoder_hidden_states = attn.to_add_out(encoder_hidden_states)
        hidden_states = attn.to_out[0](hidden_states)
        if encoder_hidden_states is not None:
            return hidden_states, encoder_hidden_states
        return hidden_states


class Flux2Attention(nn.Module):
    def __init__(self, query_dim, heads=2, dim_head=64, added_kv_proj_dim=None, eps=1e-6, elementwise_affine=True):
        super().__init__()
        self.heads = heads
        self.inner_dim = dim_head * heads
        self.added_kv_proj_dim = added_kv_proj_dim
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=False)
        self.to_k = nn.Linear(query_dim, self.inner_dim, bias=False)
        self.to_v = nn.Linear(query_dim, self.inner_dim, bias=False)
        self.norm_q = torch.nn.RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.norm_k = torch.nn.RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=False), nn.Dropout(0.0)])
        if added_kv_proj_dim is not None:
            self.norm_added_q = torch.nn.RMSNorm(dim_head, eps=eps)
            self.norm_added_k = torch.nn.RMSNorm(dim_head, eps=eps)
            self.add_q_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=False)
            self.add_k_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=False)
            self.add_v_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=False)
            self.to_add_out = nn.Linear(self.inner_dim, query_dim, bias=False)
        self.processor = Flux2AttnProcessor()

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        return self.processor(self, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb)


def rope_table(seq_len, dim, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), freqs)
    cos = angles.cos().repeat_interleave(2, dim=-1)
    sin = angles.sin().repeat_interleave(2, dim=-1)
    return cos, sin


class TinyFlux2Block(nn.Module):
    def __init__(self, dim=128, heads=2, dim_head=64):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)
        self.norm_context = nn.LayerNorm(dim, elementwise_affine=False)
        self.attn = Flux2Attention(dim, heads=heads, dim_head=dim_head, added_kv_proj_dim=dim)
        self.dim_head = dim_head

    def forward(self, hidden_states, encoder_hidden_states):
        seq = hidden_states.shape[1] + encoder_hidden_states.shape[1]
        cos, sin = rope_table(seq, self.dim_head)
        attn_out, context_out = self.attn(self.norm(hidden_states), self.norm_context(encoder_hidden_states),
                                          image_rotary_emb=(cos, sin))
        return hidden_states + attn_out, encoder_hidden_states + context_out


def build(dtype="float32", device="cpu", attention_backend="flash" if flash_attn_func is not None else None):
    """float32 weights trained under CUDA autocast bfloat16 (SimpleTuner's mixed_precision=bf16;
    trace with --autocast bf16): 256 image tokens and 32 text tokens."""
    torch.manual_seed(0)
    model = TinyFlux2Block().to(device=device, dtype=getattr(torch, dtype))
    model.attn.processor._attention_backend = attention_backend  # SimpleTuner's attention_mechanism setting
    hidden_states = torch.randn(1, 256, 128).to(device=device, dtype=getattr(torch, dtype))
    encoder_hidden_states = torch.randn(1, 32, 128).to(device=device, dtype=getattr(torch, dtype))
    return model, (hidden_states, encoder_hidden_states)
