"""Each remedy's command, rendered against the environment it names, acts on that environment:
the interpreter it runs exists, works and is the checked environment's own, and it never installs
into attn-doctor's own environment when that was checked only because nothing else was named
(it stays without torch). The environments offered beside a check are each offered with a command
that checks them, and one whose Python the probes cannot start in is left out, with the reason.
Real venvs, real interpreters, real subprocesses of the CLI."""

from __future__ import annotations

import glob
import importlib.metadata
import json
import os
import shlex
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from attn_doctor.probes.environments import find_environments
from attn_doctor.probes.runner import TARGET_PYTHON_FLOOR, TOO_OLD

HERE_BIN = Path(sys.executable).parent
DOCTOR = f"{shlex.quote(sys.executable)} -m attn_doctor"
try:
    TORCH = importlib.metadata.version("torch")
except importlib.metadata.PackageNotFoundError:
    TORCH = None


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Path:
    """A real venv without torch and without pip."""
    path = tmp_path_factory.mktemp("remedies") / "venv"
    venv.create(path, with_pip=False, symlinks=True)
    return path / "bin" / "python"


def interpreter_of(argv: list[str]) -> str | None:
    """The interpreter a command acts on: `PY -m pip ...`, `PY -c/-m ...`, `uv pip ... --python PY`."""
    if "--python" in argv:
        return argv[argv.index("--python") + 1]
    if os.path.basename(argv[0]).startswith("python"):
        return argv[0]
    return None


def prefix_of(python: str) -> str:
    proc = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (python, proc.stderr)  # the Python a command targets exists and works
    return os.path.realpath(proc.stdout.strip())


def commands(doc: dict) -> list[tuple[str, dict]]:
    return [(r["rule"], m) for r in doc["results"] if r["status"] in ("error", "warning", "info")
            for m in r.get("remedies", []) if m.get("command")]


def test_a_chosen_environment_gets_commands_that_act_on_it(bare):
    # the venv has no pip: uv (this test venv's, put on PATH) installs into it, as `uv pip --python`
    env = dict(os.environ, PATH=os.pathsep.join([str(HERE_BIN), os.environ.get("PATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--quick", "--json", "-p", str(bare)],
                          capture_output=True, text=True, timeout=240, env=env)
    doc = json.loads(proc.stdout)
    found = commands(doc)
    install = [m["command"] for rule, m in found if rule == "AD001"]
    assert len(install) == 1 and install[0][-1] == "torch", found  # AD001: torch into the venv that lacks it
    for rule, remedy in found:
        python = interpreter_of(remedy["command"])
        if python is not None:
            assert python == str(bare), (rule, remedy["command"])
            assert prefix_of(python) == os.path.realpath(bare.parent.parent) != os.path.realpath(sys.prefix)


def test_the_doctors_own_environment_checked_by_default_is_never_installed_into(bare, tmp_path, monkeypatch):
    """bare plays the doctor's own venv: checked because nothing was activated or named."""
    from attn_doctor.core import run_check
    from attn_doctor.options import CheckOptions, Target

    monkeypatch.setenv("PATH", str(HERE_BIN))
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT", "CONDA_EXE", "WORKON_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    report = run_check(CheckOptions(quick=True, target=Target(str(bare), "self")))
    by_rule = {r.rule: r for r in report.results}
    assert by_rule["AD001"].status == "error"
    offered = by_rule["AD001"].remedies
    assert [m.for_target for m in offered] == ["not_installable"]
    assert offered[0].command is None and "make one with torch: this one is attn-doctor's own environment" in offered[0].summary
    for result in report.results:
        for remedy in result.remedies:
            python = interpreter_of(remedy.command) if remedy.command else None
            assert python != str(bare), (result.rule, remedy.command)


def _old_interpreters() -> list[str]:
    """Real interpreters older than the probes' floor on this machine (pyenv's), if any."""
    found = []
    for python in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/*/bin/python"))):
        version = Path(python).parent.parent.name.split(".")
        try:
            if tuple(int(x) for x in version[:2]) < TARGET_PYTHON_FLOOR:
                found.append(python)
        except ValueError:
            continue
    return found


def test_each_environment_offered_is_checked_by_its_command_and_a_too_old_one_is_left_out(tmp_path):
    home = tmp_path / "home"
    (home / "miniconda3" / "conda-meta").mkdir(parents=True)  # conda's base, whose envs/ is read
    old = home / "miniconda3" / "envs" / "py27"  # a conda env of Python 2.7 with a torch of its time
    (old / "conda-meta").mkdir(parents=True)
    (old / "bin").mkdir()
    os.symlink(sys.executable, old / "bin" / "python2.7")
    os.symlink("python2.7", old / "bin" / "python")
    torch_info = old / "lib" / "python2.7" / "site-packages" / "torch-1.4.0.dist-info"
    torch_info.mkdir(parents=True)
    environ = {"PATH": str(HERE_BIN), "HOME": str(home), "CONDA_EXE": str(home / "miniconda3" / "bin" / "conda")}
    if _old_interpreters():
        environ["PYENV_ROOT"] = os.path.expanduser("~/.pyenv")
    found = find_environments(str(tmp_path / "nothing" / "python"), doctor=DOCTOR, environ=environ, cwd=str(tmp_path))
    by_python = {c.python: c for c in found.candidates}
    left = by_python[str(old / "bin" / "python")]
    assert (left.torch, left.python_version, left.command) == ("1.4.0", "2.7", "")
    assert left.left_out == f"Python 2.7 is {TOO_OLD}"
    offered = [c for c in found.candidates if c.command]
    assert offered and all(not c.left_out for c in offered)
    # every command offered checks its environment: run it (the one with torch, and a few more)
    for candidate in sorted(offered, key=lambda c: c.torch is None)[:4]:
        proc = subprocess.run(shlex.split(candidate.command) + ["--quick", "-q"], capture_output=True, text=True, timeout=240)
        assert proc.returncode in (0, 1), (candidate.command, proc.stderr)
    # and where this machine has one, a real interpreter below the floor is refused as too old, not "not working"
    for python in _old_interpreters():
        assert by_python[python].left_out and not by_python[python].command
        proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--quick", "-p", python], capture_output=True,
                              text=True, timeout=240)
        assert proc.returncode == 2 and TOO_OLD in proc.stderr and "not a working" not in proc.stderr, proc.stderr


def _interpreters_at_the_floor() -> list[str]:
    return [p for p in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/*/bin/python")))
            if Path(p).parent.parent.name.startswith("%d.%d." % TARGET_PYTHON_FLOOR)]


@pytest.mark.skipif(not _interpreters_at_the_floor(), reason="no Python of the floor's version on this machine (pyenv)")
def test_the_floor_is_a_python_the_probes_run_in():
    # every module of the child compiles there (those loaded by path on a GPU too), and a check runs
    python = _interpreters_at_the_floor()[0]
    target = Path(__file__).parents[1] / "attn_doctor" / "probes" / "target"
    code = "import sys\nfor f in sys.argv[1:]:\n    compile(open(f).read(), f, 'exec')\n"
    proc = subprocess.run([python, "-c", code, *map(str, sorted(target.glob("*.py")))], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--quick", "-q", "-p", python], capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode in (0, 1), proc.stderr


def test_the_human_report_names_the_environment_left_out_without_a_command(tmp_path):
    import io

    from rich.console import Console

    from attn_doctor.facts import Environments, OtherEnvironment
    from attn_doctor.render.environments import render_environments

    envs = Environments(searched=["conda environments"], doctor="attn-doctor", candidates=[
        OtherEnvironment(python="/opt/old/bin/python", found=["conda env old"], python_version="2.7", torch="1.4.0",
                         left_out=f"Python 2.7 is {TOO_OLD}")])
    out = io.StringIO()
    render_environments(Console(file=out, width=400, no_color=True), envs)
    text = out.getvalue()
    assert "No other environment on this machine has a torch attn-doctor can check" in text
    assert f"left out: torch 1.4.0  /opt/old/bin/python  (conda env old, Python 2.7): Python 2.7 is {TOO_OLD}" in text
    assert "check -p /opt/old/bin/python" not in text


@pytest.mark.parametrize("requirement, installed, expected", [
    ("x-transformers>=1.30.2", "1.30.1", "x-transformers>=1.30.2,<2"),  # not 2.x: other APIs, new dependencies
    ("flash-attn>=2.7.3", "2.6.3", "flash-attn>=2.7.3,<3"),
    ("torch>=2.6", "1.13.1", "torch>=2.6"),  # another major installed: the floor alone
    ("flash-linear-attention>=0.2.2", "0.2.1", "flash-linear-attention>=0.2.2"),  # 0.x has no major to keep
    ("flash-attn==2.7.3", "2.6.3", "flash-attn==2.7.3"),
    ("x-transformers>=1.30.2", None, "x-transformers>=1.30.2"),
])
def test_an_upgrade_stays_within_the_installed_major(requirement, installed, expected):
    from attn_doctor.diagnosis.engine import within_major

    assert within_major(requirement, lambda name: installed) == expected
