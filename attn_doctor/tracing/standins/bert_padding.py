"""flash_attn.bert_padding of the flash_attn stand-in (standins/registry.py): pure PyTorch in flash-attn
itself (flash_attn/bert_padding.py), and transformers imports it next to the kernels. unpad_input
returns five values, as from flash-attn 2.6 on."""

from __future__ import annotations


def index_first_axis(x, indices):
    return x.reshape(-1, *x.shape[1:])[indices] if x.dim() > 1 else x[indices]


def unpad_input(hidden_states, attention_mask, unused_mask=None):
    import torch

    mask = attention_mask if unused_mask is None else attention_mask + unused_mask
    seqlens = mask.sum(dim=-1, dtype=torch.int32)
    used = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(mask.flatten(), as_tuple=False).flatten()
    max_seqlen = int(seqlens.max().item()) if hidden_states.device.type != "meta" else mask.shape[-1]
    cu = torch.nn.functional.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return flat[indices], indices, cu, max_seqlen, used


def pad_input(hidden_states, indices, batch, seqlen):
    import torch

    out = torch.zeros(batch * seqlen, *hidden_states.shape[1:], dtype=hidden_states.dtype,
                      device=hidden_states.device)
    out[indices] = hidden_states
    return out.view(batch, seqlen, *hidden_states.shape[1:])
