"""One trace in this process: the options checked, the model built (a factory, a model object or
``--hf``), moved and cast to the trace device and dtype, one forward (and, with ``train``,
backward) pass run under the dtype tracer, a model meta cannot run retried on CPU, and the sinks
and findings made a report.

Never raises for the user's mistakes or the user's code: every failure becomes a report with
``status`` "usage_error" (exit 2) or "failed" (exit 3), a one-line ``error.message`` naming the
cause and the fallback taken, and the traceback kept in ``error.traceback`` for ``-v``. A trace
that ran but reached no attention call judged nothing: ``status`` "no_attention", exit 3.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import time

from .. import report as report_mod
from ..errors import EXIT_CLEAN, EXIT_FAILED, EXIT_FINDINGS, EXIT_USAGE, TraceError, _one_line, _tb
from .factory import _bind_factory_args, call_factory, cuda_to, import_target_module, normalize_inputs, parse_target, resolve_factory, split_result
from .gpu_stand_in import autocast_on_trace_device, transformers_sees_flash_attn
from .hf_models import build_hf
from .outputs import _map_tensors, _tensors, output_signature
from .shadow_pass import (measure_on_cpu, measuring_construction, merge_measured, model_bytes, new_shadow,
                          shadow_dtype, shadow_records, shadow_seq_len, shadow_work)
from ..state import say

DTYPE_CHOICES = ("bf16", "fp16", "fp32")
AUTOCAST_CHOICES = ("bf16", "fp16")
DEVICE_CHOICES = ("meta", "cpu", "cuda")
# A model that cannot run on meta is retried on CPU only below this size (parameters + buffers).
CPU_RETRY_LIMIT_BYTES = int(os.environ.get("ATTN_DOCTOR_CPU_RETRY_LIMIT", str(4 * 1024 ** 3)))
GIVEN_COPY_LIMIT_BYTES = 256 * 1024 ** 2


def _trace_once(target, model, inputs, hf, dtype, autocast, device, train, capability, standins, emulate_autocast,
                seq_len, attn_implementation, continue_after_bad_sink, retry_on_cpu, cwd, factory_kwargs, shadow=None):
    start = time.monotonic()
    notes = []
    info = {"target": target or (("hf:" + hf) if hf else (type(model).__name__ if model is not None else None)),
            "device": device, "dtype": dtype, "autocast": autocast, "train": bool(train)}
    if factory_kwargs:
        info["factory_kwargs"] = dict(factory_kwargs)
    try:
        _validate(target, model, hf, dtype, autocast, device, factory_kwargs, attn_implementation)
        say("importing torch")
        import torch  # noqa: F401
    except TraceError as exc:
        return _failure(exc, info, notes, start)
    except (Exception, SystemExit) as exc:  # torch itself may fail to import; Ctrl-C passes
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name == "torch":
            hint = ("; the trace runs in %s: name the training environment's interpreter with --python PATH "
                    "(python= in the API)" % sys.executable)
        return _failure(TraceError("environment", "torch does not import: %s%s" % (_one_line(exc), hint), exc), info, notes,
                        start)
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            return _failure(TraceError("environment", "--device cuda: CUDA is not available to torch %s; use --device "
                                                      "meta (default) or cpu" % torch.__version__), info, notes, start)
        if capability is None:
            capability = tuple(torch.cuda.get_device_capability())
    if standins is None:
        # Also on a GPU: install_standins acts only where flash_attn does not import, and then the
        # model's `try: from flash_attn import ...` must take the path it takes with flash-attn.
        standins = True
    from ..calls.autocast import emulation

    emulate_autocast = emulation(device, emulate_autocast)  # before the model's module is imported
    info["autocast_mode"] = (None if not autocast else ("emulated-cuda" if emulate_autocast else "cuda"))
    info["capability"] = list(capability) if capability else None
    try:
        from ..standins import registry as standins_mod

        if standins:
            notes.extend(standins_mod.install_standins())
        elif standins_mod.standin_installed():
            standins_mod.remove_standins()  # an earlier trace in this process put it there
        say("importing %s" % ("transformers" if hf else target.rpartition(":")[0]) if target or hf else "building the model")
        builder = _builder(target, model, inputs, hf, dtype, device, seq_len, attn_implementation, info,
                           factory_kwargs)
        say("building the model")
        try:
            built = builder(device, False, new_shadow() if shadow is not False and device == "cpu" else None)
        except TraceError as exc:
            if not (device == "meta" and retry_on_cpu and exc.kind == "factory" and _is_meta_limitation(exc.exc)):
                raise
            # the factory itself does what meta cannot (.item() in __init__): the model is built on CPU
            from ..dtype_path.limits import meta_limitation

            notes.append("the factory %s (%s); built and traced on CPU" % (
                meta_limitation(exc.exc).replace("the forward pass ", ""), _one_line(exc.exc)))
            device = info["device"] = "cpu"
            built = builder("cpu", False, new_shadow() if shadow is not False else None)
    except TraceError as exc:
        return _failure(exc, info, notes, start)
    except Exception as exc:  # noqa: BLE001 - a bug here must still give a report
        return _failure(TraceError("internal", "attn-doctor internal error while building the model: %s (a bug; "
                                               "-v shows the traceback)" % _one_line(exc), exc), info, notes, start)
    notes.extend(built["notes"])
    say("tracing the forward pass")
    run_args = (dtype, autocast, train, capability, emulate_autocast, continue_after_bad_sink, cwd)
    measured = None
    try:
        outcome = _run_fitting(built, info, device, *run_args, shadow=shadow is not False)
        longer, skip = None, None
        if shadow is not False and device == "meta":
            longer = shadow_seq_len(built["model"], seq_len, model_max_seq(built["model"])) if hf else seq_len
            longer, skip = shadow_work(outcome[2].elements, seq_len, longer, forced=shadow is True)
        if skip:
            measured = ([], False, [skip])
        elif longer is not None:
            say("measuring precision against float64 (CPU)")
            if longer != seq_len:
                # the inputs attn-doctor makes: long enough that a table's positions are the model's
                builder_at = _builder(target, model, inputs, hf, dtype, device, longer, attn_implementation, {},
                                      factory_kwargs)
            else:
                builder_at = builder
            measured = measure_on_cpu(builder_at, hf, model_bytes(built["model"]), _run_fitting, run_args,
                                      fallback=builder if builder_at is not builder else None)
    except TraceError as exc:
        if device == "meta" and retry_on_cpu and exc.kind == "meta":
            size = model_bytes(built["model"])
            if size > CPU_RETRY_LIMIT_BYTES and not hf:
                exc.message += ("; too large to retry on CPU (%.1f GB): return a smaller config from the factory"
                                % (size / 1e9))
                return _failure(exc, info, notes, start)
            if hf and size > CPU_RETRY_LIMIT_BYTES:
                # even 2 layers of a wide model can outgrow the memory a CPU retry allocates for real
                try:
                    small = model_bytes(builder("meta", True)["model"])
                except Exception:  # noqa: BLE001
                    small = 0
                if small > CPU_RETRY_LIMIT_BYTES:
                    exc.message += ("; too large to retry on CPU even with 2 layers (%.1f GB; the limit is "
                                    "ATTN_DOCTOR_CPU_RETRY_LIMIT, %.1f GB)" % (small / 1e9, CPU_RETRY_LIMIT_BYTES / 1e9))
                    return _failure(exc, info, notes, start)
            notes.append(exc.message + "; retried on CPU" + (" with a 2-layer config" if hf and size >
                                                              CPU_RETRY_LIMIT_BYTES else ""))
            info["device"] = "cpu"
            try:
                built = builder("cpu", bool(hf) and size > CPU_RETRY_LIMIT_BYTES,
                                new_shadow() if shadow is not False else None)
                notes.extend(n for n in built["notes"] if n not in notes)
                outcome = _run_fitting(built, info, "cpu", *run_args, shadow=shadow is not False)
            except TraceError as exc2:
                return _failure(exc2, info, notes, start)
        else:
            return _failure(exc, info, notes, start)
    sink_list, findings, tracer, forward_error, prep_notes = outcome
    notes.extend(prep_notes)
    if measured is not None:
        findings, notes = merge_measured(findings, notes, measured)
    for s in sink_list:
        if s.get("fallback") and s["fallback"] not in notes:
            notes.append(s["fallback"])
    summary = report_mod.summarize(sink_list, findings)
    summary["ops"] = tracer.ops
    summary["elements"] = tracer.elements
    status = "ok" if forward_error is None else "partial"
    error = None
    if forward_error is not None:
        stopped = any(f["id"] == "AD621" for f in findings)
        error = {"kind": "forward", "message": ("the forward pass stopped at the error above (AD621): nothing after it "
                                                "was traced" if stopped else
                                                "the backward pass (--train: the outputs' mean, backward) raised: %s"
                                                % _one_line(forward_error) if getattr(tracer, "phase", None) == "backward"
                                                else "the forward pass stopped: %s" % _one_line(forward_error)),
                 "traceback": _tb(forward_error)}
    elif not sink_list:
        status = "no_attention"
        error = {"kind": "no_attention", "message": _no_attention_message(info, tracer.ops, tracer.activation_products),
                 "traceback": None}
    exit_code = EXIT_FINDINGS if summary["errors"] else (EXIT_FAILED if error is not None else EXIT_CLEAN)
    out = _result(status, exit_code=exit_code, error=error, notes=notes, findings=findings, sinks=sink_list,
                  summary=summary, standin_calls=sum(1 for r in tracer.sinks if r.get("standin")),
                  duration_s=round(time.monotonic() - start, 3), outputs=getattr(tracer, "outputs", None))
    out.update(info)
    out["stack"] = stack_facts(device)
    return out


def stack_facts(device):
    """torch, its CUDA and the cuDNN it runs with, as the known kernel bugs are judged on them: torch's
    own answer on a CUDA device, else the cuDNN wheel installed beside torch."""
    import importlib.metadata

    import torch

    out = {"torch": torch.__version__, "cuda": getattr(torch.version, "cuda", None), "cudnn": None, "cudnn_from": None}
    if device == "cuda":
        try:
            out["cudnn"], out["cudnn_from"] = str(torch.backends.cudnn.version()), "torch.backends.cudnn.version()"
        except Exception:  # noqa: BLE001
            pass
    if out["cudnn"] in (None, "None"):
        for dist in ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12"):
            try:
                out["cudnn"], out["cudnn_from"] = importlib.metadata.version(dist), "the %s wheel" % dist
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return out


def _validate(target, model, hf, dtype, autocast, device, factory_kwargs=None, attn_implementation=None):
    sources = [x for x in (target, model, hf) if x is not None]
    if len(sources) != 1:
        raise TraceError("usage", "give exactly one of MODULE:FACTORY or --hf PATH")
    if dtype is not None and dtype not in DTYPE_CHOICES:
        raise TraceError("usage", "--dtype must be one of %s, not %r" % (", ".join(DTYPE_CHOICES), dtype))
    if autocast is not None and autocast not in AUTOCAST_CHOICES:
        raise TraceError("usage", "--autocast must be one of %s, not %r" % (", ".join(AUTOCAST_CHOICES), autocast))
    if device not in DEVICE_CHOICES:
        raise TraceError("usage", "--device must be one of %s, not %r" % (", ".join(DEVICE_CHOICES), device))
    if factory_kwargs and target is None:
        raise TraceError("usage", "--factory-arg goes with MODULE:FACTORY")
    if attn_implementation and hf is None:
        raise TraceError("usage", "--attn-implementation goes with --hf (a factory builds its model itself)")
    if target is not None:
        parse_target(target)


def _builder(target, model, inputs, hf, dtype, device, seq_len, attn_impl, info, factory_kwargs=None):
    """A function (device, shrink) -> built model, so a failed meta run can be rebuilt on CPU. The
    build runs watched by a mask tracker (``built["masks"]``): a causal mask kept as a buffer made
    in ``__init__`` is then known for what it is on meta too."""
    make = _builder_unwatched(target, model, inputs, hf, dtype, device, seq_len, attn_impl, info, factory_kwargs)

    def watched(dev, shrink, shadow=None):
        from ..kernel_choice.masks import MaskTracker

        tracker = MaskTracker()
        with tracker.recording(), measuring_construction(shadow):
            built = make(dev, shrink)
        built["masks"] = tracker
        if shadow is not None:
            shadow.construction_done(built["model"])
            built["shadow"] = shadow
        return built

    return watched


def _builder_unwatched(target, model, inputs, hf, dtype, device, seq_len, attn_impl, info, factory_kwargs=None):
    if model is not None:
        # a small model kept as it was given, so a run meta cannot finish is retried on a CPU copy
        # (moving it to meta loses its values); a large one the API copied already
        pristine = [None]
        if model_bytes(model) <= GIVEN_COPY_LIMIT_BYTES and not any(
                p.device.type == "meta" for p in model.parameters()):
            import copy

            pristine[0] = copy.deepcopy(model)

        def given(dev, shrink):
            if dev == "cpu" and pristine[0] is not None:
                return {"model": pristine[0], "inputs": normalize_inputs(inputs), "notes": [], "given": True}
            return {"model": model, "inputs": normalize_inputs(inputs), "notes": [], "given": True}

        return given
    if hf is not None:
        def from_hf(dev, shrink):
            m, inp, notes, meta = build_hf(hf, dev, dtype, attn_impl, seq_len, shrink)
            info.update(hf_attn_implementation=meta["attn_implementation"],
                        hf={k: meta[k] for k in ("attn_implementation", "attn_implementation_source", "model_class",
                                                 "transformers", "inputs")})
            from ..standins.registry import standin_installed

            if "flash" in (meta["attn_implementation"] or "") and standin_installed("flash_attn"):
                info["standin_route"] = True  # transformers' flash path exists here only through the stand-in
            # built in the dtype, as from_pretrained builds it: modules transformers keeps in float32
            # stay so, and a second cast here would change the model
            return {"model": m, "inputs": inp, "notes": notes, "dtype": meta["dtype"],
                    "inputs_guessed": meta["inputs"], "built_in_dtype": dtype is not None,
                    "repair_inputs": meta["repair_inputs"], "inputs_misfit": meta["inputs_misfit"]}

        return from_hf
    module, factory = parse_target(target)
    mod = import_target_module(module)
    fn = resolve_factory(mod, factory, shown=module)
    _bind_factory_args(fn, factory_kwargs)

    def from_factory(dev, shrink):
        notes = []
        m, inp = split_result(call_factory(fn, dev, factory_kwargs, notes))
        return {"model": m, "inputs": normalize_inputs(inp), "notes": notes}

    return from_factory


def _prepare(built, device, dtype, seq_len=16):
    import torch

    from ..calls.nodes import NAME_TO_DTYPE

    model, inputs, notes = built["model"], built["inputs"], []
    compiled = getattr(model, "_orig_mod", None)
    if compiled is not None and isinstance(model, getattr(torch._dynamo.eval_frame, "OptimizedModule", ())):
        # A torch.compile'd model: compiling cannot run under the tracer's TorchFunctionMode (nor on
        # meta). The model it wraps runs the same code eagerly; compiled, Inductor keeps each op's dtypes.
        notes.append("the model is torch.compile'd (%s); traced the model it wraps (_orig_mod, %s) eagerly"
                     % (type(model).__name__, type(compiled).__name__))
        model = built["model"] = compiled
        built["compiled"] = True
    want = torch.device(device)
    devices = {p.device.type for p in model.parameters()} | {b.device.type for b in model.buffers()}
    if devices and devices != {want.type}:
        notes.append("the model is on %s; moved it to %s" % (", ".join(sorted(devices)), device))
        model = model.to(want)
        built["model"] = model
    if dtype is not None and not built.get("built_in_dtype"):
        model.to(NAME_TO_DTYPE[dtype])
    if inputs is None:
        inputs = guess_inputs(model, want, seq_len)
        if inputs is None:
            if built.get("given"):  # trace(model) in Python: no factory to return them from
                raise TraceError("usage", "the model has no example inputs and its first layer is not an embedding: "
                                          "pass example_inputs= (a tensor, a tuple of the forward's arguments, or a "
                                          "dict of its keyword arguments)")
            raise TraceError("usage", "the factory returned a model without example inputs and its first layer is "
                                      "not an embedding: return (model, example_inputs) from the factory")
        notes.append("no example inputs given; used token ids of shape (1, %d)" % seq_len)
        built["inputs_guessed"] = "token ids of shape (1, %d)" % seq_len
    moved = set()

    def move(t):
        if t.device.type != want.type:
            moved.add(str(t.device))
            return t.to(want)
        return t

    inputs = _map_tensors(inputs, move)
    if dtype is not None:
        target = NAME_TO_DTYPE[dtype]
        cast = []

        def to_dtype(t):
            if t.is_floating_point() and t.dtype != target:
                cast.append(str(t.dtype).replace("torch.", ""))
                return t.to(target)
            return t

        inputs = _map_tensors(inputs, to_dtype)
        if cast:
            notes.append("cast the floating example inputs (%s) to --dtype %s, like the model"
                         % (", ".join(sorted(set(cast))), dtype))
    if moved:
        notes.append("example inputs were on %s; moved them to %s" % (", ".join(sorted(moved)), device))
    return model, inputs, notes


def guess_inputs(model, device, seq_len):
    """Token ids for a model that starts with an embedding (language models); else None."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.Embedding):
            ids = torch.zeros(1, seq_len, dtype=torch.long, device=device)
            params = {}
            try:
                params = inspect.signature(model.forward).parameters
            except (TypeError, ValueError):
                pass
            if "input_ids" in params:
                return (), {"input_ids": ids}
            return (ids,), {}
    return None


# The attributes a model (or its config) states its longest sequence in, by library.
_MAX_SEQ_NAMES = ("max_position_embeddings", "n_positions", "max_seq_len", "max_seq_length", "max_sequence_length",
                  "block_size", "seq_len", "context_length")


def model_max_seq(model):
    """(the longest sequence the model states, "the model's NAME"), or None: the size a fix's cost
    is also measured at (cost.py)."""
    for owner in (getattr(model, "config", None), model):
        for name in _MAX_SEQ_NAMES:
            value = getattr(owner, name, None) if owner is not None else None
            if isinstance(value, int) and not isinstance(value, bool) and 16 <= value <= (1 << 20):
                return value, "the model's %s" % name
    return None


class _InputsMisfit(Exception):
    """The inputs attn-doctor made do not fit the model: its traced forward pass said so."""


def _run_fitting(built, info, device, *rest, shadow=False):
    """``_run``; where the inputs attn-doctor made do not fit the model, once more with inputs that
    ran in a plain forward pass (``repair_inputs``: TraceError "build" where none does)."""
    try:
        return _run(built, info, device, *rest, shadow=shadow)
    except _InputsMisfit:
        repair = built.pop("repair_inputs")
        tracker = built.get("masks")
        with tracker.recording() if tracker is not None else contextlib.nullcontext():
            inputs, described, notes = repair()
        built.update(inputs=((), inputs), inputs_guessed=described)
        if isinstance(info.get("hf"), dict):
            info["hf"]["inputs"] = described
        outcome = _run(built, info, device, *rest, shadow=shadow)
        outcome[4][:0] = notes
        return outcome


def _run(built, info, device, dtype, autocast, train, capability, emulate, continue_after, cwd, shadow=False):
    import torch

    from ..standins import registry as standins_mod
    from .mode import activate
    from ..standins.wrappers import wrap_installed
    from ..calls.nodes import NAME_TO_DTYPE
    from ..dtype_path.tracer import Tracer

    tracker = built.get("masks")
    with tracker.recording() if tracker is not None else contextlib.nullcontext():
        model, (args, kwargs), prep_notes = _prepare(built, device, dtype)
    expected = autocast and {"bf16": "bfloat16", "fp16": "float16"}[autocast]
    if not expected:
        expected = {"bf16": "bfloat16", "fp16": "float16"}.get(dtype or built.get("dtype") or "")
    ac_dtype = NAME_TO_DTYPE[autocast] if autocast else None
    tracer = Tracer(autocast_dtype=ac_dtype, emulate_autocast=emulate, capability=capability,
                    continue_after_bad_sink=continue_after, expected_dtype=expected, mask_tracker=tracker)
    tracer.label_model(model)
    if shadow and device != "meta":
        tracer.shadow = built.get("shadow") or new_shadow()
        tracer.shadow.set_model_dtype(shadow_dtype(model, expected))
    tracer.train = bool(train)  # a CUDA trace in training compares each SDPA call with float64 (numerics.py)
    tracer.representative_seq = model_max_seq(model)
    tracer.compiled_model = bool(built.get("compiled"))  # its flex_attention runs fused (kernels.py)
    for i, a in enumerate(args):
        tracer.label_input(a, "input[%d]" % i)
    for k, a in kwargs.items():
        tracer.label_input(a, "input %s" % k)
    for i, a in enumerate(args):  # nested inputs too: a mask made from them depends on the batch
        for t in _tensors(a):
            tracer.masks.mark_batch(t, "input[%d]" % i)
    for k, a in kwargs.items():
        for t in _tensors(a):
            tracer.masks.mark_batch(t, "input %s" % k)
    flex_notes = [n for n in wrap_installed(standins_mod.LIBRARIES, model) if n.startswith("flex_attention")]
    model.train(bool(train))
    forward_error = None
    emulated = ac_dtype if (emulate and ac_dtype is not None) else None
    real_autocast = (torch.autocast("cuda", dtype=ac_dtype) if (ac_dtype is not None and not emulate)
                     else contextlib.nullcontext())
    device_ctx = torch.device(device) if device != "cuda" else contextlib.nullcontext()
    grad_ctx = contextlib.nullcontext() if train else torch.no_grad()
    off_gpu = device != "cuda"
    mapper = cuda_to(device) if off_gpu else contextlib.nullcontext()
    autocast_map = autocast_on_trace_device(device) if off_gpu else contextlib.nullcontext()
    flash_seen = transformers_sees_flash_attn() if off_gpu else contextlib.nullcontext()
    tracer.outputs = None
    try:
        with device_ctx, grad_ctx, mapper, autocast_map, flash_seen, activate(tracer, emulated):
            with real_autocast:
                out = model(*args, **kwargs)
            tracer.outputs = output_signature(out)
            if tracer.shadow is not None:
                tracer.shadow.finish(out)
            if train:
                loss = next((t for t in _tensors(out) if t.is_floating_point() and t.requires_grad), None)
                if loss is not None:
                    tracer.phase = "backward"
                    loss.float().mean().backward()
    except BaseException as exc:  # noqa: BLE001 - the user's forward may raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        if tracer.outputs is None or getattr(tracer, "phase", None) == "backward":
            tracer.outputs = {"raised": _one_line(exc)}
        if device == "meta" and _is_meta_limitation(exc):
            from ..dtype_path.limits import meta_limitation

            raise TraceError("meta", "%s (%s)" % (meta_limitation(exc), _one_line(exc)), exc)
        if built.get("repair_inputs") is not None and built["inputs_misfit"](exc):
            raise _InputsMisfit() from exc
        from ..dtype_path.raised import raise_record, where_text

        raised = raise_record(tracer, exc, expected)
        if raised is not None and not built.get("inputs_guessed"):
            # the model's own inputs made it raise: the crash is the finding, at its line (AD621)
            tracer.sinks.append(raised)
        elif not tracer.sinks:
            at = (" " + where_text(raised)) if raised is not None else ""
            guessed = ("; the inputs were made by attn-doctor (%s): give the model's own with a factory that returns "
                       "(model, inputs)" % built["inputs_guessed"]) if raised is not None else ""
            err = TraceError("forward", "the forward pass raised %s%s before reaching an attention call%s"
                             % (_one_line(exc), at, guessed), exc)
            err.outputs = tracer.outputs
            raise err
        forward_error = exc
    if getattr(mapper, "mapped", 0):
        prep_notes.append("the forward pass put tensors on cuda; they went to %s, the trace device" % device)
    if capability is not None and tuple(capability) < (8, 0) and any(
            "bfloat16" in (r.get("effective_dtypes") or {}).values() for r in tracer.sinks):
        prep_notes.append("bf16 on sm%d%d is emulated: the GPU has no native bf16 (slow), and FlashAttention-2 "
                          "refuses it; fp16 runs natively (check's AD102)" % tuple(capability))
    if any(r.get("family") == "flex" for r in tracer.sinks):  # said where the model calls flex_attention only
        prep_notes.extend(flex_notes)
    prep_notes.extend(standins_mod.fa4_standin_note(tracer.sinks))
    prep_notes.extend(standins_mod.standin_notes(tracer.sinks))
    dtypes = dict(tracer.param_dtypes)
    if not dtypes:  # a model without parameters computes in its inputs' dtype
        for t in list(_tensors(args)) + list(_tensors(kwargs)):
            if t.is_floating_point():
                name = str(t.dtype).replace("torch.", "")
                dtypes[name] = dtypes.get(name, 0) + t.numel()
    fp32_model = not autocast and bool(dtypes) and max(dtypes, key=dtypes.get) == "float32"
    if tracer.shadow is not None:
        prep_notes.extend(shadow_records(tracer, built))
    sink_list, findings = report_mod.build(tracer, expected_dtype=expected, cwd=cwd, fp32_model=fp32_model)
    return sink_list, findings, tracer, forward_error, prep_notes


def _is_meta_limitation(exc):
    from ..dtype_path.limits import _meta_limitation

    return _meta_limitation(exc)


def _no_attention_message(info, ops, products=0):
    """Why nothing was judged: a model without attention (no product of two activations at all:
    convolutions, MLPs, state-space or Fourier layers), or attention in a form the tracer does not
    know (its products of activations are named)."""
    head = "the forward pass ran (%d ops) but reached no attention call: nothing was judged" % ops
    hf = info.get("hf") or {}
    what = hf.get("model_class") or "the model"
    if not products:
        return head + ("; %s has no attention: no op multiplied two activations (its mixing is convolutions, MLPs, "
                       "state-space or Fourier layers), so there is no attention kernel to judge" % what)
    return head + ("; %s multiplies activations %d time%s, but never as scores (q by k, normalised) applied to values: "
                   "the tracer knows SDPA, flash-attn 2/3/4, xformers, fla, transformers' attention functions and "
                   "attention written out (softmax or linear): is the attention path the one you meant, or a kernel "
                   "it does not know?" % (what, products, "" if products == 1 else "s"))


def _result(status, **kw):
    from ...schemas import envelope

    return envelope("trace", dict(status=status, **kw))


def _failure(exc, info, notes, start):
    status = "usage_error" if exc.kind == "usage" else "failed"
    code = EXIT_USAGE if exc.kind == "usage" else EXIT_FAILED
    out = _result(status, exit_code=code, error={"kind": exc.kind, "message": exc.message, "traceback": _tb(exc.exc)},
                  outputs=getattr(exc, "outputs", None),
                  notes=notes, findings=[], sinks=[], summary={"sinks": 0, "bad_sinks": 0, "errors": 0,
                                                               "warnings": 0, "ops": 0},
                  duration_s=round(time.monotonic() - start, 3))
    out.update(info)
    return out



