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
