"""Tiny Swin (transformers) in bfloat16: one stage, two blocks, the second one shifted."""
import torch
from transformers import SwinConfig, SwinModel


def build():
    cfg = SwinConfig(
        image_size=32, patch_size=4, num_channels=3, embed_dim=16,
        depths=[2], num_heads=[2], window_size=4,
    )
    # Swin's __init__ calls .item() on a linspace (drop-path rates): build on CPU.
    with torch.device("cpu"):
        model = SwinModel(cfg).eval().to(torch.bfloat16)
    pixel_values = torch.randn(1, 3, 32, 32, dtype=torch.bfloat16)
    return model, (pixel_values,)
