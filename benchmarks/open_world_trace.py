"""The open world of `trace --hf`: every architecture the installed transformers ships with a model
class (benchmarks/hf_architectures.py: no list chosen here), each built from a scaled-down config and
traced in the config's default dtype, bf16 and fp16, beside a plain forward of the same model and
inputs in the same process. Label-free invariants, no expected findings needed:

- reached: the trace reached the model's attention calls, or says exactly why not: each such run is
  classed by its report's words (WHY_NOT: a missing library, transformers refusing the config, no
  attention in the model, an input no config describes, ... and the doctor's own gaps, marked *);
- faithful: the traced forward returned what the plain forward returned (each output's dtype and
  shape), or raised what the plain one raised;
- clean: a healthy build gets no error and no warning (notes allowed);
- the exit code, the findings by rule, the time of each trace against the plain build + forward.

N worker processes (--workers, default: the CPU count; benchmarks/worker_pool.py), each importing
torch and transformers once and tracing one architecture after another (one that hangs or kills
its process costs that architecture alone); one JSON line per (architecture, dtype) in --out. Then the tables: counts by outcome, by dtype and by class
of failure, and every architecture that is not clean with its reason (counts, not chosen rows).

    python benchmarks/open_world_trace.py --out ow.jsonl                 # every architecture
    python benchmarks/open_world_trace.py --only llama,vit,whisper       # some
    python benchmarks/open_world_trace.py --sample 40 --seed 1           # a stratified sample
    python benchmarks/open_world_trace.py --table ow.jsonl               # the tables of a finished run
    python benchmarks/open_world_trace.py --device cuda --train --only qwen2   # on a GPU
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DTYPES = (None, "bf16", "fp16")
TIMEOUT = int(os.environ.get("OPEN_WORLD_TIMEOUT", "300"))


# ---------------------------------------------------------------- one architecture (a worker process)

def _plain(hf, dtype, device, train=False, backward=False):
    """The plain forward of what `trace --hf` builds (the same builder, the same inputs), untraced;
    with `train`, in training mode with gradients, as `trace --train` runs it, and with `backward`
    its backward too (the outputs' mean, as --train runs it)."""
    import torch

    from attn_doctor.tracing.runs.hf_models import build_hf
    from attn_doctor.tracing.runs.outputs import _tensors, output_signature

    t0 = time.monotonic()
    model, inputs, notes, meta = build_hf(hf, device, dtype, None, 16)
    built = time.monotonic() - t0
    args, kwargs = inputs
    model.train(train)
    # a model built with some buffers elsewhere runs on one device in training, as the trace runs it
    devices = {t.device.type for t in list(model.parameters()) + list(model.buffers())}
    if devices and devices != {torch.device(device).type}:
        model = model.to(device)
    import contextlib

    def forward(kwargs):
        # as the trace runs it: under the device's context off the GPU, as written on it
        with torch.set_grad_enabled(train), (torch.device(device) if device != "cuda" else contextlib.nullcontext()):
            out = model(*args, **kwargs)
            if backward:
                loss = next((t for t in _tensors(out) if t.is_floating_point() and t.requires_grad), None)
                if loss is not None and device != "meta":
                    loss.float().mean().backward()
            return out

    spent, misfit = 0.0, None

    def signature(out):
        # its outputs' dtypes and shapes, and whether they hold inf or NaN (an overflow shows there)
        sig = output_signature(out)
        if device != "meta" and any(t.is_floating_point() and not bool(torch.isfinite(t).all())
                                    for t in _tensors(out)):
            sig["nonfinite"] = True
        return sig

    try:
        out = forward(kwargs)
        sig = signature(out)
    except Exception as exc:  # noqa: BLE001 - the model's own failure is a result here
        misfit = exc if meta["inputs_misfit"](exc) else None
        sig = {"raised": "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:300])}
    if misfit is not None:
        # the first inputs do not fit: the ones the trace then takes (tried in plain forwards first;
        # where none runs, the TraceError "build" the trace also gives: no build); the plain run is
        # timed as its build and the one forward that runs
        t1 = time.monotonic()
        kwargs = meta["repair_inputs"]()[0]
        spent = time.monotonic() - t1
        try:
            sig = signature(forward(kwargs))
        except Exception as exc:  # noqa: BLE001
            sig = {"raised": "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:300])}
    return sig, built, time.monotonic() - t0 - built - spent


def _faithful(plain, traced, retried_on_cpu):
    if not traced:
        return None  # the trace stopped before the forward (its build or inputs): nothing to compare
    if "raised" in plain or "raised" in traced:
        if retried_on_cpu:
            return None  # meta and CPU raise in their own words
        return plain.get("raised", "").split(":")[0] == traced.get("raised", "").split(":")[0] if (
            "raised" in plain and "raised" in traced) else False
    return plain["tensors"] == traced["tensors"]


def run_one(model_type, workdir, device, train, dtypes):
    import warnings

    warnings.filterwarnings("ignore")
    sys.path.insert(0, HERE)
    import hf_architectures as arch

    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except Exception:  # noqa: BLE001
        pass
    from attn_doctor.tracing.runs.api import trace

    folder = os.path.join(workdir, model_type)
    rows = []
    try:
        made = arch.write_config(model_type, folder)
    except BaseException as exc:  # noqa: BLE001
        return [{"model_type": model_type, "outcome": "no_config",
                 "reason": "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:300])}]
    width_scaled = True
    for dtype in dtypes:
        row = {"model_type": model_type, "class": made["class"], "dtype": dtype or "default"}
        try:
            plain, build_s, plain_s = _plain(folder, dtype, "meta" if device == "meta" else device, train)
        except BaseException as exc:  # noqa: BLE001 - transformers refuses to build it
            if width_scaled:
                # the widths' scaling broke a dependency between sub-configs: layers only
                arch.write_config(model_type, folder, width=False)
                width_scaled = False
                try:
                    plain, build_s, plain_s = _plain(folder, dtype, device, train)
                except BaseException as exc2:  # noqa: BLE001
                    exc = exc2
                    plain = None
            else:
                plain = None
            if plain is None:
                row.update(outcome="no_build", reason="%s: %s" % (
                    type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:300]))
                rows.append(row)
                continue
        t0 = time.monotonic()
        try:
            report = trace(hf=folder, dtype=dtype, device=device, train=train, routes=False)
        except BaseException as exc:  # noqa: BLE001 - the doctor's own crash: a result, counted as such
            row.update(outcome="crash", reason="%s: %s" % (type(exc).__name__, str(exc)[:300]),
                       plain=plain)
            rows.append(row)
            continue
        took = time.monotonic() - t0
        if train and device != "meta":
            # the plain reference of a training step, forward and backward, run after the trace: a
            # backward before it would leave the GPU libraries' state (cuDNN's cached plans) to the trace,
            # which a user's fresh process never has
            try:
                plain = _plain(folder, dtype, device, train, backward=True)[0]
            except BaseException as exc:  # noqa: BLE001
                plain = {"raised": "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:300])}
        findings = report.get("findings") or []
        retried = report.get("device") == "cpu" and device == "meta"
        row.update(
            width_scaled=width_scaled, status=report["status"], exit=report["exit_code"],
            sinks=report["summary"]["sinks"], ops=report["summary"].get("ops"),
            findings=[[f["id"], f["severity"]] for f in findings],
            errors=sum(1 for f in findings if f["severity"] == "error"),
            warnings=sum(1 for f in findings if f["severity"] == "warning"),
            error=(report.get("error") or {}).get("message"), notes=(report.get("notes") or [])[:6],
            device=report.get("device"), trace_s=round(took, 3), plain_s=round(plain_s, 3),
            build_s=round(build_s, 3), plain=plain, traced=report.get("outputs"),
            faithful=_faithful(plain, report.get("outputs") or {}, retried),
            messages=[f["message"][:700] for f in findings if f["severity"] in ("error", "warning")][:4])
        if row["errors"] and device == "meta":
            # an error on meta is confirmed where the same build's plain forward raises on a real
            # device (the CPU checks dtypes as the GPU does): a true fault of the build, not a false alarm
            try:
                cpu, _, _ = _plain(folder, dtype, "cpu", train)
            except BaseException as exc:  # noqa: BLE001
                cpu = {"raised": "%s: %s" % (type(exc).__name__, str(exc)[:200])}
            said = cpu.get("raised") or ("its outputs hold inf or NaN" if cpu.get("nonfinite") else "")
            if said and "not implemented for" not in said:
                row["confirmed_by_plain_cpu"] = said[:300]
        row["faithful"] = comparable_faithful(row)
        row["outcome"] = outcome(row)
        rows.append(row)
    return rows


def comparable_faithful(row):
    """A row's faithfulness, None where meta's plain forward is no reference: where the same build's
    plain CPU forward raises at the op the trace named (confirmed_by_plain_cpu), meta promoted
    silently where a real device raises, and the trace, having reported that raise, went on with the
    operands cast (its report's continued_with): their outputs differ by design."""
    if row.get("confirmed_by_plain_cpu") and row.get("faithful") is False:
        return None
    return row.get("faithful")


def outcome(row):
    """One word for a row: clean, warned, erred (an error on a build whose plain CPU forward runs: a
    false alarm unless shown otherwise), erred_confirmed (the plain CPU forward raises too: the build
    is broken, the error true), stopped (the forward raised after some attention calls),
    no_attention, failed (exit 3, with its reason)."""
    if row.get("status") in ("failed", "usage_error"):
        return "failed"
    if row.get("status") == "no_attention":
        return "no_attention"
    if row.get("errors"):
        return "erred_confirmed" if row.get("confirmed_by_plain_cpu") else "erred"
    if row.get("status") == "partial":
        return "stopped"
    if row.get("warnings"):
        return "warned"
    return "clean"


# ---------------------------------------------------------------- the driver

def stratified(types, n, seed):
    """n architectures spread over the kinds of model (by the head class picked), seeded."""
    import hf_architectures as arch

    maps = arch.mappings()
    by_head = collections.defaultdict(list)
    for t in types:
        head = next((h for h in arch.HEAD_ORDER if t in (maps.get(h) or {})), "other")
        by_head[head].append(t)
    rng = random.Random(seed)
    for v in by_head.values():
        rng.shuffle(v)
    picked, heads = [], sorted(by_head)
    while len(picked) < min(n, len(types)):
        for h in heads:
            if by_head[h] and len(picked) < n:
                picked.append(by_head[h].pop())
    return sorted(picked)


# Why a run reached no attention call, from what the trace (or the plain build) said. The first
# four are answers a user can act on without the doctor (a library to install, transformers' own
# refusal of the config, a model without attention, an input kind no config describes, a model
# too large for the CPU retry); the last three are the doctor's own gaps, counted so they shrink.
WHY_NOT = (
    ("environment", r"requires the \S+ library|No module named|is not installed"),
    ("transformers refuses the config", r"transformers \S+ cannot build|has no \S+ path for"),
    ("not an nn.Module forward", r"is missing the required \"forward\" function"),
    ("input no config describes", r"cannot make from a config|missing \d+ required positional argument: "
                                  r"'(inference_session|past_values|past_time_features)'"),
    ("meta only, too large for the CPU", r"too large to retry on CPU"),
    ("no attention in the model", r"has no attention: no op multiplied two activations"),
    ("attention form not recognised", r"but never as scores"),
    ("no made input runs", r"no inputs attn-doctor made"),
    ("raised before attention", r"the forward pass raised|the forward pass stopped"),
    ("other", r""),
)
DOCTOR_GAPS = ("attention form not recognised", "no made input runs", "raised before attention", "other")


def why_not(row):
    """The class of reason a run reached no attention call (None where it reached one)."""
    if row.get("sinks") or row.get("outcome") in ("clean", "warned", "erred", "erred_confirmed"):
        return None
    said = row.get("reason") or row.get("error") or ""
    return next(name for name, pattern in WHY_NOT if re.search(pattern, said))


def tables(rows):
    lines = []
    per = [r for r in rows if r.get("dtype")]
    archs = sorted({r["model_type"] for r in rows})
    lines.append("architectures: %d; runs (architecture x dtype): %d" % (len(archs), len(per)))
    by_arch = collections.defaultdict(list)
    for r in rows:
        by_arch[r["model_type"]].append(r)
    count = collections.Counter(r["outcome"] for r in rows)
    lines.append("outcomes over all rows: " + ", ".join("%s %d" % kv for kv in count.most_common()))
    dt = collections.defaultdict(collections.Counter)
    for r in per:
        dt[r["dtype"]][r["outcome"]] += 1
    for d in ("default", "bf16", "fp16"):
        if dt.get(d):
            lines.append("  %-8s %s" % (d, ", ".join("%s %d" % kv for kv in dt[d].most_common())))
    ran = [dict(r, faithful=comparable_faithful(r)) for r in per if "faithful" in r]
    unfaithful = [r for r in ran if r.get("faithful") is False]
    lines.append("faithful (traced = plain: outputs' dtypes and shapes, or the same exception): %d of %d compared "
                 "(%d not comparable: retried on CPU with a raise, or a raise on CPU that meta's plain forward "
                 "promoted past)" % (
                     sum(1 for r in ran if r.get("faithful")), sum(1 for r in ran if r.get("faithful") is not None),
                     sum(1 for r in ran if r.get("faithful") is None)))
    for r in unfaithful[:40]:
        lines.append("  UNFAITHFUL %s %s: plain %s / traced %s" % (r["model_type"], r["dtype"],
                                                                   json.dumps(r.get("plain"))[:160],
                                                                   json.dumps(r.get("traced"))[:160]))
    reached = [r for r in per if r.get("sinks")]
    lines.append("reached attention: %d of %d runs" % (len(reached), len(per)))
    why = collections.Counter(w for w in map(why_not, per) if w)
    lines.append("why the others did not, said in each run's report (the doctor's own gaps marked *): " + ", ".join(
        "%s%s %d" % ("*" if name in DOCTOR_GAPS else "", name, why[name]) for name, _ in WHY_NOT if why[name]))
    rules = collections.Counter()
    for r in per:
        for rid, sev in r.get("findings") or ():
            rules["%s %s" % (rid, sev)] += 1
    lines.append("findings by rule: " + (", ".join("%s x%d" % kv for kv in rules.most_common()) or "none"))
    times = [(r["trace_s"], r["build_s"] + r["plain_s"]) for r in per if r.get("trace_s") is not None]
    if times:
        import statistics

        ratio = [t / max(p, 1e-3) for t, p in times]
        lines.append("trace time: median %.2f s (plain build+forward median %.2f s); trace/plain median %.2fx" % (
            statistics.median(t for t, _ in times), statistics.median(p for _, p in times), statistics.median(ratio)))
    lines.append("")
    lines.append("not clean, by architecture (outcome per dtype: default/bf16/fp16) and the first reason:")
    for a in archs:
        rs = by_arch[a]
        if all(r["outcome"] in ("clean", "noted") for r in rs):
            continue
        outs = "/".join(r["outcome"] for r in rs)
        reason = next((r.get("reason") or r.get("error") or (r.get("messages") or [""])[0] for r in rs
                       if r["outcome"] not in ("clean", "noted")), "")
        lines.append("  %-32s %-34s %s" % (a, outs, (reason or "")[:220]))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="open_world_trace.jsonl")
    ap.add_argument("--only", help="comma-separated model types")
    ap.add_argument("--sample", type=int, help="a stratified sample of this many architectures")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--part", help="I/N: the I-th of N interleaved parts of the architectures (1-based), for a "
                                   "sweep split over runs of a bounded length")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--device", default="meta", choices=("meta", "cpu", "cuda"))
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--dtypes", default="default,bf16,fp16")
    ap.add_argument("--table", help="print the tables of a finished run's JSON lines and exit")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    dtypes = tuple(None if d == "default" else d for d in args.dtypes.split(","))
    if args.one:
        for row in run_one(args.one, args.workdir, args.device, args.train, dtypes):
            print(json.dumps(row), flush=True)
        return 0
    if args.serve:
        from worker_pool import serve

        serve(lambda name: run_one(name, args.workdir, args.device, args.train, dtypes))
        return 0
    if args.table:
        with open(args.table, encoding="utf-8") as fh:
            print(tables([json.loads(line) for line in fh if line.strip()]))
        return 0
    sys.path.insert(0, HERE)
    import hf_architectures as arch

    types = arch.architectures()
    if args.only:
        types = [t for t in args.only.split(",") if t]
    elif args.sample:
        types = stratified(types, args.sample, args.seed)
    if args.part:
        i, n = (int(x) for x in args.part.split("/"))
        types = types[i - 1::n]
    workdir = tempfile.mkdtemp(prefix="open-world-")
    t0 = time.monotonic()
    from worker_pool import run_jobs

    # On a GPU each architecture gets a fresh process: cuDNN keeps one backward plan per attention
    # shape, made by the first backward of that shape in the process and reused whatever the output
    # gradient's layout, so one architecture's backward would decide the next one's gradients (a user's
    # trace starts in a fresh process)

    cmd = [sys.executable, os.path.abspath(__file__), "--serve", "--workdir", workdir, "--device", args.device,
           "--dtypes", args.dtypes] + (["--train"] if args.train else [])
    done = [0]
    with open(args.out, "w", encoding="utf-8") as out:
        def on_done(name, got):
            done[0] += 1
            for row in got:
                out.write(json.dumps(row) + "\n")
            out.flush()
            print("[%d/%d] %s %s" % (done[0], len(types), name, "/".join(r["outcome"] for r in got)),
                  file=sys.stderr, flush=True)

        rows = run_jobs(cmd, types, args.workers, TIMEOUT, on_done=on_done, cwd=REPO, recycle=1 if args.device == "cuda" else 40)
    print(tables(rows))
    print("wall time: %.0f s for %d architectures with %d workers" % (time.monotonic() - t0, len(types), args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
