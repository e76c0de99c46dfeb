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
    subprocess.run(["chmod", "-R", "a-w", str(install)], check=True)
    try:
        proc = subprocess.run([sys.executable, "-m", "attn_doctor", "--version"], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120, env=_env(shared, private, PYTHONPATH=str(install)))
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(install)], check=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not marker.exists(), "a .pyc from the shared cache folder ran in the doctor itself"
    assert list((private / "attn-doctor" / "pycache").rglob("cli/__init__.*.pyc"))


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
