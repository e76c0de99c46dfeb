"""The realenv matrix: fixtures, the real CLI as a subprocess, and the time spent per environment.

Run it with `python -m pytest -m realenv` (the default run leaves it out: it needs the registry).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from .envs import Builder, Env, uv_binary
from .times import TIMES, write_times

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FACTS = REPO / "tests" / "fixtures" / "facts"
FIRED = ("error", "warning", "info", "crashed")



def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.realenv)


@pytest.fixture(scope="session")
def realenv(tmp_path_factory) -> Builder:
    kept = os.environ.get("ATTN_DOCTOR_REALENV_DIR")
    # Under pytest-xdist each worker keeps environments of its own: a test may change one (fix,
    # then undo), which a test on the other worker must not see half done.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = (Path(kept).expanduser() / (worker or "")) if kept else tmp_path_factory.mktemp("realenv")
    root.mkdir(parents=True, exist_ok=True)
    return _Timed(root)


class _Timed(Builder):
    def get(self, name: str) -> Env:
        env = super().get(name)
        TIMES[name].update(build=env.build_s, reused=env.reused)
        return env


def doctor_argv() -> list[str]:
    """The installed console script beside this interpreter (what a user runs), else -m."""
    script = Path(sys.executable).parent / "attn-doctor"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "attn_doctor"]


def path_without_uv() -> str:
    """PATH without any folder that holds a uv (an environment nothing can install into)."""
    folders = [f for f in os.environ.get("PATH", "").split(os.pathsep) if f and not (Path(f) / "uv").exists()]
    return os.pathsep.join(folders)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> dict:
        try:
            return json.loads(self.stdout)
        except ValueError:
            raise AssertionError(f"no JSON on stdout (exit {self.returncode}): {self.stdout[-1500:]} {self.stderr[-1500:]}") from None


class Doctor:
    """`attn-doctor ...` in a subprocess, with its own state directory; time charged to an env."""

    def __init__(self, state: Path):
        self.state = state

    def __call__(self, *args, env: Optional[Env] = None, no_uv: bool = False, cwd=None, timeout: float = 900) -> Run:
        environ = dict(os.environ, ATTN_DOCTOR_STATE_DIR=str(self.state), COLUMNS="200", PIP_DISABLE_PIP_VERSION_CHECK="1")
        uv = uv_binary()
        if no_uv:
            environ["PATH"] = path_without_uv()
        elif uv:  # fix may install with uv where an environment has no pip
            environ["PATH"] = str(Path(uv).parent) + os.pathsep + environ.get("PATH", "")
        argv = doctor_argv() + [str(a) for a in args]
        start = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, env=environ, cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)
        seconds = time.monotonic() - start
        if env is not None:
            TIMES[env.name]["cli"] += seconds
            TIMES[env.name]["calls"] += 1
        return Run(proc.returncode, proc.stdout, proc.stderr, seconds)


@pytest.fixture
def doctor(tmp_path) -> Doctor:
    return Doctor(tmp_path / "state")


def fired(report: dict) -> set:
    """The rule ids that did not pass (nor were skipped)."""
    return {r["rule"] for r in report["results"] if r["status"] in FIRED}


def result(report: dict, rule: str) -> dict:
    return next(r for r in report["results"] if r["rule"] == rule)


def assert_verdicts(report: dict, expected: set, known: Optional[dict] = None) -> None:
    """check ran every probe, crashed nowhere, and fired exactly `expected`; `known` maps a rule
    this environment still fires wrongly to why (an xfail naming it, after everything else held)."""
    known = known or {}
    assert report["summary"]["crashed"] == 0, [r for r in report["results"] if r["status"] == "crashed"]
    assert report["summary"]["probes_failed"] == 0, report["facts"]["probes"]
    assert report["exit_code"] in (0, 1), report["exit_code"]
    got = fired(report)
    messages = {r["rule"]: r["message"] for r in report["results"] if r["rule"] in got}
    assert got - set(known) == expected, messages
    wrong = sorted(got & set(known))
    if wrong:
        pytest.xfail("; ".join(f"{rule}: {known[rule]}" for rule in wrong))


def actions(fix_doc: dict) -> dict:
    """rule -> the fix action for it."""
    return {a["rule"]: a for a in fix_doc["actions"]}


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: its table goes to the controller (tests/conftest.py)
        workeroutput["realenv_times"] = {name: dict(t) for name, t in TIMES.items()}


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    write_times(terminalreporter, TIMES)  # a run without workers (under xdist, tests/conftest.py writes it)
