"""`check --distributed` under a real torchrun (gloo-free TCPStore gather on CPU) and an srun-like launch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleet_helpers import doctor, env, free_port, last_error_lines, rank_facts, torchrun

from attn_doctor import cache


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


def _stalling_python(tmp: Path, rank: int) -> tuple[Path, Path]:
    """An interpreter for --python that stalls in rank `rank`'s first probe (its environment read)
    and is this Python for every other rank: that rank is then busy mid-check, for real. Returns
    the script and the file holding the stalled probe's PID once it stalls."""
    marker = tmp / f"stalled-{rank}.pid"
    script = tmp / "python-stalls"
    script.write_text(f"#!/bin/sh\nif [ \"$RANK$SLURM_PROCID\" = {rank} ]; then echo $$ > {marker}; exec sleep 300; fi\nexec {sys.executable} \"$@\"\n")
    script.chmod(0o755)
    return script, marker


def _wait_file(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _kill_stalled(marker: Path) -> None:
    try:
        os.kill(int(marker.read_text()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


def test_torchrun_rank_killed_mid_run_is_named(tmp_path):
    python, marker = _stalling_python(tmp_path, 2)
    out = tmp_path / "out"
    launcher = subprocess.Popen(
        torchrun(4, "check", "--distributed", "--quick", "--python", str(python), "--json", "--output", str(out / "{rank}.json")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(ATTN_DOCTOR_GATHER_TIMEOUT="60"),
    )
    try:
        _wait_file(marker)
        victim = _pid_of_rank(launcher.pid, 2)
        deadline = time.monotonic() + 30
        while not all((out / f"{r}.json").exists() for r in (0, 1, 3)) and time.monotonic() < deadline:
            time.sleep(0.05)
        start = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = launcher.communicate(timeout=60)
        elapsed = time.monotonic() - start
    finally:
        if launcher.poll() is None:
            launcher.kill()
        _kill_stalled(marker)
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


def _heartbeat_seen(port: int, rank: int, timeout: float = 60):
    """Wait until `rank` keeps a heartbeat in the fleet's store (a real client of rank 0's TCPStore);
    returns that client."""
    from datetime import timedelta

    from torch.distributed import PrefixStore, TCPStore

    store = PrefixStore("attn-doctor/fleet/slurm-77.0", TCPStore("127.0.0.1", port, None, False, timeout=timedelta(seconds=timeout)))
    deadline = time.monotonic() + timeout
    while not store.check([f"heartbeat/{rank}"]):
        assert time.monotonic() < deadline, "no heartbeat"
        time.sleep(0.1)
    return store


@pytest.mark.parametrize("how", ["busy", "frozen"])
def test_srun_like_launch_a_slow_or_hung_rank_does_not_hang_the_others(tmp_path, how):
    # A rank still checking (its heartbeat moves) is named as such; a frozen one (SIGSTOP: no
    # heartbeat) as hung or dead. Nobody waits for either past the deadline. Frozen is only a fair
    # trial when the freeze came before rank 0 stopped waiting ("closed" not yet in its store): on a
    # slow machine the ranks' start can outlast the deadline, and that trial is run again with a
    # longer one.
    template = rank_facts(tmp_path, ["h200", "v100", "h200", "h200"])
    python, marker = _stalling_python(tmp_path, 2)
    for gather_timeout in (8, 20, 45):
        marker.unlink(missing_ok=True)
        port = free_port()
        start = time.monotonic()
        ranks = [_srun_like(r, 4, port, *(["--quick", "--python", str(python)] if r == 2 else ["--from-report", template]),
                            ATTN_DOCTOR_GATHER_TIMEOUT=str(gather_timeout)) for r in range(4)]
        fair = True
        try:
            _wait_file(marker)  # rank 2 is now busy in its check, and stays so
            if how == "frozen":
                store = _heartbeat_seen(port, 2)
                os.kill(ranks[2].pid, signal.SIGSTOP)
                fair = not store.check(["closed"])
            results = {r: ranks[r].communicate(timeout=60 + gather_timeout) for r in (0, 1, 3)}
            elapsed = time.monotonic() - start
            assert ranks[2].poll() is None  # still busy (or frozen): nobody waited for it past the deadline
        finally:
            for p in ranks:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
            _kill_stalled(marker)
        if fair:
            break
    assert fair, "rank 0 stopped waiting before rank 2 could be frozen, even with a 45 s deadline"
    assert elapsed < gather_timeout + 22, elapsed
    assert ranks[1].returncode == 0 and ranks[3].returncode == 0 and results[1][0] == ""  # only rank 0 prints
    out = results[0][0]
    assert ranks[0].returncode == 3
    if how == "busy":
        assert "rank 2 on" in out and "still checking after" in out and "reading installed packages" in out
        assert "hung" not in out
    else:
        assert "rank 2 on" in out and f"connected but did not report within {gather_timeout} s" in out and "still checking" not in out
    assert "1 rank (1)" in out and "differs from the majority" in out and "Tesla V100" in out
    assert "2 ranks (0,3)" in out and "(slurm)" in out
    assert out.index("rank 2 on") < out.index("1 rank (1)") < out.index("2 ranks (0,3)")


def test_rank_without_its_rank_0_fails_in_one_line(tmp_path):
    # TCPStore's connect gives up well after its timeout (backoff): the rank must wait for that
    # outcome, not exit while the connect is still running in C++ (that aborts the process: -6).
    template = rank_facts(tmp_path, ["h200", "h200"])
    lone = _srun_like(1, 2, free_port(), "--from-report", template, ATTN_DOCTOR_GATHER_TIMEOUT="2")
    stdout, stderr = lone.communicate(timeout=60)
    assert lone.returncode == 3
    lines = last_error_lines(stderr)
    assert len(lines) == 1 and "rank 1" in lines[0] and "cannot reach the rendezvous" in lines[0]
    assert "timed out" in lines[0] and "no answer within" not in lines[0]  # TCPStore's own outcome, waited for
    assert "Traceback" not in stderr and "c10d" not in stderr
    # its own verdict is not lost with the fleet's: one line on stdout
    (own,) = stdout.splitlines()
    assert own.startswith("[✓] rank 1 (") and "its own check only (not handed to rank 0): OK no errors" in own


def test_a_rank_whose_rank_0_froze_prints_its_own_verdict_within_the_deadline(tmp_path):
    # Rank 0's store up, then frozen (SIGSTOP: a hung node, a partition that drops packets) after
    # this rank joined it: TCPStore's own timeout does not bound a request once sent, so the
    # hand-over has a deadline of its own. The rank's check waits (its --python waits for a gate file)
    # until the store is frozen, so that the freeze falls between its rendezvous and its hand-over
    # however slowly the machine runs (the rendezvous imports torch beside the check).
    from datetime import timedelta

    from torch.distributed import PrefixStore, TCPStore

    port = free_port()
    host = subprocess.Popen([sys.executable, "-c", "import sys, time; from datetime import timedelta; from torch.distributed import TCPStore; "
                             f"s = TCPStore('127.0.0.1', {port}, None, True, timeout=timedelta(seconds=60), wait_for_workers=False, "
                             "multi_tenant=True); print('up', flush=True); time.sleep(300)"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env())
    gate = tmp_path / "store-frozen"
    slow = tmp_path / "slow-python"
    slow.write_text(f"#!/bin/sh\ni=0\nuntil [ -e '{gate}' ] || [ $i -ge 1200 ]; do sleep 0.05; i=$((i + 1)); done\n"
                    f"exec {sys.executable} \"$@\"\n")  # at most a minute, never an orphan looping on
    slow.chmod(0o755)
    rank = None
    try:
        assert host.stdout.readline().strip() == "up"
        rank = _srun_like(1, 2, port, "--quick", "--python", str(slow), ATTN_DOCTOR_GATHER_TIMEOUT="3")
        store = PrefixStore("attn-doctor/fleet/slurm-77.0", TCPStore("127.0.0.1", port, None, False, timeout=timedelta(seconds=60)))
        while not store.check(["hello"]):  # the rank joined: freeze the store's host under it
            assert rank.poll() is None, rank.communicate()
            time.sleep(0.01)
        os.kill(host.pid, signal.SIGSTOP)
        frozen = time.monotonic()
        gate.touch()  # and only now may the rank's check finish
        stdout, stderr = rank.communicate(timeout=90)
        waited = time.monotonic() - frozen
    finally:
        gate.touch()
        host.kill()
        host.communicate()
        if rank is not None and rank.poll() is None:
            rank.kill()
            rank.communicate()
    assert rank.returncode == 3, stderr
    assert waited < 3 + 20, waited  # its check, the 3 s deadline and exit: never the store's mercy
    (line,) = last_error_lines(stderr)
    assert "rank 1 (" in line and "rank 0's store at 127.0.0.1:" in line and "took no report within 3 s" in line
    (own,) = stdout.splitlines()
    assert "rank 1 (" in own and "its own check only (not handed to rank 0):" in own
    assert "Traceback" not in stderr


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


def test_torchrun_odd_rank_with_another_package_set_gets_its_own_verdict(tmp_path, x_transformers_installs):
    # Rank 2 has x-transformers 1.30.1 on its PYTHONPATH (the odd node out that fleet mode exists to
    # find): its sample verdict has another key, which it computes at once; ranks 0, 1 and 3 share
    # one computation of theirs. Nobody waits for a key nobody computes.
    _root, dirs = x_transformers_installs
    wrapper = tmp_path / "rank.sh"
    wrapper.write_text(f'#!/bin/sh\nif [ "$RANK" = 2 ]; then export PYTHONPATH={dirs["1.30.1"]}; fi\nexec {sys.executable} -m attn_doctor "$@"\n')
    wrapper.chmod(0o755)
    cache_dir, out = tmp_path / "cache", tmp_path / "out"
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4", "--no-python", str(wrapper),
            "check", "--distributed", "--no-smoke", "--json", "--cache-dir", str(cache_dir), "--output", str(out / "{rank}.json")]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env())
    elapsed = time.monotonic() - start
    doc = json.loads(proc.stdout)
    assert doc["problems"] == [] and doc["summary"]["received"] == 4, proc.stderr[-2000:]
    odd, majority = doc["groups"]
    assert odd["ranks"] == [2] and majority["ranks"] == [0, 1, 3]
    assert "AD401" in {f["rule"] for f in odd["findings"]}

    paths = {r: json.loads((out / f"{r}.json").read_text())["facts"]["dtype_path"] for r in range(4)}
    # The odd rank: its own full dtype path, computed by itself at once (no wait), x-transformers traced.
    mine = paths[2]
    assert mine["status"] == "ok" and mine["waited_s"] is None and mine["cached"] is None
    xt = next(s for s in mine["samples"] if s["name"] == "x_transformers")
    assert xt["status"] == "ran" and mine["verdict"] == "error"
    assert any(f["sample"] == "x_transformers" and f["severity"] == "error" for f in mine["findings"])
    # The others: one verdict, computed once, by one of them.
    keys = {paths[r]["key"] for r in (0, 1, 3)}
    assert len(keys) == 1 and mine["key"] not in keys
    computed = [c for c in cache.computations("samples", root=cache_dir) if c["what"] == "computed"]
    assert sorted(c["key"] for c in computed) == sorted([mine["key"], *keys])  # two computations, one per key
    assert all(paths[r]["status"] == "ok" and paths[r]["samples"] == paths[0]["samples"] for r in (0, 1, 3))
    assert {paths[r]["computed_by"] for r in (0, 1, 3)} == {next(c["by"] for c in computed if c["key"] in keys)}
    # Nothing waits past its own check: a waiter waits at most the computation it waits for.
    majority_seconds = float(next(c["seconds"] for c in computed if c["key"] in keys))
    for r in (0, 1, 3):
        assert paths[r]["waited_s"] is None or paths[r]["waited_s"] <= majority_seconds + 2.0, (paths[r]["waited_s"], majority_seconds)
    assert elapsed < 150, elapsed


def test_distributed_no_cache_computes_afresh(tmp_path):
    # check --distributed goes through the same options as check: --no-cache is honoured there too.
    cache_dir, out = tmp_path / "cache", tmp_path / "out"
    first = doctor("check", "--json", "--no-smoke", "--cache-dir", str(cache_dir))
    old = json.loads(first.stdout)["facts"]["dtype_path"]
    assert old["cached"] is None and len(cache.computations("samples", old["key"], root=cache_dir)) == 1
    again = doctor("check", "--json", "--no-smoke", "--cache-dir", str(cache_dir))
    assert json.loads(again.stdout)["facts"]["dtype_path"]["cached"] is not None  # without --no-cache: reused
    proc = subprocess.run(torchrun(2, "check", "--distributed", "--no-cache", "--no-smoke", "--json", "--cache-dir", str(cache_dir),
                                   "--output", str(out / "{rank}.json")), capture_output=True, text=True, timeout=180, env=env())
    assert json.loads(proc.stdout)["summary"]["received"] == 2, proc.stderr[-2000:]
    fresh = [c for c in cache.computations("samples", old["key"], root=cache_dir) if c["what"] == "computed"][1:]
    assert 1 <= len(fresh) <= 2  # computed afresh: once, shared by the two ranks (twice if one finished before the other asked)
    for rank in range(2):
        dtype_path = json.loads((out / f"{rank}.json").read_text())["facts"]["dtype_path"]
        assert dtype_path["key"] == old["key"] and dtype_path["computed_by"] != old["computed_by"]
        assert dtype_path["computed_by"] in {c["by"] for c in fresh}
