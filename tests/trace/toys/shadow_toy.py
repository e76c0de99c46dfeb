"""Precision faults that raise nowhere, each in a spelling no rule was written for, beside its fixed
twin: the float64 shadow measures them all. Each factory takes ``fixed`` (the healthy version) and
the dtype. Markers name the lines a finding must point at."""
import math

import torch
import torch.nn.functional as F

HALF = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def timestep_embedding(t, dim, dtype, fixed):
    half = dim // 2
    if fixed:
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        angles = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1).to(dtype)
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=dtype) / half)  # TIMESTEP-FREQS
    angles = t[:, None].to(dtype) * freqs[None]  # TIMESTEP-ANGLES
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)  # TIMESTEP-TRIG


class Timestep(torch.nn.Module):
    """A diffusion block: the timestep's sinusoid added before attention."""

    def __init__(self, fixed, dim=64, heads=4):
        super().__init__()
        self.fixed, self.heads = fixed, heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)

    def forward(self, x, t):
        x = x + timestep_embedding(t, x.shape[-1], x.dtype, self.fixed)[:, None, :]
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v)


def build_timestep(fixed=False, dtype="bfloat16"):
    model = Timestep(fixed).to(HALF[dtype])
    return model, (torch.randn(2, 8, 64, dtype=HALF[dtype]), torch.tensor([999.0, 421.0]))


class CachedRotary(torch.nn.Module):
    """A rotary table cached for every position when the model is built, in the dtype it is given."""

    def __init__(self, dim, fixed, dtype, max_len=1024):
        super().__init__()
        inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        if fixed:
            freqs = torch.outer(torch.arange(max_len).float(), inv)
            self.register_buffer("cos", freqs.cos().to(dtype), persistent=False)
            self.register_buffer("sin", freqs.sin().to(dtype), persistent=False)
        else:
            t = torch.arange(max_len, device=inv.device).to(dtype)  # CACHED-POSITIONS
            freqs = torch.einsum("i,j->ij", t, inv.to(dtype))  # CACHED-ANGLES
            self.register_buffer("cos", freqs.cos(), persistent=False)  # CACHED-TRIG
            self.register_buffer("sin", freqs.sin(), persistent=False)

    def forward(self, x):
        n = x.shape[-2]
        cos, sin = self.cos[:n].repeat(1, 2), self.sin[:n].repeat(1, 2)
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Rotated(torch.nn.Module):
    def __init__(self, fixed, dtype, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim, dtype=dtype)
        self.rotary = CachedRotary(dim // heads, fixed, dtype)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(self.rotary(q), self.rotary(k), v, is_causal=True)


def build_cached(fixed=False, dtype="bfloat16"):
    model = Rotated(fixed, HALF[dtype])
    return model, (torch.randn(1, 32, 64, dtype=HALF[dtype]),)


class Scores(torch.nn.Module):
    """Attention written out in float16 on activations as large as a trained model's (the factory
    scales the projection): q @ k^T overflows unless q is scaled first."""

    def __init__(self, fixed, dim=64, heads=2):
        super().__init__()
        self.fixed, self.heads = fixed, heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        # the output projection and its dropout, as attention modules end (the identity in eval)
        self.out = torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.Dropout(0.1))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scale = q.shape[-1] ** -0.5
        if self.fixed:
            scores = (q * scale) @ k.transpose(-1, -2)
        else:
            scores = (q @ k.transpose(-1, -2)) * scale  # SCORES
        return self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d))


def build_scores(fixed=False, dtype="float16"):
    model = Scores(fixed)
    with torch.no_grad():
        model.qkv.weight.mul_(40.0)
    model = model.to(HALF[dtype])
    return model, (torch.randn(1, 16, 64, dtype=HALF[dtype]) * 4,)


class NumbersMask(torch.nn.Module):
    """A padding mask turned into numbers and added to the scores (masks nothing), in three
    spellings, and the additive mask done right."""

    def __init__(self, spelling, dim=32, heads=4):
        super().__init__()
        self.spelling, self.heads = spelling, heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)

    def forward(self, x, keep):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        m = keep[:, None, None, :]
        if self.spelling == "sdpa":
            mask = m.to(q.dtype)  # NUMBERS-SDPA
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        if self.spelling == "float":
            scores = scores + m.float()  # NUMBERS-FLOAT
        elif self.spelling == "type_as":
            scores = scores + m.type_as(scores)  # NUMBERS-TYPE-AS
        else:
            scores = scores + (1.0 - m.type_as(scores)) * -10000.0
        return scores.softmax(-1) @ v


def build_numbers(spelling="float", dtype="bfloat16"):
    keep = torch.ones(2, 12, dtype=torch.bool)
    keep[:, 9:] = False
    return NumbersMask(spelling).to(HALF[dtype]), (torch.randn(2, 12, 32, dtype=HALF[dtype]), keep)


class Upcast(torch.nn.Module):
    """A float32 relative-position bias added to half scores, and the code upcasting the scores
    itself right before the softmax: the float32 softmax is on purpose."""

    def __init__(self, dim=32, heads=4, n=12):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.register_buffer("bias", torch.zeros(heads, n, n))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) + self.bias.float()
        return scores.float().softmax(-1).to(v.dtype) @ v


def build_upcast():
    return Upcast().to(torch.bfloat16), (torch.randn(2, 12, 32, dtype=torch.bfloat16),)


class Writes(torch.nn.Module):
    """A healthy model that writes into its tensors in place (a cache filled by index, an in-place
    add, a view written through) and draws dropout in training: the shadow follows each."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        cache = torch.zeros(b, self.heads, 2 * n, d // self.heads, dtype=k.dtype)
        cache[:, :, :n] = k
        view = cache[:, :, n:]
        view.add_(1.0)
        view.mul_(0.0)
        k = cache[:, :, :n]
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if self.training else 0.0)
        return self.drop(out)


def build_writes(dtype="bfloat16"):
    return Writes().to(HALF[dtype]), (torch.randn(2, 8, 32, dtype=HALF[dtype]),)


class Regions(torch.nn.Module):
    """Swin's shifted-window mask: region ids subtracted, then nonzero differences filled with -100;
    without the fill the region differences themselves are added to the scores (they mask nothing)."""

    def __init__(self, filled, dim=32, heads=4):
        super().__init__()
        self.filled, self.heads = filled, heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        regions = torch.arange(n) // 4
        mask = (regions[None, :] - regions[:, None]).to(x.dtype)  # REGION-DIFFERENCES
        if self.filled:
            mask = mask.masked_fill(mask != 0, -100.0)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        return (scores + mask).softmax(-1) @ v  # REGIONS-ADDED


def build_regions(filled=False, dtype="bfloat16"):
    return Regions(filled).to(HALF[dtype]), (torch.randn(2, 12, 32, dtype=HALF[dtype]),)


class MinMask(torch.nn.Module):
    """An additive mask of float16's most negative value: added to negative scores it overflows to
    -inf where it masks, which the softmax makes 0 (harmless); a row it masks entirely gives NaN."""

    def __init__(self, whole_row, dim=32, heads=4):
        super().__init__()
        self.whole_row, self.heads = whole_row, heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        keep = torch.ones(n, n, dtype=torch.bool).tril()
        if self.whole_row:
            keep[0] = False
        mask = torch.zeros(n, n, dtype=x.dtype).masked_fill(~keep, torch.finfo(x.dtype).min)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads) - 100.0
        return (scores + mask).softmax(-1) @ v  # MIN-MASK


def build_min_mask(whole_row=False):
    return MinMask(whole_row).to(torch.float16), (torch.randn(2, 12, 32, dtype=torch.float16),)
