"""Fleet overhead: `check --distributed` on R local ranks against the single-process `check`,
measured in the same run with the same check mode. Targets: at most 1.3x a single check, cold
(`--cold`: an empty cache for every launch, as on a fresh node) and cached, also with one rank
given another package set (`--odd-pythonpath DIR`: that rank, R // 2, gets DIR on its PYTHONPATH,
e.g. `pip install --no-deps --target DIR x-transformers==1.30.1 einops`).

    python benchmarks/bench_fleet.py [--ranks 4] [--mode full|no-sample|quick|report] [--repeat 3]
                                     [--torchrun] [--cold] [--odd-pythonpath DIR]

After the timings, one more fleet launch writes every rank's report and prints each rank's dtype
path: its key, who computed it, how long the rank waited for it. The odd rank must have its own
full dtype path (computed by itself, no wait) and no rank may wait past its own check.

Rows (median wall time of fresh processes, alternating so that drifting load hits all alike):
  single        one `check` process: the reference
  plain xR      R `check` processes at once (what R ranks cost without any gather: CPU contention)
  fleet xR      R `check --distributed` ranks at once (launched as torchrun would: RANK, WORLD_SIZE,
                MASTER_ADDR/PORT), until every rank has exited and rank 0 has printed the fleet report
  torchrun xR   (--torchrun) the same under a real torchrun, its own start-up included
fleet/single is the issue's figure; fleet/plain isolates the gather (torch.distributed import,
rendezvous, digests) from the contention of R checks on the same CPUs, which dominates on a machine
with fewer cores than ranks. Then the bytes rank 0 receives at 1,024 and 16,384 ranks, from the
real report of tests/fixtures/facts/h200.json.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import zlib
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this script's own imports of attn_doctor, from a checkout
H200 = ROOT / "tests" / "fixtures" / "facts" / "h200.json"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV.update(OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
MODES = {"full": [], "no-sample": ["--no-sample"], "quick": ["--quick"], "report": ["--from-report", str(H200)]}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(procs) -> None:
    for p in procs:
        if p.wait() not in (0, 1, 3):
            raise SystemExit(f"a rank exited {p.returncode}")


COLD = False  # --cold: every run starts with an empty cache, as on a freshly allocated node


def _env(**extra) -> dict:
    env = dict(ENV, **extra)
    if COLD:
        import tempfile

        env["ATTN_DOCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="attn-doctor-cold-")
    return env


def single(mode: list[str]) -> float:
    start = time.perf_counter()
    _wait([subprocess.Popen([sys.executable, "-m", "attn_doctor", "check", *mode], stdout=subprocess.DEVNULL, env=_env())])
    return time.perf_counter() - start


ODD = None  # --odd-pythonpath: rank R // 2's extra PYTHONPATH (another package set)


def _rank_env(rank: int, n: int, **extra) -> dict:
    env = dict(ENV, **extra)
    if ODD and rank == n // 2:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [ODD, env.get("PYTHONPATH", "")]))
    return env


def ranks(n: int, mode: list[str], distributed: bool, output: str = "") -> float:
    port = _port()
    cache = _env().get("ATTN_DOCTOR_CACHE_DIR")  # one cache for the host's ranks, as in a home folder
    start = time.perf_counter()
    procs = []
    for rank in range(n):
        env = _rank_env(rank, n, RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        if cache:
            env["ATTN_DOCTOR_CACHE_DIR"] = cache
        argv = [sys.executable, "-m", "attn_doctor", "check", *mode] + (["--distributed"] if distributed else [])
        if output:
            argv += ["--json", "--output", output]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=env))
    _wait(procs)
    return time.perf_counter() - start


def torchrun(n: int, mode: list[str]) -> float:
    launch = ["-m", "attn_doctor"]
    if ODD:  # torchrun gives every rank one environment: a wrapper gives the odd rank its own
        import tempfile

        wrapper = os.path.join(tempfile.mkdtemp(prefix="attn-doctor-bench-"), "rank.sh")
        with open(wrapper, "w") as fh:
            fh.write(f'#!/bin/sh\nif [ "$RANK" = {n // 2} ]; then export PYTHONPATH={ODD}${{PYTHONPATH:+:$PYTHONPATH}}; fi\n'
                     f'exec {sys.executable} -m attn_doctor "$@"\n')
        os.chmod(wrapper, 0o755)
        launch = ["--no-python", wrapper]
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n), *launch, "check", "--distributed", *mode]
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    return time.perf_counter() - start


def rank_paths(n: int, mode: list[str]) -> None:
    """One more fleet launch, every rank's report kept: who computed each rank's sample verdict."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="attn-doctor-bench-")
    ranks(n, mode, True, output=os.path.join(folder, "{rank}.json"))
    print("\nper rank (one more launch): sample verdict key, status, verdict, computed by, waited")
    for rank in range(n):
        try:
            doc = msgspec.json.decode(Path(folder, f"{rank}.json").read_bytes())
        except (OSError, msgspec.DecodeError):
            print(f"  rank {rank}: no report")
            continue
        dp = doc["facts"]["dtype_path"]
        ran = ",".join(s["name"] for s in dp.get("samples", []) if s.get("status") == "ran")
        waited = f"{dp['waited_s']:.1f} s" if dp.get("waited_s") is not None else "-"
        odd = "  <- odd package set" if ODD and rank == n // 2 else ""
        print(f"  rank {rank}: {str(dp.get('key'))[:10]} {dp.get('status')} {dp.get('verdict')} by {dp.get('computed_by')}"
              f" ({'cached ' + dp['cached'][11:19] if dp.get('cached') else 'computed'}), waited {waited}; ran {ran}{odd}")


def sizes() -> None:
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--from-report", str(H200), "--json"], capture_output=True, env=ENV)
    report = proc.stdout
    doc = msgspec.json.decode(report)
    compact = msgspec.json.encode(doc)
    from attn_doctor.fleet.aggregate import Member
    from attn_doctor.fleet.digest import report_digest
    from attn_doctor.report import Summary

    member = msgspec.json.encode(Member(rank=16383, local_rank=7, host="gpu-node-2047", digest=report_digest(doc), exit_code=0,
                                        summary=msgspec.convert(doc["summary"], Summary))) + b"\n"
    hello = len("16383\t7\tgpu-node-2047\n")
    upload = len(zlib.compress(compact))
    print(f"\nreport of h200.json: {len(report):,} B as printed, {len(compact):,} B compact, {upload:,} B zlib (one upload per distinct digest)")
    print(f"per rank: member line {len(member)} B + hello {hello} B, in about 6 small store requests")
    for n in (1024, 16384):
        for distinct in (1, 8):
            bounded = n * (len(member) + hello) + distinct * upload
            print(
                f"  {n:>6} ranks, {distinct} distinct configs: rank 0 reads {bounded / 1e6:6.2f} MB "
                f"(every report in full: {n * len(compact) / 1e6:8.1f} MB, {n * len(compact) / bounded:5.0f}x more)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--mode", choices=sorted(MODES), default="full")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--torchrun", action="store_true", help="also time a real torchrun launch")
    parser.add_argument("--cold", action="store_true", help="an empty cache for every run (a fresh node)")
    parser.add_argument("--odd-pythonpath", metavar="DIR", help="rank R // 2 gets DIR on its PYTHONPATH (another package set)")
    parser.add_argument("--python", metavar="PATH", help="the environment every check diagnoses (default: attn-doctor's own)")
    args = parser.parse_args()
    import atexit
    import shutil
    import tempfile

    # Every folder this run makes (cold caches, bytecode: hundreds of MB each) is inside one, removed at exit.
    tempfile.tempdir = tempfile.mkdtemp(prefix="attn-doctor-bench-")
    atexit.register(shutil.rmtree, tempfile.tempdir, True)
    mode, n = MODES[args.mode], args.ranks
    if args.python and args.mode not in ("report",):
        mode = mode + ["--python", args.python]
    global COLD, ODD
    COLD, ODD = args.cold, args.odd_pythonpath
    if not COLD:
        import tempfile

        ENV["ATTN_DOCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="attn-doctor-bench-")  # this run's own, warmed below
    print(f"cache: {'cold (empty for every run)' if COLD else 'warm (shared across runs)'}; "
          f"odd rank: {f'rank {n // 2} with {ODD} on its PYTHONPATH' if ODD else 'none'}")

    rows = {
        "single": lambda: single(mode),
        f"plain x{n}": lambda: ranks(n, mode, False),
        f"fleet x{n}": lambda: ranks(n, mode, True),
    }
    if args.torchrun:
        rows[f"torchrun x{n}"] = lambda: torchrun(n, mode)
    for fn in rows.values():  # warm the page cache, untimed
        fn()
    samples: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeat):
        for name, fn in rows.items():
            samples[name].append(fn())
    med = {name: statistics.median(v) for name, v in samples.items()}
    ref, plain, fleet = med["single"], med[f"plain x{n}"], med[f"fleet x{n}"]
    print(f"check mode: {args.mode} ({' '.join(mode) or 'the whole check'}), {n} ranks, {os.cpu_count()} CPUs, median of {args.repeat}")
    for name, value in med.items():
        print(f"  {name:<14} {value:7.3f} s   {value / ref:5.2f}x single")
    verdict = "ok" if fleet / ref <= 1.3 else "over target"
    print(f"fleet x{n} / single = {fleet / ref:.2f}x (target <= 1.3x: {verdict}); fleet x{n} / plain x{n} = {fleet / plain:.2f}x (the gather alone)")
    if args.torchrun:
        tr = med[f"torchrun x{n}"]
        print(f"torchrun x{n} / single = {tr / ref:.2f}x (target <= 1.3x: {'ok' if tr / ref <= 1.3 else 'over target'})")
    if args.mode in ("full", "no-sample"):
        rank_paths(n, mode)
    sizes()


if __name__ == "__main__":
    main()
