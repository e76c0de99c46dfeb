"""EleutherAI/gpt-neox, megatron/model/positional_embeddings.py (RotaryEmbedding), at 3bfedf47 (the fix applied).

The cos/sin tables are computed in forward from the inv_freq buffer, which the model's cast to
float16 (DeepSpeed's fp16, model.half()) casts too: positions made with type_as(inv_freq) and the
outer product run in float16, so for large positions the phases are off by up to a radian
(issue #1003: emb[1857, 1] is 1045 instead of 1044.27). The fix (3bfedf47, PR #1041) precomputes
the tables in float32 at construction. Cut down to RotaryEmbedding, the rotary helpers and a
ParallelSelfAttention-like block ([sq, b, np, hn] layout, no model parallelism, SDPA for the
fused softmax path).
"""
import torch
import torch.nn.functional as F
from torch import nn


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, dim, max_seq_len, base=10000, precision=torch.half):  # FIX
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)
        self.seq_len_cached = None
        self.cos_cached = None
        self.sin_cached = None
        self.precision = precision
        self.max_seq_len = max_seq_len  # FIX
        self.base = base  # FIX
        self.dim = dim  # FIX

        # tables computed once, in float32  # FIX
        cos_cached, sin_cached, inv_freq = self._prepare_cache(  # FIX
            max_seq_len, precision, base  # FIX
        )  # FIX

        self.register_buffer("inv_freq", inv_freq)  # FIX
        self.cos_cached = cos_cached  # FIX
        self.sin_cached = sin_cached  # FIX

    def _prepare_cache(self, seq_len, precision, base):  # FIX
        # tables computed once, in float32  # FIX
        inv_freq = 1.0 / (base ** (torch.arange(0, self.dim, 2).float() / self.dim))  # FIX

        t = torch.arange(seq_len).type_as(inv_freq)  # FIX
        freqs = torch.einsum("i,j->ij", t, inv_freq)  # FIX
        emb = torch.cat((freqs, freqs), dim=-1)  # FIX

        cos_cached = emb.cos()[:, None, None, :]  # FIX
        sin_cached = emb.sin()[:, None, None, :]  # FIX

        return (  # FIX
            cos_cached.to(precision),  # FIX
            sin_cached.to(precision),  # FIX
            inv_freq.to(precision),  # FIX
        )  # FIX

    def forward(self, x, seq_dim=0, seq_len=None):  # FIX
        if seq_len is None:
            seq_len = x.shape[seq_dim]

        assert seq_len <= self.max_seq_len  # FIX

        if seq_len != self.max_seq_len:  # FIX
            return (  # FIX
                self.cos_cached[:seq_len, ...].to(x.device),  # FIX
                self.sin_cached[:seq_len, ...].to(x.device),  # FIX
            )  # FIX
        else:  # FIX
            return self.cos_cached.to(x.device), self.sin_cached.to(x.device)  # FIX




def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat(
        (-x2, x1), dim=x1.ndim - 1
    )


def apply_rotary_pos_emb_torch(
    q, k, cos, sin, offset: int = 0
):
    cos, sin = (
        cos[offset : q.shape[0] + offset, ...],
        sin[offset : q.shape[0] + offset, ...],
    )
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class ParallelSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, max_seq_len, params_dtype):
        super().__init__()
        self.num_heads = num_heads
        self.hn = hidden_size // num_heads
        self.query_key_value = nn.Linear(hidden_size, 3 * hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.rotary_emb = RotaryEmbedding(self.hn, base=10000, max_seq_len=max_seq_len, precision=params_dtype)  # FIX

    def forward(self, hidden_states):
        # hidden_states: [sq, b, h]
        sq, b, _ = hidden_states.shape
        mixed_x_layer = self.query_key_value(hidden_states).view(sq, b, self.num_heads, 3 * self.hn)
        query_layer, key_layer, value_layer = torch.split(mixed_x_layer, self.hn, dim=-1)
        seq_len = key_layer.shape[0]
        cos, sin = self.rotary_emb(value_layer, seq_len=seq_len)
        query_layer, key_layer = apply_rotary_pos_emb_torch(query_layer, key_layer, cos, sin, offset=0)
        # [sq, b, np, hn] -> [b, np, sq, hn]
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query_layer, key_layer, value_layer))
        context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        context = context.permute(2, 0, 1, 3).reshape(sq, b, -1)
        return self.dense(context)


class TinyNeoX(nn.Module):
    def __init__(self, vocab=128, hidden_size=128, num_heads=2, depth=2, max_seq_len=2048, params_dtype=torch.half):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden_size)
        self.layers = nn.ModuleList([ParallelSelfAttention(hidden_size, num_heads, max_seq_len, params_dtype) for _ in range(depth)])
        self.final_norm = nn.LayerNorm(hidden_size)
        self.head = nn.Linear(hidden_size, vocab, bias=False)

    def forward(self, input_ids):
        x = self.embed(input_ids).transpose(0, 1)  # [sq, b, h]
        for layer in self.layers:
            x = x + layer(x)
        return self.head(self.final_norm(x)).transpose(0, 1)


def build(dtype="float16", device="cpu"):
    """The model as DeepSpeed fp16 trains it (the whole module cast to float16), 2048 tokens."""
    torch.manual_seed(0)
    params_dtype = getattr(torch, dtype)
    model = TinyNeoX(params_dtype=params_dtype).to(device=device, dtype=params_dtype).eval()
    input_ids = torch.randint(0, 128, (1, 2048), device=device)
    return model, (input_ids,)
