"""The sample verdict's cache: single-flight by key across real processes, what the key covers,
stale holders (killed on this host, or gone silent elsewhere), failures shared with the waiters,
and `check --prepare` for an image build.

Every process here is real: `attn-doctor check` subprocesses, holders killed with SIGKILL, a
holder in another PID namespace standing in for another host. The cache's own record (its log of
computations) says who computed what.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from attn_doctor import bytecode, cache

ROOT = Path(__file__).resolve().parents[1]


def _env(cache_dir: Path, **extra: str) -> dict:
    env = dict(os.environ, ATTN_DOCTOR_CACHE_DIR=str(cache_dir), XDG_CACHE_HOME=str(_home(cache_dir)), PYTHONWARNINGS="ignore",
               OMP_NUM_THREADS="1")
    env.update(extra)
    return env


def _home(cache_dir: Path) -> Path:
    """The user's own cache folder of a test's processes (XDG_CACHE_HOME): bytecode goes there."""
    return cache_dir.with_name(cache_dir.name + "-home")


def _pycache(cache_dir: Path) -> Path:
    return _home(cache_dir) / "attn-doctor" / "pycache"


def _check(cache_dir: Path, *args: str, cwd=None, **extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "attn_doctor", "check", "--json", "--no-smoke", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd or ROOT,
                            env=_env(cache_dir, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), extra.pop("PYTHONPATH", "")])), **extra))


def _report(proc: subprocess.Popen, timeout: float = 180) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode in (0, 1), err[-2000:]
    return json.loads(out)


def _computed(cache_dir: Path, key: str) -> list[dict]:
    return [c for c in cache.computations("samples", key, root=cache_dir) if c["what"] == "computed"]


def _key(cache_dir: Path, capability=None, python=None, cwd=None, pythonpath: str = "") -> str:
    """The key a check in that process environment uses (a real process: its own cwd, PYTHONPATH)."""
    code = "import sys; from attn_doctor.probes import sample_cache_key; print(sample_cache_key(sys.argv[1] or None, sys.argv[2] or None))"
    env = _env(cache_dir, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), pythonpath])))
    proc = subprocess.run([sys.executable, "-c", code, python or "", capability or ""], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


# ---------------------------------------------------------------- the key


def _package(folder: Path, name: str, body: str = "VALUE = 1\n") -> Path:
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / "__init__.py").write_text(body)
    return folder / name / "__init__.py"


def test_the_key_changes_with_everything_the_verdict_depends_on(tmp_path):
    cache_dir = tmp_path / "cache"
    base = _key(cache_dir)
    assert base == _key(cache_dir)  # stable

    # A sample library from PYTHONPATH (x_transformers, as the odd rank of a fleet has it) ...
    site = tmp_path / "site"
    init = _package(site, "x_transformers")
    on_path = _key(cache_dir, pythonpath=str(site))
    assert on_path != base
    # ... and any edit to its files: the verdict is a function of the code it imports.
    os.utime(init, ns=(time.time_ns(), time.time_ns() + 10**9))
    edited = _key(cache_dir, pythonpath=str(site))
    assert edited != on_path
    # Bytecode written beside it (a training run's import) changes how fast, not what the sample finds.
    import py_compile

    py_compile.compile(str(init), doraise=True)
    assert _key(cache_dir, pythonpath=str(site)) == edited
    # PYTHONPATH itself, even where it shadows nothing the samples import (it can carry a sitecustomize).
    assert _key(cache_dir, pythonpath=str(tmp_path / "empty")) != base
    # The package set: a new distribution anywhere on the path.
    (site / "newpkg-1.0.dist-info").mkdir()
    assert _key(cache_dir, pythonpath=str(site)) not in (edited, base)

    # The working folder counts through what it shadows: a folder holding its own transformers ...
    shadow = tmp_path / "project"
    _package(shadow, "transformers")
    assert _key(cache_dir, cwd=shadow) != base
    # ... while a folder shadowing nothing keeps the key: an image's prepared verdicts serve any folder.
    plain = tmp_path / "plain"
    plain.mkdir()
    assert _key(cache_dir, cwd=plain) == base

    # The GPU capability, and with it the dtype (fp16 below sm80).
    keys = {cap: _key(cache_dir, capability=cap) for cap in ("7.5", "8.0", "9.0")}
    assert len(set(keys.values()) | {base}) == 4
    from attn_doctor.probes import _sample_config

    assert _sample_config("7.5")["dtype"] == "fp16" and _sample_config("9.0")["dtype"] == "bf16"

    # The interpreter: another venv of the same Python.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    assert _key(cache_dir, python=str(venv / "bin" / "python")) != base


def test_a_changed_file_recomputes_and_no_cache_computes_afresh(tmp_path):
    cache_dir = tmp_path / "cache"
    site = tmp_path / "site"
    init = _package(site, "einops")  # a sample library's name: part of the key, imported by no sample here
    first = _report(_check(cache_dir, PYTHONPATH=str(site)))["facts"]["dtype_path"]
    key = first["key"]
    assert first["status"] == "ok" and first["cached"] is None and len(_computed(cache_dir, key)) == 1
    second = _report(_check(cache_dir, PYTHONPATH=str(site)))["facts"]["dtype_path"]
    assert second["key"] == key and second["cached"] is not None and len(_computed(cache_dir, key)) == 1
    assert second["samples"] == first["samples"] and second["computed_by"] == first["computed_by"]

    fresh = _report(_check(cache_dir, "--no-cache", PYTHONPATH=str(site)))["facts"]["dtype_path"]
    assert fresh["key"] == key and fresh["cached"] is None and len(_computed(cache_dir, key)) == 2

    init.write_text("VALUE = 2  # edited in place\n")
    edited = _report(_check(cache_dir, PYTHONPATH=str(site)))["facts"]["dtype_path"]
    assert edited["key"] != key and edited["cached"] is None and len(_computed(cache_dir, edited["key"])) == 1

    # A corrupt entry is recomputed, not trusted.
    (cache_dir / "samples" / f"{edited['key']}.json").write_text("{not json")
    again = _report(_check(cache_dir, PYTHONPATH=str(site)))["facts"]["dtype_path"]
    assert again["cached"] is None and len(_computed(cache_dir, edited["key"])) == 2


# ---------------------------------------------------------------- single-flight


def test_two_concurrent_checks_compute_the_verdict_once(tmp_path):
    cache_dir = tmp_path / "cache"
    procs = [_check(cache_dir) for _ in range(2)]
    reports = [_report(p)["facts"]["dtype_path"] for p in procs]
    key = reports[0]["key"]
    assert reports[1]["key"] == key
    computed = _computed(cache_dir, key)
    assert len(computed) == 1, computed  # the cache's own record: one computation
    assert all(r["status"] == "ok" for r in reports) and reports[0]["samples"] == reports[1]["samples"]
    by = {r["computed_by"] for r in reports}
    assert by == {computed[0]["by"]}
    pids = {f"{p.pid}" for p in procs}
    assert computed[0]["by"].rsplit(":", 1)[1] in pids
    waiter = next(r for r, p in zip(reports, procs) if str(p.pid) != computed[0]["by"].rsplit(":", 1)[1])
    assert waiter["cached"] is not None  # the other one reused it: waited for it, or found it stored


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_a_holder_killed_mid_computation_does_not_block_the_others(tmp_path):
    cache_dir = tmp_path / "cache"
    key = _key(cache_dir)
    # The holder claims the key and never finishes (a real check could finish its computation
    # before the kill on a fast machine, or the waiter reach the key late on a loaded one).
    holder = _python(HOLDER, key, "exact", cache_dir=cache_dir)
    assert holder.stdout.readline().strip() == "claimed"
    waiter = _check(cache_dir)
    time.sleep(4.0)  # the waiter starts, finds the claim taken and waits
    holder.send_signal(signal.SIGKILL)
    holder.communicate()
    start = time.monotonic()
    dtype_path = _report(waiter)["facts"]["dtype_path"]
    # Taken over at once (the holder's PID is gone on this host), not after the 30 s lease.
    assert time.monotonic() - start < 25
    assert dtype_path["status"] == "ok" and dtype_path["key"] == key
    # it went through the wait (a check that found the key free would not have waited at all)
    assert dtype_path["computed_by"].endswith(f":{waiter.pid}") and dtype_path["waited_s"] > 0
    computed = _computed(cache_dir, key)
    assert [c["by"] for c in computed] == [dtype_path["computed_by"]]


HOLDER = textwrap.dedent("""
    import sys, time
    from attn_doctor import cache
    inputs = cache.inputs_of(name=sys.argv[1])  # a key as a check makes one: from the inputs its entry records
    # "exact": claim the key a real check computes (this holder never stores under it)
    key = sys.argv[1] if sys.argv[2:] == ["exact"] else cache.key("samples", **inputs)
    flight = cache.Flight("samples", key, inputs=inputs)
    assert flight.claim()
    print("claimed", flush=True)
    command = sys.stdin.readline().strip()
    if command == "fail":
        flight.fail({"status": "failed"}, "the sample child crashed (signal 11)")
    elif command == "store":
        flight.store({"status": "ok"})
    time.sleep(60)
""")

WAITER = textwrap.dedent("""
    import json, sys, time
    from attn_doctor import cache
    inputs = cache.inputs_of(name=sys.argv[1])  # a key as a check makes one: from the inputs its entry records
    # "exact": claim the key a real check computes (this holder never stores under it)
    key = sys.argv[1] if sys.argv[2:] == ["exact"] else cache.key("samples", **inputs)
    flight = cache.Flight("samples", key, inputs=inputs)
    start = time.monotonic()
    claimed = flight.claim()
    outcome = None if claimed else flight.wait(float(sys.argv[2]))
    print(json.dumps({"claimed": claimed, "status": outcome and outcome.status, "error": outcome and (outcome.entry or {}).get("error"),
                      "seconds": time.monotonic() - start}), flush=True)
""")


def _python(code: str, *args: str, cache_dir: Path, prefix=(), **extra) -> subprocess.Popen:
    return subprocess.Popen([*prefix, sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(cache_dir, PYTHONPATH=str(ROOT), **extra))


def _result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    return json.loads(out)


def test_a_failed_computation_releases_its_waiters_with_its_error(tmp_path):
    cache_dir = tmp_path / "cache"
    holder = _python(HOLDER, "k1", cache_dir=cache_dir)
    try:
        assert holder.stdout.readline().strip() == "claimed"
        waiters = [_python(WAITER, "k1", "60", cache_dir=cache_dir) for _ in range(2)]
        time.sleep(1.0)
        holder.stdin.write("fail\n")
        holder.stdin.flush()
        for waiter in waiters:
            got = _result(waiter)
            assert got == {**got, "claimed": False, "status": "failed", "error": "the sample child crashed (signal 11)"}
            assert got["seconds"] < 20
        # Never reused later: the next process computes again.
        later = _result(_python(WAITER, "k1", "5", cache_dir=cache_dir))
        assert later["claimed"] is True
    finally:
        holder.kill()
        holder.communicate()


def test_another_key_is_computed_at_once_and_a_stored_one_released(tmp_path):
    cache_dir = tmp_path / "cache"
    holder = _python(HOLDER, "k1", cache_dir=cache_dir)
    try:
        assert holder.stdout.readline().strip() == "claimed"
        other = _result(_python(WAITER, "k2", "60", cache_dir=cache_dir))
        assert other["claimed"] is True and other["seconds"] < 5  # nobody's claim was in the way
        waiter = _python(WAITER, "k1", "60", cache_dir=cache_dir)
        time.sleep(1.0)
        holder.stdin.write("store\n")
        holder.stdin.flush()
        got = _result(waiter)
        assert got["claimed"] is False and got["status"] == "hit"
    finally:
        holder.kill()
        holder.communicate()


def _unshare_works() -> bool:
    if not shutil.which("unshare"):
        return False
    proc = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=30)
    return proc.returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="needs unshare --pid (root or user namespaces)")
def test_a_holder_on_another_host_that_died_is_replaced_after_its_lease(tmp_path):
    # A holder in another PID namespace records another host identity: its PID cannot be probed
    # from here, so only its lease going unrefreshed frees the key, as for a node that died.
    cache_dir = tmp_path / "cache"
    lease = "3"
    holder = _python(HOLDER, "k1", cache_dir=cache_dir, prefix=("unshare", "--pid", "--fork", "--mount-proc", "--kill-child"), ATTN_DOCTOR_CACHE_LEASE=lease)
    try:
        assert holder.stdout.readline().strip() == "claimed"
        # While it lives (and refreshes its lease) nobody takes the key over.
        alive = _result(_python(WAITER, "k1", "5", cache_dir=cache_dir, ATTN_DOCTOR_CACHE_LEASE=lease))
        assert alive["claimed"] is False and alive["status"] == "timeout"
        waiter = _python(WAITER, "k1", "60", cache_dir=cache_dir, ATTN_DOCTOR_CACHE_LEASE=lease)
        time.sleep(0.5)
        holder.kill()  # unshare --kill-child: the holder inside dies with it
        holder.communicate()
        got = _result(waiter)
        assert got["claimed"] is False and got["status"] == "claimed"  # it now computes
        assert float(lease) <= got["seconds"] < 20
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()


# ---------------------------------------------------------------- check --prepare


def test_prepare_stores_what_a_check_then_reuses(tmp_path):
    cache_dir = tmp_path / "shared"
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--prepare", "--capability", "9.0", "--cache-dir", str(cache_dir), "--json"],
                          capture_output=True, text=True, timeout=300, env=_env(tmp_path / "elsewhere"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "attn-doctor/prepare" and Path(doc["cache_dir"]) == cache_dir
    assert [v["capability"] for v in doc["verdicts"]] == ["9.0", None]
    assert all(v["status"] == "ok" and v["cached"] is None for v in doc["verdicts"])
    # This node has no GPU: its check looks up the no-GPU verdict, from another folder, and computes nothing.
    workdir = tmp_path / "job"
    workdir.mkdir()
    check = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--json", "--cache-dir", str(cache_dir)],
                           capture_output=True, text=True, timeout=300, env=_env(tmp_path / "elsewhere"), cwd=workdir)
    dtype_path = json.loads(check.stdout)["facts"]["dtype_path"]
    assert dtype_path["cached"] is not None and dtype_path["key"] == doc["verdicts"][1]["key"]
    assert len(cache.computations("samples", root=cache_dir)) == 2 and not (tmp_path / "elsewhere").exists()
    # Prepared twice: nothing is computed again.
    again = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--prepare", "--capability", "9.0", "--cache-dir", str(cache_dir)],
                           capture_output=True, text=True, timeout=300, env=_env(tmp_path / "elsewhere"), cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.count("already cached") == 2


@pytest.mark.parametrize("args, message", [
    (["--capability", "9.0", "--capability", "8.0"], "--capability: give one"),
    (["--gpu", "t9"], "--gpu t9: not a GPU attn-doctor knows; did you mean Tesla T4"),
    (["--prepare", "--capability", "sm90"], "--capability sm90: expected a compute capability"),
    (["--prepare", "--quick"], "--prepare computes the sample verdicts"),
])
def test_prepare_usage_errors(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", *args], capture_output=True, text=True, timeout=60,
                          env=_env(tmp_path / "cache"))
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_cache_dir_that_is_a_file_is_a_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--cache-dir", str(blocker)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--cache-dir" in proc.stderr and "not a folder" in proc.stderr


# ---------------------------------------------------------------- bytecode


def test_probe_children_keep_bytecode_in_the_cache_where_the_target_has_none(tmp_path):
    # A torch installed without bytecode (uv's default; a read-only site-packages): the probe
    # children would compile it from source on every check. They write it in the user's own
    # private folder instead, never next to the target's sources nor in the shared cache folder;
    # a torch with bytecode is left as it is.
    site = tmp_path / "site"
    _package(site, "torch", "__version__ = '0.0.1+nobytecode'\nimport torch.helper\n")
    (site / "torch" / "helper.py").write_text("X = 1\n")
    cache_dir = tmp_path / "cache"
    proc = _check(cache_dir, "--no-sample", PYTHONPATH=str(site))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1, 3), err  # the stand-in torch is no working torch: judged, not crashed
    compiled = sorted(p.name for p in _pycache(cache_dir).rglob("*.pyc") if str(site) in str(p))
    assert not (cache_dir / "pycache").exists()
    assert compiled and any(n.startswith("__init__.") for n in compiled) and any(n.startswith("helper.") for n in compiled)
    assert not (site / "torch" / "__pycache__").exists()

    import torch

    real = Path(torch.__file__).parent
    had_bytecode = bool(list((real / "__pycache__").glob("__init__.*.pyc")))
    other = tmp_path / "cache2"
    _report(_check(other, "--no-sample"))
    if had_bytecode:  # this venv's torch has its bytecode: nothing to keep for it
        assert not _pycache(other).exists()
    else:  # installed without (uv, as CI's newest-torch venv): kept in the private folder, never beside torch
        assert _pycache(other).exists()


def test_bytecode_of_an_environment_that_is_gone_is_removed_once_a_day(tmp_path):
    # Python never removes what it wrote under a pycache prefix: every short-lived environment a
    # user checks (a CI job's venv, one per experiment) would keep its torch bytecode for ever.
    sites = {name: tmp_path / name for name in ("kept", "gone")}
    for site in sites.values():
        _package(site, "torch", "__version__ = '0.0.1+nobytecode'\n")
    cache_dir = tmp_path / "cache"
    prefix = _pycache(cache_dir)

    def mirror(site):
        return Path(bytecode.mirror(str(prefix), str(site)))

    for site in sites.values():
        proc = _check(cache_dir, "--no-sample", PYTHONPATH=str(site))
        assert proc.communicate(timeout=120) and proc.returncode in (0, 1, 3)
        assert list(mirror(site).rglob("*.pyc")), site
    kept = {p: p.stat().st_mtime_ns for p in mirror(sites["kept"]).rglob("*.pyc")}
    shutil.rmtree(sites["gone"])
    # A link in the prefix (Python makes none) is never followed.
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "x.pyc").write_text("")
    (prefix / "link").symlink_to(precious)

    stamp = prefix / ".pruned"
    assert stamp.exists()  # the first check of the day looked (nothing was gone then)
    proc = _check(cache_dir, "--no-sample", PYTHONPATH=str(sites["kept"]))
    proc.communicate(timeout=120)
    assert mirror(sites["gone"]).exists()  # not again the same day

    os.utime(stamp, (time.time() - 2 * 86400,) * 2)
    proc = _check(cache_dir, "--no-sample", PYTHONPATH=str(sites["kept"]))
    proc.communicate(timeout=120)
    assert not mirror(sites["gone"]).exists()
    assert {p: p.stat().st_mtime_ns for p in mirror(sites["kept"]).rglob("*.pyc")} == kept  # still used, not compiled again
    assert (prefix / "link").is_symlink() and (precious / "x.pyc").exists()
    assert time.time() - stamp.stat().st_mtime < 600


def test_probe_children_keep_bytecode_in_the_cache_where_the_targets_bytecode_is_stale(tmp_path):
    # An image whose build touched the sources after compiling them (or copied them with new
    # times): a .pyc beside each file, none valid. Python compiles them again on every import, and
    # the probes never write beside the target's sources: the user's private folder keeps theirs.
    import py_compile

    site = tmp_path / "site"
    init = _package(site, "torch", "__version__ = '0.0.1+stale'\nimport torch.helper\n")
    (site / "torch" / "helper.py").write_text("X = 1\n")
    for source in (init, site / "torch" / "helper.py"):
        py_compile.compile(str(source), doraise=True)
        os.utime(source, (time.time() + 3600, time.time() + 3600))  # touched after compiling
    stale = sorted(p.name for p in (site / "torch" / "__pycache__").iterdir())
    cache_dir = tmp_path / "cache"
    proc = _check(cache_dir, "--no-sample", PYTHONPATH=str(site))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1, 3), err
    compiled = sorted(p.name for p in _pycache(cache_dir).rglob("*.pyc") if str(site) in str(p))
    assert any(n.startswith("__init__.") for n in compiled) and any(n.startswith("helper.") for n in compiled)
    assert sorted(p.name for p in (site / "torch" / "__pycache__").iterdir()) == stale  # left as they were


def test_bytecode_state_validates_a_pyc_as_importlib_does(tmp_path):
    import importlib.util
    import py_compile

    from attn_doctor.probes.target.env_probe import bytecode_state

    big = tmp_path / "big.py"
    big.write_text("X = 1\n" * 50)
    small = tmp_path / "__init__.py"
    small.write_text("Y = 2\n")
    assert bytecode_state([str(big), str(small)]) == "missing"
    for source in (big, small):
        py_compile.compile(str(source), doraise=True)
    assert bytecode_state([str(big), str(small)]) == "fresh"
    os.utime(big, (time.time() + 60, time.time() + 60))
    assert bytecode_state([str(big), str(small)]) == "stale"
    # hash-based bytecode: checked against the source's content where the flag asks for it
    checked = py_compile.PycInvalidationMode.CHECKED_HASH
    py_compile.compile(str(big), doraise=True, invalidation_mode=checked)
    assert bytecode_state([str(big), str(small)]) == "fresh"
    big.write_text("X = 3\n" * 50)
    assert bytecode_state([str(big), str(small)]) == "stale"
    py_compile.compile(str(big), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    big.write_text("X = 4\n" * 50)
    assert bytecode_state([str(big), str(small)]) == "fresh"  # unchecked: importlib trusts it as well
    # another interpreter's magic number: compiled again all the same
    pyc = Path(importlib.util.cache_from_source(str(small)))
    pyc.write_bytes(b"\0\0\r\n" + pyc.read_bytes()[4:])
    assert bytecode_state([str(big), str(small)]) == "missing"
    assert bytecode_state([]) is None
    # judged beside the source, where the target's imports look, whatever pycache prefix this
    # process has (the doctor's read-only install keeps its own bytecode in the cache folder)
    py_compile.compile(str(small), doraise=True)
    py_compile.compile(str(big), doraise=True)
    saved = sys.pycache_prefix
    sys.pycache_prefix = str(tmp_path / "elsewhere")
    try:
        assert bytecode_state([str(big), str(small)]) == "fresh"
    finally:
        sys.pycache_prefix = saved


def _prepare_line(path: Path) -> list[str]:
    for line in path.read_text().splitlines():
        if "attn-doctor check --prepare" in line and not line.lstrip().startswith("#"):
            return line[line.index("attn-doctor check --prepare"):].split()[1:]
    raise AssertionError(f"{path} has no `attn-doctor check --prepare` line")


def test_the_image_build_examples_prepare_what_a_check_reuses(tmp_path):
    examples = ROOT / "examples"
    args = _prepare_line(examples / "Dockerfile")
    assert args == _prepare_line(examples / "apptainer.def")  # one build step, two image formats
    assert "ENV ATTN_DOCTOR_CACHE_DIR=/opt/attn-doctor/cache" in (examples / "Dockerfile").read_text()
    image_cache = tmp_path / "opt-attn-doctor-cache"
    # The build step, as the image runs it (ATTN_DOCTOR_CACHE_DIR set by the image), from its WORKDIR.
    build = subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, timeout=300,
                           env=_env(image_cache), cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    assert build.stdout.count("computed and stored") == len([a for a in args if a == "--capability"]) + 1
    # A node of the cluster (no GPU here: the no-GPU verdict), from the job's folder: nothing computed.
    job = tmp_path / "job"
    job.mkdir()
    check = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--json"], capture_output=True, text=True, timeout=300,
                           env=_env(image_cache), cwd=job)
    assert json.loads(check.stdout)["facts"]["dtype_path"]["cached"] is not None
    assert len(cache.computations("samples", root=image_cache)) == 3
