"""fix on packages: real pip in a temporary venv against a local wheelhouse; undo; SIGKILL recovery."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

from attn_doctor.facts import Facts, Package
from attn_doctor.fix.plan import Options, build_plan
from attn_doctor.report import Report, Result
from attn_doctor.rules.model import Remedy

from .conftest import CONFIGS, cli, installed_version, offline_env


def test_upgrade_verified_then_undo_brings_the_old_version_back(venv, wheelhouse, tmp_path):
    state = tmp_path / "state"
    env = offline_env(wheelhouse)
    py = str(venv / "bin" / "python")
    dry = cli("fix", "--python", py, "--quick", "--only", "AD401", "--dry-run", state=state, env_extra=env)
    assert dry.returncode == 0 and "-m pip install --upgrade 'x-transformers>=1.30.2,<2'" in dry.stdout, dry.stdout + dry.stderr
    assert installed_version(venv, "x-transformers") == "1.30.1"

    proc = cli("fix", "--python", py, "--quick", "--yes", "--json", state=state, env_extra=env)
    doc = json.loads(proc.stdout)
    action = next(a for a in doc["actions"] if a["rule"] == "AD401")
    assert action["status"] == "verified" and action["argv"][:4] == [py, "-m", "pip", "install"], doc
    assert installed_version(venv, "x-transformers") == "1.30.2"
    journal = json.loads((state / "runs" / doc["run"] / "journal.json").read_text())
    assert journal["packages_before"]["x-transformers"] == "1.30.1" and journal["status"] == "applied"

    history = cli("fix", "--history", state=state)
    assert doc["run"] in history.stdout and "AD401" in history.stdout

    undo = cli("fix", "--undo", doc["run"], state=state, env_extra=env)
    assert undo.returncode == 0, undo.stderr
    assert installed_version(venv, "x-transformers") == "1.30.1"
    assert json.loads((state / "runs" / doc["run"] / "journal.json").read_text())["status"] == "undone"


def test_failing_pip_leaves_the_environment_as_it_was(venv, tmp_path):
    # A wheelhouse without the fixed release: pip finds no matching version.
    empty = tmp_path / "empty-wheelhouse"
    empty.mkdir()
    before = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    proc = cli("fix", "--python", str(venv), "--quick", "--only", "AD401", "--yes", "--json", state=tmp_path / "state", env_extra=offline_env(empty))
    assert proc.returncode == 1
    action = json.loads(proc.stdout)["actions"][0]
    assert action["status"] == "failed" and "pip exited 1" in action["reason"]
    assert "x-transformers>=1.30.2" in action["reason"] or "No matching distribution" in action["reason"], action["reason"]
    after = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    assert before == after


def test_sigkill_mid_pip_is_recovered_by_the_next_fix(venv, wheelhouse, tmp_path):
    state = tmp_path / "state"
    env = dict(os.environ, ATTN_DOCTOR_STATE_DIR=str(state), **{k: v for k, v in offline_env(wheelhouse).items() if k.startswith("PIP_")})
    proc = subprocess.Popen(
        [sys.executable, "-m", "attn_doctor", "fix", "--python", str(venv), "--quick", "--only", "AD401", "--yes"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # Kill the whole process group (the doctor and its pip) as soon as changes are under way.
    deadline = time.monotonic() + 120
    killed_while = None
    while time.monotonic() < deadline and proc.poll() is None:
        journals = list(state.glob("runs/*/journal.json"))
        if journals:
            try:
                status = json.loads(journals[0].read_text())["status"]
            except ValueError:
                status = None
            if status == "applying":
                os.killpg(proc.pid, signal.SIGKILL)
                killed_while = status
                break
        time.sleep(0.005)
    proc.wait(timeout=60)
    assert killed_while == "applying", "the fix finished before it could be killed"
    journal = json.loads(next(state.glob("runs/*/journal.json")).read_text())
    assert journal["status"] == "applying" and journal["packages_before"]["x-transformers"] == "1.30.1"
    # Whatever pip had done, the next fix restores the state before the killed one first.
    nxt = cli("fix", "--python", str(venv), "--quick", "--only", "AD401", "--dry-run", state=state, env_extra=offline_env(wheelhouse))
    assert "was interrupted" in nxt.stderr  # a dry run only reports it
    rec = cli("fix", "--python", str(venv), "--quick", "--only", "NONE", "--yes", state=state, env_extra=offline_env(wheelhouse))
    assert "restored the state before the interrupted fix" in rec.stderr, rec.stderr
    assert installed_version(venv, "x-transformers") == "1.30.1"
    assert json.loads((state / "runs" / journal["id"] / "journal.json").read_text())["status"] == "undone"


def test_sigkill_during_config_writes_never_leaves_a_half_file(tmp_path):
    src = CONFIGS / "llamafactory_lora_bf16.yaml"
    facts = str(CONFIGS.parent / "facts" / "t4.json")
    original = src.read_bytes()
    fixed = None
    for delay in (0.0, 0.15, 0.3, 0.45, 0.6):
        cfg = tmp_path / f"train-{delay}.yaml"
        shutil.copyfile(src, cfg)
        state = tmp_path / f"state-{delay}"
        env = dict(os.environ, ATTN_DOCTOR_STATE_DIR=str(state))
        proc = subprocess.Popen(
            [sys.executable, "-m", "attn_doctor", "fix", "--from-report", facts, "--config", str(cfg), "--yes"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        data = cfg.read_bytes()
        if fixed is None and data != original:
            fixed = data
        assert data == original or b"fp16: true" in data, "a half-written file"
        undo = subprocess.run([sys.executable, "-m", "attn_doctor", "fix", "--undo"], env=env, capture_output=True, text=True, timeout=60)
        assert cfg.read_bytes() == original, (delay, undo.stderr)


def _report(facts: Facts, remedy: Remedy, rule="AD999") -> Report:
    return Report(source="probed", facts=facts, results=[Result(rule=rule, name="x", area="libraries", status="error", title="t", remedies=[remedy])])


def _facts(**platform) -> Facts:
    facts = Facts()
    facts.platform.python_executable = "/venv/bin/python"
    for k, v in platform.items():
        setattr(facts.platform, k, v)
    return facts


PINS = {"2.3": "2.3", "2.4": "3.0.0", "2.5": "3.1.0"}


def test_triton_requirement_means_an_unsafe_torch_upgrade():
    plan = build_plan(_report(_facts(), Remedy(kind="pip", requirement="triton>=3.0", summary="s")), Options(), {"torch_triton": PINS})
    action = plan.actions[0]
    assert action.requirement == "torch>=2.4" and action.safety == "unsafe" and action.status == "blocked"
    assert "--unsafe" in action.reason and "pinned by torch" in action.note
    allowed = build_plan(_report(_facts(), Remedy(kind="pip", requirement="triton>=3.0", summary="s")), Options(unsafe=True), {"torch_triton": PINS})
    assert allowed.actions[0].status == "planned" and allowed.actions[0].argv[-1] == "torch>=2.4"


def test_externally_managed_python_is_refused():
    plan = build_plan(
        _report(_facts(externally_managed=True), Remedy(kind="pip", requirement="x-transformers>=1.30.2", summary="s")), Options(), {}
    )
    assert plan.actions[0].status == "blocked" and "PEP 668" in plan.actions[0].reason and not plan.actions[0].argv


def test_the_triton_torch_pins_is_installed_as_it_is():
    # AD201 on torch 2.5 with another triton: reinstalling triton 3.1.0 is what torch asks for, not a torch upgrade.
    facts = _facts()
    facts.packages["torch"] = Package(version="2.5.1")
    plan = build_plan(_report(facts, Remedy(kind="pip", requirement="triton==3.1.0", summary="s")), Options(), {"torch_triton": PINS})
    action = plan.actions[0]
    assert action.status == "planned" and action.safety == "safe" and action.argv[-1] == "triton==3.1.0", action
    # a triton that torch does not pin still means moving torch
    plan = build_plan(_report(facts, Remedy(kind="pip", requirement="triton>=3.2", summary="s")), Options(), {"torch_triton": {**PINS, "2.6": "3.2.0"}})
    assert plan.actions[0].requirement == "torch>=2.6" and plan.actions[0].status == "blocked"


def _fa4_plan(cuda: str, libs: list, **more):
    """check's rules and fix's plan on an H100 with flash-attn-4 and these CuTe DSL libraries."""
    from attn_doctor.diagnosis.engine import evaluate
    from attn_doctor.rules.fixtures import build_facts
    from attn_doctor.rules.loader import load_recipes
    from attn_doctor.rules.model import FixtureRef

    packages = {"packages.flash-attn-4": {"version": "4.0.0b36"}}
    packages.update({f"packages.{name}": {"version": "4.8.1"} for name in libs})
    facts = build_facts(FixtureRef(base="h100", set={"torch.cuda": cuda, **packages, **more}))
    facts.platform.externally_managed = False
    recipes = load_recipes()
    report = Report(source="probed", facts=facts, results=[r for r in evaluate(recipes, facts) if r.rule in ("AD309", "AD321")])
    return build_plan(report, Options(), recipes.data)


def test_fa4_is_installed_with_the_dsl_libraries_of_torchs_cuda():
    # torch for CUDA 13 beside the CUDA 12 DSL libraries a plain `pip install flash-attn-4` brings
    (action,) = _fa4_plan("13.0", ["nvidia-cutlass-dsl-libs-cu12"]).actions
    assert action.rule == "AD321" and action.status == "planned", action
    assert action.argv[-1] == "flash-attn-4[cu13]" and {"--upgrade", "--upgrade-package"} & set(action.argv)
    # torch for CUDA 12 beside only the CUDA 13 libraries: the plain install (4.0.0b36 has no cu12 extra)
    (action,) = _fa4_plan("12.8", ["nvidia-cutlass-dsl-libs-cu13"]).actions
    assert action.rule == "AD321" and action.argv[-1] == "flash-attn-4", action
    # the right libraries: nothing to do
    assert not _fa4_plan("13.0", ["nvidia-cutlass-dsl-libs-cu12", "nvidia-cutlass-dsl-libs-cu13"]).actions
    # the right libraries and still no import (AD309): the cause is in the import's traceback (the
    # DSL, or a dependency such as triton that a reinstall does not bring), so the install for
    # torch's CUDA is shown to run by hand, not run
    broken = {"imports.flash_attn_4": {"status": "error", "error": {"type": "ModuleNotFoundError", "message": "No module named 'cutlass'", "kind": "other"}}}
    plan = _fa4_plan("13.0", ["nvidia-cutlass-dsl-libs-cu13"], **broken)
    assert not plan.actions and [m.rule for m in plan.manual] == ["AD309"], plan
    assert plan.manual[0].command[-1] == "flash-attn-4[cu13]", plan.manual


def test_the_plan_says_what_an_install_would_pull_in_before_anything_runs(base_venv, tmp_path):
    """pip resolves the remedy without installing (--dry-run --report): the plan names each package
    it would install, the new ones among them, and the environment is left as it was."""
    from .conftest import make_wheel, x_transformers_wheel

    house = tmp_path / "house"
    house.mkdir()
    x_transformers_wheel(house, "1.30.1")
    make_wheel(house, "x-transformers", "1.30.2", {"x_transformers/__init__.py": "__version__ = '1.30.2'\n"},
               requires=("einx-stand-in>=0.1",))
    make_wheel(house, "einx-stand-in", "0.1", {"einx_stand_in/__init__.py": ""})
    venv = tmp_path / "venv"
    shutil.copytree(base_venv, venv, symlinks=True)
    env = offline_env(house)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "x-transformers==1.30.1"], check=True, timeout=120, env=env)
    py = str(venv / "bin" / "python")

    dry = cli("fix", "--python", py, "--quick", "--only", "AD401", "--dry-run", state=tmp_path / "state", env_extra=env)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "would install: x-transformers 1.30.2 (now 1.30.1), einx-stand-in 0.1 (new); 1 new package" in dry.stdout, dry.stdout

    doc = json.loads(cli("fix", "--python", py, "--quick", "--only", "AD401", "--dry-run", "--json",
                         state=tmp_path / "state", env_extra=env).stdout)
    action = next(a for a in doc["actions"] if a["rule"] == "AD401")
    assert {(i["name"], i["version"], i["installed"]) for i in action["would_install"]} == {
        ("x-transformers", "1.30.2", "1.30.1"), ("einx-stand-in", "0.1", None)}
    assert installed_version(venv, "x-transformers") == "1.30.1"
    assert "No package metadata" in installed_version(venv, "einx-stand-in") or "einx" in installed_version(venv, "einx-stand-in")


def test_a_remedy_the_installer_cannot_resolve_says_why_and_installs_nothing(base_venv, tmp_path):
    from attn_doctor.fix.packages import preview_install

    house = tmp_path / "empty"
    house.mkdir()
    venv = tmp_path / "venv"
    shutil.copytree(base_venv, venv, symlinks=True)
    py = str(venv / "bin" / "python")
    old = dict(os.environ)
    try:
        os.environ.update(offline_env(house))
        items, error = preview_install([py, "-m", "pip", "install", "--upgrade", "x-transformers>=1.30.2,<2"], {})
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert items == [] and error and "x-transformers" in error, error


def test_uv_resolves_the_same_preview(tmp_path):
    """uv pip install --dry-run: the packages it would add, read from its own lines."""
    import pytest

    from attn_doctor.fix.packages import preview_install

    from .conftest import make_wheel, x_transformers_wheel

    uv_mod = pytest.importorskip("uv", reason="uv is in the test extra")
    uv = uv_mod.find_uv_bin()
    house = tmp_path / "house"
    house.mkdir()
    x_transformers_wheel(house, "1.30.1")
    make_wheel(house, "x-transformers", "1.30.2", {"x_transformers/__init__.py": ""}, requires=("einx-stand-in>=0.1",))
    make_wheel(house, "einx-stand-in", "0.1", {"einx_stand_in/__init__.py": ""})
    subprocess.run([uv, "venv", "-q", str(tmp_path / "v")], check=True, timeout=120)
    py = str(tmp_path / "v" / "bin" / "python")
    source = ["--no-index", "--find-links", str(house)]
    subprocess.run([uv, "pip", "install", "-q", "--python", py, *source, "x-transformers==1.30.1"], check=True, timeout=120)
    items, error = preview_install([uv, "pip", "install", "--python", py, *source, "--upgrade", "x-transformers>=1.30.2,<2"],
                                   {"x-transformers": "1.30.1"})
    assert error is None
    assert sorted((i["name"], i["version"], i["installed"]) for i in items) == [
        ("einx-stand-in", "0.1", None), ("x-transformers", "1.30.2", "1.30.1")]
    assert "1.30.1" in subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('x-transformers'))"],
                                      capture_output=True, text=True, timeout=60).stdout
