"""diffusers 0.22.3: Custom Diffusion keeps its new key/value projections in float32 (they are the
weights being trained) while the UNet runs in bf16; CustomDiffusionAttnProcessor2_0 feeds the bf16
encoder states straight into those float32 layers on the way to F.scaled_dot_product_attention."""
import torch
from torch import nn
from diffusers.models.attention_processor import Attention, CustomDiffusionAttnProcessor2_0


class CrossAttn(nn.Module):
    def __init__(self, dim=32, ctx_dim=24, heads=2):
        super().__init__()
        self.attn = Attention(query_dim=dim, cross_attention_dim=ctx_dim, heads=heads, dim_head=dim // heads)
        self.attn.to(torch.bfloat16)
        # what train_custom_diffusion.py sets up: train_kv on, train_q_out off, kept in float32
        self.attn.set_processor(CustomDiffusionAttnProcessor2_0(
            train_kv=True, train_q_out=False, hidden_size=dim, cross_attention_dim=ctx_dim))

    def forward(self, x, ctx):
        return self.attn(x, encoder_hidden_states=ctx)


def build():
    model = CrossAttn()
    x = torch.randn(1, 16, 32, dtype=torch.bfloat16)
    ctx = torch.randn(1, 8, 24, dtype=torch.bfloat16)
    return model, (x, ctx)
