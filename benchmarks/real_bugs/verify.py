"""Plain-torch check of each real-bug pair: both files build and run (or the buggy one raises as
the real bug did), and the effect is measured against the same model in float64.

    python benchmarks/real_bugs/verify.py [--device cpu|cuda] [--only NAME ...] [--write]

Each folder's meta.json says how the pair runs ("mode": "cast" builds the model in the half
dtype; "autocast" builds float32 weights and runs the forward under torch.autocast in that
dtype), which version is valid in float64 ("reference"), and whether the flash-attn path needs a
dtype-checking stand-in for flash_attn_func where flash-attn is not installed ("flash_stub").
--write stores the numbers under meta.json's "measured_<device>".
"""
import argparse
import importlib.util
import json
import math
import sys
import traceback
import types
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent


def install_flash_stub():
    """A flash_attn module whose flash_attn_func checks dtypes as flash-attn 2 does (its own
    messages) and computes with SDPA; (B, L, H, D) in and out."""
    mod = types.ModuleType("flash_attn")

    def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, **kwargs):
        if q.dtype not in (torch.float16, torch.bfloat16):
            raise RuntimeError("FlashAttention only support fp16 and bf16 data type")
        if k.dtype != q.dtype or v.dtype != q.dtype:
            raise RuntimeError("query and key must have the same dtype")
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             is_causal=causal, scale=softmax_scale)
        return out.transpose(1, 2)

    mod.flash_attn_func = flash_attn_func
    mod.__stub__ = True
    sys.modules["flash_attn"] = mod


def load(path, tag):
    name = f"realbug_{path.parent.name}_{path.stem}_{tag}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for o in out:
            t = first_tensor(o)
            if t is not None:
                return t
    return None


def raised_at(exc, path):
    tb = traceback.extract_tb(exc.__traceback__)
    lines = [f.lineno for f in tb if Path(f.filename).resolve() == path.resolve()]
    return lines[-1] if lines else None


def run(module, path, meta, device, dtype_name, autocast, kwargs_key="factory_kwargs"):
    model, inputs = module.build(dtype=dtype_name, device=device, **meta.get(kwargs_key, {}))
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if autocast:
                with torch.autocast(device_type=device, dtype=getattr(torch, autocast)):
                    out = model(*inputs)
            else:
                out = model(*inputs)
        return model, first_tensor(out), None
    except Exception as exc:  # the buggy pair may raise, as the real bug did
        line = raised_at(exc, path)
        src = path.read_text().splitlines()[line - 1].strip() if line else None
        return model, None, {"type": type(exc).__name__, "message": str(exc).splitlines()[0][:300],
                             "line": line, "source": src}


def compare(out, ref):
    out = out.double()
    err = (out - ref).abs()
    finite = torch.isfinite(out)
    return {
        "nan_or_inf": int((~finite).sum()),
        "max_abs_err": float(err[finite].max()) if finite.any() else None,
        "mean_abs_err": float(err[finite].mean()) if finite.any() else None,
        "ref_max_abs": float(ref.abs().max()),
    }


TABLES = {}  # folder name -> fn(module, model, device, autocast) measuring the faulty table itself


def table(name):
    def deco(fn):
        TABLES[name] = fn
        return fn
    return deco


def _exact_rope(seq_len, dim, base, device):
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim))
    return torch.outer(torch.arange(seq_len, dtype=torch.float64, device=device), inv)


@table("gptneox_rotary_fp16_table")
def _gptneox(mod, model, device, autocast):
    rot = model.layers[0].rotary_emb
    cos = rot.cos_cached[:2048, 0, 0, :].to(device).double()
    exact = _exact_rope(2048, cos.shape[-1], 10000, device)
    exact = torch.cat((exact, exact), dim=-1).cos()
    return {"table_dtype": str(rot.cos_cached.dtype), "cos_max_abs_err": float((cos - exact).abs().max()),
            "cos_err_at_pos_1857_dim_1": float((cos[1857, 1] - exact[1857, 1]).abs())}


@table("internlm_rotary_inv_freq_buffer")
def _internlm(mod, model, device, autocast):
    rot = model.blocks[0].rotary_emb
    cos = rot._cos_cached.double()
    exact = _exact_rope(cos.shape[0], cos.shape[-1] * 2, 10000, device).cos()
    return {"inv_freq_dtype": str(rot.inv_freq.dtype), "table_dtype": str(rot._cos_cached.dtype),
            "cos_max_abs_err": float((cos - exact).abs().max()),
            "cos_max_abs_err_first_256_positions": float((cos[:256] - exact[:256]).abs().max())}


@table("ideogram4_mrope_autocast")
def _ideogram(mod, model, device, autocast):
    pos = mod.make_position_ids(16, 16, 16, device=device)
    with torch.no_grad(), torch.autocast(device_type=device, dtype=getattr(torch, autocast)):
        cos, _ = model.rotary_emb(pos)
    image = cos[0, 16:]
    distinct = torch.unique(image.float(), dim=0).shape[0]
    # exact table in float64 from the same formula
    inv = 1.0 / (5_000_000 ** (torch.arange(0, 64, 2, dtype=torch.float64, device=device) / 64))
    p = pos[0].double()
    freqs = p[:, :, None] * inv[None, None, :]  # (L, 3, 32)
    ft = freqs[:, 0].clone()
    for axis, offset in ((1, 1), (2, 2)):
        idx = torch.arange(offset, model.rotary_emb.mrope_section[axis] * 3, 3, device=device)
        ft[:, idx] = freqs[:, axis][:, idx]
    exact = torch.cat((ft, ft), dim=-1).cos()
    return {"cos_dtype": str(cos.dtype), "distinct_image_token_rows_of_256": int(distinct),
            "cos_max_abs_err": float((cos[0].double() - exact).abs().max())}


@table("musubi_ideogram4_timestep_bf16")
def _musubi(mod, model, device, autocast):
    t = torch.tensor([0.9137, 0.4471], device=device)
    half = 64
    freq = torch.exp(torch.arange(half, dtype=torch.float64, device=device) * -(math.log(1e4) / (half - 1)))
    def emb(tt):
        e = (1e4 * tt.double()).unsqueeze(-1) * freq
        return torch.cat([torch.sin(e), torch.cos(e)], dim=-1)
    t_used = t.to(model.input_proj.weight.dtype) if "t = t.to(param_dtype)" in Path(mod.__file__).read_text() else t
    return {"t_seen_by_embedding": [float(v) for v in t_used.float()],
            "embedding_max_abs_err_vs_float64": float((emb(t_used.float()) - emb(t)).abs().max())}


@table("dsv4_padding_mask_sum_inf")
def _dsv4(mod, model, device, autocast):
    _, (hidden, attention_mask) = mod.build(dtype="bfloat16", device=device)
    m = mod.build_causal_padding_mask(attention_mask, 64, torch.bfloat16, hidden.device, 2, sliding_window=32)
    return {"mask_dtype": str(m.dtype), "mask_cells_-inf": int(torch.isinf(m).sum()),
            "mask_cells_finfo_min": int((m == torch.finfo(torch.bfloat16).min).sum())}


@table("wan_timestep_embedding_dtype")
def _wan(mod, model, device, autocast):
    t32 = torch.tensor([998.3897], device=device)
    exact = mod.sinusoidal_embedding_1d(256, t32.double())
    via_bf16 = mod.sinusoidal_embedding_1d(256, t32.to(torch.bfloat16)).double()
    return {"timestep_in_bf16": float(t32.to(torch.bfloat16)),
            "table_err_if_timestep_cast_to_bf16 (the pipeline's workaround)": float((via_bf16 - exact).abs().max())}


def check_pair(folder, device):
    meta = json.loads((folder / "meta.json").read_text())
    if meta.get("flash_stub"):
        try:
            import flash_attn  # noqa: F401
            stub = getattr(flash_attn, "__stub__", False)
        except ImportError:
            install_flash_stub()
            stub = True
    else:
        sys.modules.pop("flash_attn", None) if getattr(sys.modules.get("flash_attn"), "__stub__", False) else None
        stub = False
    dtype = meta["dtype"]
    autocast = dtype if meta.get("mode") == "autocast" else None
    build_dtype = meta.get("weights_dtype", "float32") if autocast else dtype
    result = {"device": device, "torch": torch.__version__, "dtype": dtype,
              "autocast": bool(autocast), "flash_attn_stand_in": stub}
    torch.manual_seed(0)
    ref_path = folder / f"{meta.get('reference', 'fixed')}.py"
    ref_mod = load(ref_path, "ref")
    _, ref_out, ref_err = run(ref_mod, ref_path, meta, device, "float64", None,
                              "factory_kwargs_reference" if "factory_kwargs_reference" in meta else "factory_kwargs")
    if ref_err:
        result["reference_error"] = ref_err
        return result
    ref = ref_out.double()
    for version in ("buggy", "fixed"):
        path = folder / f"{version}.py"
        mod = load(path, version)
        model, out, err = run(mod, path, meta, device, build_dtype, autocast)
        entry = {"raised": err} if err else compare(out, ref)
        tables = TABLES.get(folder.name)
        if tables is not None:
            try:
                entry["table"] = tables(mod, model, device, autocast)
            except Exception as exc:
                entry["table"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        result[version] = entry
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--json", help="write all results to this file")
    args = ap.parse_args()
    results = {}
    for folder in sorted(p for p in HERE.iterdir() if (p / "meta.json").exists()):
        if args.only and folder.name not in args.only:
            continue
        try:
            res = check_pair(folder, args.device)
        except Exception as exc:
            res = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
        results[folder.name] = res
        print(f"== {folder.name}")
        print(json.dumps(res, indent=1))
        if args.write:
            meta = json.loads((folder / "meta.json").read_text())
            meta[f"measured_{args.device}"] = res
            (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
