"""The float64 shadow of a trace (numerics/shadow.py) needs values: a CPU run. A trace on CPU carries it
along; a trace on meta (the default, any size) gets a second run on CPU for it, of the same model
where it fits in memory as float64, else of a reduced build with the same widths (fewer layers, for
``--hf``), said in a note. Only the measured findings of that run join the meta trace's report: the
rest it already judged."""

from __future__ import annotations

import contextlib
import os

from ..errors import TraceError, _one_line

# The float64 shadow keeps a twin of every weight and activation: a model above this many bytes of
# parameters and buffers (as built) is shadowed in a reduced build, or not at all.
SHADOW_LIMIT_BYTES = int(os.environ.get("ATTN_DOCTOR_SHADOW_LIMIT", str(512 * 1024 ** 2)))
# what the shadow's CPU run adds to a meta trace's report: what only values show, and a crash the meta
# device let through (its kernels check less: a bitwise op on a float mask, a fill that overflows)
MEASURED_IDS = frozenset(("AD621", "AD624", "AD626", "AD627"))


def new_shadow():
    from ..numerics.shadow import Shadow

    return Shadow()


def shadow_dtype(model, expected):
    """The dtype the shadow judges a model's rounding by: ``expected`` (the half dtype it computes in),
    else its parameters' dtype; float32 models at float16's rounding, the narrowest a table or a
    score of theirs is cast to by a line of their own."""
    import torch

    if expected is None:
        counts = {}
        for p in model.parameters():
            if p.is_floating_point():
                counts[p.dtype] = counts.get(p.dtype, 0) + p.numel()
        dtype = max(counts, key=counts.get) if counts else torch.float32
    else:
        dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(expected, torch.float32)
    return dtype if dtype in (torch.bfloat16, torch.float16) else torch.float16


@contextlib.contextmanager
def measuring_construction(shadow):
    """The model's construction measured by ``shadow`` (None: not measured)."""
    if shadow is None:
        yield
        return
    from ..dtype_path.tracer import Tracer
    from ..numerics.shadow import measuring_construction as mode

    shadow.building = True
    try:
        with mode(shadow, Tracer()):
            yield
    finally:
        shadow.building = False


def shadow_records(tracer, built):
    """The shadow's events as the tracer's records; the notes a user reads about the measurement."""
    from ..dtype_path.measured import headroom_note, records

    shadow = tracer.shadow
    records(tracer, shadow)
    weights = "the model's random initial weights" if built.get("inputs_guessed") or built.get("hf_random") else \
        "the weights the factory built"
    notes = []
    note = headroom_note(shadow, weights)
    if note:
        notes.append(note)
    if shadow.failed:
        ops = ", ".join("%s (%d)" % kv for kv in sorted(shadow.failed.items())[:6])
        notes.append("the float64 shadow took the results of %s as they are (no float64 kernel): precision is "
                     "not measured inside them" % ops)
    return notes


def model_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters()) + sum(
        b.numel() * b.element_size() for b in model.buffers())


# Where the inputs are attn-doctor's own (--hf), the shadow runs them longer than the trace's few
# tokens: a position table's error grows with the positions, and 16 of them hide it. Bounded by what a
# float64 forward of the build costs on a CPU (parameters x tokens).
SHADOW_SEQ = 256
SHADOW_WORK = 2e9


def shadow_seq_len(model, seq_len, max_seq):
    """The token count the shadow's run of made inputs uses: up to SHADOW_SEQ, the model's longest
    (``max_seq``: (length, where it says so) or None) and what SHADOW_WORK affords."""
    params = sum(p.numel() for p in model.parameters()) or 1
    longest = max_seq[0] if max_seq else SHADOW_SEQ
    return max(seq_len, min(SHADOW_SEQ, longest, int(SHADOW_WORK // params)))


# What the shadow redoes is each op in float64 and a comparison: about 100 ns an element read on a
# CPU core. Unless asked for (--shadow), a forward reading more than this many elements is not measured.
SHADOW_ELEMENTS = float(os.environ.get("ATTN_DOCTOR_SHADOW_ELEMENTS", "5e7"))


def shadow_work(elements, seq_len, longer, forced=False):
    """(the token count the shadow runs made inputs at, or None; a note where it is not run): a
    forward that reads ``elements`` at ``seq_len`` is measured where that fits SHADOW_ELEMENTS (at a
    longer length only as far as it still fits), always where ``forced``."""
    if forced:
        return longer, None
    if elements > SHADOW_ELEMENTS:
        return None, ("precision was not measured: the forward pass reads %.2g elements, more than a float64 "
                      "shadow measures in seconds on a CPU (%.2g, ATTN_DOCTOR_SHADOW_ELEMENTS); --shadow measures "
                      "it all the same" % (elements, SHADOW_ELEMENTS))
    if longer > seq_len and elements:
        longer = max(seq_len, min(longer, int(seq_len * SHADOW_ELEMENTS / elements)))
    return longer, None


def measure_on_cpu(builder, hf, model_size, run, run_args, fallback=None):
    """A second run on CPU for the shadow of a meta trace: (findings, notes, measured: whether the
    shadow ran). ``run`` is the trace's own run (run._run_fitting) and ``run_args`` its arguments
    after the device."""
    shrink = False
    notes = []
    if model_size > SHADOW_LIMIT_BYTES:
        if not hf:
            return [], False, ["precision was not measured: the model has %.1f GB of weights, too large for a float64 "
                        "shadow on CPU (the limit is ATTN_DOCTOR_SHADOW_LIMIT, %.1f GB); return a smaller config "
                        "(fewer layers) from the factory to measure it" % (model_size / 1e9,
                                                                            SHADOW_LIMIT_BYTES / 1e9)]
        shrink = True
    try:
        if shrink and model_bytes(builder("meta", True)["model"]) > SHADOW_LIMIT_BYTES:
            return [], False, ["precision was not measured: even a 2-layer build of the config is too large for a "
                        "float64 shadow on CPU (the limit is ATTN_DOCTOR_SHADOW_LIMIT, %.1f GB)"
                        % (SHADOW_LIMIT_BYTES / 1e9)]
        try:
            built = builder("cpu", shrink, new_shadow())
            sink_list, findings, tracer, forward_error, prep_notes = run(built, {}, "cpu", *run_args, shadow=True)
        except TraceError:
            if fallback is None:
                raise
            # the longer inputs do not fit this model: the trace's own length
            built = fallback("cpu", shrink, new_shadow())
            sink_list, findings, tracer, forward_error, prep_notes = run(built, {}, "cpu", *run_args, shadow=True)
    except TraceError as exc:
        return [], False, ["precision was not measured: the float64 shadow's CPU run could not run (%s)" % exc.message]
    except Exception as exc:  # noqa: BLE001 - the user's code on CPU; the meta trace stands
        return [], False, ["precision was not measured: the float64 shadow's CPU run raised %s" % _one_line(exc)]
    if shrink:
        notes.append("precision measured on a 2-layer build of the config (the same widths; the full model is too "
                     "large for a float64 shadow on CPU)")
    notes.extend(n for n in prep_notes if n.startswith(("float16 values reach", "the float64 shadow")))
    measured = [f for f in findings if f["id"] in MEASURED_IDS]
    return measured, True, notes


def merge_measured(findings, notes, measured):
    """A meta trace's findings and notes with what its CPU shadow run measured (measure_on_cpu's
    triple): the measured findings join, and where the shadow ran the recognised form of a table in
    half (AD622) gives way to the measurement."""
    found, ran, measured_notes = measured
    if ran:
        findings = [f for f in findings if f["id"] != "AD622"]
    known = {(f["id"], f["sink"]["file"], f["sink"]["line"]) for f in findings}
    if any(f["severity"] == "error" for f in findings):
        # the meta trace found where the job fails (and went on past it in the model's dtype): a crash
        # the CPU run meets after that is the trace going on, not the job
        found = [f for f in found if f["id"] != "AD621"]
    added = [f for f in found if (f["id"], f["sink"]["file"], f["sink"]["line"]) not in known]
    if any(f["id"] == "AD621" for f in added):
        notes = notes + ["the forward pass raised on CPU where meta let it through (AD621): meta's kernels do not "
                         "check what CPU and GPU kernels do"]
    return findings + added, notes + [n for n in measured_notes if n not in notes]


def measured_of(report):
    """measure_on_cpu's triple from a whole CPU trace report with the shadow on."""
    ok = report.get("status") in ("ok", "partial")
    return ([f for f in report.get("findings") or () if f["id"] in MEASURED_IDS], ok,
            [n for n in report.get("notes") or () if n.startswith(("float16 values reach", "the float64 shadow"))])
