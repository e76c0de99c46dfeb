"""The dtype tracer: every op's dtypes and its caller's line, seen through a TorchFunctionMode
(mode.py switches it on).

Why a TorchFunctionMode (KNOWLEDGE.md section 5): it sees ``F.normalize``, ``Tensor.mul``,
``Tensor.addcmul`` and ``F.scaled_dot_product_attention`` each as one op, with the frame of the
code that called it, and it sees the SDPA call before the kernel's dtype check can raise. A
TorchDispatchMode sees aten ops only and never a mixed-dtype SDPA call.

For every floating tensor an op produces the tracer keeps a small ``Node`` (op, file:line,
module path, input nodes, dtype), in a weak-keyed table so that no tensor is kept alive. At an
attention sink it records q/k/v and judges them (``sinks.judge``); for each bad input it walks
the nodes back to the implicit promotions (half in, fp32 out, not an explicit cast and not an op
given ``dtype=``) and to the origin of each fp32 operand (provenance.py). Attention written out
as matmuls and a softmax is recognised from the nodes too (inline.py).

Module hooks (global forward pre/post hooks that return None, so outputs are untouched) only keep
the current module path.
"""

from __future__ import annotations

import torch

try:
    from torch.utils.weak import WeakIdKeyDictionary
except ImportError:  # pragma: no cover - torch < 2.0
    WeakIdKeyDictionary = None

from ..kernel_choice import kernels, masks
from ..calls import policy, sinks
from .. import state
from ..calls.autocast import AUTOCAST_DTYPE, AUTOCAST_ENABLED
from .inline import PV_OPS, QK_OPS, inline_attention
from ..calls.nodes import CAST_OPS, HALF_DTYPES, NAME_TO_DTYPE, RANK, Node, all_tensors as _all_tensors, dtype_name, traced
from ..places import library_package
from .frames import UserFrames
from .provenance import misshapen_mask, wide_named
from . import precision
from .raised import note_op_raise
from .limits import _kernel_missing, _meta_limitation
from .tensors import (_cast_args, _cast_in_place, _floating_tensors, _lower_eligible, _output_tensors,
                      _transformers_flash_effective)

F = torch.nn.functional


_half = lambda t: t.dtype in HALF_DTYPES  # noqa: E731
_floating = lambda t: t.is_floating_point()  # noqa: E731

# Ops whose floating operands must share one dtype (matmuls, linear, einsum, convolutions): a mix
# raises on a GPU, where type promotion does not apply to them.
MIXED_REFUSED = frozenset(("matmul", "mm", "bmm", "baddbmm", "addmm", "addbmm", "addmv", "mv", "linear", "einsum",
                           "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                           "conv_transpose3d", "__matmul__", "__rmatmul__", "layer_norm", "group_norm"))
# Norms take one mix (a half input, float32 parameters: mixed_type in ATen); any other raises
# ("mixed dtype (CPU): expect parameter to have scalar type of Float", and on CUDA).
MIXED_NORMS = frozenset(("layer_norm", "group_norm"))


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


class Tracer(UserFrames):
    def __init__(self, autocast_dtype=None, emulate_autocast=False, capability=None, continue_after_bad_sink=True,
                 expected_dtype=None, mask_tracker=None):
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
        UserFrames.__init__(self)
        self._names_cache = {}
        self._short_cache = {}
        self._hooks = []
        self.torch_sinks = {F.scaled_dot_product_attention: sinks.SDPA, F.multi_head_attention_forward: sinks.MHA}
        self.op_sinks = dict(sinks.FLASH_ATTN2_CUSTOM_OPS)
        # what each mask is and where its values come from (fallbacks.py); it may have watched the
        # model being built, so that a mask kept as a buffer is known on meta too
        self.masks = mask_tracker if mask_tracker is not None else masks.MaskTracker()
        self._mixed_seen = {}  # (file, line, op) -> the AD608 record of a matmul that mixes dtypes
        # the tensors the forward made that are not floating (boolean masks, integer positions) ->
        # their Node: a mask's maker, named where an attention call refuses its shape or an op
        # raises on it (floating ones have theirs in ``nodes``)
        self.made_at = WeakIdKeyDictionary()
        # the op that raised, with its operands (raised.py), and the exception an attention call
        # raised (AD607 has that one)
        self.raised = None
        self.raised_at_sink = None
        self.param_dtypes = {}  # dtype name -> parameters' elements: the dtype the model computes in
        self.attention_outputs = set()  # seq of the nodes attention written out produced (never new scores)
        self.precision_seen = {}  # (rule, file, line) -> the record of a precision fault (precision.py)
        self.activation_products = 0  # matrix products of two activations: a model without any has no attention
        self.inputs_by_name = {}
        self.overflow_lines = set()  # (file, line) of fills that overflow: a raise there is that fault
        self.elements = 0  # elements the ops read (their first tensor argument), all told
        self.asked_wide = set()  # seq of the nodes an explicit cast to float32 returned as they were
        self.shadow = None  # the float64 shadow (numerics/shadow.py), where the trace device has values

    # ------------------------------------------------------------ bookkeeping

    def label_model(self, model, prefix=""):
        for name, module in model.named_modules():
            self.module_names[id(module)] = (prefix + name) or type(module).__name__
        for name, p in model.named_parameters():
            self.names[id(p)] = ("param", prefix + name)
            if p.is_floating_point():
                key = dtype_name(p.dtype)
                self.param_dtypes[key] = self.param_dtypes.get(key, 0) + p.numel()
        for name, b in model.named_buffers():
            if b is not None:
                self.names[id(b)] = ("buffer", prefix + name)
        # tensors kept as plain attributes (a KV cache, a rotary table): module.to() leaves them
        # as they were made, so they are often the float32 operand
        for mod_name, module in model.named_modules():
            for attr, value in list(vars(module).items()):
                if attr.startswith("_"):
                    continue
                items = [(attr, value)]
                if isinstance(value, (list, tuple)):
                    items = [("%s[%d]" % (attr, i), v) for i, v in enumerate(value[:64])]
                elif isinstance(value, dict):
                    items = [("%s[%r]" % (attr, k), v) for k, v in list(value.items())[:64]]
                for label, t in items:
                    if isinstance(t, torch.Tensor) and id(t) not in self.names:
                        self.names[id(t)] = ("attribute", prefix + (mod_name + "." if mod_name else "") + label)

    def label_input(self, tensor, name):
        if isinstance(tensor, torch.Tensor):
            self.names[id(tensor)] = ("input", name)
            # by the forward's parameter name (labels): what a kernel's numbers at a call are weighed by
            self.inputs_by_name[name.split(" ", 1)[-1]] = tensor
            self.masks.mark_batch(tensor, name)

    def node_of(self, t):
        n = self.nodes.get(t)
        if n is None:
            ref = self.names.get(id(t))
            kind, name = ref if ref else ("tensor", None)
            self.seq += 1
            site = self.masks.site_of(t) if kind in ("tensor", "attribute", "buffer") else None
            if site is not None:  # made by the model's construction, before the trace: named where
                file, line, func = site
                n = Node(self.seq, kind, dtype_name(t.dtype), name=name, op=self.display(func), file=file, line=line)
                n.batch = kind == "input"
            else:
                n = Node(self.seq, kind, dtype_name(t.dtype), name=name)
                n.batch = kind == "input"
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
        if isinstance(args[0] if args else None, torch.Tensor):
            self.elements += args[0].numel()  # the work a float64 shadow of this forward would redo
        if not self.ops % 256 and state.PROGRESS[0] is not None:
            state.say("tracing: %d ops" % self.ops)
        call_args, call_kwargs = args, kwargs
        applied = None
        inline = None
        short = self.short(func)
        if short in PV_OPS and not self.in_sink:
            if _products_activations(self, args):
                self.activation_products += 1
            inline = inline_attention(self, short, args, kwargs)
            if inline is not None:
                call_args, call_kwargs = inline[1], inline[2]
        if self.emulate and AUTOCAST_ENABLED():
            pol = policy.policy_for(short)
            if pol == "lower":
                call_args, call_kwargs = _cast_args(call_args, call_kwargs, _lower_eligible, AUTOCAST_DTYPE())
                applied = "lower"
            elif pol == "fp32":
                call_args, call_kwargs = _cast_args(call_args, call_kwargs, _half, torch.float32)
                applied = "fp32"
        mixed = None
        if inline is None and short in MIXED_REFUSED and not self.in_sink and not (
                AUTOCAST_ENABLED() and policy.policy_for(short) == "lower" and not self.emulate):
            mixed = self._mixed_operands(func, short, call_args, call_kwargs)
            if mixed is not None and mixed.get("continued_with"):
                target = NAME_TO_DTYPE[mixed["continued_with"]]
                call_args, call_kwargs = _cast_args(call_args, call_kwargs, _floating, target)
        precision.before_op(self, func, short, call_args, call_kwargs)
        try:
            out = func(*call_args, **call_kwargs)
        except Exception as exc:  # noqa: BLE001
            if inline is not None:
                self.raised_at_sink = exc
                self._raised(inline[0], exc)
            elif mixed is not None:
                mixed["raised"] = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0][:400]
                                              if str(exc).strip() else "")
            note_op_raise(self, func, call_args, call_kwargs, exc)
            raise
        self.masks.observe(short, args, kwargs, out)
        self.masks.propagate(short, args, kwargs, out)
        if isinstance(out, torch.Tensor) and not traced(out) and out.dim() >= 1 and not self.in_sink:
            self._made(func, short, args, kwargs, out)
        outs = _output_tensors(out)
        if outs:
            self.record(func, args, kwargs, outs, applied)
            if inline is not None:
                for o in outs:
                    n = self.nodes.get(o)
                    if n is not None:
                        self.attention_outputs.add(n.seq)
        precision.after_op(self, func, short, args, kwargs, out)
        if self.shadow is not None:
            self.shadow.step(self, func, short, args, kwargs, out)
        return out

    def _made(self, func, short, args, kwargs, out):
        """A Node for a boolean or integer tensor the forward made (a mask, positions), with the
        nodes of every tensor it was made from: where its shape came from."""
        file, line = self.caller()
        if file is None:
            return
        ins = []
        for a in list(args) + list((kwargs or {}).values()):
            if isinstance(a, torch.Tensor):
                n = self.nodes.get(a) if traced(a) else self.made_at.get(a)
                if n is not None:
                    ins.append(n)
        self.seq += 1
        node = Node(self.seq, "op", dtype_name(out.dtype), op=self.display(func), file=file, line=line,
                    module=self.current_module(), inputs=ins, short=short)
        node.stack = self.callers()
        self.made_at[out] = node

    def _mixed_operands(self, func, short, args, kwargs):
        """A matmul, linear, einsum or convolution whose floating operands differ in dtype raises
        on a GPU (the meta device lets some through): record it where it happens, with the
        operands' provenance, once per line (AD608). Returns the record, or None."""
        operands = [t for t in _floating_tensors(args, kwargs) if t.dim() > 0]
        kinds = {t.dtype for t in operands}
        if len(kinds) < 2 or (short == "einsum" and not _contracts(args)):
            return None
        if short in MIXED_NORMS and operands[0].dtype in HALF_DTYPES and all(
                t.dtype in (operands[0].dtype, torch.float32) for t in operands[1:]):
            return None  # a half input with float32 weight and bias: the norms' one mixed case
        file, line = self.caller()
        key = (file, line, short)
        if key in self._mixed_seen:
            record = self._mixed_seen[key]
            record["count"] = record.get("count", 1) + 1
            return record
        # the two operands that differ: the first one and the first of another dtype
        a = operands[0]
        b = next(t for t in operands if t.dtype != a.dtype)
        da, db = dtype_name(a.dtype), dtype_name(b.dtype)
        message = ("expected both operands to have the same dtype, but got: %s != %s"
                   % (sinks.C10_NAMES.get(da, da), sinks.C10_NAMES.get(db, db)))
        record = {
            "name": self.display(func), "family": "op", "layout": None, "file": file, "line": line,
            "module_path": self.current_module(),
            "inputs": {"a": {"dtype": da, "shape": list(a.shape)}, "b": {"dtype": db, "shape": list(b.shape)}},
            "effective_dtypes": {"a": da, "b": db}, "autocast": None, "head_dim": None, "head_dim_v": None,
            "problems": [{"id": "AD608", "severity": "error", "check": "same_dtype", "kernel_message": message}],
            "via": self.via[-1] if self.via else None, "seq": self.seq,
            "_nodes": {"a": self.node_of(a), "b": self.node_of(b)},
        }
        half = [d for d in (da, db) if d in ("float16", "bfloat16")]
        if self.continue_after and half:
            # go on as the fixed model would: in its half dtype (later calls are then judged on
            # their own, not on this one's consequences)
            record["continued_with"] = self.expected_dtype if self.expected_dtype in half else half[0]
        self._mixed_seen[key] = record
        self.sinks.append(record)
        return record

    def record(self, func, args, kwargs, outs, applied):
        ins = _floating_tensors(args, kwargs)
        short = self.short(func)
        explicit = short in CAST_OPS or (kwargs.get("dtype") is not None if kwargs else False) or any(
            isinstance(a, torch.dtype) for a in args)
        inplace = short.endswith("_") and not short.startswith("_")
        in_nodes = [self.node_of(t) for t in ins]
        half_in = any(t.dtype in HALF_DTYPES for t in ins)
        narrowest = min((RANK.get(t.dtype, 9) for t in ins), default=9)
        file, line = self.caller()
        module = self.current_module()
        kind = "cast" if explicit else "op"
        batch = any(n.batch or n.kind == "input" for n in in_nodes) or any(
            self.masks.from_batch(t) is not None for t in _all_tensors(args, kwargs) if not traced(t))
        if kind == "cast" and ins and all(o.dtype == ins[0].dtype for o in outs):
            # .to(device), .type_as(same dtype), softmax(x, dtype=x.dtype): not a cast
            kind = "op"
        stack = None
        for o in outs:
            if not inplace and any(o is t for t in ins):
                if explicit and RANK.get(o.dtype, 0) >= 2:
                    kept = self.node_of(o)  # the code asks for this width itself, here
                    self.asked_wide.add(kept.seq)
                    if wide_named(file, line):  # by name; a dtype in a variable was chosen elsewhere
                        kept.kept = (self.display(func), file, line)
                continue  # x.float() on an fp32 x returns x itself: keep x's own origin
            promo = None
            width = RANK.get(o.dtype, 0)
            if width >= 2 and width > narrowest and not explicit:
                if o.dtype == torch.float32 and half_in and (applied == "fp32" or (
                        not self.emulate and policy.policy_for(short) == "fp32" and AUTOCAST_ENABLED())):
                    promo = "autocast"
                else:
                    promo = "promotion"
            self.seq += 1
            node = self.nodes[o] = Node(self.seq, kind, dtype_name(o.dtype), op=self.display(func), file=file,
                                        line=line, module=module, inputs=in_nodes, promo=promo, short=short,
                                        shapes=[list(t.shape) for t in ins] if short in QK_OPS else None)
            node.batch = batch
            node.empty = not o.numel()
            if (kind == "cast" or not in_nodes) and RANK.get(o.dtype, 0) >= 2:
                node.stack = stack if stack is not None else self.callers()
                stack = node.stack

    # ------------------------------------------------------------ sinks

    def sink_call(self, spec, func, args, kwargs, caller_depth=0, standin=False):
        """Record one attention call, judge it, and run it (cast to a common half dtype first when
        it is bad, so the forward pass goes on and later sites are found too). An error the call
        raises anyway is recorded on the call (AD607) before it propagates."""
        if self.in_sink:
            return func(*args, **kwargs)
        file, line = self.caller()
        called_from = self.user_frame() if file and library_package(file) else None
        tensors = spec.tensors(args, kwargs)
        tensors = {r: t for r, t in tensors.items() if isinstance(t, torch.Tensor)}
        extra = {r: t for r, t in spec.extra_tensors(args, kwargs).items() if isinstance(t, torch.Tensor)}
        raw = {r: dtype_name(t.dtype) for r, t in tensors.items()}
        autocast_now = None
        if spec.autocast and AUTOCAST_ENABLED():
            autocast_now = dtype_name(AUTOCAST_DTYPE())
        effective = dict(raw)
        extra_effective = {r: dtype_name(t.dtype) for r, t in extra.items()}
        if autocast_now:
            # autocast casts every floating tensor argument but float64 (the mask too).
            for r, t in tensors.items():
                if _lower_eligible(t):
                    effective[r] = autocast_now
            for r, t in extra.items():
                if _lower_eligible(t):
                    extra_effective[r] = autocast_now
        family = spec.family
        if family == "transformers_flash":
            ac = dtype_name(AUTOCAST_DTYPE()) if AUTOCAST_ENABLED() else None
            effective, family = _transformers_flash_effective(args, effective, ac), "flash_attn2"
        try:
            head_dims = spec.head_dims(args, kwargs, tensors)
        except Exception:  # noqa: BLE001 - odd shapes must not stop the trace
            head_dims = (None, None)
        problems = sinks.judge_call(spec, family, effective, head_dims, self.capability, extra_effective)
        record = {
            "name": spec.name,
            "family": spec.family,
            "layout": spec.layout,
            "_roles": spec.roles,
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
        if extra:
            record["_extra"] = extra
            record["other_inputs"] = {r: {"dtype": dtype_name(t.dtype), "shape": list(t.shape),
                                          "effective_dtype": extra_effective[r]} for r, t in extra.items()}
            record["_extra_nodes"] = {r: self.node_of(t) for r, t in extra.items() if t.is_floating_point()}
        if standin:
            record["standin"] = True
        if called_from:
            record["called_from"] = called_from
        kernels.annotate(self, spec, record, args, kwargs)  # the kernel it runs, and why not a faster one
        precision.numbers_mask_at_call(self, spec.name, file, line, extra)
        self.sinks.append(record)
        if spec.outer:
            before, before_seq = len(self.sinks), self.seq
            self.via.append(spec.name)
            try:
                out = func(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001
                # transformers cannot run flash-attn here (no GPU, no package, autocast queried for
                # the meta device): keep the judgement made above and let the forward pass go on
                # through its SDPA path.
                fallback = getattr(func, "attn_doctor_fallback", None)
                # meta: the CPU retry runs it for real; anything but a missing kernel is a real bug
                # of the wrapper, raised on the GPU too (transformers 5.6.0's ``s_aux.to``).
                inner_op = self.raised is not None and self.raised["exc"] is exc
                if inner_op and not _meta_limitation(exc):
                    # an op of the attention written out inside it raised (its mask added, a fill):
                    # that op's line and operands are the finding (AD621), not the wrapper's call
                    record["problems"] = []
                    record["inner"] = record.get("inner") or ["the op that raised"]
                    raise
                if fallback is None or _meta_limitation(exc) or not _kernel_missing(exc):
                    self.raised_at_sink = exc
                    if len(self.sinks) == before:
                        self._raised(record, exc)
                    else:  # the kernel call inside was judged (and raised)
                        record["inner"] = [s["name"] for s in self.sinks[before:]]
                        record["problems"] = []
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
                # its output is the inner kernel's, through the wrapper's own lines (a cast there is named)
                self._mark_outputs(out, spec, keep_after=before_seq)
            else:
                self._mark_outputs(out, spec)
            return out
        call_args, call_kwargs = args, kwargs
        cast_to = restore = None
        if any(p["check"] in ("dtype", "same_dtype") for p in problems) and self.continue_after:
            cast_to = sinks.target_dtype(effective, self.expected_dtype)
            if cast_to is None and effective.get("q") in sinks.WIDE:
                # No half dtype anywhere (an fp32 model at flash-attn): run the kernel in bf16 and
                # hand its output back in q's dtype, so the rest of the model runs as written.
                cast_to, restore = "bfloat16", NAME_TO_DTYPE.get(effective["q"])
        mask_to = None
        if any(p["check"] == "mask_dtype" for p in problems) and self.continue_after:
            mask_to = "float32" if "alibi_slopes" in extra else (cast_to or effective.get("q"))
        self.in_sink += 1
        try:
            if cast_to is not None or mask_to is not None:
                call_args, call_kwargs = list(args), dict(kwargs)
                if cast_to is not None and spec.family == "mha":
                    # its kernel includes the projections: their weights go to the same dtype, or the
                    # cast q/k/v would meet float32 weights, which the model never does
                    call_args, call_kwargs = _cast_args(call_args, call_kwargs, _floating, NAME_TO_DTYPE[cast_to])
                    call_args = list(call_args)
                    if problems:
                        record["continued_with"] = cast_to
                elif cast_to is not None:
                    roles = {}
                    for r, (pos, key) in spec.roles.items():
                        roles.setdefault((pos, key), r)
                    _cast_in_place(call_args, call_kwargs, roles, NAME_TO_DTYPE[cast_to], lambda t: True)
                    if problems:
                        record["continued_with"] = cast_to
                if mask_to is not None and mask_to in NAME_TO_DTYPE:
                    spots = {v: r for r, v in spec.extras.items()}
                    _cast_in_place(call_args, call_kwargs, spots, NAME_TO_DTYPE[mask_to], _lower_eligible_or_bad)
                call_args = tuple(call_args)
            if autocast_now and self.emulate:
                # What CUDA autocast does: SDPA's inputs, mask included, and those of every matmul
                # and linear inside an attention written in Python are cast. Cast every floating
                # argument up front (F.multi_head_attention_forward's fp32 projection weights,
                # eager attention's fp32 mask or position bias).
                call_args, call_kwargs = _cast_args(call_args, call_kwargs, _lower_eligible, NAME_TO_DTYPE[autocast_now])
            try:
                out = func(*call_args, **call_kwargs)
            except Exception as exc:  # noqa: BLE001
                self.raised_at_sink = exc
                self._raised(record, exc)
                raise
            if self.shadow is not None:
                self.shadow.sink_step(self, func, args, kwargs, out)
            if restore is not None:
                if isinstance(out, torch.Tensor):
                    out = out.to(restore)
                elif isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
                    out = (out[0].to(restore),) + tuple(out[1:])
        finally:
            self.in_sink -= 1
        self._mark_outputs(out, spec)
        return out

    def _raised(self, record, exc):
        """The attention call raised: the kernel's message is a finding (AD607), unless the
        trace device cannot run it (meta) or a rule above already predicted this failure."""
        text = str(exc).strip().splitlines()
        message = text[0][:400] if text else type(exc).__name__
        if _meta_limitation(exc):
            return
        record["raised"] = "%s: %s" % (type(exc).__name__, message)
        if any(p["kernel_message"] and p["kernel_message"] in message for p in record["problems"]):
            return
        record["problems"].append({"id": "AD607", "severity": "error", "check": "raised", "kernel_message": message})
        maker = misshapen_mask(record, self.nodes, self.made_at)
        if maker is not None:
            record["problems"][-1]["mask_made"] = maker

    def _mark_outputs(self, out, spec, keep_after=None):
        # Attention outputs (and fused kernels' fp32 log-sum-exp) are roots: never promotions.
        for o in _output_tensors(out):
            n = self.nodes.get(o)
            if keep_after is not None and n is not None and n.seq > keep_after:
                continue
            self.seq += 1
            self.nodes[o] = Node(self.seq, "sink", dtype_name(o.dtype), op=spec.name)


def _contracts(args):
    """An einsum that sums over an index runs a batched matrix product, which takes one dtype; one
    that sums over none (an outer product, "...n,d->...nd") multiplies elementwise, with type
    promotion, on every device."""
    equation = args[0] if args and isinstance(args[0], str) else None
    if equation is None or "->" not in equation:
        return True  # an implicit output sums every repeated index: take it as a product
    inputs, output = equation.replace(" ", "").split("->", 1)
    return bool(set(inputs.replace(",", "").replace(".", "")) - set(output.replace(".", "")))


def _products_activations(tracer, args):
    operands = [a for a in args if isinstance(a, torch.Tensor)]
    if len(operands) < 2 and args and isinstance(args[-1], (list, tuple)):
        operands = [a for a in args[-1] if isinstance(a, torch.Tensor)]
    nodes = [tracer.nodes.get(t) for t in operands[-2:] if traced(t)]
    return len(nodes) == 2 and all(n is not None and n.batch and n.kind != "param" for n in nodes)


# a mask the kernel refused: any floating mask is cast (float64 too), bool masks stay
_lower_eligible_or_bad = lambda t: t.is_floating_point()  # noqa: E731
