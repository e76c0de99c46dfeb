"""The open world of `trace MODULE:FACTORY` beyond transformers: every entry of benchmarks/zoo.py
(timm, diffusers, open_clip, torchvision, torchaudio, reference implementations: enumerated from
each library, scaled down), in bf16 and fp16, traced as the CLI runs it (`attn-doctor trace
benchmarks/zoo.py:build -a codebase=... -a name=... -a dtype=...`) on meta (the default) and on the
CPU (`--device cpu`), beside a plain forward of the same factory on the CPU in the same process.
Healthy models, so label-free invariants:

- reached: the trace reached the model's attention calls, or says why not (status, its message);
- clean: no finding of severity error or warning;
- faithful: the traced forward returned what the plain forward returned (each output's dtype and
  shape), or raised what the plain one raised;
- the exit code, the findings by id with their message and line, the trace's time against the
  plain build + forward.

Outcomes of a row (entry x dtype x device): clean, warned, erred, no_attention, failed (the trace
could not run: exit 3 with its reason, or the doctor crashed), unfaithful (reached and judged, but
its outputs differ from the plain forward's), no_build (the zoo's own factory does not build or run
this entry in float32: the zoo's gap, not the doctor's).

Run it in a venv with the libraries (see zoo.py; torchaudio needs a venv of its own):

    PYTHONPATH=. /work/venvs/zoo/bin/python benchmarks/open_world_zoo.py --out zoo.jsonl --workers 2
    ... --split build                        # timm and diffusers only (the codebases rules are developed on)
    ... --only timm/vit_small_patch16_224,diffusers/FluxTransformer2DModel
    ... --codebase open_clip --sample 20 --seed 1   # a sample stratified by codebase and family
    /work/venvs/zoo-audio/bin/python benchmarks/open_world_zoo.py --codebase torchaudio --out audio.jsonl
    python benchmarks/open_world_zoo.py --table zoo.jsonl [audio.jsonl ...]   # the tables of finished runs
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TARGET = "benchmarks/zoo.py:build"
DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
DEVICES = ("meta", "cpu")
TIMEOUT = int(os.environ.get("OPEN_WORLD_TIMEOUT", "400"))
OUTCOMES = ("clean", "warned", "erred", "erred_confirmed", "no_attention", "failed", "unfaithful", "no_build")


def _one_line(exc):
    return "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:300])


def _model_line(exc):
    """The last frame of the traceback outside torch, the zoo and this file: the model's line that raised."""
    best = None
    for fr in traceback.extract_tb(exc.__traceback__):
        f = fr.filename.replace(os.sep, "/")
        if "/torch/" in f or f.endswith("/zoo.py") or f.endswith("/open_world_zoo.py") or "/attn_doctor/" in f:
            continue
        best = "%s:%d" % (_short(f), fr.lineno)
    return best


def _short(path):
    i = path.find("site-packages/")
    return path[i + len("site-packages/"):] if i >= 0 else os.path.relpath(path, REPO) if path.startswith(REPO) else path


def _plain(zoo, codebase, name, dtype):
    """The plain build + forward on the CPU (eval, no grad, as the trace runs it): (signature, seconds)."""
    import torch

    from attn_doctor.tracing.runs.factory import normalize_inputs
    from attn_doctor.tracing.runs.outputs import output_signature

    t0 = time.monotonic()
    with torch.device("cpu"):
        model, inputs = zoo.build(codebase, name, dtype)
        args, kwargs = normalize_inputs(inputs) or ((), {})
        try:
            with torch.no_grad():
                sig = output_signature(model(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the model's own failure is a result here
            sig = {"raised": _one_line(exc), "line": _model_line(exc)}
    return sig, time.monotonic() - t0


def _faithful(plain, traced):
    if not traced:
        return None  # the trace stopped before the forward: nothing to compare
    if "raised" in plain or "raised" in traced:
        if "raised" in plain and "raised" in traced:
            return plain["raised"].split(":")[0] == traced["raised"].split(":")[0]
        return False
    return plain["tensors"] == traced["tensors"]


def outcome(row):
    """One word for a row: clean, warned, erred (an error where the plain CPU forward of the same
    factory runs: a false alarm unless shown otherwise), erred_confirmed (the plain forward raises
    too: the model is broken in that dtype, the error true), no_attention, failed (the trace could not
    run, or stopped with no finding), unfaithful (judged clean, but its outputs differ from the plain
    forward's), no_build (the zoo's factory does not run the entry in float32)."""
    if row.get("outcome") == "no_build":
        return "no_build"
    if row.get("status") in ("failed", "usage_error") or row.get("crash"):
        return "failed"
    if row.get("status") == "no_attention":
        return "no_attention"
    if row.get("errors"):
        return "erred_confirmed" if "raised" in (row.get("plain") or {}) else "erred"
    if row.get("warnings"):
        return "warned"
    if row.get("faithful") is False:
        return "unfaithful"
    if row.get("status") == "partial":
        return "failed"
    return "clean"


def run_one(job, devices, dtypes):
    import warnings

    warnings.filterwarnings("ignore")
    import logging

    logging.disable(logging.WARNING)
    sys.path.insert(0, HERE)
    import zoo

    from attn_doctor.tracing.runs.api import trace

    codebase, _, name = job.partition("/")
    base = {"job": job, "model_type": job, "codebase": codebase, "name": name, "split": zoo.SPLIT.get(codebase)}
    try:
        t0 = time.monotonic()
        with _cpu():
            # the size found once (cached), imports done, not timed below; a float32 forward that
            # raises is the zoo's own gap (no_build), not a healthy model to judge
            import torch

            from attn_doctor.tracing.runs.factory import normalize_inputs

            model, inputs = zoo.build(codebase, name, "float32")
            args, kwargs = normalize_inputs(inputs) or ((), {})
            with torch.no_grad():
                model(*args, **kwargs)
        base["warm_s"] = round(time.monotonic() - t0, 3)
    except BaseException as exc:  # noqa: BLE001
        return [dict(base, outcome="no_build", reason=_one_line(exc), line=_model_line(exc))]
    rows = []
    for short in dtypes:
        dtype = DTYPES[short]
        try:
            plain, plain_s = _plain(zoo, codebase, name, dtype)
        except BaseException as exc:  # noqa: BLE001
            plain, plain_s = {"raised": _one_line(exc), "line": _model_line(exc)}, None
        for device in devices:
            row = dict(base, dtype=short, device=device, plain=plain, plain_s=plain_s and round(plain_s, 3))
            t1 = time.monotonic()
            try:
                report = trace(target=TARGET, factory_kwargs={"codebase": codebase, "name": name, "dtype": dtype},
                               device=device, cwd=REPO, route_timeout=180)
            except BaseException as exc:  # noqa: BLE001 - the doctor's own crash: a result
                row.update(crash=True, reason="the doctor crashed: " + _one_line(exc), outcome="failed",
                           trace_s=round(time.monotonic() - t1, 3))
                rows.append(row)
                continue
            findings = report.get("findings") or []
            loud = [f for f in findings if f.get("severity") in ("error", "warning")]
            row.update(
                status=report["status"], exit=report["exit_code"], sinks=report["summary"]["sinks"],
                ops=report["summary"].get("ops"), traced_on=report.get("device"),
                findings=[[f["id"], f["severity"]] for f in findings],
                errors=sum(1 for f in findings if f["severity"] == "error"),
                warnings=sum(1 for f in findings if f["severity"] == "warning"),
                said=[{"id": f["id"], "severity": f["severity"], "line": _finding_line(f), "count": f.get("count"),
                       "message": f["message"][:600]} for f in loud[:6]],
                error=(report.get("error") or {}).get("message"), notes=(report.get("notes") or [])[:6],
                routes=[[r.get("name"), r.get("verdict")] for r in report.get("routes") or []],
                traced=report.get("outputs"), trace_s=round(time.monotonic() - t1, 3))
            row["faithful"] = _faithful(plain, report.get("outputs") or {})
            row["outcome"] = outcome(row)
            rows.append(row)
    return rows


def _finding_line(f):
    sink = f.get("sink") or {}
    if sink.get("file"):
        return "%s:%s" % (_short(sink["file"]), sink.get("line"))
    return None


class _cpu(object):
    def __enter__(self):
        import torch

        self.ctx = torch.device("cpu")
        return self.ctx.__enter__()

    def __exit__(self, *a):
        return self.ctx.__exit__(*a)


# ---------------------------------------------------------------- the driver

def stratified(items, n, seed):
    """n entries spread over codebases and families, seeded: the first entry of every family of every
    codebase (codebases in turn) before any family's second, so any prefix covers the families
    evenly and n >= the number of families covers them all."""
    rng = random.Random(seed)
    by_cb = collections.defaultdict(lambda: collections.defaultdict(list))
    for e in items:
        by_cb[e["codebase"]][e["family"]].append(e)
    firsts, rest = {}, {}
    for cb, fams in by_cb.items():
        order = sorted(fams)
        rng.shuffle(order)
        firsts[cb] = [fams[f].pop(rng.randrange(len(fams[f]))) for f in order]
        rest[cb] = [x for f in order for x in fams[f]]
    picked = []
    for pools in (firsts, rest):
        while any(pools.values()) and len(picked) < min(n, len(items)):
            for cb in sorted(pools):
                if pools[cb] and len(picked) < n:
                    picked.append(pools[cb].pop(0))
    return picked


def tables(rows):
    lines = []
    for r in rows:
        if r.get("outcome") not in ("timeout", "worker_died", "crash"):
            r["outcome"] = outcome(r)
    runs = [r for r in rows if r.get("dtype") or r["outcome"] in ("no_build", "timeout", "worker_died", "crash")]
    jobs = sorted({r["job"] if "job" in r else r["model_type"] for r in rows})
    covers = {}
    for r in rows:
        covers.setdefault(r.get("job", r["model_type"]), r.get("covers") or 1)
    lines.append("entries: %d (covering %d library names); runs (entry x dtype x device): %d" % (
        len(jobs), sum(covers.values()), len(runs)))
    by_cb = collections.defaultdict(collections.Counter)
    for r in runs:
        by_cb[r.get("codebase") or r["model_type"].split("/")[0]][r["outcome"]] += 1
    cols = list(OUTCOMES) + sorted({o for c in by_cb.values() for o in c} - set(OUTCOMES))
    lines.append("")
    lines.append("| codebase | split | entries | " + " | ".join(cols) + " | runs |")
    lines.append("|---|---|---|" + "---|" * len(cols) + "---|")
    total = collections.Counter()
    n_entries = collections.Counter(r.get("codebase") or r["model_type"].split("/")[0] for r in rows
                                    if r is next(x for x in rows if x.get("job", x["model_type"]) == r.get("job", r["model_type"])))
    for cb in sorted(by_cb):
        c = by_cb[cb]
        total.update(c)
        split = next((r.get("split") for r in rows if (r.get("codebase") or "") == cb and r.get("split")), "")
        lines.append("| %s | %s | %d | %s | %d |" % (cb, split, n_entries[cb], " | ".join(str(c[o]) for o in cols),
                                                    sum(c.values())))
    lines.append("| **all** | | %d | %s | %d |" % (sum(n_entries.values()), " | ".join(str(total[o]) for o in cols),
                                                   sum(total.values())))
    lines.append("")
    for key in ("dtype", "device"):
        c = collections.defaultdict(collections.Counter)
        for r in runs:
            if r.get(key):
                c[r[key]][r["outcome"]] += 1
        lines.append("by %s: %s" % (key, "; ".join("%s: %s" % (k, ", ".join("%s %d" % kv for kv in v.most_common()))
                                                   for k, v in sorted(c.items()))))
    ran = [r for r in runs if "faithful" in r]
    lines.append("faithful (traced = plain: outputs' dtypes and shapes, or the same exception): %d of %d compared "
                 "(%d not comparable: the trace stopped before the forward)" % (
                     sum(1 for r in ran if r["faithful"]), sum(1 for r in ran if r["faithful"] is not None),
                     sum(1 for r in ran if r["faithful"] is None)))
    lines.append("reached attention: %d of %d runs" % (sum(1 for r in runs if r.get("sinks")), len(runs)))
    rules = collections.Counter()
    for r in runs:
        for rid, sev in r.get("findings") or ():
            rules["%s %s" % (rid, sev)] += 1
    lines.append("findings by rule (runs x findings): " + (", ".join("%s x%d" % kv for kv in rules.most_common()) or "none"))
    times = [(r["trace_s"], r["plain_s"]) for r in runs if r.get("trace_s") is not None and r.get("plain_s")]
    if times:
        import statistics

        for dev in DEVICES:
            t = [(r["trace_s"], r["plain_s"]) for r in runs if r.get("device") == dev and r.get("trace_s") is not None
                 and r.get("plain_s")]
            if t:
                lines.append("trace time on %s: median %.2f s, max %.1f s (plain build+forward on CPU median %.2f s); "
                             "trace/plain median %.1fx" % (dev, statistics.median(a for a, _ in t), max(a for a, _ in t),
                                                            statistics.median(b for _, b in t),
                                                            statistics.median(a / max(b, 1e-3) for a, b in t)))
    lines.append("")
    lines.append("every run that is not clean, with its reason:")
    for r in sorted(runs, key=lambda r: (r.get("codebase") or "", r.get("job", r["model_type"]), r.get("dtype") or "",
                                         r.get("device") or "")):
        if r["outcome"] == "clean":
            continue
        head = "  %-62s %-4s %-4s %-12s" % (r.get("job", r["model_type"]), r.get("dtype") or "-", r.get("device") or "-",
                                            r["outcome"])
        lines.append(head + " " + reason(r))
    return "\n".join(lines)


def reason(r):
    if r.get("said"):
        return " | ".join("%s %s at %s: %s" % (s["id"], s["severity"], s.get("line"), s["message"][:300])
                          for s in r["said"][:3])
    if r["outcome"] == "unfaithful":
        return "plain %s / traced %s" % (json.dumps(r.get("plain"))[:200], json.dumps(r.get("traced"))[:200])
    return (r.get("reason") or r.get("error") or "")[:400] + (" (%s)" % r["line"] if r.get("line") else "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="open_world_zoo.jsonl")
    ap.add_argument("--only", help="comma-separated CODEBASE/NAME entries")
    ap.add_argument("--codebase", help="comma-separated codebases")
    ap.add_argument("--split", default="all", choices=("build", "held", "all"))
    ap.add_argument("--sample", type=int, help="a sample of this many entries, stratified by codebase and family")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--devices", default=",".join(DEVICES))
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--resume", action="store_true", help="keep --out's rows, run only the entries it lacks "
                    "(or that timed out), appending")
    ap.add_argument("--table", nargs="+", help="print the tables of finished runs' JSON lines and exit")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    devices, dtypes = args.devices.split(","), args.dtypes.split(",")
    if args.serve:
        from worker_pool import serve

        serve(lambda job: run_one(job, devices, dtypes))
        return 0
    if args.table:
        rows = []
        for path in args.table:
            with open(path, encoding="utf-8") as fh:
                rows.extend(json.loads(line) for line in fh if line.strip())
        print(tables(rows))
        return 0
    sys.path.insert(0, HERE)
    import zoo

    t0 = time.monotonic()
    cbs = [c for c in (args.codebase.split(",") if args.codebase else zoo.CODEBASES)
           if args.split == "all" or zoo.SPLIT[c] == args.split]
    items = zoo.entries(cbs)
    meta = {"%s/%s" % (e["codebase"], e["name"]): e for e in items}
    print("enumerated %d entries in %.0f s: %s" % (len(items), time.monotonic() - t0, ", ".join(
        "%s %d" % kv for kv in sorted(collections.Counter(e["codebase"] for e in items).items()))), file=sys.stderr)
    if args.only:
        jobs = [j for j in args.only.split(",") if j]
    elif args.sample:
        jobs = ["%s/%s" % (e["codebase"], e["name"]) for e in stratified(items, args.sample, args.seed)]
    else:
        # all, in a stratified order (codebases in turn, each family's first before any second): a run
        # stopped early is a stratified sample
        jobs = ["%s/%s" % (e["codebase"], e["name"]) for e in stratified(items, len(items), args.seed)]
    kept = []
    if args.resume and os.path.exists(args.out):
        with open(args.out, encoding="utf-8") as fh:
            kept = [json.loads(line) for line in fh if line.strip()]
        kept = [r for r in kept if r.get("outcome") not in ("timeout", "worker_died")]
        have = {r.get("job") for r in kept}
        jobs = [j for j in jobs if j not in have]
    from worker_pool import run_jobs

    cmd = [sys.executable, os.path.abspath(__file__), "--serve", "--devices", args.devices, "--dtypes", args.dtypes]
    done = [0]
    with open(args.out, "w", encoding="utf-8") as out:
        for row in kept:
            out.write(json.dumps(row) + "\n")
        def on_done(job, got):
            done[0] += 1
            e = meta.get(job) or {}
            for row in got:
                row.setdefault("job", job)
                row.setdefault("codebase", job.partition("/")[0])
                row.update(family=e.get("family"), covers=len(e.get("covers") or [job]), split=zoo.SPLIT.get(
                    row["codebase"]))
                out.write(json.dumps(row) + "\n")
            out.flush()
            print("[%d/%d] %s %s" % (done[0], len(jobs), job, "/".join(r["outcome"] for r in got)), file=sys.stderr,
                  flush=True)

        rows = kept + run_jobs(cmd, jobs, args.workers, TIMEOUT, on_done=on_done, cwd=REPO, recycle=30)
    print(tables(rows))
    print("wall time: %.0f s for %d entries with %d workers" % (time.monotonic() - t0, len(jobs), args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
