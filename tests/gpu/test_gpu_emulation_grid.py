"""The SDPA emulation held against the GPU: over a grid of calls (dtype x head dim x mask kind x
query / key-value heads and enable_gqa x layout x lengths x gradients) torch's own choice
(``torch._fused_sdp_choice``) and the emulation's (sdpa_select, for this GPU and this torch) must
agree. Every disagreement is printed; ATTN_DOCTOR_GRID_OUT=FILE writes them all as JSON. The
agreement figure is the test's output:

    python -m pytest tests/gpu/test_gpu_emulation_grid.py -m gpu -s
"""

from __future__ import annotations

import itertools
import json
import os

import torch

from attn_doctor.tracing.kernel_choice import kernels, sdpa_select

from .conftest import this_gpu as _this_gpu

DTYPES = ("bfloat16", "float16", "float32")
HEAD_DIMS = (64, 96, 128, 256, 512)
MASKS = ("none", "causal", "bool", "float")
HEADS = ((8, 8, False), (8, 2, True), (8, 2, False), (8, 1, False), (8, 1, True))  # (q heads, kv heads, enable_gqa)
LAYOUTS = ("contiguous", "bshd_view", "last_dim_strided", "five_d")
LENGTHS = ((128, 128), (1, 257), (704, 704))
GRAD = (False, True)




def _tensor(batch, heads, length, dim, dtype, layout, grad):
    if layout == "bshd_view":  # [B, S, H, D] made, viewed as [B, H, S, D]: strided, last dim contiguous
        t = torch.randn(batch, length, heads, dim, device="cuda", dtype=dtype).transpose(1, 2)
    elif layout == "last_dim_strided":
        t = torch.randn(batch, heads, length, 2 * dim, device="cuda", dtype=dtype)[..., ::2]
    elif layout == "five_d":
        t = torch.randn(batch, 1, heads, length, dim, device="cuda", dtype=dtype)
    else:
        t = torch.randn(batch, heads, length, dim, device="cuda", dtype=dtype)
    return t.requires_grad_(grad)


def _call(dtype, dim, mask_kind, heads, layout, lengths, grad):
    hq, hk, gqa = heads
    lq, lk = lengths
    dt = getattr(torch, dtype)
    q = _tensor(2, hq, lq, dim, dt, layout, grad)
    k = _tensor(2, hk, lk, dim, dt, layout, grad)
    v = _tensor(2, hk, lk, dim, dt, layout, grad)
    mask = None
    if mask_kind == "bool":
        mask = torch.ones(lq, lk, dtype=torch.bool, device="cuda").tril(lk - lq)
    elif mask_kind == "float":
        mask = torch.zeros(lq, lk, dtype=dt, device="cuda")
    return q, k, v, mask, 0.0, mask_kind == "causal", gqa


def _grid():
    for combo in itertools.product(DTYPES, HEAD_DIMS, MASKS, HEADS, LAYOUTS, LENGTHS, GRAD):
        dtype, dim, mask_kind, heads, layout, lengths, grad = combo
        if dim == 512 and layout != "contiguous":
            continue  # the layouts are judged at the ordinary head dims
        yield combo


def test_the_emulation_agrees_with_torch_over_the_grid():
    target = _this_gpu()
    rows, disagreements = 0, []
    for combo in _grid():
        dtype, dim, mask_kind, heads, layout, lengths, grad = combo
        q, k, v, mask, dropout, is_causal, gqa = _call(*combo)
        try:
            asked = kernels.ask_torch(q, k, v, mask, dropout, is_causal, gqa)
        except RuntimeError as exc:  # torch refuses the call itself (no kernel): the emulation must too
            asked = {"kernel": None, "error": str(exc).splitlines()[0][:200]}
        call = kernels.describe(q, k, v, mask, dropout, is_causal, gqa, grad)
        emulated = sdpa_select.select(call, target)
        rows += 1
        if asked["kernel"] != emulated["kernel"]:
            disagreements.append({
                "dtype": dtype, "head_dim": dim, "mask": mask_kind, "heads": list(heads), "layout": layout,
                "lengths": list(lengths), "grad": grad, "torch": asked["kernel"], "emulated": emulated["kernel"],
                "torch_refused": asked.get("refused"), "emulated_refused": emulated.get("refused"),
                "error": asked.get("error")})
        del q, k, v, mask
    agree = rows - len(disagreements)
    cap = "sm%d%d" % torch.cuda.get_device_capability(0)
    print("\nSDPA emulation against torch on %s (%s), torch %s, cuDNN %s: %d of %d calls agree (%.1f%%)" % (
        torch.cuda.get_device_name(0), cap, torch.__version__, torch.backends.cudnn.version(), agree, rows,
        100.0 * agree / rows))
    for d in disagreements[:40]:
        print("  disagree: %s" % json.dumps({k: d[k] for k in ("dtype", "head_dim", "mask", "heads", "layout", "lengths",
                                                                 "grad", "torch", "emulated")}))
    out = os.environ.get("ATTN_DOCTOR_GRID_OUT")
    if out:
        with open(out, "w") as fh:
            json.dump({"gpu": torch.cuda.get_device_name(0), "capability": cap, "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "rows": rows, "agree": agree,
                       "disagreements": disagreements}, fh, indent=1)
    assert not disagreements, "%d of %d calls disagree (first: %s)" % (len(disagreements), rows, disagreements[0])
