"""Where else torch is (attn_doctor/probes/environments.py): found from folders and package
metadata, in real venvs (this test session's, with its real torch, and fresh ones without), real
pyenv and conda layouts (conda itself is not on this machine: its folders are what the search
reads), never by running an interpreter; bounded in time and size."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sys
import time
import venv
from pathlib import Path

import pytest

from attn_doctor.probes.environments import find_environments

try:
    TORCH = importlib.metadata.version("torch")
except importlib.metadata.PackageNotFoundError:  # the suite also runs in venvs without torch
    TORCH = None
needs_torch = pytest.mark.skipif(TORCH is None, reason="this test venv has no torch to be found")
HERE_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Path:
    """A real venv without torch (no pip: nothing to install), as the doctor's own would be."""
    path = tmp_path_factory.mktemp("bare") / "venv"
    venv.create(path, with_pip=False, symlinks=True)
    return path


def _empty(tmp_path: Path) -> Path:
    """A working folder with nothing in it (the environments the test made are found elsewhere)."""
    folder = tmp_path / "cwd"
    folder.mkdir(exist_ok=True)
    return folder


def search(target: Path, path: list, home: Path, cwd: Path, **extra):
    environ = {"PATH": os.pathsep.join(map(str, path)), "HOME": str(home), **extra}
    return find_environments(str(target), doctor="attn-doctor", environ=environ, cwd=str(cwd))


@needs_torch
def test_the_torch_venv_on_path_is_named_first_with_its_command(bare, tmp_path):
    found = search(bare / "bin" / "python", [bare / "bin", HERE_BIN], tmp_path, tmp_path)
    first = found.candidates[0]
    assert first.torch == TORCH
    assert Path(first.python).parent == HERE_BIN and first.python_version == "%d.%d" % sys.version_info[:2]
    assert "python3 on PATH" in first.found and "python on PATH" in first.found  # one venv, two names
    assert first.command == f"attn-doctor check -p {first.python}"
    assert [c for c in found.candidates if c.torch] == [first]
    # The target itself is never a candidate, under any of its names.
    assert not [c for c in found.candidates if Path(c.python).parent == bare / "bin"]
    assert found.error is None and found.duration_s < 1.0


@needs_torch
def test_dot_venv_in_the_working_folder(bare, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / ".venv").symlink_to(HERE_BIN.parent)
    found = search(bare / "bin" / "python", [], tmp_path, project)
    assert [(c.found, c.torch) for c in found.candidates] == [(["./.venv"], TORCH)]


@needs_torch
def test_venvs_of_the_projects_beside_and_in_home_envs(bare, tmp_path):
    """Where people keep venvs: ./*/.venv (the projects beside the one checked) and ~/envs."""
    work = tmp_path / "work"
    (work / "trainer").mkdir(parents=True)
    (work / "trainer" / ".venv").symlink_to(HERE_BIN.parent)
    home = tmp_path / "home"
    (home / "envs").mkdir(parents=True)
    (home / "envs" / "train").symlink_to(HERE_BIN.parent)
    found = search(bare / "bin" / "python", [], home, work)
    assert [(sorted(c.found), c.torch) for c in found.candidates] == [(["./trainer/.venv", "~/envs/train"], TORCH)]
    assert "venvs and conda environments of any name in ./ and ./*/" in found.searched
    assert any("~/envs" in s for s in found.searched)


@needs_torch
def test_environments_of_any_name_in_the_working_folder(bare, tmp_path):
    """`./train` and the README's `./.venv-dev`: a folder with pyvenv.cfg is a venv, whatever its name,
    here and one level down (a project's `./proj/env`)."""
    work = tmp_path / "work"
    (work / "proj").mkdir(parents=True)
    for link in (work / "train", work / ".venv-dev", work / "proj" / "env"):
        link.symlink_to(HERE_BIN.parent)
    (work / "data").mkdir()  # a folder that is no environment
    (work / "data" / "bin").mkdir()
    found = search(bare / "bin" / "python", [], tmp_path, work)
    assert [(sorted(c.found), c.torch) for c in found.candidates] == [(["./.venv-dev", "./proj/env", "./train"], TORCH)]


def test_nothing_found_is_said_with_what_was_searched(bare, tmp_path):
    found = search(bare / "bin" / "python", [bare / "bin"], tmp_path, tmp_path)
    assert found.candidates == [] and "conda environments" in found.searched and found.error is None


def _conda_env(prefix: Path, torch: str | None, python: str = "3.11") -> Path:
    """A conda environment as conda lays it out: conda-meta/, bin/python -> bin/pythonX.Y (its own
    binary: here a copy of this machine's), lib/pythonX.Y/site-packages."""
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / f"python-{python}.10-h955ad1f_0.json").write_text("{}")
    (prefix / "bin").mkdir()
    binary = prefix / "bin" / f"python{python}"
    shutil.copy2(os.path.realpath(sys.executable), binary)
    (prefix / "bin" / "python").symlink_to(binary.name)
    site = prefix / "lib" / f"python{python}" / "site-packages"
    site.mkdir(parents=True)
    if torch:
        info = site / f"torch-{torch}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {torch}\n")
    (site / "torchvision-0.20.1.dist-info").mkdir()  # not torch
    return prefix


def test_conda_envs_from_conda_exe_and_environments_txt(bare, tmp_path):
    home = tmp_path / "home"
    root = _conda_env(home / "miniforge3", None, "3.12")
    (root / "condabin").mkdir()
    _conda_env(root / "envs" / "train", "2.11.0+cu130")
    elsewhere = _conda_env(tmp_path / "scratch" / "ft", "2.5.1")
    (home / ".conda").mkdir()
    # conda's list of environments: every `conda create -p` appends to it; junk is skipped.
    (home / ".conda" / "environments.txt").write_text(f"{root}\n{root / 'envs' / 'train'}\n{elsewhere}\nrelative/path\n\x00\xff\n")
    found = search(bare / "bin" / "python", [], home, _empty(tmp_path), CONDA_EXE=str(root / "bin" / "conda"))
    got = [(c.found, c.torch, c.python_version) for c in found.candidates]
    assert got == [(["conda env train"], "2.11.0+cu130", "3.11"), (["conda env ft"], "2.5.1", "3.11"), (["conda base"], None, "3.12")]
    assert found.candidates[0].python == str(root / "envs" / "train" / "bin" / "python")  # as -p takes it, not resolved


def test_a_pyenv_shim_on_path_is_the_version_pyenv_would_run(bare, tmp_path):
    home = tmp_path / "home"
    pyenv = home / ".pyenv"
    (pyenv / "shims").mkdir(parents=True)
    shim = pyenv / "shims" / "python3"
    shim.write_text("#!/usr/bin/env bash\nexec pyenv exec python3 \"$@\"\n")
    shim.chmod(0o755)
    _conda_env(pyenv / "versions" / "3.11.9", "2.13.0")  # a prefix with bin/python and lib/python3.11
    _conda_env(pyenv / "versions" / "3.12.4", None, "3.12")
    (pyenv / "version").write_text("3.11.9\n")
    found = search(bare / "bin" / "python", [pyenv / "shims"], home, tmp_path)
    assert [(c.found, c.torch) for c in found.candidates] == [(["python3 on PATH", "pyenv 3.11.9"], "2.13.0"), (["pyenv 3.12.4"], None)]
    # .python-version in the working folder wins over the global version, as in pyenv.
    (tmp_path / ".python-version").write_text("3.12.4\n")
    found = search(bare / "bin" / "python", [pyenv / "shims"], home, tmp_path)
    assert next(c for c in found.candidates if "python3 on PATH" in c.found).python_version == "3.12"


def test_a_hung_file_system_stops_the_search_not_the_check(bare, tmp_path):
    """A FIFO in place of conda's environments.txt blocks the reader forever, as a dead NFS home
    does: the search gives up at its deadline with what it had."""
    home = tmp_path / "home"
    (home / ".conda").mkdir(parents=True)
    os.mkfifo(home / ".conda" / "environments.txt")
    started = time.monotonic()
    found = find_environments(str(bare / "bin" / "python"), doctor="attn-doctor",
                              environ={"PATH": "", "HOME": str(home)}, cwd=str(tmp_path), deadline_s=0.5)
    assert time.monotonic() - started < 2.0
    assert found.error.startswith("stopped after")
    with open(home / ".conda" / "environments.txt", "w"):  # let the blocked thread finish
        pass


@needs_torch
def test_a_default_check_without_torch_carries_them_and_says_the_command(bare, tmp_path, monkeypatch):
    """The check pipeline on a torch-less interpreter chosen by default (the probes run in it), no
    venv active, this test venv's bin on PATH: the report carries the candidates, the JSON is valid
    against the shipped schema, and the human report names the one with torch and its command."""
    import io

    import jsonschema
    from rich.console import Console

    from attn_doctor import schemas
    from attn_doctor.core import run_check
    from attn_doctor.options import CheckOptions, Target
    from attn_doctor.render import human

    monkeypatch.setenv("PATH", str(HERE_BIN))
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT", "CONDA_EXE", "WORKON_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    python = str(bare / "bin" / "python")
    default = Target(python, "self")
    report = run_check(CheckOptions(quick=True, target=default))
    first = report.facts.environments.candidates[0]
    assert first.torch == TORCH and first.command.endswith(f" check -p {first.python}")
    document = json.loads(schemas.to_json(report))
    jsonschema.validate(document, json.loads(schemas.schema_bytes("report")))
    assert document["facts"]["environments"]["candidates"][0]["python"] == first.python
    out = io.StringIO()
    human.render(report, Console(file=out, width=300, no_color=True))
    text = out.getvalue()
    assert f"torch {TORCH} is in one other environment on this machine: {first.python}" in text
    assert f"\n        {first.command}\n" in text
    # Chosen by the user (--python), the same interpreter is checked as asked: no search.
    chosen = run_check(CheckOptions(quick=True, python=python, target=Target(python, "option")))
    assert chosen.facts.environments is None


def test_a_python_without_venv_finds_torch_in_the_user_site(bare, tmp_path):
    """`pip install --user torch` with a system-like Python (no pyvenv.cfg): ~/.local counts."""
    home = tmp_path / "home"
    prefix = _conda_env(tmp_path / "usr", None)
    info = home / ".local" / "lib" / "python3.11" / "site-packages" / "torch-2.4.1.dist-info"
    info.mkdir(parents=True)
    found = search(bare / "bin" / "python", [prefix / "bin"], home, _empty(tmp_path))
    assert [(c.found, c.torch, c.python_version) for c in found.candidates] == [(["python on PATH"], "2.4.1", "3.11")]
