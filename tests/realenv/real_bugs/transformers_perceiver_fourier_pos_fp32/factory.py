"""Tiny Perceiver image classifier with Fourier position features (transformers), in bfloat16."""
import torch
from transformers import PerceiverConfig, PerceiverForImageClassificationFourier


def build():
    # The Fourier preprocessor is fixed to 64 bands over 2 axes: 3 + 2 * (2 * 64 + 1) = 261 channels.
    cfg = PerceiverConfig(
        num_latents=8, d_latents=32, d_model=261, num_blocks=1, num_self_attends_per_block=1,
        num_self_attention_heads=2, num_cross_attention_heads=1, image_size=8, num_labels=4,
        attention_probs_dropout_prob=0.0,
    )
    model = PerceiverForImageClassificationFourier(cfg).eval().to(torch.bfloat16)
    pixel_values = torch.randn(1, 3, 8, 8, dtype=torch.bfloat16)
    return model, (pixel_values,)
