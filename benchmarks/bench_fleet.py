"""Fleet gather overhead: `check --distributed` on R local ranks against the single-process `check`,
measured in the same run with the same check mode (issue 7: at most 1.3x on 8 ranks).

    python benchmarks/bench_fleet.py [--ranks 8] [--mode full|no-sample|quick|report] [--repeat 3] [--torchrun]

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


def ranks(n: int, mode: list[str], distributed: bool) -> float:
    port = _port()
    cache = _env().get("ATTN_DOCTOR_CACHE_DIR")  # one cache for the host's ranks, as in a home folder
    start = time.perf_counter()
    procs = []
    for rank in range(n):
        env = dict(ENV, RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        if cache:
            env["ATTN_DOCTOR_CACHE_DIR"] = cache
        argv = [sys.executable, "-m", "attn_doctor", "check", *mode] + (["--distributed"] if distributed else [])
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=env))
    _wait(procs)
    return time.perf_counter() - start


def torchrun(n: int, mode: list[str]) -> float:
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n), "-m", "attn_doctor", "check", "--distributed", *mode]
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    return time.perf_counter() - start


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
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--mode", choices=sorted(MODES), default="full")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--torchrun", action="store_true", help="also time a real torchrun launch")
    parser.add_argument("--cold", action="store_true", help="an empty cache for every run (a fresh node)")
    args = parser.parse_args()
    mode, n = MODES[args.mode], args.ranks
    global COLD
    COLD = args.cold
    print(f"cache: {'cold (empty for every run)' if COLD else 'warm (shared across runs)'}")

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
    sizes()


if __name__ == "__main__":
    main()
