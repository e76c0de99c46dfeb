"""A shared cache folder holds data, never code; what another user writes there is not believed.

Every process here is real: `attn-doctor check` subprocesses, forged bytecode compiled the way an
attacker would (carrying the source's mtime and size, so Python's own validation accepts it), and
readers and writers running as another real uid (`nobody`, through setpriv-like preexec setuid)
where this machine lets the tests (they run as root); the owner check is faked only where not.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env(shared: Path, private: Path, **extra: str) -> dict:
    env = dict(os.environ, ATTN_DOCTOR_CACHE_DIR=str(shared), XDG_CACHE_HOME=str(private), PYTHONWARNINGS="ignore",
               OMP_NUM_THREADS="1")
    for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"):
        env.pop(name, None)
    env.update(extra)
    return env


def forge_pyc(prefix: Path, source: Path, marker: Path) -> Path:
    """The .pyc Python would look for under `prefix` for `source`, compiled from code that writes
    `marker`, stamped with the source's mtime and size: exactly what importlib validates."""
    saved = sys.pycache_prefix
    sys.pycache_prefix = str(prefix)
    try:
        pyc = Path(importlib.util.cache_from_source(str(source)))
    finally:
        sys.pycache_prefix = saved
    code = compile(source.read_text() + f"\nopen({str(marker)!r}, 'w').write('ran')\n", str(source), "exec")
    st = source.stat()
    from importlib._bootstrap_external import _code_to_timestamp_pyc

    pyc.parent.mkdir(parents=True, exist_ok=True)
    pyc.write_bytes(bytes(_code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size)))
    return pyc


def _torch_without_bytecode(site: Path) -> Path:
    (site / "torch").mkdir(parents=True)
    init = site / "torch" / "__init__.py"
    init.write_text("__version__ = '0.0.1+nobytecode'\n")
    return init


def test_bytecode_forged_in_a_shared_cache_folder_is_never_run(tmp_path):
    # The target's torch has no bytecode (uv's default, pip --no-compile): the probe children keep
    # the bytecode they compile somewhere. Another user who can write the shared cache folder
    # puts a .pyc there for torch's __init__ that passes Python's checks; the next check must not
    # run it: bytecode goes only to the user's own private folder.
    shared, private, site = tmp_path / "shared", tmp_path / "home-cache", tmp_path / "site"
    init = _torch_without_bytecode(site)
    marker = tmp_path / "forged-code-ran"
    forge_pyc(shared / "pycache", init, marker)
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--json", "--no-smoke", "--no-sample"],
                          capture_output=True, text=True, cwd=ROOT, timeout=180,
                          env=_env(shared, private, PYTHONPATH=os.pathsep.join([str(ROOT), str(site)])))
    assert proc.returncode in (0, 1, 3), proc.stderr[-2000:]
    assert not marker.exists(), "a .pyc from the shared cache folder ran in the probe child"
    kept = [p for p in (private / "attn-doctor" / "pycache").rglob("*.pyc") if str(site) in str(p)]
    assert kept, "the private folder keeps the target's bytecode"
    folder = private / "attn-doctor" / "pycache"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.geteuid()


def test_a_read_only_doctor_never_imports_its_own_bytecode_from_the_shared_folder(tmp_path):
    # A read-only shared install of the doctor, with no bytecode of its own for this Python: its
    # modules' bytecode goes to the user's private folder, never to the shared cache folder.
    install = tmp_path / "install"
    shutil.copytree(ROOT / "attn_doctor", install / "attn_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    shared, private = tmp_path / "shared", tmp_path / "home-cache"
    marker = tmp_path / "forged-code-ran"
    forge_pyc(shared / "pycache", install / "attn_doctor" / "cli" / "__init__.py", marker)

    def version() -> subprocess.CompletedProcess:
        subprocess.run(["chmod", "-R", "a-w", str(install)], check=True)
        try:
            return subprocess.run([sys.executable, "-m", "attn_doctor", "--version"], capture_output=True, text=True,
                                  cwd=tmp_path, timeout=120, env=_env(shared, private, PYTHONPATH=str(install)))
        finally:
            subprocess.run(["chmod", "-R", "u+w", str(install)], check=True)

    proc = version()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not marker.exists(), "a .pyc from the shared cache folder ran in the doctor itself"
    assert list((private / "attn-doctor" / "pycache").rglob("cli/__init__.*.pyc"))
    # a private folder that is not private: compiled in memory, and one line says why
    shutil.rmtree(private / "attn-doctor" / "pycache")
    (private / "attn-doctor" / "pycache").mkdir()
    (private / "attn-doctor" / "pycache").chmod(0o777)
    proc = version()
    assert proc.returncode == 0 and not marker.exists()
    assert proc.stderr.splitlines() == [f"attn-doctor: note: bytecode is not kept: {private}/attn-doctor/pycache can be written by others (mode 0777)"]
    assert not list((private / "attn-doctor" / "pycache").rglob("*.pyc"))


def test_a_bytecode_folder_others_can_write_is_not_used(tmp_path):
    # The private folder is checked before each use: open to others, owned by someone else or a
    # link, it is not used; the check says so in one line and compiles in memory.
    from attn_doctor.bytecode import why_not_private

    folder = tmp_path / "pycache"
    assert why_not_private(str(folder)) is None
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    folder.chmod(0o755)
    assert why_not_private(str(folder)) is None and stat.S_IMODE(folder.stat().st_mode) == 0o700  # tightened
    folder.chmod(0o777)
    assert "written by others" in why_not_private(str(folder))
    folder.chmod(0o700)
    os.chown(folder, 65534, -1)
    assert "belongs to uid 65534" in why_not_private(str(folder))
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert "not a folder" in why_not_private(str(link))
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)  # a parent anyone may rename entries in (no sticky bit)
    assert "who could replace" in why_not_private(str(loose / "pycache"))


def test_check_says_in_one_line_when_no_private_bytecode_folder_can_be_had(tmp_path):
    shared, private, site = tmp_path / "shared", tmp_path / "home-cache", tmp_path / "site"
    _torch_without_bytecode(site)
    (private / "attn-doctor" / "pycache").mkdir(parents=True)
    (private / "attn-doctor" / "pycache").chmod(0o777)
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--no-smoke", "--no-sample"],
                          capture_output=True, text=True, cwd=ROOT, timeout=180,
                          env=_env(shared, private, PYTHONPATH=os.pathsep.join([str(ROOT), str(site)])))
    assert proc.returncode in (0, 1, 3), proc.stderr[-2000:]
    notes = [line for line in proc.stdout.splitlines() if "bytecode is not kept" in line]
    assert len(notes) == 1 and "can be written by others" in notes[0], proc.stdout
    assert not list((private / "attn-doctor" / "pycache").rglob("*.pyc"))
    assert not (shared / "pycache").exists()


# ---------------------------------------------------------------- whose cache entries are believed

NOBODY = 65534


def _shared_folder(mode: int = 0o777) -> Path:
    """A cache folder other users can reach and write, outside pytest's private tmp folder (0700)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="attn-doctor-shared-"))
    folder.chmod(mode)
    return folder


def _write_as(uid: int, path: Path, doc: dict) -> None:
    """Write an entry as another real user, the way any process of theirs would (aside, renamed)."""
    if os.geteuid() != 0:
        pytest.skip("writing as another uid needs root")
    proc = subprocess.run(["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1.tmp" && mv -f "$1.tmp" "$1"', "sh", str(path)],
                          input=json.dumps(doc), text=True, capture_output=True, user=uid, group=uid, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert path.stat().st_uid == uid


def _verdict(message: str = "the real verdict") -> dict:
    return {"status": "ok", "verdict": "warning", "dtype": "bfloat16", "findings": [{"id": "AD601", "message": message}]}


def _stored(root: Path, **inputs) -> tuple[str, dict]:
    from attn_doctor import cache

    inputs = cache.inputs_of(**inputs)
    digest = cache.key("samples", **inputs)
    flight = cache.Flight("samples", digest, root, inputs=inputs)
    assert flight.claim()
    entry = flight.store(_verdict())
    (Path(root) / "samples").chmod(0o777 | ((Path(root) / "samples").stat().st_mode & 0o2000))  # everyone's, as on a cluster
    return digest, entry


def test_a_verdict_forged_by_another_uid_is_ignored_and_recomputed(tmp_path):
    from attn_doctor import cache
    from attn_doctor.facts import DtypePath

    root = _shared_folder()
    try:
        digest, entry = _stored(root, python="/x/bin/python", packages=["torch==2.13.0"])
        assert entry["writer"]["uid"] == os.geteuid() and entry["writer"]["host"]
        assert cache.Flight("samples", digest, root, schema=DtypePath).cached()["nonce"] == entry["nonce"]
        # Another user of the shared folder replaces it: a whole, valid entry of that key...
        forged = dict(entry, nonce="f" * 16, value=_verdict("all is well, nothing to fix"))
        _write_as(NOBODY, root / "samples" / f"{digest}.json", forged)
        flight = cache.Flight("samples", digest, root, schema=DtypePath)
        assert flight.cached() is None  # ...not believed: this process computes the verdict itself
        assert flight.ignored == [f"ignored samples entry {digest}.json: written by uid {NOBODY}: not you, root or the cache "
                                  "folder's owner; computed here instead"]
        # Its failure records are not believed either (they would end a wait with their error).
        _write_as(NOBODY, root / "samples" / f"{digest}.failed.json", dict(forged, error="go away"))
        assert cache.Flight("samples", digest, root)._failure() is None
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_group_trust_believes_members_of_a_setgid_cache_folders_group():
    # A cluster's admins make the shared folder setgid to a group of its users: with
    # `--cache-trust group` (or ATTN_DOCTOR_CACHE_TRUST=group) their entries are believed.
    from attn_doctor import cache

    if os.geteuid() != 0:
        pytest.skip("writing as another uid needs root")
    root = _shared_folder()
    try:
        os.chown(root, -1, NOBODY)  # nobody's own group: nobody is a member
        root.chmod(0o2777)
        digest, entry = _stored(root, python="/y/bin/python")
        _write_as(NOBODY, root / "samples" / f"{digest}.json", dict(entry, nonce="e" * 16))
        assert cache.Flight("samples", digest, root).cached() is None  # owner trust: not believed
        assert cache.Flight("samples", digest, root, trust="group").cached()["nonce"] == "e" * 16
        os.environ[cache.TRUST_ENV] = "group"
        try:
            assert cache.Flight("samples", digest, root).cached() is not None
        finally:
            del os.environ[cache.TRUST_ENV]
        root.chmod(0o0777)  # not setgid: the group means nothing, the entry is not believed
        assert cache.Flight("samples", digest, root, trust="group").cached() is None
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_entry_is_believed_only_whole(tmp_path):
    # Even from a trusted writer (this user): the key must follow from the entry's own inputs (an
    # entry renamed onto another key is not that key's), the value must be a verdict, the file a
    # regular file of bounded size.
    from attn_doctor import cache
    from attn_doctor.facts import DtypePath

    digest_a, entry_a = _stored(tmp_path, python="/a")
    digest_b, _ = _stored(tmp_path, python="/b")
    folder = tmp_path / "samples"

    def believed(digest, doc=None, raw=None):
        path = folder / f"{digest}.json"
        path.unlink()
        if raw is not None:
            path.write_bytes(raw)
        elif doc is not None:
            path.write_text(json.dumps(doc))
        flight = cache.Flight("samples", digest, tmp_path, schema=DtypePath)
        return flight.cached() is not None, " ".join(flight.ignored)

    assert believed(digest_b, dict(entry_a)) == (False, f"ignored samples entry {digest_b}.json: its key is not its name; computed here instead")
    assert "inputs do not give its key" in believed(digest_b, dict(entry_a, key=digest_b))[1]
    assert "inputs do not give its key" in believed(digest_a, dict(entry_a, inputs=None))[1]
    assert "not a DtypePath" in believed(digest_a, dict(entry_a, value={"status": 7}))[1]
    assert "malformed" in believed(digest_a, dict(entry_a, by="x" * 10_000))[1]
    assert "over the" in believed(digest_a, raw=b" " * (cache.MAX_ENTRY_BYTES + 1))[1]
    assert "not JSON" in believed(digest_a, raw=b"\x1b]0;title\x07")[1]
    (folder / f"{digest_a}.json").unlink()
    (folder / "elsewhere.json").write_text(json.dumps(entry_a))
    (folder / f"{digest_a}.json").symlink_to(folder / "elsewhere.json")
    assert cache.Flight("samples", digest_a, tmp_path).cached() is None
    (folder / f"{digest_a}.json").unlink()
    (folder / f"{digest_a}.json").write_text(json.dumps(entry_a))
    assert believed(digest_a, dict(entry_a)) == (True, "")


def test_cache_trust_setting_is_validated(tmp_path):
    env = dict(os.environ, ATTN_DOCTOR_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--quick", "--cache-trust", "everyone"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "--cache-trust everyone: cache trust must be one of owner, group" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--quick"], capture_output=True, text=True, cwd=ROOT,
                          env=dict(env, ATTN_DOCTOR_CACHE_TRUST="all"), timeout=60)
    assert proc.returncode == 2 and "$ATTN_DOCTOR_CACHE_TRUST: cache trust must be one of owner, group, not 'all'" in proc.stderr


def _python_for(uid: int) -> "list[str] | None":
    """An interpreter `uid` may run that imports attn-doctor and its dependencies from here (this
    venv's own may sit in a folder only root can enter), or None."""
    import sysconfig

    path = os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for python in dict.fromkeys([sys.executable, os.path.realpath(sys.executable), f"/usr/bin/python{minor}"]):
        try:
            proc = subprocess.run([python, "-c", "import msgspec, attn_doctor.cache"], capture_output=True, cwd="/",
                                  env=dict(os.environ, PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1"), user=uid, group=uid, timeout=30)
        except OSError:
            continue
        if proc.returncode == 0:
            return [python, path]
    return None


READ = """
import json, sys
from attn_doctor import cache
from attn_doctor.facts import DtypePath
flight = cache.Flight("samples", sys.argv[1], sys.argv[2], schema=DtypePath)
entry = flight.cached()
print(json.dumps({"nonce": entry and entry["nonce"], "ignored": flight.ignored}))
"""


def test_a_reader_of_another_uid_believes_the_images_entries_and_no_one_elses(monkeypatch):
    # `check --prepare` in an image build runs as the image's owner (root): a check at run time,
    # as whichever user the container runs, believes those entries (root's, the folder owner's),
    # and not one that a third user slipped in. The reader runs as `nobody` where it can.
    from attn_doctor import cache

    if os.geteuid() != 0:
        pytest.skip("writing as another uid needs root")
    root = _shared_folder(0o755)  # the image's folder: its owner's
    try:
        digest, entry = _stored(root, python="/image/bin/python")
        other_digest, other_entry = _stored(root, python="/image/bin/python", capability="9.0")
        _write_as(4242, root / "samples" / f"{other_digest}.json", dict(other_entry, nonce="d" * 16))
        runner = _python_for(NOBODY)
        if runner is not None:
            def read(d):
                proc = subprocess.run([runner[0], "-c", READ, d, str(root)], capture_output=True, text=True, cwd="/", timeout=60,
                                      env=dict(os.environ, PYTHONPATH=runner[1], PYTHONDONTWRITEBYTECODE="1"), user=NOBODY, group=NOBODY)
                assert proc.returncode == 0, proc.stderr
                return json.loads(proc.stdout)
        else:  # no interpreter `nobody` may run: only the reader's uid is faked, at the owner check
            monkeypatch.setattr(cache.os, "geteuid", lambda: NOBODY)

            def read(d):
                flight = cache.Flight("samples", d, root)
                found = flight.cached()
                return {"nonce": found and found["nonce"], "ignored": flight.ignored}
        assert read(digest) == {"nonce": entry["nonce"], "ignored": []}
        seen = read(other_digest)
        assert seen["nonce"] is None and "written by uid 4242" in seen["ignored"][0]
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------- outside text on the terminal


def test_check_from_report_and_explain_print_outside_text_inert(tmp_path):
    # A recorded report carrying a terminal retitle (OSC 0), a clipboard write (OSC 52), a colour
    # and a right-to-left override: shown escaped, not obeyed; the JSON keeps them as they are.
    report = json.loads((ROOT / "tests" / "fixtures" / "facts" / "t4.json").read_text())
    facts = report.get("facts", report)
    hostile = "Tesla T4 [reverse]\x1b]0;retitled\x07\x1b]52;c;ZXZpbA==\x07\x1b[31m\u202eevil"
    for device in facts["gpu"]["devices"] + facts.get("torch", {}).get("devices", []):
        device["name"] = hostile
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    env = dict(os.environ, FORCE_COLOR="1", COLUMNS="300")
    human = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--from-report", str(path)], capture_output=True, text=True,
                           cwd=ROOT, env=env, timeout=60)
    assert human.returncode in (0, 1), human.stderr
    assert "GPU: Tesla T4 [reverse]\\x1b]0;retitled\\x1b]52;c;ZXZpbA==\\x1b[31m\\u202eevil" in re.sub("\x1b\\[[0-9;]*m", "", human.stdout)
    assert "\u202e" not in human.stdout and not re.search("\x1b(?!\\[[0-9;]*m)", human.stdout)
    as_json = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--from-report", str(path), "--json"], capture_output=True,
                             text=True, cwd=ROOT, env=env, timeout=60)
    assert json.loads(as_json.stdout)["facts"]["gpu"]["devices"][0]["name"] == hostile

    line = "RuntimeError: FlashAttention only supports Ampere GPUs or newer. \x1b]0;retitled\x07\u2066"
    explained = subprocess.run([sys.executable, "-m", "attn_doctor", "explain", line], capture_output=True, text=True, cwd=ROOT,
                               env=env, timeout=60)
    # explain takes terminal sequences out of a log's lines itself (colour codes of a CI log);
    # what is left of the echo shows its bidi control escaped
    assert "newer. \\u2066" in explained.stdout, explained.stdout
    assert "\u2066" not in explained.stdout and not re.search("\x1b(?!\\[[0-9;]*m)", explained.stdout)


def test_a_check_recomputes_a_verdict_another_uid_forged_and_says_so_with_v():
    # End to end: a real check stores its sample verdict in a shared folder everyone can write;
    # another user rewrites it (a verdict with nothing to report). The next check does not
    # believe it: it computes the verdict again, and -v says which entry it ignored and why.
    if os.geteuid() != 0:
        pytest.skip("writing as another uid needs root")
    shared = _shared_folder()
    try:
        env = _env(shared, shared / "home", PYTHONPATH=str(ROOT))
        first = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--json", "--no-smoke"], capture_output=True, text=True,
                               cwd=ROOT, env=env, timeout=240)
        assert first.returncode in (0, 1), first.stderr[-2000:]
        key = json.loads(first.stdout)["facts"]["dtype_path"]["key"]
        path = shared / "samples" / f"{key}.json"
        entry = json.loads(path.read_text())
        assert entry["writer"]["uid"] == 0 and entry["inputs"] and cache_key_of(entry) == key
        (shared / "samples").chmod(0o777)
        forged = dict(entry, nonce="0" * 16, value=dict(entry["value"], verdict="pass", findings=[]))
        _write_as(NOBODY, path, forged)
        second = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "-v", "--no-smoke"], capture_output=True, text=True,
                                cwd=ROOT, env=env, timeout=240)
        assert second.returncode in (0, 1), second.stderr[-2000:]
        note = f"note: ignored samples entry {key}.json: written by uid {NOBODY}: not you, root or the cache folder's owner; computed here instead"
        assert note in second.stdout, second.stdout[-3000:]
        assert json.loads(path.read_text())["writer"]["uid"] == 0  # computed again, and stored again
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def cache_key_of(entry: dict) -> str:
    from attn_doctor import cache

    return cache.key("samples", **entry["inputs"])
