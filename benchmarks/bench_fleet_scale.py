"""`attn-doctor fleet DIR` at 1,000 to 10,000 nodes: time, peak RSS and how they grow.

    python benchmarks/bench_fleet_scale.py [--sizes 1000,2000,5000,10000] [--repeat 3] [--keep DIR]

The reports are real: `check --from-report tests/fixtures/facts/h100.json --json` (63 KB), and
three odd groups made the same way from that facts file changed (5 nodes with an older driver, 20
with another triton, 12 with another transformers: 37 odd nodes), written as a node would write
them: every node its own host name, creation time and timings (every duration_s and *_ms drawn
anew), so that no two files are byte-identical and only the fleet view can tell them alike. Plus
one broken report (cut short, as when a node dies while writing it).

Rows (each a fresh `python -m attn_doctor fleet DIR` process, median of --repeat, peak RSS from
wait4):
  start-up     `fleet` over one report: the fixed cost (imports, the schema's view types)
  N reports    the human report; `--json` at the largest N too
Ratios: each N's time against the smallest N's (linear growth: the ratio of the sizes), and the
time per report after start-up. Targets (issue 33): 10,000 reports in at most 10 s on the 2-core
machine, peak RSS at most 300 MB, linear growth. The human report at the largest N is printed last.
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
FACTS = ROOT / "tests" / "fixtures" / "facts" / "h100.json"
ENV = dict(os.environ, PYTHONWARNINGS="ignore", COLUMNS="160", NO_COLOR="1")

# name -> (how many nodes, where: their node numbers for a size N, the change to the facts)
ODD = {
    "old-driver": (5, lambda n: [12, 13, 14, 15, 133], lambda f: f["gpu"].update(driver_version="570.86.15")),
    "other-triton": (20, lambda n: [250 + i * (n - 300) // 20 for i in range(20)],
                     lambda f: f["packages"]["triton"].update(version="3.5.0")),
    "other-transformers": (12, lambda n: list(range(n * 7 // 10, n * 7 // 10 + 12)),
                           lambda f: f["packages"]["transformers"].update(version="5.16.0")),
}


def _report(facts: dict, work: Path, name: str) -> dict:
    path = work / f"{name}.facts.json"
    path.write_bytes(msgspec.json.encode(facts))
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--from-report", str(path), "--json"],
                          capture_output=True, env=ENV, check=False)
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"check --from-report {name}: exit {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return msgspec.json.decode(proc.stdout)


def _timings(doc, out: list) -> None:
    """Every (holder, key) of a timing: what a node measures anew on every run."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if (k == "duration_s" or k.endswith("_ms")) and isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append((doc, k))
            else:
                _timings(v, out)
    elif isinstance(doc, list):
        for v in doc:
            _timings(v, out)


def generate(n: int, folder: Path, reports: dict[str, dict]) -> None:
    folder.mkdir(parents=True)
    rng = random.Random(n)
    docs = {name: copy.deepcopy(doc) for name, doc in reports.items()}
    timings = {name: [] for name in docs}
    for name, doc in docs.items():
        _timings(doc, timings[name])
    which = {}
    for name, (_, where, _) in ODD.items():
        for i in where(n):
            which[i] = name
    encoder = msgspec.json.Encoder()
    for i in range(n):
        name = which.get(i, "majority")
        doc = docs[name]
        host = f"node{i:05d}"
        doc["facts"]["platform"]["hostname"] = host
        doc["created"] = f"2026-11-24T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00"
        for holder, key in timings[name]:
            holder[key] = round(rng.uniform(0.01, 30.0), 3)
        (folder / f"{host}.json").write_bytes(msgspec.json.format(encoder.encode(doc), indent=2) + b"\n")  # as --json prints
    whole = msgspec.json.format(encoder.encode(docs["majority"]), indent=2)
    (folder / "node99999.json").write_bytes(whole[: len(whole) // 3])  # a node died while writing it


def run(args: list[str]) -> tuple[float, float, int, bytes]:
    """(seconds, peak RSS in MB, exit code, stdout) of one fresh attn-doctor process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "attn_doctor", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    out = proc.stdout.read()
    proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - start
    return elapsed, usage.ru_maxrss / 1024, proc.returncode, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,2000,5000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="write the report folders here and keep them")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="attn-doctor-fleet-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        facts = msgspec.json.decode(FACTS.read_bytes())
        reports = {"majority": _report(facts, work, "majority")}
        for name, (_, _, change) in ODD.items():
            changed = copy.deepcopy(facts)
            change(changed)
            reports[name] = _report(changed, work, name)
        size = len(msgspec.json.format(msgspec.json.encode(reports["majority"]), indent=2)) + 1
        print(f"report: {FACTS.relative_to(ROOT)} through check --from-report --json, {size:,} B; odd groups: "
              + ", ".join(f"{name} x{count}" for name, (count, _, _) in ODD.items()) + "; 1 broken report")
        folders = {}
        for n in sizes:
            folders[n] = work / f"n{n}"
            if not folders[n].exists():
                start = time.perf_counter()
                generate(n, folders[n], reports)
                print(f"  wrote {n:,} reports in {time.perf_counter() - start:.1f} s")
        one = work / "one"
        if not one.exists():
            one.mkdir()
            shutil.copy(folders[sizes[0]] / "node00000.json", one / "node00000.json")

        rows = {"start-up": ["fleet", str(one)]}
        rows.update({f"{n:,} reports": ["fleet", str(folders[n]), "--expect", str(n + 1)] for n in sizes})
        rows[f"{sizes[-1]:,} --json"] = ["fleet", str(folders[sizes[-1]]), "--json"]
        for argv in rows.values():  # the page cache warm, untimed
            run(argv)
        samples: dict[str, list] = {name: [] for name in rows}
        for _ in range(args.repeat):
            for name, argv in rows.items():
                samples[name].append(run(argv))
        print(f"\n{os.cpu_count()} CPUs, median of {args.repeat} (fresh processes)")
        med = {}
        for name, runs in samples.items():
            seconds = statistics.median(r[0] for r in runs)
            rss = max(r[1] for r in runs)
            med[name] = seconds
            print(f"  {name:<16} {seconds:7.2f} s   peak RSS {rss:6.0f} MB   exit {runs[0][2]}")
        startup = med["start-up"]
        base = sizes[0]
        print(f"\ngrowth against {base:,} reports (linear: the ratio of the sizes)")
        for n in sizes:
            t = med[f"{n:,} reports"]
            print(f"  {n:>6,}: {t / med[f'{base:,} reports']:5.2f}x the time for {n / base:4.1f}x the reports; "
                  f"{(t - startup) / n * 1e3:.3f} ms per report after start-up")
        largest = med[f"{sizes[-1]:,} reports"]
        rss = max(r[1] for r in samples[f"{sizes[-1]:,} reports"])
        print(f"target: {sizes[-1]:,} reports in <= 10 s: {largest:.2f} s ({'ok' if largest <= 10 else 'over'}); "
              f"peak RSS <= 300 MB: {rss:.0f} MB ({'ok' if rss <= 300 else 'over'})")
        print(f"\n$ attn-doctor fleet DIR  ({sizes[-1]:,} reports)")
        print(samples[f"{sizes[-1]:,} reports"][0][3].decode(errors="replace"))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
