"""`check --distributed` under a real torchrun (gloo-free TCPStore gather on CPU) and an srun-like launch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fleet_helpers import doctor, env, free_port, last_error_lines, rank_facts, torchrun


def test_torchrun_four_ranks_one_odd_rank_out(tmp_path):
    template = rank_facts(tmp_path, ["h200", "h200", "t4", "h200"])
    proc = subprocess.run(
        torchrun(4, "check", "--distributed", "--from-report", template, "--json", "--output", str(tmp_path / "out" / "rank{rank}.json")),
        capture_output=True, text=True, timeout=120, env=env(),
    )
    doc = json.loads(proc.stdout)  # rank 0 alone prints: stdout is one JSON document
    assert doc["schema"] == "attn-doctor/fleet" and doc["command"] == "check --distributed" and doc["launcher"] == "torchrun"
    assert doc["summary"]["expected"] == 4 and doc["summary"]["received"] == 4 and doc["problems"] == []
    odd, majority = doc["groups"]
    assert odd["ranks"] == [2] and not odd["majority"] and majority["ranks"] == [0, 1, 3]
    diffs = {d["path"]: (d["majority"], d["value"]) for d in odd["differences"]}
    assert diffs["facts.gpu.devices[0].name"] == ("NVIDIA H200", "Tesla T4")
    assert diffs["facts.gpu.driver_version"] == ("580.159.04", "535.183.01")
    assert {f["rule"] for f in odd["findings"] if f["status"] == "error"} == {"AD103"}
    # The T4 has errors: rank 0 exits 1, torchrun fails the step.
    assert doc["exit_code"] == 1 and proc.returncode != 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"rank{r}.json" for r in range(4)]


def test_torchrun_identical_ranks_human_report(tmp_path):
    template = rank_facts(tmp_path, ["h200", "h200", "h200"])
    proc = subprocess.run(torchrun(3, "check", "--distributed", "--from-report", template), capture_output=True, text=True, timeout=120, env=env())
    assert proc.returncode == 0, proc.stderr
    assert "3 ranks (0-2) on" in proc.stdout and "agree" in proc.stdout and "all identical" in proc.stdout
    assert proc.stdout.count("attn-doctor fleet") == 1  # one report, from rank 0


def _pid_of_rank(parent: int, rank: int, timeout: float = 30) -> int:
    needle = f"\0RANK={rank}\0".encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                if ppid == parent and needle in b"\0" + (entry / "environ").read_bytes():
                    return int(entry.name)
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(0.05)
    raise AssertionError(f"no worker with RANK={rank} under {parent}")


def _hold_fifo(path: Path, timeout: float = 30) -> int:
    """Open the FIFO's write end once the rank has opened it: the rank is then blocked mid-check."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the rank never opened its facts file")


def test_torchrun_rank_killed_mid_run_is_named(tmp_path):
    template = rank_facts(tmp_path, ["h200", "h200", "fifo", "h200"])
    out = tmp_path / "out"
    launcher = subprocess.Popen(
        torchrun(4, "check", "--distributed", "--from-report", template, "--json", "--output", str(out / "{rank}.json")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(ATTN_DOCTOR_GATHER_TIMEOUT="60"),
    )
    try:
        fd = _hold_fifo(tmp_path / "2.json")
        victim = _pid_of_rank(launcher.pid, 2)
        deadline = time.monotonic() + 30
        while not all((out / f"{r}.json").exists() for r in (0, 1, 3)) and time.monotonic() < deadline:
            time.sleep(0.05)
        start = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = launcher.communicate(timeout=60)
        elapsed = time.monotonic() - start
        os.close(fd)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    # torchrun stops the other workers (SIGTERM) when one dies; rank 0 reports what it has, well inside the 60 s deadline.
    assert elapsed < 20, elapsed
    doc = json.loads(stdout)
    missing = [p for p in doc["problems"] if p["kind"] == "missing"]
    assert [p["rank"] for p in missing] == [2]
    # Whether rank 2 had joined the rendezvous before it died depends on its torch import: both are named.
    assert "stopped by the launcher" in missing[0]["message"]
    assert "connected but did not report" in missing[0]["message"] or "never reached the rendezvous" in missing[0]["message"]
    assert doc["summary"]["received"] == 3 and doc["groups"][0]["ranks"] == [0, 1, 3]
    assert doc["exit_code"] == 3 and launcher.returncode != 0


def _srun_like(rank: int, world: int, port: int, *args: str, **extra: str) -> subprocess.Popen:
    e = env(SLURM_PROCID=str(rank), SLURM_NTASKS=str(world), SLURM_LOCALID=str(rank), SLURM_STEP_NODELIST="localhost",
            SLURM_JOB_ID="77", SLURM_STEP_ID="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), **extra)
    return subprocess.Popen([sys.executable, "-m", "attn_doctor", "check", "--distributed", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)


def test_srun_like_launch_a_hung_rank_does_not_hang_the_others(tmp_path):
    template = rank_facts(tmp_path, ["h200", "v100", "fifo", "h200"])
    port = free_port()
    start = time.monotonic()
    ranks = [_srun_like(r, 4, port, "--from-report", template, ATTN_DOCTOR_GATHER_TIMEOUT="4") for r in range(4)]
    fd = _hold_fifo(tmp_path / "2.json")  # rank 2 now hangs in its check, and stays hung
    try:
        results = {r: ranks[r].communicate(timeout=60) for r in (0, 1, 3)}
        elapsed = time.monotonic() - start
        assert ranks[2].poll() is None  # still hung: nobody waited for it past the deadline
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.communicate()
        os.close(fd)
    assert elapsed < 25, elapsed
    assert ranks[1].returncode == 0 and ranks[3].returncode == 0 and results[1][0] == ""  # only rank 0 prints
    out = results[0][0]
    assert ranks[0].returncode == 3
    assert "rank 2 on" in out and "connected but did not report within 4 s" in out
    assert "1 rank (1)" in out and "differs from the majority" in out and "Tesla V100" in out
    assert "2 ranks (0,3)" in out and "(slurm)" in out
    assert out.index("rank 2 on") < out.index("1 rank (1)") < out.index("2 ranks (0,3)")


def test_rank_without_its_rank_0_fails_in_one_line(tmp_path):
    template = rank_facts(tmp_path, ["h200", "h200"])
    lone = _srun_like(1, 2, free_port(), "--from-report", template, ATTN_DOCTOR_GATHER_TIMEOUT="2")
    stdout, stderr = lone.communicate(timeout=60)
    assert lone.returncode == 3
    lines = last_error_lines(stderr)
    assert len(lines) == 1 and "rank 1" in lines[0] and "cannot reach the rendezvous" in lines[0]
    assert "Traceback" not in stderr and "c10d" not in stderr


def test_a_rank_whose_check_cannot_run_is_named_without_waiting(tmp_path):
    template = rank_facts(tmp_path, ["h200", "h200"])
    (tmp_path / "1.json").write_text("{ not json")
    port = free_port()
    start = time.monotonic()
    ranks = [_srun_like(r, 2, port, "--from-report", template, ATTN_DOCTOR_GATHER_TIMEOUT="60") for r in range(2)]
    (out0, _), (_, err1) = (p.communicate(timeout=60) for p in ranks)
    assert time.monotonic() - start < 30
    assert ranks[1].returncode == 2 and "rank 1" in last_error_lines(err1)[0] and "not valid JSON" in err1
    assert ranks[0].returncode == 3 and "rank 1 on" in out0 and "its check could not run" in out0


def test_not_under_a_launcher_is_a_usage_error():
    proc = doctor("check", "--distributed", "--quick")
    assert proc.returncode == 2
    lines = last_error_lines(proc.stderr)
    assert len(lines) == 1 and "needs a launcher" in lines[0] and "Traceback" not in proc.stderr
