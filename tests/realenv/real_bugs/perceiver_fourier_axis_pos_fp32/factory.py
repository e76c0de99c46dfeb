"""perceiver-pytorch 0.8.1: the Fourier position features of the input axes are built from a float32
torch.linspace and concatenated to the bf16 input, so the cross-attention context is float32."""
import torch
from perceiver_pytorch import Perceiver


def build():
    model = Perceiver(
        input_channels=3, input_axis=2, num_freq_bands=4, max_freq=10.,
        depth=1, num_latents=16, latent_dim=32, cross_heads=1, latent_heads=2,
        cross_dim_head=16, latent_dim_head=16, num_classes=10, self_per_cross_attn=1,
    ).to(torch.bfloat16)
    img = torch.randn(1, 8, 8, 3, dtype=torch.bfloat16)
    return model, img
