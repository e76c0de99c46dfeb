"""The numerics sweep on this GPU: its table (kernel x case x direction), its time, and the margin
healthy kernels keep under the tolerance, over several seeds.

    python benchmarks/bench_numerics.py [--seeds 3] [--json OUT.json]

Each seed runs the sweep's groups (numerics_child.numerics_groups) as `check` runs them: every group
a process forked from one that imported torch and never touched CUDA, all at once, beside the
compiled flex_attention test with empty Inductor and triton caches (what a new package set pays).
Reported against that compiled test run alone, cold, in the same run: the sweep should hide behind
the compile, not add to it.

The table marks each (case, kernel, dtype): ok, `NaN dQ 45056` (non-finite values where float64 is
finite), `err dK 12x` (error over the tolerance, as a multiple of it), refused, n/a (the kernel's API
cannot express the case), and `*` where SDPA's default dispatch picks that kernel for the case.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _load():
    from attn_doctor.facts import BF16_NATIVE_FROM
    from attn_doctor.probes.target.torch_probe import _load_file_module, installed

    gc = _load_file_module("attn_doctor_gpu_child", os.path.join(ROOT, "attn_doctor", "probes", "target", "gpu_child.py"))
    gc.BF16_NATIVE_FROM = tuple(BF16_NATIVE_FROM)
    libraries = [name for name, probe in gc.LIBRARIES.items() if installed(probe)]
    compiled = [name for name, needs in gc.COMPILED.items() if installed(needs)]
    only = [name for name, needs in gc.NUMERICS_ONLY.items() if installed(needs)]
    return gc, libraries, compiled, only


def _child(conn, gc, group, groups, cache, seed):
    if cache:
        for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
            os.environ[name] = os.path.join(cache, name.lower())
    started = time.perf_counter()
    try:
        if group.startswith("num:"):
            import torch

            out = gc.numerics_child().run_numerics_group(group, gc._sdpa_backends(torch), 0, gc.bf16_native, seed)
        else:
            out = gc.run_smoke_group(group, 0, groups, [], None)
    except BaseException as exc:  # noqa: BLE001
        out = {"status": "error", "error": "%s: %s" % (type(exc).__name__, exc)}
    out["wall_s"] = round(time.perf_counter() - started, 3)
    conn.send(out)
    conn.close()


def run_groups(gc, groups, all_groups, cache, seed):
    """Each group in a forked process, all at once: ({group: answer}, wall seconds)."""
    ctx = multiprocessing.get_context("fork")
    started = time.perf_counter()
    procs = {}
    for group in groups:
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(child, gc, group, all_groups, cache, seed))
        proc.start()
        procs[group] = (proc, parent)
    answers = {}
    for group, (proc, parent) in procs.items():
        answers[group] = parent.recv() if parent.poll(600) else {"status": "timeout"}
        proc.join(5)
    return answers, time.perf_counter() - started


def cell(row):
    status = row.get("status")
    mark = "*" if row.get("default") == row.get("backend") else ""
    if status == "ok":
        return "ok" + mark
    if status == "wrong":
        parts = []
        for name, m in (row.get("directions") or {}).items():
            word = {"out": "fwd", "dq": "dQ", "dk": "dK", "dv": "dV"}[name]
            if m.get("nonfinite"):
                parts.append("NaN %s %d" % (word, m["nonfinite"]))
            elif m.get("allowed"):
                parts.append("err %s %.0fx" % (word, m["err"] / m["allowed"]))
        return "; ".join(parts) + mark
    return {"refused": "refused", "n/a": "n/a", "unavailable": "unavailable"}.get(status, status or "?") + mark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", help="write every result here")
    args = parser.parse_args()
    import torch  # the forks import nothing more; CUDA is theirs alone

    gc, libraries, compiled, only = _load()
    all_groups = gc.smoke_groups(None, libraries, compiled, numerics_only=only)
    num_groups = [g for g in all_groups if g.startswith("num:")]
    compile_groups = [g for g in all_groups if g.startswith("compile:")]
    root = tempfile.mkdtemp(prefix="attn-doctor-bench-numerics-")
    record = {"torch": torch.__version__, "groups": num_groups, "seeds": [], "compile_alone_s": []}
    try:
        for i in range(args.seeds):
            seed = 1234 + i
            cache = os.path.join(root, "seed%d" % i)
            answers, wall = run_groups(gc, num_groups + compile_groups, all_groups, cache, seed)
            record["seeds"].append({"seed": seed, "wall_s": round(wall, 3), "answers": answers})
            alone_cache = os.path.join(root, "alone%d" % i)
            if compile_groups:
                _answers, alone = run_groups(gc, compile_groups, all_groups, alone_cache, seed)
                record["compile_alone_s"].append(round(alone, 3))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(record)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(record, fh, indent=1)


def report(record) -> None:
    import torch

    print("torch %s, cuDNN %s, %s" % (torch.__version__, torch.backends.cudnn.version(),
                                      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"))
    first = record["seeds"][0]["answers"]
    rows, columns = {}, []
    for group, answer in first.items():
        if answer.get("status") != "ok":
            print("group %s: %s %s" % (group, answer.get("status"), answer.get("error")))
        for row in answer.get("numerics", []):
            column = "%s %s" % (row["backend"], {"float16": "fp16", "bfloat16": "bf16"}.get(row["dtype"], row["dtype"]))
            if column not in columns:
                columns.append(column)
            rows.setdefault(row["case"], {})[column] = cell(row)
    width = max([len(c) for c in rows] + [4])
    print("\n%-*s | %s" % (width, "case", " | ".join(columns)))
    for case, cells in rows.items():
        print("%-*s | %s" % (width, case, " | ".join(cells.get(c, "-").ljust(len(c)) for c in columns)))
    # Margins: the worst ratio of error to tolerance among results judged ok, per kernel, over every seed.
    margins, unstable = {}, set()
    for seed in record["seeds"]:
        for answer in seed["answers"].values():
            for row in answer.get("numerics", []):
                key = (row["backend"], row["dtype"])
                if row.get("status") == "ok":
                    margins[key] = max(margins.get(key, 0.0), row.get("worst", 0.0))
    verdicts = {}
    for seed in record["seeds"]:
        for answer in seed["answers"].values():
            for row in answer.get("numerics", []):
                verdicts.setdefault((row["backend"], row["dtype"], row["case"]), set()).add(row.get("status"))
    unstable = {k for k, v in verdicts.items() if len(v) > 1}
    print("\nworst error / tolerance among passing results, over %d seeds (1.0 = at the tolerance):" % len(record["seeds"]))
    for (backend, dtype), worst in sorted(margins.items()):
        print("  %-22s %-9s %.3f" % (backend, dtype, worst))
    print("verdicts that changed between seeds: %s" % (sorted(unstable) or "none"))
    print("\ntime (wall, the sweep's groups and the compiled test side by side, forked from one torch import):")
    for seed in record["seeds"]:
        groups = ", ".join("%s %.2fs" % (g, a.get("wall_s", float("nan"))) for g, a in seed["answers"].items())
        print("  seed %d: all %.2f s (%s)" % (seed["seed"], seed["wall_s"], groups))
    if record["compile_alone_s"]:
        alone = statistics.median(record["compile_alone_s"])
        together = statistics.median(s["wall_s"] for s in record["seeds"])
        print("compiled flex test alone, cold: median %.2f s; with the sweep beside it: %.2f s (%.2fx)" % (alone, together, together / alone))


if __name__ == "__main__":
    main()
