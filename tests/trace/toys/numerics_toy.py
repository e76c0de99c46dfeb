"""One attention block whose training calls meet the cuDNN bugs of recipes/numerics.toml: a padding
mask (non-causal from SDPA's side) at a sequence length the factory takes, a causal call without a
mask, and a single learned query pooling the sequence. Each call's line ends with a marker."""
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, dim=128, heads=2, kind="mask"):
        super().__init__()
        self.kind, self.heads = kind, heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.query = torch.nn.Parameter(torch.randn(1, heads, 1, dim // heads))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in self.qkv(x).split(c, dim=2))
        if self.kind == "causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # SINK-CAUSAL
        if self.kind == "pool":
            return F.scaled_dot_product_attention(self.query.expand(b, -1, -1, -1).to(k.dtype), k, v)  # SINK-POOL
        keep = torch.ones(b, 1, t, t, dtype=torch.bool, device=x.device).tril()  # causal, as a tensor
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # SINK-MASK


def make(device="meta", seq=704, kind="mask"):
    model = Block(kind=kind).to(device)
    return model, (torch.randn(2, seq, 128, device=device),)
