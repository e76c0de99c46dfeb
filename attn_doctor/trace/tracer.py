"""The dtype tracer: a TorchFunctionMode that records every op's dtypes and its caller's line.

Why a TorchFunctionMode (KNOWLEDGE.md section 5): it sees ``F.normalize``, ``Tensor.mul``,
``Tensor.addcmul`` and ``F.scaled_dot_product_attention`` each as one op, with the frame of the
code that called it, and it sees the SDPA call before the kernel's dtype check can raise. A
TorchDispatchMode sees aten ops only and never a mixed-dtype SDPA call.

For every floating tensor an op produces the tracer keeps a small ``Node`` (op, file:line,
module path, input nodes, dtype), in a weak-keyed table so that no tensor is kept alive. At an
attention sink it records q/k/v and judges them (``sinks.judge``); for each bad input it walks
the nodes back to the implicit promotions (half in, fp32 out, not an explicit cast and not an op
given ``dtype=``) and to the origin of each fp32 operand (``explain``).

Module hooks (global forward pre/post hooks that return None, so outputs are untouched) only keep
the current module path.
"""

from __future__ import annotations

import linecache
import os
import re
import sys

import torch
from torch.overrides import TorchFunctionMode

try:
    from torch.utils.weak import WeakIdKeyDictionary
except ImportError:  # pragma: no cover - torch < 2.0
    WeakIdKeyDictionary = None

from . import policy, sinks, state

F = torch.nn.functional

HALF_DTYPES = (torch.float16, torch.bfloat16)
DTYPE_NAMES = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float64: "float64",
}
NAME_TO_DTYPE = {"fp32": torch.float32, "float32": torch.float32, "fp16": torch.float16,
                 "float16": torch.float16, "half": torch.float16, "bf16": torch.bfloat16,
                 "bfloat16": torch.bfloat16}

# Explicit casts: their fp32 output is what the user asked for, never a promotion.
CAST_OPS = frozenset(("float", "double", "half", "bfloat16", "to", "type", "type_as"))

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_TRACE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# The tracer's own machinery is skipped when naming a caller; the sample models are user code.
_TRACE_FILES = frozenset(_TRACE_DIR + name for name in (
    "tracer.py", "api.py", "standins.py", "sinks.py", "state.py", "policy.py", "child.py", "report.py"))
_STDLIB_HELPERS = ("contextlib.py", "functools.py")


def _transparent_dirs():
    """Library code whose frames are skipped when naming an op's caller: torch itself, this
    tracer, and einops (``rearrange`` is a reshape done on the caller's behalf)."""
    dirs = [_TORCH_DIR]
    try:
        import importlib.util

        spec = importlib.util.find_spec("einops")
        if spec is not None and spec.origin:
            dirs.append(os.path.dirname(os.path.abspath(spec.origin)) + os.sep)
    except (ImportError, ValueError):
        pass
    return tuple(dirs)


def dtype_name(dtype):
    return DTYPE_NAMES.get(dtype) or str(dtype).replace("torch.", "")


class Node(object):
    """Where one tensor came from. kind: op, cast, param, buffer, input, tensor (made outside
    the trace), sink (an attention kernel's output)."""

    __slots__ = ("seq", "kind", "op", "file", "line", "module", "inputs", "dtype", "promo", "name")

    def __init__(self, seq, kind, dtype, op=None, file=None, line=None, module=None, inputs=(), promo=None,
                 name=None):
        self.seq = seq
        self.kind = kind
        self.dtype = dtype
        self.op = op
        self.file = file
        self.line = line
        self.module = module
        self.inputs = inputs
        self.promo = promo
        self.name = name


def _autocast_state_fns():
    """(is_enabled(), get_dtype()) for CUDA autocast, across torch versions."""
    try:
        torch.is_autocast_enabled("cuda")

        def enabled():
            return torch.is_autocast_enabled("cuda")

        def get_dtype():
            return torch.get_autocast_dtype("cuda")
    except TypeError:  # torch < 2.4
        def enabled():
            return torch.is_autocast_enabled()

        def get_dtype():
            return torch.get_autocast_gpu_dtype()
    return enabled, get_dtype


AUTOCAST_ENABLED, AUTOCAST_DTYPE = _autocast_state_fns()


def set_emulated_autocast(enabled, dtype=None):
    """Switch CUDA autocast's thread-local state without a CUDA device. The dispatcher only applies
    it to CUDA tensors, so on CPU/meta it changes nothing by itself; the tracer reads it (and user
    code's ``autocast(enabled=False)`` regions turn it off, as on the GPU)."""
    try:
        torch.set_autocast_enabled("cuda", enabled)
        if dtype is not None:
            torch.set_autocast_dtype("cuda", dtype)
    except TypeError:  # torch < 2.4
        torch.set_autocast_enabled(enabled)
        if dtype is not None:
            torch.set_autocast_gpu_dtype(dtype)


def _floating_tensors(args, kwargs):
    out = []
    for seq in (args, kwargs.values() if kwargs else ()):
        for a in seq:
            if isinstance(a, torch.Tensor):
                if a.is_floating_point():
                    out.append(a)
            elif isinstance(a, (list, tuple)):
                for b in a:
                    if isinstance(b, torch.Tensor) and b.is_floating_point():
                        out.append(b)
    return out


def _output_tensors(out):
    if isinstance(out, torch.Tensor):
        return (out,) if out.is_floating_point() else ()
    if isinstance(out, (list, tuple)):
        return tuple(o for o in out if isinstance(o, torch.Tensor) and o.is_floating_point())
    return ()


def _cast_args(args, kwargs, pred, dtype):
    def conv(a):
        if isinstance(a, torch.Tensor):
            return a.to(dtype) if pred(a) else a
        if isinstance(a, (list, tuple)) and any(isinstance(b, torch.Tensor) for b in a):
            return type(a)(conv(b) for b in a)
        return a

    return tuple(conv(a) for a in args), {k: conv(v) for k, v in kwargs.items()}


def _lower_eligible(t):
    return t.is_floating_point() and t.dtype != torch.float64


def _half(t):
    return t.dtype in HALF_DTYPES


def op_display_name(func):
    name = getattr(func, "__name__", None) or str(func)
    qual = getattr(func, "__qualname__", "") or ""
    module = getattr(func, "__module__", None) or ""
    if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return "torch.ops." + str(func)
    if qual.startswith(("TensorBase.", "Tensor.")):
        return "Tensor." + name
    if module == "torch.nn.functional" or module.startswith("torch._C._nn"):
        return "F." + name
    if name == "__get__":  # property access such as .T / .mT
        return "Tensor.<property>"
    return "torch." + name


_ASSIGN = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9]*)\s*(?::[^=]*)?=(?!=)")


class Tracer(object):
    def __init__(self, autocast_dtype=None, emulate_autocast=False, capability=None, continue_after_bad_sink=True,
                 expected_dtype=None):
        self.nodes = WeakIdKeyDictionary()
        self.names = {}  # id(tensor) -> (kind, name) for parameters, buffers and inputs
        self.seq = 0
        self.ops = 0
        self.sinks = []
        self.module_stack = []
        self.module_names = {}
        self.in_sink = 0
        self.via = []
        self.capability = tuple(capability) if capability else None
        self.emulate = bool(emulate_autocast)
        self.autocast_dtype = autocast_dtype
        self.continue_after = continue_after_bad_sink
        self.expected_dtype = expected_dtype
        self._internal = {}
        self._transparent = _transparent_dirs()
        self._names_cache = {}
        self._short_cache = {}
        self._hooks = []
        self.torch_sinks = {F.scaled_dot_product_attention: sinks.SDPA, F.multi_head_attention_forward: sinks.MHA}
        self.op_sinks = dict(sinks.FLASH_ATTN2_CUSTOM_OPS)

    # ------------------------------------------------------------ bookkeeping

    def label_model(self, model, prefix=""):
        for name, module in model.named_modules():
            self.module_names[id(module)] = (prefix + name) or type(module).__name__
        for name, p in model.named_parameters():
            self.names[id(p)] = ("param", prefix + name)
        for name, b in model.named_buffers():
            if b is not None:
                self.names[id(b)] = ("buffer", prefix + name)

    def label_input(self, tensor, name):
        if isinstance(tensor, torch.Tensor):
            self.names[id(tensor)] = ("input", name)

    def _is_internal(self, filename):
        if filename.startswith(self._transparent) or filename.endswith(_STDLIB_HELPERS) or filename in _TRACE_FILES:
            return True
        return filename.startswith("<") and filename != "<stdin>" and not filename.startswith("<ipython")

    def caller(self):
        f = sys._getframe(2)
        cache = self._internal
        while f is not None:
            fn = f.f_code.co_filename
            internal = cache.get(fn)
            if internal is None:
                internal = cache[fn] = self._is_internal(fn)
            if not internal:
                return fn, f.f_lineno
            f = f.f_back
        return None, None

    def node_of(self, t):
        n = self.nodes.get(t)
        if n is None:
            ref = self.names.get(id(t))
            kind, name = ref if ref else ("tensor", None)
            self.seq += 1
            n = Node(self.seq, kind, dtype_name(t.dtype), name=name)
            self.nodes[t] = n
        return n

    def current_module(self):
        return self.module_stack[-1] if self.module_stack else ""

    # ------------------------------------------------------------ module hooks

    def install_hooks(self):
        from torch.nn.modules import module as module_mod

        names = self.module_names
        stack = self.module_stack

        def pre(module, inputs):
            stack.append(names.get(id(module)) or type(module).__name__)

        def post(module, inputs, output):
            if stack:
                stack.pop()

        self._hooks.append(module_mod.register_module_forward_pre_hook(pre))
        try:
            self._hooks.append(module_mod.register_module_forward_hook(post, always_call=True))
        except TypeError:  # torch < 2.1
            self._hooks.append(module_mod.register_module_forward_hook(post))

    def remove_hooks(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []

    # ------------------------------------------------------------ ops

    def short(self, func):
        try:
            return self._short_cache[func]
        except KeyError:
            s = self._short_cache[func] = policy.short_name(func)
            return s
        except TypeError:
            return policy.short_name(func)

    def display(self, func):
        try:
            return self._names_cache[func]
        except KeyError:
            s = self._names_cache[func] = op_display_name(func)
            return s
        except TypeError:
            return op_display_name(func)

    def handle_op(self, func, args, kwargs):
        self.ops += 1
        call_args, call_kwargs = args, kwargs
        applied = None
        if self.emulate and AUTOCAST_ENABLED():
            pol = policy.policy_for(self.short(func))
            if pol == "lower":
                call_args, call_kwargs = _cast_args(args, kwargs, _lower_eligible, AUTOCAST_DTYPE())
                applied = "lower"
            elif pol == "fp32":
                call_args, call_kwargs = _cast_args(args, kwargs, _half, torch.float32)
                applied = "fp32"
        out = func(*call_args, **call_kwargs)
        outs = _output_tensors(out)
        if outs:
            self.record(func, args, kwargs, outs, applied)
        return out

    def record(self, func, args, kwargs, outs, applied):
        ins = _floating_tensors(args, kwargs)
        short = self.short(func)
        explicit = short in CAST_OPS or (kwargs.get("dtype") is not None if kwargs else False) or any(
            isinstance(a, torch.dtype) for a in args)
        inplace = short.endswith("_") and not short.startswith("_")
        in_nodes = [self.node_of(t) for t in ins]
        half_in = any(t.dtype in HALF_DTYPES for t in ins)
        file, line = self.caller()
        module = self.current_module()
        kind = "cast" if explicit else "op"
        for o in outs:
            if not inplace and any(o is t for t in ins):
                continue  # x.float() on an fp32 x returns x itself: keep x's own origin
            promo = None
            if o.dtype == torch.float32 and half_in and not explicit:
                if applied == "fp32" or (not self.emulate and policy.policy_for(short) == "fp32" and AUTOCAST_ENABLED()):
                    promo = "autocast"
                else:
                    promo = "promotion"
            self.seq += 1
            self.nodes[o] = Node(self.seq, kind, dtype_name(o.dtype), op=self.display(func), file=file, line=line,
                                 module=module, inputs=in_nodes, promo=promo)

    # ------------------------------------------------------------ sinks

    def sink_call(self, spec, func, args, kwargs, caller_depth=0):
        """Record one attention call, judge it, and run it (cast to a common half dtype first when
        it is bad, so the forward pass goes on and later sites are found too)."""
        if self.in_sink:
            return func(*args, **kwargs)
        file, line = self.caller()
        tensors = spec.tensors(args, kwargs)
        tensors = {r: t for r, t in tensors.items() if isinstance(t, torch.Tensor)}
        raw = {r: dtype_name(t.dtype) for r, t in tensors.items()}
        autocast_now = None
        if spec.autocast and AUTOCAST_ENABLED():
            autocast_now = dtype_name(AUTOCAST_DTYPE())
        effective = dict(raw)
        if autocast_now:
            for r, t in tensors.items():
                if _lower_eligible(t):
                    effective[r] = autocast_now
        family = spec.family
        if family == "transformers_flash":
            ac = dtype_name(AUTOCAST_DTYPE()) if AUTOCAST_ENABLED() else None
            effective, family = _transformers_flash_effective(args, effective, ac), "flash_attn2"
        try:
            head_dims = spec.head_dims(args, kwargs, tensors)
        except Exception:  # noqa: BLE001 - odd shapes must not stop the trace
            head_dims = (None, None)
        problems = sinks.judge(family, effective, head_dims, self.capability)
        record = {
            "name": spec.name,
            "family": spec.family,
            "layout": spec.layout,
            "file": file,
            "line": line,
            "module_path": self.current_module(),
            "inputs": {r: {"dtype": raw[r], "shape": list(t.shape)} for r, t in tensors.items()},
            "effective_dtypes": effective,
            "autocast": autocast_now,
            "head_dim": head_dims[0],
            "head_dim_v": head_dims[1],
            "problems": problems,
            "via": self.via[-1] if self.via else None,
            "seq": self.seq,
            "_nodes": {r: self.node_of(t) for r, t in tensors.items()},
        }
        self.sinks.append(record)
        if spec.outer:
            before = len(self.sinks)
            self.via.append(spec.name)
            try:
                out = func(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001
                # transformers cannot run flash-attn here (no GPU, no package, autocast queried for
                # the meta device): keep the judgement made above and let the forward pass go on
                # through its SDPA path.
                fallback = getattr(func, "attn_doctor_fallback", None)
                if fallback is None:
                    raise
                record["fallback"] = "%s could not run here (%s: %s); continued with sdpa" % (
                    spec.name, type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "")
                self.in_sink += 1
                try:
                    out = fallback(*args, **kwargs)
                finally:
                    self.in_sink -= 1
            finally:
                self.via.pop()
            if len(self.sinks) > before:
                record["inner"] = [s["name"] for s in self.sinks[before:]]
                record["problems"] = []  # the kernel call inside was judged
            self._mark_outputs(out, spec)
            return out
        call_args, call_kwargs = args, kwargs
        cast_to = None
        if any(p["check"] in ("dtype", "same_dtype") for p in problems) and self.continue_after:
            cast_to = sinks.target_dtype(effective, self.expected_dtype)
        elif autocast_now and self.emulate:
            cast_to = autocast_now  # what CUDA autocast does to SDPA's inputs
        self.in_sink += 1
        try:
            if cast_to is not None:
                dt = NAME_TO_DTYPE[cast_to]
                roles = {}
                for r, (pos, key) in spec.roles.items():
                    roles.setdefault((pos, key), r)
                call_args, call_kwargs = list(args), dict(kwargs)
                for (pos, key) in roles:
                    if key in call_kwargs and isinstance(call_kwargs[key], torch.Tensor):
                        call_kwargs[key] = call_kwargs[key].to(dt)
                    elif pos is not None and pos < len(call_args) and isinstance(call_args[pos], torch.Tensor):
                        call_args[pos] = call_args[pos].to(dt)
                call_args = tuple(call_args)
                if problems:
                    record["continued_with"] = cast_to
            out = func(*call_args, **call_kwargs)
        finally:
            self.in_sink -= 1
        self._mark_outputs(out, spec)
        return out

    def _mark_outputs(self, out, spec):
        # Attention outputs (and fused kernels' fp32 log-sum-exp) are roots: never promotions.
        for o in _output_tensors(out):
            self.seq += 1
            self.nodes[o] = Node(self.seq, "sink", dtype_name(o.dtype), op=spec.name)

    # ------------------------------------------------------------ provenance

    def promotions_behind(self, start, budget=20000):
        """The implicit promotions a float32 tensor went through, oldest first."""
        found, mixed, stack, seen = [], [], [start], set()
        while stack and budget > 0:
            n = stack.pop()
            budget -= 1
            if id(n) in seen:
                continue
            seen.add(id(n))
            if n.kind != "op":
                continue
            if n.promo:
                found.append(n)
            elif len(n.inputs) >= 2:
                # An op whose float32 inputs include a parameter, buffer or explicit cast: on its
                # own it would promote a half tensor too (VAR's ``.mul(scale_mul)`` after an
                # autocast-fp32 normalize). Reported only next to a real promotion.
                mixed.append(n)
            for i in n.inputs:
                if i.dtype == "float32":
                    stack.append(i)
        if found:
            for n in mixed:
                kinds = [self.origin(i)["kind"] for i in n.inputs if i.dtype == "float32"]
                if any(k in ("parameter", "buffer", "explicit_cast") for k in kinds) and any(
                        k == "promotion" for k in kinds):
                    found.append(n)
        found.sort(key=lambda n: n.seq)
        return found

    def origin(self, n, limit=200):
        """Follow a float32 operand back to what made it float32."""
        first = n
        while limit > 0:
            limit -= 1
            if n.kind in ("param", "buffer", "input"):
                out = {"kind": {"param": "parameter"}.get(n.kind, n.kind), "name": n.name}
                break
            if n.kind == "cast":
                out = {"kind": "explicit_cast", "op": n.op}
                out.update(_where(n))
                break
            if n.kind == "sink":
                out = {"kind": "attention_output", "op": n.op}
                break
            if n.kind == "tensor":
                out = {"kind": "tensor", "detail": "a float32 tensor made outside the traced forward"}
                break
            if n.promo:
                out = {"kind": "promotion", "op": n.op}
                out.update(_where(n))
                break
            fp32_inputs = [i for i in n.inputs if i.dtype == "float32"]
            if not fp32_inputs:
                out = {"kind": "created", "op": n.op}
                out.update(_where(n))
                break
            # Prefer a named parameter or buffer, then a direct cast (.float(), .to()) over one that
            # copies another tensor's dtype (type_as): it is what the user can change.
            n = min(fp32_inputs, key=_origin_rank)
        else:
            out = {"kind": "unknown"}
        if first.kind == "op" and not first.promo:
            out["via"] = dict(_where(first), op=first.op)
        return out

    def explain_sink(self, record):
        """Chains of promotions behind each fp32 input of a bad sink."""
        chains = {}
        for role, node in record["_nodes"].items():
            if node.dtype != "float32":
                continue
            promos = self.promotions_behind(node)
            if promos:
                chains[role] = [self.chain_entry(p) for p in promos]
        return chains

    def chain_entry(self, n):
        entry = {"op": n.op, "kind": n.promo}
        entry.update(_where(n))
        entry["module_path"] = n.module
        fp32_inputs = [i for i in n.inputs if i.dtype == "float32"]
        if n.promo == "autocast":
            entry["operand"] = None
            entry["operand_origin"] = None
            entry["reason"] = "CUDA autocast runs %s in float32 (its half input comes out float32)" % n.op
        elif fp32_inputs:
            origins = [(i, self.origin(i)) for i in fp32_inputs]
            ranked = [p for p in origins if p[1]["kind"] in ("parameter", "buffer", "explicit_cast", "created",
                                                              "input")] or origins
            operand, origin = ranked[0]
            entry["operand"] = _operand_label(operand, origin, n.line)
            entry["operand_origin"] = origin
            if n.promo:
                entry["reason"] = ("a half-precision tensor meets a float32 operand; type promotion makes the "
                                   "result float32")
            else:
                entry["kind"] = "fp32_operand"
                entry["reason"] = ("combines the promoted tensor with a float32 operand: this op alone would "
                                   "promote a half-precision input too")
        else:
            entry["operand"] = None
            entry["operand_origin"] = None
            entry["reason"] = "the op returns float32 from a half-precision input"
        return entry


def _transformers_flash_effective(args, effective, autocast_now):
    """What transformers' flash-attention wrapper hands to flash-attn: float32 q/k/v are cast to
    the autocast dtype, else the model's pre-quantization dtype, else the dtype of the module's
    first Linear weight (transformers/modeling_flash_attention_utils.py, get_target_dtype
    [src, version range unverified]); half inputs pass unchanged."""
    if "float32" not in effective.values():
        return effective
    target = autocast_now
    module = args[0] if args else None
    if target is None and module is not None:
        cfg = getattr(module, "config", None)
        pre = getattr(cfg, "_pre_quantization_dtype", None)
        if pre is not None:
            target = dtype_name(pre)
        else:
            for m in module.modules():
                if isinstance(m, torch.nn.Linear):
                    target = dtype_name(m.weight.dtype)
                    break
    if target is None:
        return effective
    return {r: (target if d == "float32" else d) for r, d in effective.items()}


def _origin_rank(n):
    if n.kind in ("param", "buffer"):
        return 0
    if n.kind == "cast":
        return 2 if n.op == "Tensor.type_as" else 1
    if n.kind == "input":
        return 3
    return 4


def _source(file, line):
    if not file or not line:
        return None
    text = linecache.getline(file, line)
    return text.strip() or None


def _where(n):
    return {"file": n.file, "line": n.line, "source": _source(n.file, n.line)}


def _operand_label(node, origin, promoting_line=None):
    if node.kind in ("param", "buffer", "input") and node.name:
        return node.name
    m = _ASSIGN.match(linecache.getline(node.file, node.line) or "") if node.file and node.line else None
    if m and node.line != (promoting_line or -1):
        return m.group(1)
    if origin.get("name"):
        return origin["name"]
    m = _ASSIGN.match(linecache.getline(origin["file"], origin["line"]) or "") if origin.get("line") else None
    if m:
        return m.group(1)
    if origin.get("kind") == "explicit_cast":
        return "the result of %s (float32 since %s at line %s)" % (node.op, origin.get("op"), origin.get("line"))
    return "the result of %s" % node.op


class TraceMode(TorchFunctionMode):
    """Routes every torch call through the tracer."""

    def __init__(self, tracer):
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        tracer = self.tracer
        if tracer.in_sink:
            return func(*args, **kwargs)
        try:
            spec = tracer.torch_sinks.get(func)
        except TypeError:
            spec = None
        if spec is None and isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            qual = getattr(func, "_qualified_op_name", None) or (func.name() if hasattr(func, "name") else "")
            qual = qual.split(".", 1)[0] if isinstance(qual, str) else ""
            spec = tracer.op_sinks.get(qual)
        if spec is not None:
            return tracer.sink_call(spec, func, args, kwargs)
        return tracer.handle_op(func, args, kwargs)


class activate(object):
    """Context manager: make ``tracer`` the active one, with its mode, hooks and autocast state."""

    def __init__(self, tracer, emulated_autocast_dtype=None):
        self.tracer = tracer
        self.emulated = emulated_autocast_dtype
        self.mode = TraceMode(tracer)
        self._saved = None

    def __enter__(self):
        if state.ACTIVE[0] is not None:
            raise RuntimeError("a dtype trace is already running in this process")
        state.ACTIVE[0] = self.tracer
        if self.emulated is not None:
            self._saved = (AUTOCAST_ENABLED(), AUTOCAST_DTYPE())
            set_emulated_autocast(True, self.emulated)
        self.tracer.install_hooks()
        self.mode.__enter__()
        return self.tracer

    def __exit__(self, *exc):
        try:
            self.mode.__exit__(*exc)
        finally:
            self.tracer.remove_hooks()
            if self._saved is not None:
                set_emulated_autocast(*self._saved)
            state.ACTIVE[0] = None
        return False
