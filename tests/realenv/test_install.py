"""The doctor installed the ways users install it, run the ways they run it:

- pipx-like: the doctor in a venv of its own (no torch), a training venv activated in the shell
  (VIRTUAL_ENV set, its bin first on PATH): the report is the training venv's, and says why;
- a read-only shared install (`--target /shared/ad`, `chmod -R a-w`) run as
  `PYTHONPATH=/shared/ad python -m attn_doctor`: nothing is written into it, ever;
- `uvx --from attn_doctor-<ver>.whl attn-doctor check`.

The doctor's dependencies come from the registry (hence realenv); torch from the local CPU wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from .envs import REPO, _base_python, uv_binary, uv_env

MODEL = """
import torch
import torch.nn.functional as F


class Attn(torch.nn.Module):
    def __init__(self, device=None):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96, device=device)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 8, 3, 2, 16).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v)


def build(device=None):
    return Attn(device), torch.randn(2, 8, 32, device=device)
"""


def uv(*args, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run([uv_binary() or "uv", *map(str, args)], capture_output=True, text=True, timeout=timeout, env=uv_env(),
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"uv {' '.join(map(str, args))}: {proc.stderr[-2000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    uv("build", "--wheel", "-q", "-o", out, REPO)
    return next(out.glob("attn_doctor-*.whl"))


@pytest.fixture(scope="module")
def doctor_venv(tmp_path_factory, wheel) -> Path:
    """`pipx install`, as pipx does it: a venv of the doctor's own, without torch."""
    path = tmp_path_factory.mktemp("pipx") / "attn-doctor"
    uv("venv", "-q", "--python", _base_python(), path)
    uv("pip", "install", "-q", "--python", path / "bin" / "python", wheel)
    assert not (next((path / "lib").glob("python3*/site-packages")) / "torch").exists()
    return path


def shell(prefix: Path = None, variable: str = "VIRTUAL_ENV", home: Path = None) -> dict:
    """A user's shell: nothing active, or PREFIX activated (VIRTUAL_ENV or CONDA_PREFIX, its bin
    first on PATH). No PYTHONDONTWRITEBYTECODE: a user's Python writes bytecode where it can."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["COLUMNS"] = "200"
    if prefix is not None:
        env[variable] = str(prefix)
        env["PATH"] = str(prefix / "bin") + os.pathsep + env.get("PATH", "")
    if home is not None:
        env["HOME"] = str(home)
        for name in ("ATTN_DOCTOR_CACHE_DIR", "ATTN_DOCTOR_STATE_DIR", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
            env.pop(name, None)  # the user's own folders, under that HOME
    return env


def run(argv: list, env: dict, cwd=None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_the_wheel_ships_py_typed_and_the_recipes(wheel):
    """PEP 561: py.typed in the wheel makes type checkers read the API's annotations."""
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "attn_doctor/py.typed" in names
    assert "attn_doctor/recipes/system.toml" in names


# ---------------------------------------------------------------- pipx-like, training venv activated


def test_pipx_installed_doctor_diagnoses_the_activated_training_venv(realenv, doctor_venv):
    train = realenv.get("torch-2.13-cpu")
    doctor = doctor_venv / "bin" / "attn-doctor"
    # Before: no venv active, the doctor's own interpreter (no torch), as issue 15 found it.
    alone = json.loads(run([doctor, "check", "--json", "--no-sample"], shell()).stdout)
    assert alone["facts"]["target"]["source"] == "self" and alone["facts"]["torch"]["status"] == "missing"
    # The training venv activated: its torch is found and judged.
    proc = run([doctor, "check", "--json", "--no-sample"], shell(train.path))
    assert proc.returncode in (0, 1), proc.stderr
    facts = json.loads(proc.stdout)["facts"]
    assert facts["target"] == {"python": str(train.python), "source": "venv", "why": "active venv ($VIRTUAL_ENV)", "ignored": None}
    assert facts["torch"]["status"] == "ok" and facts["torch"]["version"] == "2.13.0+cpu"
    human = run([doctor, "check", "--no-sample"], shell(train.path))
    assert human.stdout.splitlines()[1] == f"checking {train.python} — active venv ($VIRTUAL_ENV)", human.stdout
    assert "torch 2.13.0+cpu" in human.stdout and human.stderr == ""


def test_pipx_installed_doctor_diagnoses_the_active_conda_env(realenv, doctor_venv):
    train = realenv.get("torch-2.13-cpu")  # a prefix with bin/python, as a conda env has
    proc = run([doctor_venv / "bin" / "attn-doctor", "check", "--json", "--no-sample"], shell(train.path, "CONDA_PREFIX"))
    facts = json.loads(proc.stdout)["facts"]
    assert (facts["target"]["source"], facts["target"]["why"]) == ("conda", "active conda env ($CONDA_PREFIX)")
    assert facts["torch"]["status"] == "ok"


def test_pipx_installed_doctor_with_a_stale_virtual_env(doctor_venv, tmp_path):
    proc = run([doctor_venv / "bin" / "attn-doctor", "check", "--no-sample"], shell(tmp_path / "deleted-venv"))
    assert proc.returncode in (0, 1)
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(
        f"attn-doctor: warning: VIRTUAL_ENV={tmp_path / 'deleted-venv'} is not a Python environment"), proc.stderr
    assert proc.stdout.splitlines()[1].startswith(f"checking {doctor_venv / 'bin' / 'python'} — the interpreter attn-doctor runs in")


def test_doctor_alone_names_the_training_venv_on_path_with_its_command(realenv, doctor_venv, tmp_path):
    """First contact: a venv holding only attn-doctor, run by its path with no venv active; a
    training venv with torch is on PATH (bin first, not activated). The check of the doctor's own
    torch-less venv names that one, with the command that checks it, and exits 1 (torch missing)."""
    train = realenv.get("torch-2.13-cpu")
    doctor = doctor_venv / "bin" / "attn-doctor"
    home = tmp_path / "home"
    home.mkdir()
    env = shell(home=home)
    env["PATH"] = f"{train.path / 'bin'}{os.pathsep}{env['PATH']}"
    for name in ("PYENV_ROOT", "CONDA_EXE", "MAMBA_EXE", "WORKON_HOME"):
        env.pop(name, None)
    proc = run([doctor, "check", "--json", "--no-sample"], env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    facts = json.loads(proc.stdout)["facts"]
    assert facts["target"]["source"] == "self" and facts["torch"]["status"] == "missing"
    first = facts["environments"]["candidates"][0]
    command = f"{doctor} check -p {train.path / 'bin' / 'python3'}"
    assert (first["python"], first["torch"], first["command"]) == (str(train.path / "bin" / "python3"), "2.13.0+cpu", command)
    assert "python3 on PATH" in first["found"] and "python on PATH" in first["found"]
    assert facts["environments"]["duration_s"] < 1.0
    human = run([doctor, "check", "--no-sample"], env, cwd=tmp_path)
    assert human.returncode == 1 and human.stderr == ""
    assert f"→ torch 2.13.0+cpu is in one other environment on this machine: {train.path / 'bin' / 'python3'}" in human.stdout
    assert f"\n        {command}\n" in human.stdout, human.stdout
    # The command it gives works: the training venv, checked.
    again = run(command.split(), env, cwd=tmp_path)
    assert again.returncode in (0, 1) and "torch 2.13.0+cpu" in again.stdout and "other environment" not in again.stdout


def test_pipx_installed_doctor_traces_in_the_activated_venv(realenv, doctor_venv, tmp_path):
    train = realenv.get("torch-2.13-cpu")
    (tmp_path / "model.py").write_text(MODEL)
    doctor = doctor_venv / "bin" / "attn-doctor"
    # The doctor's own venv has no torch: the model cannot even be built there.
    assert run([doctor, "trace", "model:build", "--json"], shell(), cwd=tmp_path).returncode == 3
    proc = run([doctor, "trace", "model:build", "--json"], shell(train.path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["interpreter"]["python"] == str(train.python) and doc["summary"]["sinks"] == 1


# ---------------------------------------------------------------- read-only shared install


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in [root, *root.rglob("*")]}


def read_only(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)


def writable(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


@pytest.mark.parametrize("compiled", [True, False], ids=["pip-like-bytecode", "no-bytecode"])
def test_read_only_shared_install_runs_and_writes_nothing_into_it(realenv, wheel, tmp_path, compiled):
    shared, home = tmp_path / "shared" / "ad", tmp_path / "home"
    home.mkdir()
    uv("pip", "install", "-q", "--python", _base_python(), "--target", shared, *(["--compile-bytecode"] if compiled else []), wheel)
    read_only(shared)
    before = snapshot(shared)
    env = dict(shell(home=home), PYTHONPATH=str(shared))
    train = realenv.get("torch-2.13-cpu")
    try:
        for args, activated in ((["check", "--quick"], None), (["check", "--no-sample"], None), (["check", "--no-sample"], train.path),
                                (["check", "--quick"], None)):
            run_env = dict(shell(activated, home=home), PYTHONPATH=str(shared)) if activated else env
            proc = run([_base_python(), "-m", "attn_doctor", *args], run_env, cwd=home)
            assert proc.returncode in (0, 1), (args, proc.stdout[-2000:], proc.stderr[-2000:])
            assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
        after = snapshot(shared)
    finally:
        writable(shared)  # so that pytest can remove it
    written = sorted(set(after) - set(before)) + sorted(k for k in before if k in after and after[k] != before[k])
    if compiled:
        assert written == []
    else:
        # Python compiles the package and its __main__ before the doctor's first line runs (root
        # writes through chmod a-w); everything after that keeps its bytecode in the user's cache.
        assert set(written) <= {"attn_doctor", "attn_doctor/__pycache__", "attn_doctor/__pycache__/__init__.cpython-311.pyc",
                                "attn_doctor/__pycache__/__main__.cpython-311.pyc"}, written
        assert list((home / ".cache" / "attn-doctor" / "pycache").rglob("cli/__pycache__/*.pyc")) or list(
            (home / ".cache" / "attn-doctor" / "pycache").rglob("cli/*.pyc")), "the doctor's bytecode went nowhere"


# ---------------------------------------------------------------- uvx


def test_uvx_from_the_wheel(realenv, wheel, tmp_path):
    train = realenv.get("torch-2.13-cpu")
    argv = [uv_binary() or "uv", "tool", "run", "--from", wheel, "attn-doctor", "check", "--quick", "--json"]
    env = dict(shell(train.path), UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1", UV_PYTHON=_base_python())
    proc = run(argv, env, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    facts = json.loads(proc.stdout)["facts"]
    # uvx runs the doctor in an environment of its own and leaves VIRTUAL_ENV alone: the activated venv is checked.
    assert facts["target"]["python"] == str(train.python) and facts["packages"]["torch"]["version"] == "2.13.0+cpu"
