"""The target is the active environment: --python, else $VIRTUAL_ENV, else $CONDA_PREFIX, else the
interpreter attn-doctor runs in. Real venvs (made by the venv module, no registry) and the real CLI.

The pipx-like install (the doctor in a venv without torch, a training venv with torch) is in
tests/realenv/test_active_env.py: it installs the doctor's dependencies from the registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attn_doctor.options import CheckOptions, UsageError, resolve_target, validate


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory) -> Path:
    """A real venv without torch (nor pip): what the doctor would see there differs from its own."""
    path = tmp_path_factory.mktemp("envs") / "train"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    return path


@pytest.fixture(scope="module")
def conda_like(tmp_path_factory) -> Path:
    """A prefix laid out as conda's (bin/python, conda-meta/): a venv with conda's marker folder."""
    path = tmp_path_factory.mktemp("envs") / "conda-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    (path / "conda-meta").mkdir()
    (path / "conda-meta" / "history").write_text("")
    return path


def activated(prefix: Path, variable: str = "VIRTUAL_ENV") -> dict:
    """The environment a shell has after `source PREFIX/bin/activate` (or `conda activate`)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env[variable] = str(prefix)
    env["PATH"] = str(prefix / "bin") + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "200"
    return env


def doctor(*args, env: dict, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


# ---------------------------------------------------------------- resolution (real folders)


def test_resolution_order(bare_venv, conda_like, tmp_path):
    venv_python = str(bare_venv / "bin" / "python")
    conda_python = str(conda_like / "bin" / "python")
    alone = resolve_target(environ={})
    assert (alone.python, alone.source, alone.own) == (sys.executable, "self", True)
    target = resolve_target(environ={"VIRTUAL_ENV": str(bare_venv)})
    assert (target.python, target.source, target.own, target.why) == (venv_python, "venv", False, "active venv ($VIRTUAL_ENV)")
    target = resolve_target(environ={"CONDA_PREFIX": str(conda_like)})
    assert (target.python, target.source, target.why) == (conda_python, "conda", "active conda env ($CONDA_PREFIX)")
    # A venv activated on top of a conda env is the one in use.
    assert resolve_target(environ={"VIRTUAL_ENV": str(bare_venv), "CONDA_PREFIX": str(conda_like)}).python == venv_python
    # --python wins over both; an empty variable is no active environment.
    target = resolve_target(str(conda_like), environ={"VIRTUAL_ENV": str(bare_venv)})
    assert (target.python, target.source, target.why) == (conda_python, "option", "--python")
    assert resolve_target(environ={"VIRTUAL_ENV": "", "CONDA_PREFIX": str(conda_like)}).source == "conda"


def test_the_doctors_own_environment_active_changes_nothing():
    # Run from inside the active venv (installed there, `python -m`): probed as before, in-process.
    target = resolve_target(environ={"VIRTUAL_ENV": sys.prefix})
    assert (target.python, target.source, target.own) == (sys.executable, "venv", True)
    options = validate(CheckOptions())
    assert options.python is None  # collect_facts then probes this interpreter in-process


def test_a_folder_that_is_not_an_environment_falls_back_with_a_reason(tmp_path, bare_venv):
    target = resolve_target(environ={"VIRTUAL_ENV": str(tmp_path)})
    assert (target.python, target.source, target.own) == (sys.executable, "self", True)
    assert target.ignored == f"VIRTUAL_ENV={tmp_path} is not a Python environment (no bin/python)"
    # Not CONDA_PREFIX either: a stale VIRTUAL_ENV says nothing about which conda env is meant.
    assert resolve_target(environ={"VIRTUAL_ENV": str(tmp_path / "gone"), "CONDA_PREFIX": str(bare_venv)}).source == "self"
    broken = tmp_path / "broken"  # a venv whose base interpreter was removed: a dangling bin/python
    (broken / "bin").mkdir(parents=True)
    (broken / "bin" / "python").symlink_to(tmp_path / "no-such-python")
    assert resolve_target(environ={"CONDA_PREFIX": str(broken)}).ignored.startswith(f"CONDA_PREFIX={broken} ")
    with pytest.raises(UsageError, match="--python"):
        resolve_target(str(tmp_path), environ={"VIRTUAL_ENV": str(bare_venv)})  # a bad --python stays an error


def test_validate_is_idempotent_and_leaves_recorded_reports_alone(bare_venv, monkeypatch, facts_dir):
    monkeypatch.setenv("VIRTUAL_ENV", str(bare_venv))
    once = validate(CheckOptions())
    assert once.python == str(bare_venv / "bin" / "python") and once.target.source == "venv"
    assert validate(once) == once  # fix validates, then run_check again: still the active venv, not "--python"
    recorded = validate(CheckOptions(facts_file=facts_dir / "h100.json"))
    assert recorded.target is None and recorded.python is None


# ---------------------------------------------------------------- the CLI


def test_check_diagnoses_the_activated_venv(bare_venv):
    env = activated(bare_venv)
    proc = doctor("check", "--quick", "--json", env=env)
    assert proc.returncode in (0, 1), proc.stderr
    facts = json.loads(proc.stdout)["facts"]
    python = str(bare_venv / "bin" / "python")
    assert facts["target"] == {"python": python, "source": "venv", "why": "active venv ($VIRTUAL_ENV)", "ignored": None}
    assert facts["platform"]["python_executable"] == python
    assert "torch" not in facts["packages"]  # the doctor's own venv has torch: this is the venv's view
    human = doctor("check", "--quick", env=env)
    assert human.stderr == ""
    assert human.stdout.splitlines()[1] == f"checking {python} — active venv ($VIRTUAL_ENV)"


def test_check_diagnoses_the_active_conda_env(conda_like):
    proc = doctor("check", "--quick", env=activated(conda_like, "CONDA_PREFIX"))
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stdout.splitlines()[1] == f"checking {conda_like / 'bin' / 'python'} — active conda env ($CONDA_PREFIX)"


def test_python_option_overrides_the_active_venv(bare_venv, conda_like):
    proc = doctor("check", "--quick", "--json", "--python", str(conda_like), env=activated(bare_venv))
    target = json.loads(proc.stdout)["facts"]["target"]
    assert (target["python"], target["source"], target["why"]) == (str(conda_like / "bin" / "python"), "option", "--python")


def test_bogus_virtual_env_is_one_warning_then_the_own_interpreter(tmp_path):
    env = activated(tmp_path)
    proc = doctor("check", "--quick", env=env)
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stderr.splitlines() == [
        f"attn-doctor: warning: VIRTUAL_ENV={tmp_path} is not a Python environment (no bin/python): "
        f"checking the interpreter attn-doctor runs in ({sys.executable})"
    ]
    assert proc.stdout.splitlines()[1] == (
        f"checking {sys.executable} — the interpreter attn-doctor runs in "
        f"(VIRTUAL_ENV={tmp_path} is not a Python environment (no bin/python))"
    )
    doc = json.loads(doctor("check", "--quick", "--json", env=env).stdout)
    assert doc["facts"]["target"]["source"] == "self" and doc["facts"]["target"]["ignored"].startswith("VIRTUAL_ENV=")
    assert doc["facts"]["platform"]["python_executable"] == sys.executable


def test_fix_plans_for_the_activated_venv(bare_venv, conda_like, tmp_path):
    env = dict(activated(bare_venv), ATTN_DOCTOR_STATE_DIR=str(tmp_path / "state"))
    proc = doctor("fix", "--dry-run", "--json", "--quick", env=env)
    assert proc.returncode == 0, proc.stderr
    python = str(bare_venv / "bin" / "python")
    doc = json.loads(proc.stdout)
    assert doc["python"] == python
    assert doc["target"] == {"python": python, "source": "venv", "why": "active venv ($VIRTUAL_ENV)", "ignored": None}
    # The plan's header says which environment it changes and why, in check's words.
    human = doctor("fix", "--dry-run", "--quick", env=env)
    assert human.returncode == 0, human.stderr
    assert human.stdout.splitlines()[:2] == ["Plan (dry run: nothing will change)", f"fixing {python} — active venv ($VIRTUAL_ENV)"]
    conda = doctor("fix", "--dry-run", "--quick", env=dict(activated(conda_like, "CONDA_PREFIX"), ATTN_DOCTOR_STATE_DIR=env["ATTN_DOCTOR_STATE_DIR"]))
    assert conda.stdout.splitlines()[1] == f"fixing {conda_like / 'bin' / 'python'} — active conda env ($CONDA_PREFIX)"
    option = doctor("fix", "--dry-run", "--quick", "--python", str(conda_like), env=env)
    assert option.stdout.splitlines()[1] == f"fixing {conda_like / 'bin' / 'python'} — --python"


def test_fix_in_a_bogus_venv_says_it_falls_back_to_its_own_interpreter(tmp_path):
    env = dict(activated(tmp_path / "gone"), ATTN_DOCTOR_STATE_DIR=str(tmp_path / "state"))
    config = tmp_path / "config.json"  # flash_attention_2 without flash-attn: a remedy to plan
    config.write_text(json.dumps({"model_type": "llama", "torch_dtype": "bfloat16", "attn_implementation": "flash_attention_2"}))
    proc = doctor("fix", "--dry-run", "--quick", "--config", str(config), env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1] == (
        f"fixing {sys.executable} — the interpreter attn-doctor runs in "
        f"(VIRTUAL_ENV={tmp_path / 'gone'} is not a Python environment (no bin/python))"
    )


MODEL = """
def build(device=None):
    import torch
    return torch.nn.Linear(4, 4, device=device), torch.zeros(2, 4, device=device)
"""


def test_trace_runs_the_model_in_the_activated_venv(bare_venv, tmp_path):
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    # The doctor's own interpreter has torch: in-process, the model imports it (no attention call).
    own = doctor("trace", f"{model}:build", "--json", env=activated(Path(sys.prefix)))
    assert "interpreter" not in json.loads(own.stdout), own.stderr
    # The activated venv has none: the model ran there, and the report says so.
    proc = doctor("trace", f"{model}:build", "--json", env=activated(bare_venv))
    doc = json.loads(proc.stdout)
    assert doc["interpreter"] == {"python": str(bare_venv / "bin" / "python"), "source": "venv", "why": "active venv ($VIRTUAL_ENV)"}
    assert proc.returncode == 3 and "No module named 'torch'" in doc["error"]["message"]
    human = doctor("trace", f"{model}:build", env=activated(bare_venv))
    assert f"traced in {bare_venv / 'bin' / 'python'} — active venv ($VIRTUAL_ENV)" in human.stdout
