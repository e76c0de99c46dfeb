"""The shared cache folder's attack on a real install: torch installed without bytecode (uv's
default, as `pip install --no-compile`), a check with ATTN_DOCTOR_CACHE_DIR on a shared folder,
then another user's .pyc for torch/version.py, compiled to carry the source's mtime and size and
to write a marker. The next check must not run it (it did while the probes kept their bytecode in
the cache folder)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

from test_security import forge_pyc


def test_forged_torch_bytecode_in_the_shared_cache_folder_never_runs(realenv, doctor, tmp_path, monkeypatch):
    env = realenv.get("torch-2.13-cpu")
    shared, private, marker = tmp_path / "shared", tmp_path / "home-cache", tmp_path / "forged-code-ran"
    monkeypatch.setenv("ATTN_DOCTOR_CACHE_DIR", str(shared))
    monkeypatch.setenv("XDG_CACHE_HOME", str(private))
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    folder = subprocess.run([str(env.python), "-c", "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    version = f"{folder}/version.py"
    assert not os.path.exists(importlib.util.cache_from_source(version)), "torch was installed with bytecode"
    first = doctor("check", "--python", env.python, "--json", "--no-sample", "--no-smoke", env=env)
    assert first.returncode in (0, 1), first.stderr[-2000:]
    assert not list(shared.rglob("*.pyc"))  # no bytecode in the shared folder at all
    assert list((private / "attn-doctor" / "pycache").rglob("torch/version.*.pyc"))  # kept in the user's own
    forge_pyc(shared / "pycache", Path(version), marker)
    second = doctor("check", "--python", env.python, "--json", "--no-sample", "--no-smoke", env=env)
    assert second.returncode in (0, 1), second.stderr[-2000:]
    assert not marker.exists(), "the forged .pyc in the shared cache folder ran"


def test_the_user_pycache_folder_keeps_only_bytecode_of_folders_that_are_there(realenv, doctor, tmp_path, monkeypatch):
    # A check of an environment without bytecode, sample forward pass included: torch's bytecode is
    # kept in the user's own folder, mirrored under torch's path, for the next check. The sample
    # child imports attn-doctor through a temporary folder of its own: nothing may stay mirrored
    # under that folder's name once it is gone, one copy per check.
    env = realenv.get("torch-2.13-cpu")
    private = tmp_path / "home-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(private))
    # a cache of its own: results an earlier check of this venv cached would start no torch here
    monkeypatch.setenv("ATTN_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    run = doctor("check", "--python", env.python, "--json", "--no-smoke", env=env)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    assert run.json()["facts"]["dtype_path"]["status"] == "ok"  # the sample ran
    prefix = private / "attn-doctor" / "pycache"
    mirrored = {p.parent for p in prefix.rglob("*.pyc")}
    assert any("torch" in m.parts for m in mirrored)
    gone = sorted(str(m) for m in mirrored if not (Path(os.sep) / m.relative_to(prefix)).is_dir())
    assert not gone, gone[:3]
