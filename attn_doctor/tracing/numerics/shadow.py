"""A float64 shadow of the traced forward pass: every floating tensor an op makes gets a float64 twin,
computed by the same op from its inputs' twins (weights, buffers and inputs cast up where they enter),
so the error of each op's result against float64 is a number, whatever the code's spelling.

At each op the shadow keeps, per floating result: its relative error against the twin (the largest
difference over the twin's largest magnitude, over the elements both hold finite), the largest error of
its floating inputs, the elements that are inf or NaN where the twin is finite, and its largest
magnitude. An op is where precision is *lost* when its result's error is many times what its inputs
brought and what the model's dtype rounds to (a cosine of angles held in bfloat16, a sum that
underflows); it *overflows* where it makes inf or NaN from finite inputs while float64 stays finite.
Both are kept as events with the op's node (the tracer's provenance starts there); judging them is
the tracer's (dtype_path/measured.py).

The shadow follows the model's discrete decisions: integer and boolean tensors (indices, masks,
positions) are shared, never twinned, and random ops (dropout in training, noise) hand their result
to the twin as it is. Casts do not round the twin: ``x.to(torch.bfloat16)`` keeps x's float64 twin,
so the rounding a cast makes is an error that later ops carry and may amplify.

Values are needed: the shadow runs where the trace device has them (CPU), never on meta.
"""

from __future__ import annotations

import math

import torch

from ..calls.nodes import all_tensors as _tensors

try:
    from torch.utils.weak import WeakIdKeyDictionary
except ImportError:  # pragma: no cover - torch < 2.0
    WeakIdKeyDictionary = None

# Unit roundoff (half the machine epsilon) of each floating dtype.
UNIT = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8, torch.float32: 2.0 ** -24, torch.float64: 2.0 ** -53}
MANTISSA = {torch.float16: 10, torch.bfloat16: 7, torch.float32: 23, torch.float64: 52}
# An op loses precision where its result's error is at least this many times both its inputs' error
# and the model dtype's unit roundoff: an op that rounds correctly adds at most one unit, and errors
# carried through well-conditioned ops grow by a few units at most.
AMPLIFICATION = 8.0

_WIDE = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64,
         torch.complex64: torch.complex128}
if hasattr(torch, "complex32"):
    _WIDE[torch.complex32] = torch.complex128

# casts keep the twin (and copy it where the result is a new tensor)
_CASTS = frozenset(("float", "double", "half", "bfloat16", "to", "type", "type_as"))
# results the twin takes as they are: random draws, uninitialised memory
_AS_IS = frozenset(("dropout", "dropout_", "feature_dropout", "alpha_dropout", "dropout1d", "dropout2d", "dropout3d",
                    "native_dropout", "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "normal",
                    "normal_", "uniform_", "bernoulli", "bernoulli_", "multinomial", "randperm", "exponential_",
                    "rrelu", "empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                    "gumbel_softmax", "poisson", "cauchy_", "log_normal_", "geometric_", "random_"))
# a dropout is the identity in eval (p = 0, not training), else its drawn mask times a scale
_DROPOUTS = frozenset(("dropout", "dropout_", "feature_dropout", "feature_dropout_", "dropout1d", "dropout2d",
                       "dropout3d"))
# views and copies: the result holds the input's values, error and all
_SAME_VALUES = frozenset(("view", "reshape", "transpose", "permute", "expand", "expand_as", "unsqueeze", "squeeze",
                          "flatten", "unflatten", "contiguous", "clone", "detach", "t", "movedim", "swapaxes",
                          "view_as", "reshape_as", "mT", "T", "repeat", "tile", "broadcast_to", "requires_grad_",
                          "moveaxis", "flip", "roll", "__get__"))


# ops that move values without arithmetic (a part, a gather, a concatenation, a fill): their result's
# error is its inputs' element for element, so they lose nothing; a part of small values merely
# shows a larger share of the error the whole already had
_MOVES = _SAME_VALUES | frozenset((
    "__getitem__", "split", "split_with_sizes", "chunk", "unbind", "narrow", "select", "index_select", "gather",
    "take", "take_along_dim", "masked_select", "cat", "concat", "concatenate", "stack", "hstack", "vstack", "pad",
    "repeat_interleave", "tril", "triu", "where", "masked_fill", "masked_fill_", "index_put", "index_put_",
    "scatter", "scatter_", "diagonal", "unfold", "as_strided", "slice_scatter", "select_scatter", "__setitem__",
    "copy_", "fill_", "zero_", "tensor_split", "split_copy", "unsafe_split", "unsafe_chunk", "dsplit", "hsplit",
    "vsplit", "index_copy", "index_copy_", "index_fill", "index_fill_", "masked_scatter", "masked_scatter_"))


# ops that sum many products (projections, norms, reductions, attention): in the model's dtype their
# result is rounded once and may cancel (a dot product near zero, a norm over one element); that is
# what computing in that dtype is, at every layer of every model, not a line's choice. Where precision
# is lost by a choice is an elementwise op amplifying the rounding of a value made in half (the cosine
# of half-precision angles, the exponential of a large half value).
_SUMS = frozenset((
    "linear", "matmul", "mm", "bmm", "baddbmm", "addmm", "addbmm", "addmv", "mv", "einsum", "conv1d", "conv2d",
    "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "layer_norm", "group_norm", "rms_norm",
    "batch_norm", "instance_norm", "local_response_norm", "normalize", "mean", "sum", "nansum", "var", "std",
    "var_mean", "std_mean", "norm", "vector_norm", "linalg_vector_norm", "softmax", "log_softmax", "cumsum",
    "logsumexp", "prod", "cumprod", "scaled_dot_product_attention", "multi_head_attention_forward",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "__matmul__", "__rmatmul__", "tensordot", "dot", "inner", "outer", "interpolate", "upsample", "embedding_bag"))


def _wide(dtype):
    return _WIDE.get(dtype, dtype)


def _twinned(t):
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def _inplace(short):
    return (short.endswith("_") and not short.startswith("_")) or short in (
        "__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__")


class Event(object):
    """One op where precision was lost or a value overflowed: what the judge needs, without tensors."""

    __slots__ = ("kind", "node", "op", "short", "file", "line", "module", "dtype", "shape", "err", "err_in",
                 "nonfinite", "numel", "out_max", "twin_max", "operands", "count", "building")

    def __init__(self, **kw):
        self.count = 1
        for k in self.__slots__:
            if k != "count":
                setattr(self, k, kw.get(k))


class Shadow(object):
    """The float64 twins of one traced forward, and the events found on the way."""

    def __init__(self, model_dtype=torch.bfloat16, max_events=64):
        self.twin = WeakIdKeyDictionary()
        self.building = False  # measuring the model's construction (tables made in __init__)
        # tensor -> (relative error, elements inf or NaN where the twin is finite, of them NaN)
        self.err = WeakIdKeyDictionary()
        self.unit = UNIT.get(model_dtype, UNIT[torch.bfloat16])
        self.model_dtype = model_dtype
        self.events = []
        self._seen = {}  # (kind, file, line) -> Event
        self.max_events = max_events
        self.ops = 0
        self.failed = {}  # op short name -> ops the twin could not run (their results were taken as they are)
        self.peak = None  # (ratio of the dtype's largest value, Event-like dict) of the half result nearest overflow
        self.by_seq = {}  # a node's seq -> its result's relative error: the provenance walk follows the error
        self.build_by_seq = {}  # the same for the construction's nodes (another tracer's numbering)
        self.output_bad = False  # the forward's results hold inf or NaN where float64 is finite

    # ------------------------------------------------------------ twins

    def twin_of(self, t):
        tw = self.twin.get(t)
        if tw is None:
            tw = t.detach().to(_wide(t.dtype))
            self.twin[t] = tw
        return tw

    def _map(self, x, depth=0):
        if isinstance(x, torch.Tensor):
            return self.twin_of(x) if _twinned(x) else x
        if isinstance(x, torch.dtype):
            return _wide(x)
        if depth < 3 and isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            return type(x)(self._map(i, depth + 1) for i in x)
        if depth < 3 and isinstance(x, dict):
            return {k: self._map(v, depth + 1) for k, v in x.items()}
        return x

    def _error(self, t):
        e = self.err.get(t)
        return e if e is not None else (0.0, 0, 0)

    # ------------------------------------------------------------ one op

    def step(self, tracer, func, short, args, kwargs, out):
        """After an op ran in the model's dtypes: run it on the twins, measure each floating result.
        The shadow's own ops pass no torch function mode (the trace's, the device's): they are not
        the model's, and a mode in Python on each of them would cost more than the ops."""
        with torch._C.DisableTorchFunction():
            self._step(tracer, func, short, args, kwargs, out)

    def _step(self, tracer, func, short, args, kwargs, out):
        self.ops += 1
        kwargs = kwargs or {}
        if _inplace(short):
            target = _written(args, kwargs)
            outs = (target,) if _twinned(target) else ()
        else:
            outs = _results(out)
        if not outs:
            return
        if _inplace(short) and outs[0] not in self.twin:
            # written in place before it had a twin: its values before the write are gone, so its twin
            # starts from its values after it (lifted when next read)
            self.err[outs[0]] = (0.0, 0, 0)
            return
        ins = [t for t in _tensors(args, kwargs) if _twinned(t)]
        with torch.no_grad():
            twins = self._twins_for(func, short, args, kwargs, out, outs)
        if twins is None:
            for o in outs:  # taken as they are: their error starts again at zero
                if _inplace(short) and o in self.twin:
                    # written in place (an initialiser, a random fill): the twin takes the new values where
                    # it is, so the twins of its views and of its base see them too
                    with torch.no_grad():
                        self.twin[o].copy_(o.detach())
                else:
                    self.twin.pop(o, None)  # lifted when next read
                self.err[o] = (0.0, 0, 0)
            return
        err_in = max((self._error(t)[0] for t in ins), default=0.0)
        bad_in = sum(self._error(t)[1] for t in ins)
        nan_in = sum(self._error(t)[2] for t in ins)
        for t in ins:  # weights, buffers, inputs: their error (a buffer rounded by a cast) for the walk back
            node = tracer.nodes.get(t)
            if node is not None and node.seq not in self.by_seq:
                self.by_seq[node.seq] = self._error(t)[0]
        for o, tw in zip(outs, twins):
            self.twin[o] = tw
            node = tracer.nodes.get(o)
            if (short in _SAME_VALUES or short in _DROPOUTS) and len(ins) == 1 and ins[0].numel() == o.numel():
                self.err[o] = self._error(ins[0])
                if node is not None:
                    self.by_seq[node.seq] = self.err[o][0]
                continue
            err, nonfinite, nans, out_max, twin_max = _compare(o, tw)
            self.err[o] = (err, nonfinite, nans)
            if node is not None:
                self.by_seq[node.seq] = err
            self._headroom(tracer, func, short, o, out_max, node)
            if (nans and not nan_in or nonfinite > nans and not bad_in) and not _dtype_makes_it(
                    func, args, kwargs, outs.index(o), o.dtype):
                # the trace device's half kernel, not the dtype (the GPU's computes in float32): nothing
                # it leads to downstream is the model's either
                self.err[o] = (err, max(nonfinite, 1), max(nonfinite, 1))
                continue
            if nans and not nan_in:  # NaN, the harm: an inf before it is where it started
                self._event(tracer, "nan", func, short, o, node, err, err_in, nans, out_max, twin_max, ins)
            if nonfinite > nans and not bad_in:
                self._event(tracer, "overflow", func, short, o, node, err, err_in, nonfinite - nans, out_max,
                            twin_max, ins)
            elif short not in _MOVES and short not in _SUMS and err >= AMPLIFICATION * max(err_in, self.unit) and \
                    out_max == out_max:
                self._event(tracer, "loss", func, short, o, node, err, err_in, nonfinite, out_max, twin_max, ins)

    def _twins_for(self, func, short, args, kwargs, out, outs):
        """The float64 results of the op, one per floating result in ``outs``; None where the twin
        cannot be computed (it then takes the model's results as they are)."""
        if short in _DROPOUTS and args and _twinned(args[0]):
            tw = _dropout_twin(self.twin_of(args[0]), args, kwargs, outs[0])
            if tw is not None:
                return [tw]
        if short in _AS_IS or getattr(func, "__module__", None) == "torch.nn.init" or (
                short == "scaled_dot_product_attention" and _drops_out(args, kwargs)):
            return None  # random draws and initialisers: their values are the model's
        if short in _CASTS and args and isinstance(args[0], torch.Tensor):
            src = args[0]
            if _twinned(src):
                tw = self.twin_of(src)
                # a new tensor gets a copy: an in-place op on it must not change the source's twin
                return [tw if outs[0] is src else tw.clone()]
            return [src.detach().to(_wide(outs[0].dtype))]  # an integer or boolean tensor made floating
        if short == "view" and any(isinstance(a, torch.dtype) for a in args[1:]):
            return None  # bits read as another dtype: no float64 counterpart
        kw = self._map(kwargs)
        if "dtype" not in kw and not any(True for _ in _tensors(args, kwargs)):
            # a tensor made from numbers in the default dtype (torch.ones, torch.linspace): made in float64
            kw["dtype"] = _wide(outs[0].dtype)
        try:
            try:
                result = func(*self._map(args), **kw)
            except TypeError:
                if kw is kwargs or "dtype" in kwargs:
                    raise
                result = func(*self._map(args), **self._map(kwargs))
        except Exception:  # noqa: BLE001 - an op without float64 kernels: take its result as it is
            self.failed[short] = self.failed.get(short, 0) + 1
            return None
        if _inplace(short):
            return [self.twin_of(outs[0])]
        twins = _results(result)
        if len(twins) != len(outs) or any(a.shape != b.shape for a, b in zip(outs, twins)):
            self.failed[short] = self.failed.get(short, 0) + 1
            return None
        return [tw if tw.dtype == _wide(tw.dtype) else tw.to(_wide(tw.dtype)) for tw in twins]

    def sink_step(self, tracer, func, args, kwargs, out):
        """An attention kernel's result: its float64 counterpart where the kernel takes float64
        (SDPA does), else its result as it is (the kernel's own error is the numerics check's)."""
        with torch._C.DisableTorchFunction():
            self._sink_step(tracer, func, args, kwargs, out)

    def _sink_step(self, tracer, func, args, kwargs, out):
        outs = _results(out)
        if not outs:
            return
        ins = [t for t in _tensors(args, kwargs or {}) if _twinned(t)]
        with torch.no_grad():
            try:
                if _drops_out(args, kwargs or {}):
                    raise ValueError("a random dropout mask: the kernel's result is taken as it is")
                result = func(*self._map(args), **self._map(kwargs or {}))
                twins = _results(result)
                if len(twins) != len(outs) or any(a.shape != b.shape for a, b in zip(outs, twins)):
                    twins = None
            except Exception:  # noqa: BLE001
                twins = None
        err_in = max((self._error(t)[0] for t in ins), default=0.0)
        for i, o in enumerate(outs):
            if twins is None:
                self.twin.pop(o, None)
                self.err.pop(o, None)
                continue
            self.twin[o] = twins[i]
            err, nonfinite, nans, out_max, twin_max = _compare(o, twins[i])
            self.err[o] = (err, nonfinite, nans)
            if nans and not sum(self._error(t)[2] for t in ins):
                self._event(tracer, "nan", func, "attention", o, tracer.nodes.get(o), err, err_in, nans,
                            out_max, twin_max, ins)
            if nonfinite > nans and not sum(self._error(t)[1] for t in ins):
                self._event(tracer, "overflow", func, "attention", o, tracer.nodes.get(o), err, err_in,
                            nonfinite - nans, out_max, twin_max, ins)

    def finish(self, outputs):
        """The forward's results: where one holds inf or NaN where float64 is finite, an overflow or a
        NaN reached what the job reads (a loss, logits); one a later op dropped (padding sliced off)
        harmed nothing."""
        self.output_bad = any(self._error(t)[1] for t in _results_deep(outputs))

    def set_model_dtype(self, dtype):
        self.model_dtype = dtype
        self.unit = UNIT.get(dtype, UNIT[torch.bfloat16])

    def construction_done(self, model):
        """After the construction was measured: the weights are the model's (a checkpoint's values,
        or the initial ones in the model's dtype), so their twins are their values cast up; the
        buffers and attributes made there (tables) keep the twins their construction computed. The
        construction's nodes were another tracer's: their errors are kept apart."""
        for p in model.parameters():
            self.twin.pop(p, None)
            self.err.pop(p, None)
        self.build_by_seq, self.by_seq = self.by_seq, {}

    # ------------------------------------------------------------ events

    def _headroom(self, tracer, func, short, o, out_max, node):
        if o.dtype != torch.float16 or not out_max or out_max != out_max or out_max == math.inf:
            return
        ratio = out_max / torch.finfo(o.dtype).max
        if self.peak is None or ratio > self.peak[0]:
            file, line = tracer.caller()
            self.peak = (ratio, {"op": tracer.display(func), "file": file, "line": line, "max": out_max,
                                 "dtype": "float16"})

    def _event(self, tracer, kind, func, short, o, node, err, err_in, nonfinite, out_max, twin_max, ins):
        file, line = tracer.caller()
        key = (kind, file, line)
        seen = self._seen.get(key)
        if seen is not None:
            seen.count += 1
            return
        if len(self.events) >= self.max_events:
            return
        operands = []
        for t in ins[:4]:
            e = self._error(t)[0]
            values = t.detach()
            finite = values[torch.isfinite(values)] if values.numel() else values
            big = float(finite.abs().max()) if finite.numel() else 0.0
            operands.append({"node": tracer.nodes.get(t), "dtype": t.dtype, "shape": list(t.shape), "err": e,
                             "max": big, "twin_max": _abs_max(self.twin.get(t))})
        ev = Event(kind=kind, node=node, op=tracer.display(func) if short != "attention" else getattr(
            func, "__name__", "attention"), short=short, file=file, line=line, module=tracer.current_module(),
            dtype=o.dtype, shape=list(o.shape), err=err, err_in=err_in, nonfinite=nonfinite, numel=o.numel(),
            out_max=out_max, twin_max=twin_max, operands=operands, building=self.building)
        self._seen[key] = ev
        self.events.append(ev)


def _dtype_makes_it(func, args, kwargs, index, dtype):
    """Whether the op's inf or NaN is the dtype's: the op again on the same half inputs computed in
    float32 (as GPU kernels compute half ops) and rounded to ``dtype`` is not finite either. A CPU
    half kernel that makes NaN by itself (grid_sample in bfloat16) is the trace device's, not the
    model's."""
    def up(x):
        if isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16):
            return x.float()
        if isinstance(x, torch.dtype) and x in (torch.float16, torch.bfloat16):
            return torch.float32
        if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            return type(x)(up(i) for i in x)
        return x

    try:
        with torch.no_grad():
            out = _results(func(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()}))
        return not bool(torch.isfinite(out[index].to(dtype)).all())
    except Exception:  # noqa: BLE001 - an op that takes no float32 here: keep what was seen
        return True


def _dropout_twin(tw, args, kwargs, out):
    """The float64 result of a dropout the model ran: its input's twin where it is the identity (not
    training, p = 0: every eval forward passes through one); else the twin with the mask the model
    drew (read off its result: the elements it zeroed) and the same 1/(1-p) scale. None where neither
    holds (an in-place draw: its input is gone)."""
    p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
    training = kwargs.get("training", kwargs.get("train", args[2] if len(args) > 2 else True))
    if not isinstance(p, (int, float)) or isinstance(training, torch.Tensor):
        return None
    if not training or p == 0:
        return tw if out is args[0] else tw.clone()
    if out is args[0] or out.shape != tw.shape or p >= 1:
        return None
    src = args[0].detach()
    keep = (out.detach() != 0) | (src == 0)
    return tw * keep.to(tw.dtype) / (1.0 - p)


def _drops_out(args, kwargs):
    """An attention call with dropout (SDPA's dropout_p, its fifth argument): a random mask, which a
    second call would draw anew."""
    p = kwargs.get("dropout_p", args[4] if len(args) > 4 and not isinstance(args[4], torch.Tensor) else 0.0)
    return isinstance(p, (int, float)) and not isinstance(p, bool) and p > 0


def _written(args, kwargs):
    """The tensor an in-place op writes: its first argument (torch.nn.init's functions take it as
    ``tensor=`` when they dispatch)."""
    if args:
        return args[0] if isinstance(args[0], torch.Tensor) else None
    return next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)


def _abs_max(t):
    if t is None or not t.numel():
        return None
    finite = t[torch.isfinite(t)]
    return float(finite.abs().max()) if finite.numel() else None


def _compare(o, tw):
    """(relative error over the elements both hold finite: the largest difference over the twin's
    largest magnitude; elements inf or NaN where the twin is finite, and of them NaN; the result's
    largest finite magnitude, the twin's). The largest difference, not an average: a table wrong at its long
    positions only is wrong, however right its short ones are. Where both are finite everywhere (the
    common case) a few reductions over the tensors, nothing indexed."""
    if o.is_complex():
        o, tw = torch.view_as_real(o), torch.view_as_real(tw)
    if not o.numel():
        return 0.0, 0, 0, 0.0, 0.0
    o = o.detach()
    # min and max carry NaN and inf: where both are finite numbers every element is
    olo, ohi = (float(v) for v in o.aminmax())
    tlo, thi = (float(v) for v in tw.aminmax())
    if math.isfinite(olo + ohi + tlo + thi):
        dlo, dhi = torch.sub(o, tw).aminmax()
        num, scale = max(-float(dlo), float(dhi)), max(-tlo, thi)
        err = (0.0 if num == 0.0 else 1.0) if scale == 0.0 else num / scale
        return err, 0, 0, max(-olo, ohi), scale
    ov = o.to(tw.dtype)
    fo, ft = torch.isfinite(ov), torch.isfinite(tw)
    nonfinite = int((~fo & ft).sum())
    nans = int((torch.isnan(ov) & ft).sum())
    both = fo & ft
    d, ref = (ov - tw)[both], tw[both]
    twin_max = float(tw[ft].abs().max()) if bool(ft.any()) else 0.0  # also where the result overflowed
    if not ref.numel():
        return 0.0, nonfinite, nans, 0.0, twin_max
    num = float(d.abs().max())
    scale = float(ref.abs().max())
    err = (0.0 if num == 0.0 else 1.0) if scale == 0.0 else num / scale
    out_max = float(ov[fo].abs().max()) if bool(fo.any()) else 0.0
    return err, nonfinite, nans, out_max, twin_max


def _results(out):
    if isinstance(out, torch.Tensor):
        return (out,) if _twinned(out) else ()
    if isinstance(out, (list, tuple)):
        return tuple(o for o in out if _twinned(o))
    return ()


def _results_deep(out, depth=0):
    """The floating tensors of a forward's result (a tensor, tuples, dicts, a ModelOutput)."""
    if isinstance(out, torch.Tensor):
        return [out] if _twinned(out) else []
    if depth > 4:
        return []
    values = out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else ()
    return [t for v in values for t in _results_deep(v, depth + 1)]


def spacing(value, dtype):
    """The distance between neighbouring values of ``dtype`` at magnitude ``value``."""
    if not value or value != value or value == math.inf:
        return None
    bits = MANTISSA.get(dtype)
    if bits is None:
        return None
    return 2.0 ** (math.floor(math.log2(abs(value))) - bits)


def measuring_construction(shadow, frames):
    """A context manager: the model's construction runs under the shadow too, so a table computed
    in half precision in ``__init__`` (a cached rotary table, positions made in the model's dtype) is
    measured where it is made, and a buffer computed in float32 and cast with the model keeps its
    float32 twin. ``frames``: a tracer that is not tracing (dtype_path's Tracer): it names callers and
    ops and keeps the nodes the provenance walk reads."""
    from torch.overrides import TorchFunctionMode

    from .. import state
    from ..calls.policy import short_name

    class _Build(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            try:
                short = short_name(func)
            except Exception:  # noqa: BLE001 - an odd callable: not measured
                return out
            if state.OWN_RUN[0]:
                return out  # the doctor trying the inputs it made: not the model's construction
            if any(isinstance(t, torch.nn.Parameter) for t in _tensors(args, kwargs)):
                return out  # the weights' initialisation: their twins are their values, once built
            outs = _results(out)
            if outs:
                frames.record(func, args, kwargs, outs, None)  # provenance: where each table was made
            shadow.step(frames, func, short, args, kwargs, out)
            return out

    return _Build()
