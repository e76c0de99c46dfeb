"""`attn-doctor explain --file` on a generated 100 MB training log: wall time and peak RSS, against
references measured in the same run on the same file (`grep -c` for one literal, and a plain Python
loop over the file's lines). Target: at most 1.5 s on a 2-core machine, memory flat.

    python benchmarks/bench_explain.py [--mb 100] [--keep]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_log(path: Path, mb: float, warning_every: int) -> int:
    """A realistic training log: env header, loss lines, trainer INFO lines, tqdm bars, a warning
    every `warning_every` lines, a traceback at the end."""
    rnd = random.Random(4242)
    header = (
        "| NVIDIA-SMI 535.183.01   Driver Version: 535.183.01   CUDA Version: 12.2 |\n"
        "|   0  Tesla T4                       Off | 00000000:00:04.0 Off |    0 |\n"
        "torch==2.4.0\nflash-attn==2.6.3\ntransformers==4.46.1\nllamafactory==0.9.1\n"
    )
    lines = []
    for i in range(50000):
        r = rnd.random()
        if i % warning_every == warning_every - 1:
            lines.append(f"[rank{i % 8}]: /opt/venv/lib/python3.10/site-packages/torch/nn/functional.py:5560: UserWarning: Memory efficient kernel not used because: (Triggered internally at sdp_utils.cpp:859.)\n")
        elif r < 0.6:
            lines.append(f"[rank{i % 8}]: {{'loss': {rnd.random() * 3:.4f}, 'grad_norm': {rnd.random() * 10:.3f}, 'learning_rate': 1.9e-05, 'epoch': {i / 1000:.2f}}}\n")
        elif r < 0.85:
            lines.append(f"[2026-11-22 10:01:{i % 60:02d},123] INFO [trainer.py:{i % 3000}] step {i} throughput {rnd.random() * 1e4:.1f} tokens/s mem 61.2GiB\n")
        else:
            lines.append(f" {i % 100}%|████▌     | {i}/50000 [01:{i % 60:02d}<12:34,  1.23it/s]\r")
    block = "".join(lines).encode()
    tail = (
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/opt/venv/lib/python3.10/site-packages/flash_attn/flash_attn_interface.py", line 96, in _flash_attn_forward\n'
        "[rank0]: RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n"
    ).encode()
    target = int(mb * 1e6)
    with open(path, "wb") as f:
        f.write(header.encode())
        written = len(header)
        while written < target - len(tail):
            f.write(block)
            written += len(block)
        f.write(tail)
    return path.stat().st_size


def timed(argv: list[str]) -> tuple[float, int, subprocess.CompletedProcess]:
    """Wall seconds and the child's peak RSS (KiB), from wait4."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _pid, _status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.returncode = os.waitstatus_to_exitcode(_status)
    return wall, usage.ru_maxrss, subprocess.CompletedProcess(argv, proc.returncode, out, err)


def best(argv, runs=3):
    results = [timed(argv) for _ in range(runs)]
    return min(results, key=lambda r: r[0])


PY_LOOP = "import sys\nn=0\nwith open(sys.argv[1],'rb') as f:\n    for line in f:\n        n+=1\nprint(n)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--warning-every", type=int, default=5000, help="one SDPA warning line every N lines")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-explain-"))
    log = tmp / "train.log"
    size = make_log(log, args.mb, args.warning_every)
    cli = [sys.executable, "-m", "attn_doctor", "explain", "--file", str(log), "--json"]
    grep = shutil.which("grep")
    rows = []
    if grep:
        rows.append(("grep -c 'FlashAttention'", best([grep, "-c", "FlashAttention", str(log)])))
    rows.append(("python line loop", best([sys.executable, "-c", PY_LOOP, str(log)])))
    rows.append(("explain --file", best(cli)))
    os.environ["ATTN_DOCTOR_SCAN_ENGINE"] = "regex"  # without ahocorasick-rs
    rows.append(("explain --file (regex fallback)", best(cli, runs=1)))
    del os.environ["ATTN_DOCTOR_SCAN_ENGINE"]
    empty = tmp / "empty.log"
    empty.write_bytes(b"")
    rows.append(("explain on an empty file", best([sys.executable, "-m", "attn_doctor", "explain", "--file", str(empty)])))
    explain_row = rows[[r[0] for r in rows].index("explain --file")][1]
    import json

    doc = json.loads(explain_row[2].stdout)
    print(f"log: {size / 1e6:.1f} MB, {doc['input']['lines']} lines, engine {doc['input']['engine']}, "
          f"matches {[m['rule'] for m in doc['matches']]}, {os.cpu_count()} CPUs")
    loop = rows[[r[0] for r in rows].index("python line loop")][1][0]
    ref_grep = rows[0][1][0] if grep else None
    print(f"{'command':34} {'wall s':>8} {'peak RSS MiB':>13} {'x py loop':>10} {'x grep':>8}")
    for name, (wall, rss, _proc) in rows:
        print(f"{name:34} {wall:8.3f} {rss / 1024:13.1f} {wall / loop:10.2f} {(wall / ref_grep) if ref_grep else float('nan'):8.1f}")
    print(f"target: explain --file <= 1.5 s on 2 cores: {'met' if explain_row[0] <= 1.5 else 'NOT met'} ({explain_row[0]:.2f} s); "
          f"memory flat: peak RSS {explain_row[1] / 1024:.0f} MiB for a {size / 1e6:.0f} MB log")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
