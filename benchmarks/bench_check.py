"""`check` wall time against `python -m torch.utils.collect_env`, measured in the same run.

Targets (issue 2): `check --quick` <= 0.12x and the full `check` <= 1.0x collect_env.

    python benchmarks/bench_check.py [--repeat 5] [--python PATH]

Each command runs as a fresh process (what a user or an onboarding script pays), alternating
between commands so that drifting machine load hits all of them alike; the median is reported.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--python", default=sys.executable, help="interpreter that has torch (reference and target)")
    args = parser.parse_args()

    commands = {
        "collect_env (reference)": [args.python, "-W", "ignore", "-m", "torch.utils.collect_env"],
        "check --quick": [sys.executable, "-m", "attn_doctor", "check", "--quick", "--json", "--python", args.python],
        "check (tiers 1-2)": [sys.executable, "-m", "attn_doctor", "check", "--json", "--python", args.python],
    }
    for argv in commands.values():  # warm the page cache once, untimed
        wall(argv)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, argv in commands.items():
            samples[name].append(wall(argv))

    ref = statistics.median(samples["collect_env (reference)"])
    targets = {"check --quick": 0.12, "check (tiers 1-2)": 1.0}
    print(f"{'command':28} {'median s':>9} {'min s':>7} {'ratio':>7} {'target':>7}")
    for name, values in samples.items():
        med = statistics.median(values)
        ratio = med / ref
        target = targets.get(name)
        verdict = "" if target is None else ("ok" if ratio <= target else "MISSED")
        print(
            f"{name:28} {med:9.3f} {min(values):7.3f} {ratio:7.3f} {('<= %.2f' % target) if target else '':>7} {verdict}"
        )


if __name__ == "__main__":
    main()
