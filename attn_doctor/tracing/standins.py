"""Stand-ins and wrappers for attention libraries.

- ``flash_attn`` not importable (a CPU machine, a broken build): a stand-in package is put in
  ``sys.modules`` *before* the model's code is imported, so ``try: from flash_attn import
  flash_attn_func`` takes the branch it takes on the GPU. Its functions enforce flash-attn 2's
  real checks with its real messages (flash_api.cpp order: dtype, same dtype, contiguous last
  dim, head dim), then compute the attention with PyTorch's SDPA so the forward pass goes on
  (nothing runs on ``meta``). The architecture check is left out: the stand-in stands for the GPU.
  It is also an installed distribution to ``importlib.metadata`` (a ``flash_attn-X.dist-info`` in
  a temporary folder on sys.path): libraries that check availability by distribution
  (transformers 5.x indexes ``packages_distributions()["flash_attn"]``) see a consistent install.
- Real libraries that import (flash_attn, flash_attn_interface, xformers, fla, transformers'
  attention dispatch): their public attention functions are wrapped, and every module that did
  ``from lib import fn`` is re-pointed at the wrapper (``rebind``). A wrapper is inert when no
  trace runs.
- fla's Triton kernels on a machine without CUDA: the wrapper records the call and runs nothing
  (returns zeros shaped like the kernel's output).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import math
import os
import sys
import types

from . import sinks, state

STANDIN_FLASH_ATTN_VERSION = os.environ.get("ATTN_DOCTOR_STANDIN_FLASH_ATTN_VERSION", "2.8.3")

_INSTALLED = {}  # what this process installed: name -> "standin" | "wrapped"


def _torch():
    import torch

    return torch


# ---------------------------------------------------------------- flash-attn 2 stand-in


class FlashAttnError(RuntimeError):
    pass


def _check(q, k, v, max_head_dim=256, alibi_slopes=None):
    torch = _torch()
    half = (torch.float16, torch.bfloat16)
    if q.dtype not in half:
        raise FlashAttnError("FlashAttention only support fp16 and bf16 data type")
    if k.dtype != q.dtype:
        raise FlashAttnError("query and key must have the same dtype")
    if v.dtype != q.dtype:
        raise FlashAttnError("query and value must have the same dtype")
    for t in (q, k, v):
        if t.stride(-1) != 1:
            raise FlashAttnError("Input tensor must have contiguous last dimension")
    if q.shape[-1] > max_head_dim:
        raise FlashAttnError("FlashAttention forward only supports head dimension at most %d" % max_head_dim)
    if alibi_slopes is not None and alibi_slopes.dtype != torch.float32:
        raise FlashAttnError("ALiBi slopes must have dtype fp32")


def _attend(q, k, v, softmax_scale=None, causal=False):
    """(B, S, H, D) attention through SDPA, with flash-attn's GQA and bottom-right causal mask."""
    torch = _torch()
    F = torch.nn.functional
    b, sq, hq, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    if hq != hk:
        if hq % hk:
            raise FlashAttnError("Number of heads in key/value must divide number of heads in query")
        k = k.repeat_interleave(hq // hk, dim=2)
        v = v.repeat_interleave(hq // hk, dim=2)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    mask = None
    if causal:
        # flash-attn aligns the causal mask to the bottom right when seqlen_q != seqlen_k.
        i = torch.arange(sq, device=q.device).unsqueeze(1)
        j = torch.arange(sk, device=q.device).unsqueeze(0)
        mask = j <= i + (sk - sq)
    if softmax_scale is not None and softmax_scale != 1.0 / math.sqrt(d):
        # SDPA's scale= came in torch 2.1; scaling q (by a Python number: no promotion) works on 2.0
        qt = qt * (softmax_scale * math.sqrt(d))
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)
    return out.transpose(1, 2)


def _lse(q):
    torch = _torch()
    b, s, h, _ = q.shape
    return torch.zeros(b, h, s, dtype=torch.float32, device=q.device)


# Signatures are flash-attn 2.8.3's (flash_attn/flash_attn_interface.py): callers inspect them
# (transformers >= 5 enables softcap, window_size, ... from the parameter names).


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    def impl(q, k, v, *a, **kw):
        _check(q, k, v, alibi_slopes=kw.get("alibi_slopes"))
        out = _attend(q, k, v, softmax_scale, causal)
        return (out, _lse(q), None) if return_attn_probs else out

    extra = {"alibi_slopes": alibi_slopes} if alibi_slopes is not None else {}
    return _dispatch("flash_attn_func", impl, (q, k, v), extra)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    def impl(qkv, *a, **kw):
        q, k, v = qkv.unbind(dim=2)
        _check(q, k, v, alibi_slopes=alibi_slopes)
        out = _attend(q, k, v, softmax_scale, causal)
        return (out, _lse(q), None) if return_attn_probs else out

    return _dispatch("flash_attn_qkvpacked_func", impl, (qkv,), {})


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    def impl(q, kv, *a, **kw):
        k, v = kv.unbind(dim=2)
        _check(q, k, v, alibi_slopes=alibi_slopes)
        out = _attend(q, k, v, softmax_scale, causal)
        return (out, _lse(q), None) if return_attn_probs else out

    return _dispatch("flash_attn_kvpacked_func", impl, (q, kv), {})


def _varlen(q, k, v, cu_q, cu_k, softmax_scale, causal):
    torch = _torch()
    if q.device.type == "meta":
        return q.new_empty(q.shape[:-1] + (v.shape[-1],))
    outs = []
    bq, bk = cu_q.tolist(), cu_k.tolist()
    for i in range(len(bq) - 1):
        qs, ks = q[bq[i]:bq[i + 1]], k[bk[i]:bk[i + 1]]
        vs = v[bk[i]:bk[i + 1]]
        outs.append(_attend(qs[None], ks[None], vs[None], softmax_scale, causal)[0])
    return torch.cat(outs, 0) if outs else q.new_empty(q.shape[:-1] + (v.shape[-1],))


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    def impl(q, k, v, *a, **kw):
        _check(q, k, v, alibi_slopes=alibi_slopes)
        out = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)
        return (out, None, None) if return_attn_probs else out

    return _dispatch("flash_attn_varlen_func", impl, (q, k, v), {})


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None, causal=False,
                                     window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    def impl(qkv, *a, **kw):
        q, k, v = qkv.unbind(dim=1)
        _check(q, k, v, alibi_slopes=alibi_slopes)
        return _varlen(q, k, v, cu_seqlens, cu_seqlens, softmax_scale, causal)

    return _dispatch("flash_attn_varlen_qkvpacked_func", impl, (qkv,), {})


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                                    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    def impl(q, kv, *a, **kw):
        k, v = kv.unbind(dim=1)
        _check(q, k, v, alibi_slopes=alibi_slopes)
        return _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)

    return _dispatch("flash_attn_varlen_kvpacked_func", impl, (q, kv), {})


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    # Approximation: attends over the whole cache; new k/v are checked but not appended.
    def impl(q, k_cache, v_cache, *a, **kw):
        _check(q, k_cache, v_cache, alibi_slopes=alibi_slopes)
        if k is not None and k.dtype != q.dtype:
            raise FlashAttnError("query and key must have the same dtype")
        out = _attend(q, k_cache, v_cache, softmax_scale, causal)
        return (out, _lse(q)) if return_softmax_lse else out

    return _dispatch("flash_attn_with_kvcache", impl, (q, k_cache, v_cache), {})


def _dispatch(name, impl, args, kwargs):
    tracer = state.ACTIVE[0]
    if tracer is None:
        return impl(*args, **kwargs)
    return tracer.sink_call(sinks.FLASH_ATTN2[name], impl, args, kwargs, standin=True)


# ---------------------------------------------------------------- FlashAttention 4 stand-in

# flash-attn-4 (flash_attn.cute) compiles CuTe DSL kernels for NVIDIA GPUs: it runs nowhere else
# (`inputs must be on CUDA device`). Off the GPU, where it is not importable or the inputs are not
# on CUDA, these enforce its dtype checks with its messages (AssertionError, flash_attn/cute/
# interface.py of 4.0.0b36: v's dtype first, then q and k against v) and compute the attention
# with SDPA. Its head-dim and architecture checks depend on the GPU: the tracer judges those.
STANDIN_FLASH_ATTN_4_VERSION = "4.0.0b36"


def _check_fa4(q, k, v):
    torch = _torch()
    allowed = [torch.float16, torch.bfloat16] + [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2")
                                                 if hasattr(torch, n)]
    if v.dtype not in allowed:
        raise AssertionError("inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2")
    if q.dtype != v.dtype or k.dtype != v.dtype:
        raise AssertionError("q, k, v, and qv must have the same dtype")
    if q.shape[-2] % k.shape[-2]:
        raise AssertionError("num_head must be divisible by num_head_kv")


def _fa4_lse(q, want):
    # FlashAttnFunc returns (out, lse); lse is only computed when asked for or for a backward
    if not want:
        return None
    torch = _torch()
    return torch.zeros(q.shape[0], q.shape[2], q.shape[1], dtype=torch.float32, device=q.device)


def fa4_flash_attn_func(q, k, v, qv=None, gather_kv_indices=None, softmax_scale=None, causal=False,
                        window_size=(None, None), learnable_sink=None, softcap=0.0, num_splits=1, pack_gqa=None,
                        deterministic=False, score_mod=None, score_mod_bwd=None, mask_mod=None, aux_tensors=None,
                        aux_scalars=None, block_sparse_tensors=None, block_sparse_tensors_bwd=None,
                        return_lse=False, gather_bwd_recompute_p=False, gather_bwd_token_chunk=None):
    _check_fa4(q, k, v)
    out = _attend(q, k, v, softmax_scale, causal)
    return out, _fa4_lse(q, return_lse or any(t.requires_grad for t in (q, k, v)))


def fa4_flash_attn_varlen_func(q, k, v, qv=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                               max_seqlen_k=None, min_seqlen_k=None, seqused_q=None, seqused_k=None,
                               gather_kv_indices=None, page_table=None, softmax_scale=None, causal=False,
                               window_size=(None, None), learnable_sink=None, softcap=0.0, num_splits=1,
                               pack_gqa=None, deterministic=False, score_mod=None, score_mod_bwd=None, mask_mod=None,
                               block_sparse_tensors=None, aux_tensors=None, aux_scalars=None, return_lse=False,
                               scheduler_metadata=None, seqlen_k_per_split=None, disable_scheduler_metadata=False,
                               gather_bwd_recompute_p=False, gather_bwd_token_chunk=None):
    _check_fa4(q, k, v)
    if q.dim() == 4:
        return fa4_flash_attn_func(q, k, v, softmax_scale=softmax_scale, causal=causal, return_lse=return_lse)
    out = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)
    lse = None
    if return_lse or any(t.requires_grad for t in (q, k, v)):
        lse = _torch().zeros(q.shape[1], q.shape[0], dtype=_torch().float32, device=q.device)
    return out, lse


FA4_RUNNERS = {"flash_attn_func": fa4_flash_attn_func, "flash_attn_varlen_func": fa4_flash_attn_varlen_func}


def _fa4_standin(name):
    runner = FA4_RUNNERS[name]

    def fn(*args, **kwargs):
        tracer = state.ACTIVE[0]
        if tracer is None:
            return runner(*args, **kwargs)
        return tracer.sink_call(sinks.FLASH_ATTN4[name], runner, args, kwargs, standin=True)

    fn.__name__ = name
    fn.__wrapped__ = runner  # inspect.signature sees flash-attn-4's parameters
    return fn


def make_flash_attn_4_standin():
    cute = _module("flash_attn.cute", is_package=True)
    iface = _module("flash_attn.cute.interface")
    cute.__version__ = STANDIN_FLASH_ATTN_4_VERSION
    for name in FA4_RUNNERS:
        fn = _fa4_standin(name)
        setattr(cute, name, fn)
        setattr(iface, name, fn)
    cute.interface = iface
    return {"flash_attn.cute": cute, "flash_attn.cute.interface": iface}


# ---------------------------------------------------------------- flash_attn.bert_padding

# Pure PyTorch in flash-attn itself (flash_attn/bert_padding.py); transformers imports it next to
# the kernels. unpad_input returns five values from 2.6 on.


def index_first_axis(x, indices):
    return x.reshape(-1, *x.shape[1:])[indices] if x.dim() > 1 else x[indices]


def unpad_input(hidden_states, attention_mask, unused_mask=None):
    torch = _torch()
    mask = attention_mask if unused_mask is None else attention_mask + unused_mask
    seqlens = mask.sum(dim=-1, dtype=torch.int32)
    used = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(mask.flatten(), as_tuple=False).flatten()
    max_seqlen = int(seqlens.max().item()) if hidden_states.device.type != "meta" else mask.shape[-1]
    cu = torch.nn.functional.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return flat[indices], indices, cu, max_seqlen, used


def pad_input(hidden_states, indices, batch, seqlen):
    torch = _torch()
    out = torch.zeros(batch * seqlen, *hidden_states.shape[1:], dtype=hidden_states.dtype,
                      device=hidden_states.device)
    out[indices] = hidden_states
    return out.view(batch, seqlen, *hidden_states.shape[1:])


STANDIN_FUNCTIONS = (
    flash_attn_func, flash_attn_qkvpacked_func, flash_attn_kvpacked_func, flash_attn_varlen_func,
    flash_attn_varlen_qkvpacked_func, flash_attn_varlen_kvpacked_func, flash_attn_with_kvcache,
)


def _module(name, is_package=False):
    mod = types.ModuleType(name)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=is_package)
    if is_package:
        mod.__path__ = []
    mod.__file__ = __file__
    mod.__attn_doctor_standin__ = True
    return mod


def make_flash_attn_standin():
    pkg = _module("flash_attn", is_package=True)
    iface = _module("flash_attn.flash_attn_interface")
    padding = _module("flash_attn.bert_padding")
    pkg.__version__ = STANDIN_FLASH_ATTN_VERSION
    for fn in STANDIN_FUNCTIONS:
        setattr(pkg, fn.__name__, fn)
        setattr(iface, fn.__name__, fn)
    for fn in (index_first_axis, unpad_input, pad_input):
        setattr(padding, fn.__name__, fn)
    pkg.flash_attn_interface = iface
    pkg.bert_padding = padding
    return {"flash_attn": pkg, "flash_attn.flash_attn_interface": iface, "flash_attn.bert_padding": padding}


_DIST = {}  # the stand-in's distribution metadata: {"dir": temporary sys.path entry}


def _install_distribution():
    """A ``flash_attn-VERSION.dist-info`` on a temporary sys.path entry, so ``importlib.metadata``
    (``version("flash-attn")``, ``packages_distributions()``) agrees with ``import flash_attn``."""
    import atexit
    import importlib.metadata
    import shutil
    import tempfile

    if _DIST.get("dir"):
        return
    try:
        importlib.metadata.version("flash_attn")
        return  # a broken real install keeps its own metadata
    except importlib.metadata.PackageNotFoundError:
        pass
    folder = tempfile.mkdtemp(prefix="attn-doctor-standin-")
    info = os.path.join(folder, "flash_attn-%s.dist-info" % STANDIN_FLASH_ATTN_VERSION)
    os.makedirs(info)
    files = {
        "METADATA": "Metadata-Version: 2.1\nName: flash_attn\nVersion: %s\nSummary: attn-doctor stand-in for "
                    "flash-attn (checks and messages only)\n" % STANDIN_FLASH_ATTN_VERSION,
        "top_level.txt": "flash_attn\n",
        "INSTALLER": "attn-doctor\n",
        "RECORD": "",
    }
    for name, text in files.items():
        with open(os.path.join(info, name), "w") as fh:
            fh.write(text)
    sys.path.append(folder)
    importlib.invalidate_caches()
    _DIST["dir"] = folder
    atexit.register(shutil.rmtree, folder, True)
    # A transformers imported before the stand-in read the distributions already.
    iu = sys.modules.get("transformers.utils.import_utils")
    mapping = getattr(iu, "PACKAGE_DISTRIBUTION_MAPPING", None) if iu is not None else None
    if isinstance(mapping, dict) and "flash_attn" not in mapping:
        mapping["flash_attn"] = ["flash_attn"]
        _DIST["patched_mapping"] = mapping


def _remove_distribution():
    import shutil

    folder = _DIST.pop("dir", None)
    if folder:
        if folder in sys.path:
            sys.path.remove(folder)
        shutil.rmtree(folder, ignore_errors=True)
    mapping = _DIST.pop("patched_mapping", None)
    if mapping is not None:
        mapping.pop("flash_attn", None)


def _importable(name):
    """Import ``name``; (True, None) or (False, one-line reason). A missing package is not an error,
    nor is a bare namespace package (flash-attn-4's flash_attn/cute/ holds no FlashAttention 2)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False, None
    if spec is None or (spec.origin in (None, "namespace") and spec.submodule_search_locations):
        return False, None  # the same test as probes/torch_probe.py's installed(), which needs no import here
    try:
        importlib.import_module(name)
        return True, None
    except BaseException as exc:  # noqa: BLE001 - a broken extension may raise anything
        return False, "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "")


def install_standins():
    """Before the model's code is imported: a flash_attn stand-in where flash_attn does not import.

    Returns notes (one line each) saying what was put in place and why.
    """
    notes = []
    mod = sys.modules.get("flash_attn")
    if mod is not None and getattr(mod, "__attn_doctor_standin__", False):
        return notes
    # FlashAttention 4 first, found without importing it (its import costs seconds): flash-attn-4
    # alone installs flash_attn/cute/ in a namespace package flash_attn, which the flash_attn
    # stand-in below replaces; the folders holding cute/ then stay its __path__.
    fa4_paths = _fa4_locations()
    ok, reason = _importable("flash_attn")
    if not ok:
        for key in list(sys.modules):  # a half-imported broken package must not shadow the stand-in
            if (key == "flash_attn" or key.startswith("flash_attn.")) and not (
                    fa4_paths and (key == "flash_attn.cute" or key.startswith("flash_attn.cute."))):
                del sys.modules[key]
        modules = make_flash_attn_standin()
        modules["flash_attn"].__path__ = fa4_paths
        if "flash_attn.cute" in sys.modules:  # FlashAttention 4 imported already: the same modules
            modules["flash_attn"].cute = sys.modules["flash_attn.cute"]
        sys.modules.update(modules)
        _install_distribution()
        _INSTALLED["flash_attn"] = "standin"
        notes.append(
            "flash_attn %s here; using a stand-in that enforces flash-attn %s's checks and messages"
            % ("does not import (" + reason + ")" if reason else "is not installed", STANDIN_FLASH_ATTN_VERSION))
    if not fa4_paths:
        _install_flash_attn_4_standin()
    return notes


def _fa4_locations():
    """The folders of the installed flash_attn package that hold flash-attn-4's cute/ subpackage
    (an installed FlashAttention 4, importable or not: its import says which)."""
    try:
        spec = importlib.util.find_spec("flash_attn")
    except (ImportError, ValueError):
        return []
    locations = list(getattr(spec, "submodule_search_locations", None) or ()) if spec is not None else []
    return [p for p in locations if os.path.isfile(os.path.join(p, "cute", "__init__.py"))]


def _install_flash_attn_4_standin():
    mod = sys.modules.get("flash_attn.cute")
    if mod is not None and getattr(mod, "__attn_doctor_standin__", False):
        return
    parent = sys.modules.get("flash_attn")
    for key in list(sys.modules):
        if key == "flash_attn.cute" or key.startswith("flash_attn.cute."):
            del sys.modules[key]
    modules = make_flash_attn_4_standin()
    sys.modules.update(modules)
    if parent is not None:
        parent.cute = modules["flash_attn.cute"]
    # said only by a trace that called it (fa4_standin_note): most models never import flash_attn.cute
    _INSTALLED["flash_attn.cute"] = (
        "flash_attn.cute (FlashAttention 4) is not installed here; used a stand-in that enforces flash-attn-4 %s's "
        "dtype checks and messages (its head-dim and GPU checks are judged by the tracer)" % STANDIN_FLASH_ATTN_4_VERSION)


def fa4_standin_note(sink_records):
    """The note on FlashAttention 4's stand-in, for a trace whose model called it."""
    note = _INSTALLED.get("flash_attn.cute")
    if note and any(r.get("standin") and r.get("family") == "flash_attn4" for r in sink_records):
        return [note]
    return []


def remove_standins():
    for key in list(sys.modules):
        mod = sys.modules[key]
        if (key == "flash_attn" or key.startswith("flash_attn.")) and getattr(mod, "__attn_doctor_standin__", False):
            del sys.modules[key]
    parent = sys.modules.get("flash_attn")
    if parent is not None and getattr(getattr(parent, "cute", None), "__attn_doctor_standin__", False):
        del parent.cute
    _INSTALLED.pop("flash_attn", None)
    _INSTALLED.pop("flash_attn.cute", None)
    _remove_distribution()


def standin_installed():
    return _INSTALLED.get("flash_attn") == "standin"


# ---------------------------------------------------------------- wrappers of real libraries


def _make_wrapper(spec, original, runner=None):
    """A sink wrapper: inert outside a trace; in one, the call is recorded and judged, then run by
    ``runner(args, kwargs)``'s answer (default: the original)."""
    def wrapper(*args, **kwargs):
        tracer = state.ACTIVE[0]
        if tracer is None:
            return original(*args, **kwargs)
        return tracer.sink_call(spec, original if runner is None else runner(args, kwargs), args, kwargs)

    wrapper.__wrapped__ = original
    wrapper.__name__ = getattr(original, "__name__", "wrapper")
    wrapper.__doc__ = getattr(original, "__doc__", None)
    wrapper.__attn_doctor_wrapper__ = True
    return wrapper


def rebind(replacements):
    """Point every loaded module's global that *is* an original at its wrapper (covers
    ``from flash_attn import flash_attn_func`` done before the wrapping). torch is skipped."""
    if not replacements:
        return 0
    ids = {id(orig): new for orig, new in replacements}
    count = 0
    for name, mod in list(sys.modules.items()):
        if mod is None or name.startswith("torch") or name.startswith("attn_doctor"):
            continue
        count += _repoint(getattr(mod, "__dict__", None), ids)
    return count


def _compiled_original(value):
    """The function a ``torch.compile(fn)`` wrapper compiles, else None."""
    if isinstance(value, types.FunctionType):
        return value.__dict__.get("_torchdynamo_orig_callable")
    return None


def _repoint(d, ids):
    """In one namespace, point every original, and every torch.compile'd wrapper of one, at its
    wrapper: the trace runs eagerly (compiling cannot run under the tracer's TorchFunctionMode)."""
    if not isinstance(d, dict):
        return 0
    count = 0
    for key, value in list(d.items()):
        new = ids.get(id(value))
        if new is None:
            compiled = _compiled_original(value)
            new = ids.get(id(compiled)) if compiled is not None else None
            new = getattr(new, "attn_doctor_compiled", new)  # flex_attention: it ran compiled
        if new is not None and value is not new:
            d[key] = new
            count += 1
    return count


def rebind_model(model, replacements):
    """The model's own attributes that hold an original (``self.attend = flex_attention`` or its
    torch.compile'd wrapper, stored before the trace wrapped it), and the globals its forward
    methods read (a model file loaded by path is in no sys.modules entry rebind() walks)."""
    if not replacements or model is None or not hasattr(model, "modules"):
        return 0
    ids = {id(orig): new for orig, new in replacements}
    count, seen = 0, set()
    for m in model.modules():
        count += _repoint(getattr(m, "__dict__", None), ids)
        if type(m).__module__.startswith("torch"):
            continue
        namespace = getattr(getattr(type(m), "forward", None), "__globals__", None)
        if isinstance(namespace, dict) and id(namespace) not in seen:
            seen.add(id(namespace))
            count += _repoint(namespace, ids)
    return count


def _wrap_module_functions(modname, table):
    mod = sys.modules.get(modname)
    if mod is None or getattr(mod, "__attn_doctor_standin__", False):
        return []
    pairs = []
    for fname, spec in table.items():
        orig = getattr(mod, fname, None)
        if orig is None or getattr(orig, "__attn_doctor_wrapper__", False):
            continue
        pairs.append((orig, _make_wrapper(spec, orig)))
    return pairs


def _wrap_fa4(modname):
    """The real flash-attn-4: on CUDA tensors it runs; elsewhere (meta, CPU) it cannot (`inputs
    must be on CUDA device`), so the stand-in's checks and SDPA run in its place."""
    mod = sys.modules.get(modname)
    if mod is None or getattr(mod, "__attn_doctor_standin__", False):
        return []
    pairs = []
    for fname, spec in sinks.FLASH_ATTN4.items():
        orig = getattr(mod, fname, None)
        if orig is None or getattr(orig, "__attn_doctor_wrapper__", False):
            continue

        def runner(args, kwargs, _orig=orig, _spec=spec, _standin=FA4_RUNNERS[fname]):
            q = _spec.tensors(args, kwargs).get("q")
            return _orig if getattr(getattr(q, "device", None), "type", None) == "cuda" else _standin

        pairs.append((orig, _make_wrapper(spec, orig, runner)))
    return pairs


def _fla_run_nothing_factory(spec):
    def run_nothing(args, kwargs):
        tensors = spec.tensors(args, kwargs)
        v = tensors.get("v")
        return v is not None and getattr(v, "device", None) is not None and v.device.type != "cuda"

    return run_nothing


def _fla_outputs(spec, args, kwargs):
    # fla chunk/fused ops return (o, final_state); o is shaped like v in v's dtype, the final state
    # (B, H, K, V) in float32 when output_final_state=True [inferred from fla/ops/*/chunk.py].
    torch = _torch()
    t = spec.tensors(args, kwargs)
    q, v = t["q"], t["v"]
    o = torch.zeros(v.shape, dtype=v.dtype, device=v.device)
    final = None
    if kwargs.get("output_final_state"):
        final = torch.zeros(v.shape[0], v.shape[2], q.shape[-1], v.shape[-1], dtype=torch.float32, device=v.device)
    return o, final


def wrap_fla():
    """Wrap fla's chunk/fused/parallel ops (``fla.ops.*``). Which functions exist varies by fla
    version, so they are found by name prefix and signature rather than from a fixed list."""
    import inspect

    pairs = []
    seen = set()
    for modname, mod in list(sys.modules.items()):
        if not modname.startswith("fla.ops") or mod is None:
            continue
        for fname, fn in list(vars(mod).items()):
            if not callable(fn) or id(fn) in seen or getattr(fn, "__attn_doctor_wrapper__", False):
                continue
            if not fname.startswith(("chunk_", "fused_chunk_", "fused_recurrent_", "parallel_")):
                continue
            if getattr(fn, "__module__", "") is None or not str(getattr(fn, "__module__", "")).startswith("fla."):
                continue
            seen.add(id(fn))
            try:
                params = list(inspect.signature(fn).parameters)
            except (TypeError, ValueError):
                continue
            spec = sinks.fla_spec("fla." + fname, params)
            if spec is None:
                continue
            run_nothing = _fla_run_nothing_factory(spec)

            def make(spec=spec, fn=fn, run_nothing=run_nothing):
                def no_run(*args, **kwargs):
                    return _fla_outputs(spec, args, kwargs)

                def wrapper(*args, **kwargs):
                    tracer = state.ACTIVE[0]
                    if tracer is None:
                        return fn(*args, **kwargs)
                    return tracer.sink_call(spec, no_run if run_nothing(args, kwargs) else fn, args, kwargs)

                wrapper.__wrapped__ = fn
                wrapper.__name__ = getattr(fn, "__name__", "wrapper")
                wrapper.__attn_doctor_wrapper__ = True
                return wrapper

            pairs.append((fn, make()))
    return pairs


def wrap_transformers():
    """Wrap the entries of transformers' attention interface (transformers >= 4.48,
    ``ALL_ATTENTION_FUNCTIONS``); models look the function up on every forward."""
    mod = sys.modules.get("transformers.modeling_utils")
    registry = getattr(mod, "ALL_ATTENTION_FUNCTIONS", None) if mod is not None else None
    if registry is None:
        return 0
    mapping = getattr(registry, "_global_mapping", None)
    if not isinstance(mapping, dict):
        return 0
    count = 0
    sdpa = mapping.get("sdpa")
    for impl, fn in list(mapping.items()):
        if getattr(fn, "__attn_doctor_wrapper__", False):
            continue

        def call(*args, _fn=fn, **kwargs):
            return _fn(*args, **kwargs)

        if "flash" in impl and sdpa is not None:
            call.attn_doctor_fallback = sdpa
        mapping[impl] = _make_wrapper(sinks.transformers_spec(impl), call)
        count += 1
    return count


def wrap_transformers_eager():
    """transformers' ``eager_attention_forward`` (one per modeling module, >= 4.48): the model looks
    the global up on every forward, so re-pointing it at a wrapper is enough."""
    pairs, seen = [], set()
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith("transformers.models."):
            continue
        fn = getattr(mod, "__dict__", {}).get("eager_attention_forward")
        if fn is None or not callable(fn) or getattr(fn, "__attn_doctor_wrapper__", False) or id(fn) in seen:
            continue
        seen.add(id(fn))
        pairs.append((fn, _make_wrapper(sinks.eager_spec("transformers:eager"), fn)))
    rebind(pairs)
    return len(pairs)


def _flex_run(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False, return_lse=False,
              kernel_options=None, *, return_aux=None):
    """flex_attention for the trace: SDPA with flex's output dtype (q's) and shapes. The real one
    compiles itself (torch.compile inside its eager path), which cannot run under the tracer's
    TorchFunctionMode, nor at all on meta. score_mod and block_mask change values, not dtypes, so
    they are not applied."""
    torch = _torch()
    F = torch.nn.functional
    k, v = key.to(query.dtype), value.to(query.dtype)
    if enable_gqa and k.shape[-3] != query.shape[-3]:
        k = k.repeat_interleave(query.shape[-3] // k.shape[-3], dim=-3)
        v = v.repeat_interleave(query.shape[-3] // v.shape[-3], dim=-3)
    out = F.scaled_dot_product_attention(query, k, v, scale=scale)
    if not (return_lse or return_aux is not None):
        return out
    lse = torch.zeros(query.shape[:-1], dtype=torch.float32, device=query.device)
    if return_aux is None:
        return out, lse
    from torch.nn.attention.flex_attention import AuxOutput

    return out, AuxOutput(lse=lse if getattr(return_aux, "lse", False) else None,
                          max_scores=lse.clone() if getattr(return_aux, "max_scores", False) else None)


def wrap_flex():
    """FlexAttention (torch >= 2.5) is a Python function, not a torch function the tracer's mode
    sees: wrap it where it is defined, and every module that imported it by name."""
    mod = sys.modules.get("torch.nn.attention.flex_attention")
    orig = getattr(mod, "flex_attention", None) if mod is not None else None
    if orig is None:
        return []
    if getattr(orig, "__attn_doctor_wrapper__", False):
        # an earlier trace in this process wrapped it: torch.compile'd wrappers of the wrapper,
        # made since, still need re-pointing
        return [(orig.__wrapped__, orig), (orig, orig)]
    hop = sys.modules.get("torch._higher_order_ops.flex_attention")
    spec = sinks.flex_spec(autocast=hasattr(hop, "_autocast_cast"))
    wrapper = _make_wrapper(spec, orig, lambda args, kwargs: _flex_run)
    wrapper.attn_doctor_compiled = _compiled_call(wrapper)
    mod.flex_attention = wrapper
    return [(orig, wrapper), (wrapper, wrapper)]


def _compiled_call(wrapper):
    """What a torch.compile'd flex_attention is re-pointed at: the same wrapper, telling the trace
    the call runs compiled (kernels.py names the kernel from it)."""
    def compiled(*args, **kwargs):
        state.FLEX_COMPILED[0] = True
        try:
            return wrapper(*args, **kwargs)
        finally:
            state.FLEX_COMPILED[0] = False

    compiled.__wrapped__, compiled.__attn_doctor_wrapper__ = wrapper, True
    return compiled


def wrap_installed(model=None):
    """At trace start (the model's modules are imported by now): wrap what is loaded."""
    notes = []
    pairs = []
    pairs += _wrap_module_functions("flash_attn", sinks.FLASH_ATTN2)
    pairs += _wrap_module_functions("flash_attn.flash_attn_interface", sinks.FLASH_ATTN2)
    pairs += _wrap_module_functions("flash_attn_interface", sinks.FLASH_ATTN3)
    pairs += _wrap_fa4("flash_attn.cute")
    pairs += _wrap_fa4("flash_attn.cute.interface")
    pairs += _wrap_module_functions("xformers.ops", sinks.XFORMERS)
    pairs += _wrap_module_functions("xformers.ops.fmha", sinks.XFORMERS)
    if "fla" in sys.modules:
        pairs += wrap_fla()
    flex = wrap_flex()
    # Patch the defining modules first, then every alias.
    for orig, new in pairs:
        modname = getattr(orig, "__module__", None)
        mod = sys.modules.get(modname) if modname else None
        if mod is not None and getattr(mod, getattr(orig, "__name__", ""), None) is orig:
            setattr(mod, orig.__name__, new)
    rebind(pairs + flex)
    rebind_model(model, pairs + flex)
    n = wrap_transformers() + wrap_transformers_eager()
    if pairs:
        notes.append("wrapped %d attention functions of installed libraries" % len(pairs))
    if flex:
        notes.append("flex_attention runs as SDPA in the trace (its dtypes and shapes; score_mod and block_mask "
                     "are not applied): compiling it cannot run under the tracer")
    if n:
        notes.append("wrapped %d transformers attention implementations" % n)
    return notes
