"""Tiny Wav2Vec2-Conformer (transformers) with rotary self-attention, built in bfloat16 the way
from_pretrained(torch_dtype=torch.bfloat16) builds it: under a bf16 default dtype."""
import torch
from transformers import Wav2Vec2ConformerConfig, Wav2Vec2ConformerModel


def build():
    cfg = Wav2Vec2ConformerConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_feat_extract_layers=2,
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, conv_depthwise_kernel_size=3,
        position_embeddings_type="rotary", do_stable_layer_norm=True,
        hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
        mask_time_prob=0.0,
    )
    # _from_config(torch_dtype=...) builds under that default dtype, as from_pretrained does: the
    # parameters come out bf16, and the rotary inv_freq (made with .float()) stays float32.
    model = Wav2Vec2ConformerModel._from_config(cfg, torch_dtype=torch.bfloat16).eval()
    audio = torch.randn(1, 400, dtype=torch.bfloat16)
    return model, (audio,)
