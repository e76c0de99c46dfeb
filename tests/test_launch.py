"""The folder that puts this attn_doctor package on another interpreter's sys.path (tracing/runs/launch.py):
kept in the user's private cache, one per package location, so the bytecode children keep under a pycache
prefix is read again; a temporary one (removed after) where no private folder can be had."""

from __future__ import annotations

import os
import json

from attn_doctor.tracing.runs import launch


def test_the_package_folder_is_kept_and_its_bytecode_mirror_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = launch.package_dir()
    second = launch.package_dir()
    assert first == second and first.startswith(str(tmp_path / "cache"))
    assert os.path.realpath(os.path.join(first, "attn_doctor")) == os.path.realpath(launch.PACKAGE_DIR)
    json.loads(open(os.path.join(first, launch.support.JSON_NAME), encoding="utf-8").read())
    launch.remove_package_dir(first, {"PYTHONPYCACHEPREFIX": str(tmp_path / "prefix")})
    assert os.path.isdir(first)  # kept: the next child reads its bytecode
    assert oct(os.stat(os.path.dirname(first)).st_mode & 0o777) == "0o700"
    assert not [p for p in os.listdir(first) if p not in ("attn_doctor", launch.support.JSON_NAME)]  # no leftovers


def test_without_a_private_cache_folder_a_temporary_one_is_made_and_removed(tmp_path, monkeypatch):
    shared = tmp_path / "cache"
    (shared / "attn-doctor").mkdir(parents=True)
    os.chmod(shared / "attn-doctor", 0o777)  # writable by others: not private, never used
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    folder = launch.package_dir()
    assert not folder.startswith(str(shared))
    launch.remove_package_dir(folder)
    assert not os.path.exists(folder)
