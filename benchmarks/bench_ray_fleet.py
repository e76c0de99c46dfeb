"""`fleet --ray` against one plain `check`, in the same run, on a real Ray cluster started here: a
head and N worker nodes (`ray start`, one raylet each, on this host), torn down at the end.

    python benchmarks/bench_ray_fleet.py --venv VENV [--workers 2] [--mode quick|full|both] [--repeat 3]

VENV: a virtual environment with attn-doctor and Ray (`pip install -e '.[ray]'`, or the realenv
"ray" environment: ATTN_DOCTOR_REALENV_DIR=DIR pytest -m realenv tests/realenv/test_ray.py keeps it
in DIR). Every node runs its check with VENV's Python, as a cluster's nodes share an image.

Rows (median wall time of fresh processes, alternating so that drifting load hits all alike):
  check         one `check` process on this host: the reference
  plain xN      N `check` processes at once, N = the nodes (what the nodes' checks cost on this one
                host without Ray: CPU contention)
  fleet --ray   `fleet --ray` over the head and the workers, from the command's start to its exit
                (connecting to the cluster, one Ray task per node started in a worker process, the
                checks, the gather)
On one host the nodes' checks share its CPUs (N + 1 checks at once): fleet/check then also measures
that contention, which a real cluster with a node per check does not have; fleet/plain is Ray's
own part (connecting, a worker process per node, the tasks, the gather).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.realenv.raycluster import RayCluster  # noqa: E402


def timed(argv: list[str], env: dict, timeout: float = 900) -> tuple[float, subprocess.CompletedProcess]:
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
    return time.monotonic() - start, proc


def timed_together(argv: list[str], n: int, env: dict, timeout: float = 900) -> float:
    start = time.monotonic()
    procs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, stdin=subprocess.DEVNULL) for _ in range(n)]
    for p in procs:
        p.wait(timeout)
        assert p.returncode in (0, 1), p.stderr.read()[-2000:]
    return time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, required=True, help="a venv with attn-doctor and ray")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mode", choices=("quick", "full", "both"), default="both")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    python = str(args.venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(RAY_USAGE_STATS_ENABLED="0", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")

    with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
        cluster = RayCluster(args.venv, Path(tmp), env)
        try:
            start = time.monotonic()
            cluster.start_head()
            for i in range(args.workers):
                cluster.add_node(f"w{i}")
            cluster.node_ids(args.workers + 1)
            print(f"cluster: head + {args.workers} workers on one host ({os.cpu_count()} CPUs), up in {time.monotonic() - start:.1f} s")
            modes = ["quick", "full"] if args.mode == "both" else [args.mode]
            for mode in modes:
                extra = ["--quick"] if mode == "quick" else []
                check_argv = [python, "-m", "attn_doctor", "check", "--json", *extra]
                fleet_argv = [python, "-m", "attn_doctor", "fleet", "--ray", "--address", cluster.address, "--json", "--timeout", "600", *extra]
                singles, plains, fleets = [], [], []
                n = args.workers + 1
                for _ in range(args.repeat):
                    s, proc = timed(check_argv, env)
                    assert proc.returncode in (0, 1), proc.stderr[-2000:]
                    singles.append(s)
                    plains.append(timed_together(check_argv, n, env))
                    f, proc = timed(fleet_argv, env)
                    doc = json.loads(proc.stdout)
                    assert doc["summary"]["received"] == args.workers + 1, (doc["problems"], proc.stderr[-2000:])
                    fleets.append(f)
                s, p, f = statistics.median(singles), statistics.median(plains), statistics.median(fleets)
                runs = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
                print(f"{mode:6} check        {s:7.2f} s   (runs: {runs(singles)})")
                print(f"{mode:6} plain x{n}     {p:7.2f} s   (runs: {runs(plains)})   plain/check {p / s:.1f}x")
                print(f"{mode:6} fleet --ray  {f:7.2f} s   (runs: {runs(fleets)})   {n} nodes, fleet/check {f / s:.1f}x, fleet/plain {f / p:.1f}x")
        finally:
            cluster.stop()
            left = cluster.processes()
            if left:
                print(f"warning: processes of the cluster left running: {left}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
