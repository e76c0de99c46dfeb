"""Tiny CLIP text model (transformers) in bfloat16: one layer, eager attention with the causal mask."""
import torch
from transformers import CLIPTextConfig, CLIPTextModel


def build():
    cfg = CLIPTextConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, max_position_embeddings=32,
    )
    model = CLIPTextModel(cfg).eval().to(torch.bfloat16)
    input_ids = torch.randint(0, 64, (1, 16))
    return model, (input_ids,)
