"""Wrappers of the real attention libraries that import (flash_attn, flash_attn_interface,
flash_attn.cute, xformers, fla, flex_attention, transformers' attention dispatch): their public
attention functions are wrapped, and every module that did ``from lib import fn`` is re-pointed at
the wrapper (``rebind``). A wrapper is inert when no trace runs. fla's Triton kernels on a machine
without CUDA: the wrapper records the call and runs nothing (returns zeros shaped like the
kernel's output)."""

from __future__ import annotations

import sys
import types

from ..calls import sinks
from .. import state


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


def _wrap_module(modname, table, standins=None):
    """(original, wrapper) pairs for the functions of ``table`` in the loaded module ``modname``.
    ``standins`` (function name -> stand-in), for a library that runs on CUDA tensors only
    (flash-attn-4: `inputs must be on CUDA device`; xformers' operators, FlashAttention 3,
    SageAttention): on CUDA tensors the real function runs, elsewhere (meta, CPU) its stand-in's
    checks and SDPA run in its place. None: the real function runs everywhere."""
    mod = sys.modules.get(modname)
    if mod is None or getattr(mod, "__attn_doctor_standin__", False):
        return []
    pairs = []
    for fname, spec in table.items():
        orig = getattr(mod, fname, None)
        if orig is None or getattr(orig, "__attn_doctor_wrapper__", False):
            continue
        if standins is None:
            pairs.append((orig, _make_wrapper(spec, orig)))
        elif standins.get(fname) is not None:
            pairs.append((orig, _make_wrapper(spec, orig, _cuda_or(orig, spec, standins[fname]))))
    return pairs


def _cuda_or(orig, spec, standin):
    def runner(args, kwargs):
        q = spec.tensors(args, kwargs).get("q")
        return orig if getattr(getattr(q, "device", None), "type", None) == "cuda" else standin

    return runner


def wrap_library(library):
    """(original, wrapper) pairs for an installed library's functions (a ``library.Library``) in
    each of its modules that is loaded: recorded and judged; off CUDA tensors its stand-in's
    implementation runs in place of the real one where it has ``runners``."""
    standins = library.runners() if library.runners is not None else None
    pairs = []
    for modname in library.real_modules:
        pairs += _wrap_module(modname, library.specs, standins)
    return pairs


def wrap_hub_module(module, repo_id):
    """A module the real kernels hub returned: its attention functions recorded under the repo's
    name, run as they are on CUDA tensors and by the stand-in's functions elsewhere."""
    from . import hub as hub_standin

    kind = hub_standin.kind_of(repo_id)
    if kind is None or getattr(module, "__attn_doctor_wrapped__", False):
        return module
    base = repo_id.split(":", 1)[0].split("@", 1)[0].strip()
    standin = hub_standin.kernel_module(base)
    for fname, spec in hub_standin.hub_specs(base, kind).items():
        orig = getattr(module, fname, None)
        replacement = getattr(standin, fname, None)
        if orig is None or replacement is None or getattr(orig, "__attn_doctor_wrapper__", False):
            continue
        setattr(module, fname, _make_wrapper(spec, orig, _cuda_or(orig, spec, getattr(replacement, "__wrapped__",
                                                                                       replacement))))
    try:
        module.__attn_doctor_wrapped__ = True
    except (AttributeError, TypeError):
        pass
    return module


def _fla_run_nothing_factory(spec):
    def run_nothing(args, kwargs):
        tensors = spec.tensors(args, kwargs)
        v = tensors.get("v")
        return v is not None and getattr(v, "device", None) is not None and v.device.type != "cuda"

    return run_nothing


def _fla_outputs(spec, args, kwargs):
    # fla chunk/fused ops return (o, final_state); o is shaped like v in v's dtype, the final state
    # (B, H, K, V) in float32 when output_final_state=True [inferred from fla/ops/*/chunk.py].
    import torch

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
    import torch

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


def wrap_installed(libraries, model=None):
    """At trace start (the model's modules are imported by now): wrap what is loaded, the attention
    libraries' functions (``libraries``: registry.LIBRARIES) among it."""
    notes = []
    pairs = []
    for library in libraries:
        pairs += wrap_library(library)
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
