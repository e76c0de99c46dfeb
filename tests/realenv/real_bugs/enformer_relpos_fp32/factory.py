"""enformer-pytorch 0.8.7: the relative-position basis features are built in float32 and
projected by the bf16 to_rel_k layer on their way into the attention logits."""
import torch
import torch.nn.functional as F
from enformer_pytorch import Enformer


def build():
    model = Enformer.from_hparams(
        dim=96,              # dim // heads must be divisible by 6 (rel-pos feature groups)
        depth=1,
        heads=2,
        attn_dim_key=16,
        num_downsamples=3,
        dim_divisible_by=8,
        output_heads=dict(human=8),
        target_length=-1,
    ).to(torch.bfloat16)
    seq = F.one_hot(torch.randint(0, 4, (1, 128)), 4).to(torch.bfloat16)
    return model, seq
