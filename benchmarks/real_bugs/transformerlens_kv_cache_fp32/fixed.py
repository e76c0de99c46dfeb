"""TransformerLensOrg/TransformerLens, transformer_lens/cache/key_value_cache_entry.py and
components/abstract_attention.py, at 7c95d7c6 (the fix applied).

TransformerLensKeyValueCacheEntry.init_cache_entry makes the empty past keys/values with
torch.get_default_dtype() (float32). A float16 model's first append, torch.cat([past_keys,
new_keys]), promotes k and v to float32, and the score matmul q_ @ k_ raises ("expected scalar
type Half but found Float"), so generate(use_past_kv_cache=True) fails for every reduced-precision
model. The fix (7c95d7c6, PR #1260) uses cfg.dtype. Cut down to the cache entry and an
attention-only causal transformer (einops' rearrange and einsum written as permute/einsum,
hooks dropped).
"""
from dataclasses import dataclass
from typing import Union

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class TransformerLensConfig:
    d_model: int
    d_head: int
    n_layers: int
    n_ctx: int
    n_heads: int
    d_vocab: int = 64
    dtype: torch.dtype = torch.float32
    n_key_value_heads: Union[int, None] = None


@dataclass
class TransformerLensKeyValueCacheEntry:
    past_keys: torch.Tensor
    past_values: torch.Tensor
    frozen: bool = False

    @classmethod
    def init_cache_entry(
        cls,
        cfg: TransformerLensConfig,
        device: Union[torch.device, str, None],
        batch_size: int = 1,
    ):
        n_heads = cfg.n_key_value_heads if cfg.n_key_value_heads is not None else cfg.n_heads
        return cls(
            past_keys=torch.empty(
                (batch_size, 0, n_heads, cfg.d_head), device=device, dtype=cfg.dtype  # FIX
            ),
            past_values=torch.empty(
                (batch_size, 0, n_heads, cfg.d_head), device=device, dtype=cfg.dtype  # FIX
            ),
        )

    def append(self, new_keys: torch.Tensor, new_values: torch.Tensor):
        updated_keys = torch.cat([self.past_keys, new_keys], dim=1)
        updated_values = torch.cat([self.past_values, new_values], dim=1)
        if not self.frozen:
            self.past_keys = updated_keys
            self.past_values = updated_values
        return updated_keys, updated_values


class Attention(nn.Module):
    def __init__(self, cfg: TransformerLensConfig):
        super().__init__()
        self.cfg = cfg
        self.W_Q = nn.Parameter(torch.empty(cfg.n_heads, cfg.d_model, cfg.d_head))
        self.W_K = nn.Parameter(torch.empty(cfg.n_heads, cfg.d_model, cfg.d_head))
        self.W_V = nn.Parameter(torch.empty(cfg.n_heads, cfg.d_model, cfg.d_head))
        self.W_O = nn.Parameter(torch.empty(cfg.n_heads, cfg.d_head, cfg.d_model))
        for w in (self.W_Q, self.W_K, self.W_V, self.W_O):
            nn.init.normal_(w, std=0.05)
        causal_mask = torch.tril(torch.ones((cfg.n_ctx, cfg.n_ctx)).bool())
        self.register_buffer("mask", causal_mask)
        self.register_buffer("IGNORE", torch.tensor(-torch.inf))
        self.attn_scale = cfg.d_head ** 0.5

    def forward(self, x, past_kv_cache_entry=None):
        q = torch.einsum("bpm,hmd->bphd", x, self.W_Q)
        k = torch.einsum("bpm,hmd->bphd", x, self.W_K)
        v = torch.einsum("bpm,hmd->bphd", x, self.W_V)

        if past_kv_cache_entry is not None:
            kv_cache_pos_offset = past_kv_cache_entry.past_keys.size(1)
            k, v = past_kv_cache_entry.append(k, v)
        else:
            kv_cache_pos_offset = 0

        attn_scores = self.calculate_attention_scores(q, k)  # [batch, head_index, query_pos, key_pos]
        attn_scores = self.apply_causal_mask(attn_scores, kv_cache_pos_offset)
        pattern = F.softmax(attn_scores, dim=-1)
        pattern = torch.where(torch.isnan(pattern), torch.zeros_like(pattern), pattern)
        pattern = pattern.to(device=v.device, dtype=v.dtype)
        z = self.calculate_z_scores(v, pattern)  # [batch, pos, head_index, d_head]
        return torch.einsum("bphd,hdm->bpm", z, self.W_O)

    def calculate_attention_scores(self, q, k):
        q_ = q.permute(0, 2, 1, 3)  # batch head_index query_pos d_head
        k_ = k.permute(0, 2, 3, 1)  # batch head_index d_head key_pos
        attn_scores = q_ @ k_ / self.attn_scale
        return attn_scores

    def calculate_z_scores(self, v, pattern):
        v_ = v.permute(0, 2, 1, 3)  # batch head_index key_pos d_head
        z = pattern @ v_
        return z.permute(0, 2, 1, 3)

    def apply_causal_mask(self, attn_scores, past_kv_pos_offset=0):
        query_ctx_length = attn_scores.size(-2)
        key_ctx_length = attn_scores.size(-1)
        final_mask = self.mask[None, None, -query_ctx_length:, -key_ctx_length:]  # [1, 1, pos, pos]
        return torch.where(final_mask, attn_scores, self.IGNORE)


class AttnOnlyTransformer(nn.Module):
    def __init__(self, cfg: TransformerLensConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.d_vocab, cfg.d_model)
        self.blocks = nn.ModuleList([Attention(cfg) for _ in range(cfg.n_layers)])
        self.unembed = nn.Linear(cfg.d_model, cfg.d_vocab, bias=False)

    def forward(self, tokens, new_tokens):
        """A prompt pass and one cached decode step, as generate(use_past_kv_cache=True) runs them."""
        cache = [TransformerLensKeyValueCacheEntry.init_cache_entry(self.cfg, tokens.device, tokens.shape[0])
                 for _ in self.blocks]
        for step in (tokens, new_tokens):
            x = self.embed(step)
            for block, entry in zip(self.blocks, cache):
                x = x + block(x, past_kv_cache_entry=entry)
        return self.unembed(x)


def build(dtype="float16", device="cpu"):
    """A 2-layer attention-only model in float16, a 12-token prompt and one more token."""
    torch.manual_seed(0)
    cfg = TransformerLensConfig(d_model=64, d_head=16, n_layers=2, n_ctx=64, n_heads=4, dtype=getattr(torch, dtype))
    model = AttnOnlyTransformer(cfg).to(device=device, dtype=cfg.dtype).eval()  # HookedTransformer(cfg) moves to cfg.dtype
    tokens = torch.randint(0, cfg.d_vocab, (2, 12), device=device)
    new_tokens = torch.randint(0, cfg.d_vocab, (2, 1), device=device)
    return model, (tokens, new_tokens)
