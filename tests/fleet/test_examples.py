"""The onboarding scripts in examples/, run for real (torchrun; srun through a stand-in: no Slurm here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fleet_helpers import env, free_port

EXAMPLES = Path(__file__).parents[2] / "examples"
FAKE_SLURM = Path(__file__).parent / "fake_slurm"


def run_script(name: str, *args: str, **extra: str) -> subprocess.CompletedProcess:
    e = env(DOCTOR_PYTHON=sys.executable, **extra)
    return subprocess.run(["bash", str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=120, env=e)


def test_torchrun_onboarding_fails_on_warning_by_default(tmp_path):
    # This machine has no GPU: AD101 is a warning, which strict onboarding (the default) refuses.
    strict = run_script("onboard-torchrun.sh", "--quick", NPROC_PER_NODE="2", ATTN_DOCTOR_REPORTS=str(tmp_path))
    assert strict.returncode != 0
    assert "2 ranks (0-1)" in strict.stdout and "AD101" in strict.stdout and "(exit code 1)" in strict.stdout
    assert len(list(tmp_path.glob("*-rank*.json"))) == 2
    lenient = run_script("onboard-torchrun.sh", "--quick", NPROC_PER_NODE="2", ATTN_DOCTOR_FAIL_ON="error")
    assert lenient.returncode == 0, lenient.stderr


def test_slurm_onboarding_distributed_and_offline(tmp_path):
    path = f"{FAKE_SLURM}{os.pathsep}{os.environ['PATH']}"
    common = dict(PATH=path, SLURM_JOB_ID="4242", SLURM_JOB_NUM_NODES="1", SLURM_GPUS_ON_NODE="3", SLURM_JOB_NODELIST="localhost")
    online = run_script("onboard-slurm.sh", "--quick", MASTER_PORT=str(free_port()), ATTN_DOCTOR_FAIL_ON="error", **common)
    assert online.returncode == 0, online.stderr
    assert "3 ranks (0-2)" in online.stdout and "(slurm)" in online.stdout
    strict = run_script("onboard-slurm.sh", "--quick", MASTER_PORT=str(free_port()), **common)
    assert strict.returncode == 1  # srun passes task 0's code on: the fleet's

    reports = tmp_path / "reports"
    offline = run_script("onboard-slurm.sh", "--quick", ATTN_DOCTOR_OFFLINE="1", ATTN_DOCTOR_REPORTS=str(reports), ATTN_DOCTOR_FAIL_ON="error", **common)
    assert offline.returncode == 0, offline.stderr
    assert "1 report" in offline.stdout and len(list(reports.glob("*.json"))) == 1
    assert json.loads(next(reports.glob("*.json")).read_text())["schema"] == "attn-doctor/report"
