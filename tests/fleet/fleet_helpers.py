"""Helpers for the fleet tests: real attn-doctor subprocesses, real launchers, recorded facts."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

FACTS = Path(__file__).parents[1] / "fixtures" / "facts"


def env(**extra: str) -> dict:
    e = dict(os.environ)
    for name in list(e):  # a launcher around the test run must not leak into the ranks under test
        if name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT") or name.startswith(("SLURM_", "TORCHELASTIC_")):
            del e[name]
    e.update({"OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "COLUMNS": "200"})
    e.update(extra)
    return e


def doctor(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, timeout=timeout, env=kw.pop("env", env()), **kw)


def torchrun(nproc: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc), "-m", "attn_doctor", *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_facts(tmp: Path, names: list[str]) -> str:
    """tmp/{rank}.json for each rank: the recorded facts each rank diagnoses; returns the template."""
    for rank, name in enumerate(names):
        shutil.copy(FACTS / f"{name}.json", tmp / f"{rank}.json")
    return str(tmp / "{rank}.json")


def last_error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("attn-doctor:")]
