"""Shared test helpers: recorded facts fixtures and real broken environments (tests/helpers)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import msgspec
import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:  # `import helpers` from any test, whatever the import mode
    sys.path.insert(0, str(TESTS_DIR))

FACTS_DIR = TESTS_DIR / "fixtures" / "facts"


def load_facts(name: str):
    """A recorded Facts fixture by file stem ("t4", "h100", "flash-attn-undefined-symbol", ...)."""
    from attn_doctor.facts import Facts

    path = FACTS_DIR / (name if name.endswith(".json") else name + ".json")
    return msgspec.json.decode(path.read_bytes(), type=Facts)


def facts_fixture_names() -> list[str]:
    return sorted(p.stem for p in FACTS_DIR.glob("*.json"))


@pytest.fixture
def facts_dir() -> Path:
    return FACTS_DIR


@pytest.fixture
def facts_loader():
    return load_facts


@pytest.fixture(scope="session")
def x_transformers_installs(tmp_path_factory):
    """(root, {version: folder}) for x-transformers 1.30.1 and 1.30.2 (tests/helpers/x_transformers.py)."""
    from helpers import x_transformers

    root = tmp_path_factory.mktemp("xt")
    try:
        return root, x_transformers.install(root)
    except RuntimeError as exc:
        from helpers.registry import skip_or_fail

        skip_or_fail("x-transformers 1.30.1 and 1.30.2", str(exc))


@pytest.fixture(autouse=True, scope="session")
def _no_active_environment():
    """Without --python the doctor diagnoses the active venv or conda env (a conda base left active
    in the shell running pytest, say): the tests run it for its own interpreter unless they set one."""
    import os

    saved = {name: os.environ.pop(name) for name in ("VIRTUAL_ENV", "CONDA_PREFIX") if name in os.environ}
    yield
    os.environ.update(saved)


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    """The sample forward pass caches its verdict; tests must not read or fill the user's cache."""
    import os

    previous = os.environ.get("ATTN_DOCTOR_CACHE_DIR")
    os.environ["ATTN_DOCTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if previous is None:
        os.environ.pop("ATTN_DOCTOR_CACHE_DIR", None)
    else:
        os.environ["ATTN_DOCTOR_CACHE_DIR"] = previous


@pytest.fixture(autouse=True, scope="session")
def _no_bytecode_left_behind(tmp_path_factory):
    """The checks of the session's venvs keep their torch's bytecode in the user's pycache folder
    (attn_doctor/bytecode.py), mirrored under the venvs' path: some 300 MB each, for venvs the
    session deletes. Removed with them, not a day later by the doctor's own pruning."""
    yield
    from attn_doctor.bytecode import mirror, user_folder

    shutil.rmtree(mirror(os.path.join(user_folder(), "pycache"), str(tmp_path_factory.getbasetemp())), ignore_errors=True)


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite tests/golden/ from the current output (or ATTN_DOCTOR_UPDATE_GOLDENS=1)")


# The realenv matrix's time per environment under pytest-xdist: each worker sends its table at its
# end (tests/realenv/conftest.py), the controller (which collects nothing, so never loads that
# conftest) adds them up and prints one.
_REALENV_TIMES: dict = {}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    from realenv.times import merge_times

    merge_times(_REALENV_TIMES, getattr(node, "workeroutput", {}).get("realenv_times") or {})


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _REALENV_TIMES:
        from realenv.times import write_times

        write_times(terminalreporter, _REALENV_TIMES)


@pytest.fixture(autouse=True)
def _no_standins_left_behind():
    """A trace in this process puts its stand-ins (flash_attn and the others, with their fake
    distributions) in place and keeps them for the next trace, as a trace child does; a test in
    the same pytest worker that checks this interpreter afterwards must not see them installed."""
    yield
    from attn_doctor.tracing.standins import registry as standins

    if standins.standin_installed():
        standins.remove_standins()
