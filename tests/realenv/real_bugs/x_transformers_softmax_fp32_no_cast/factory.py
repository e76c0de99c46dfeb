"""x-transformers 1.0.2: attention softmax forced to float32 and never cast back, so the
float32 attention weights meet bf16 values in the attn @ v einsum."""
import torch
from x_transformers import TransformerWrapper, Decoder


def build():
    model = TransformerWrapper(
        num_tokens=256,
        max_seq_len=64,
        attn_layers=Decoder(dim=64, depth=1, heads=4),
    )
    model = model.to(torch.bfloat16)
    tokens = torch.randint(0, 256, (2, 32))
    return model, tokens
