"""Where a float32 operand got its width, in spellings the walk back once missed: an explicit cast to
float32 of a tensor already float32 (the line that keeps it wide), and a cache's empty placeholder
joined by torch.cat beside the tensor a line made float32."""
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, case):
        super().__init__()
        self.case = case
        self.qkv = torch.nn.Linear(32, 96)
        self.register_buffer("inv", 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)), persistent=False)

    def table(self, n):
        angles = torch.outer(torch.arange(n).float(), self.inv.float()).repeat(1, 2)
        cos = angles.cos()
        return cos.to(dtype=torch.float32)  # KEEPS-WIDE

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, 4, 8).permute(2, 0, 3, 1, 4)
        if self.case == "kept":
            cos = self.table(n)
            q, k = q * cos, k * cos
        else:
            placeholder = torch.tensor([]).view(b, 4, 0, 8)
            v = torch.cat([placeholder, v.float()], dim=-2)  # MADE-WIDE
        return F.scaled_dot_product_attention(q, k, v)


def build(case="kept"):
    return Block(case).to(torch.bfloat16), (torch.randn(2, 16, 32, dtype=torch.bfloat16),)


class Indexed(torch.nn.Module):
    """A relative-position index made floating when the model is built, and positions cast to the
    model's dtype in the forward: both index a tensor, and indices must be integers."""

    def __init__(self, case):
        super().__init__()
        self.case = case
        self.qkv = torch.nn.Linear(32, 96)
        self.table = torch.nn.Parameter(torch.zeros(31, 4))
        coords = torch.arange(16)
        index = coords[:, None] - coords[None, :] + 15
        if case == "buffer":
            index = index.float()  # INDEX-FLOAT
        self.register_buffer("index", index, persistent=False)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, 4, 8).permute(2, 0, 3, 1, 4)
        bias = self.table[self.index].permute(2, 0, 1)[None]
        positions = torch.arange(n)
        if self.case == "positions":
            positions = positions.to(q.dtype)  # POSITIONS-HALF
        keep = torch.ones(n, n, dtype=torch.bool)[positions]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.masked_fill(~keep, float("-inf")))


def build_indexed(case="buffer"):
    return Indexed(case).to(torch.bfloat16), (torch.randn(2, 16, 32, dtype=torch.bfloat16),)


class ChosenFill(torch.nn.Module):
    """The fill value chosen in a variable lines above the masked_fill that uses it."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, 4, 8).permute(2, 0, 3, 1, 4)
        sim = q @ k.transpose(-1, -2) * 8 ** -0.5
        mask_value = -torch.finfo(torch.float32).max  # FILL-CHOSEN
        causal = torch.ones(n, n, dtype=torch.bool).triu(1)
        sim = sim.masked_fill(causal, mask_value)  # FILL-USED
        return sim.softmax(-1) @ v


def build_chosen_fill():
    return ChosenFill().to(torch.bfloat16), (torch.randn(2, 16, 32, dtype=torch.bfloat16),)
