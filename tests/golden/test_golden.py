"""Golden files: what users read, kept as reviewed text (tests/golden/**/*.txt).

The human output of `check --from-report` for every recorded report (with and without -v, and
with a LLaMA-Factory config where the report has a GPU), of `explain` for one corpus case of every
family, of `fix --dry-run` on recorded reports, and of `trace` on the toy models. The CLI runs
in-process (typer's CliRunner) with no terminal: no colour, no width, every line whole. Paths that
differ between machines (this interpreter, the checkout, temporary folders) and timings are
replaced by <python>, <repo>, <tmp> and <s>.

A change in wording is a reviewed change: a mismatch fails with a unified diff, and

    python -m pytest tests/golden --update-goldens      (or ATTN_DOCTOR_UPDATE_GOLDENS=1)

rewrites the files from the current output, for `git diff` to show.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent
FACTS = sorted((ROOT / "tests" / "fixtures" / "facts").glob("*.json"))
CONFIG = "tests/golden/configs/llamafactory_fa2_bf16.yaml"

sys.path.insert(0, str(ROOT / "benchmarks"))
import score_explain  # noqa: E402

CASES, FAMILIES = score_explain.load_corpus()
# one case per family, the first the corpus lists: a sample every family's wording shows in
SAMPLE = {}
for _case in CASES:
    SAMPLE.setdefault(_case.family, _case)


def _interpreters() -> list[str]:
    names = {sys.executable, os.path.abspath(sys.executable), os.path.realpath(sys.executable)}
    return sorted(names, key=len, reverse=True)


def normalise(text: str, tmp: Path | None = None) -> str:
    for python in _interpreters():
        text = text.replace(python, "<python>")
    if tmp is not None:
        text = text.replace(str(tmp), "<tmp>")
    text = text.replace(str(ROOT), "<repo>")
    text = re.sub(r"\battn-doctor \d+\.\d+\S*", "attn-doctor <version>", text)
    text = re.sub(r"\b\d+\.\d+ ?s\b", "<s>", text)  # durations measured here
    text = re.sub(r"\b\d+ ops traced", "<n> ops traced", text)  # how many ops a torch release dispatches
    text = re.sub(r"(emulated for [^\n]*?, torch )\d+\.\d+", r"\1<version>", text)  # the installed torch's rules
    return text


def update_requested(config) -> bool:
    return config.getoption("--update-goldens") or os.environ.get("ATTN_DOCTOR_UPDATE_GOLDENS") == "1"


@pytest.fixture
def cli(monkeypatch, tmp_path):
    from attn_doctor.cli import app

    monkeypatch.chdir(ROOT)
    for name in ("FORCE_COLOR", "NO_COLOR", "COLUMNS", "CLICOLOR_FORCE", "TERM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ATTN_DOCTOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ATTN_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    # explain writes commands for this interpreter with its pip, whether or not the venv running
    # the tests has one (a uv venv would give `uv pip install --python`): the same text everywhere
    from attn_doctor import remedies

    monkeypatch.setattr(remedies.Target, "interpreter", classmethod(lambda cls, python: cls(os.path.abspath(python), "pip")))

    def run(*args: str) -> str:
        result = CliRunner().invoke(app, list(args))
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return normalise(f"$ attn-doctor {shlex.join(args)}\n{result.stdout}[exit {result.exit_code}]\n", tmp_path)

    return run


def compare(request, name: str, actual: str) -> None:
    path = GOLDEN / name
    if update_requested(request.config):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"{path.relative_to(ROOT)} does not exist: run `python -m pytest tests/golden --update-goldens`")
    expected = path.read_text(encoding="utf-8")
    if expected != actual:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                            f"a/{path.relative_to(ROOT)}", f"b/{path.relative_to(ROOT)}"))
        pytest.fail(f"the output differs from its golden file (review it; "
                    f"`python -m pytest tests/golden --update-goldens` accepts it):\n{diff}", pytrace=False)


def _has_gpu(path: Path) -> bool:
    import json

    facts = json.loads(path.read_text())
    return bool((facts.get("gpu") or {}).get("devices"))


@pytest.mark.parametrize("verbose", [False, True], ids=["plain", "verbose"])
@pytest.mark.parametrize("report", FACTS, ids=lambda p: p.stem)
def test_check_from_report(cli, request, report, verbose):
    args = ["check", "--from-report", f"tests/fixtures/facts/{report.name}"] + (["-v"] if verbose else [])
    compare(request, f"check/{report.stem}{'.v' if verbose else ''}.txt", cli(*args))


@pytest.mark.parametrize("report", [p for p in FACTS if _has_gpu(p)], ids=lambda p: p.stem)
def test_check_with_a_config(cli, request, report):
    compare(request, f"check/{report.stem}.config.txt",
            cli("check", "--from-report", f"tests/fixtures/facts/{report.name}", "--config", CONFIG))


@pytest.mark.parametrize("family", sorted(SAMPLE))
def test_explain(cli, request, family):
    case = SAMPLE[family]
    compare(request, f"explain/{family}.txt", f"# {case.id} ({case.source})\n" + cli("explain", case.text))


@pytest.mark.parametrize("report,config", [("t4", CONFIG), ("flash-attn-undefined-symbol", None), ("h100-xformers", None)])
def test_fix_dry_run(cli, request, report, config):
    args = ["fix", "--from-report", f"tests/fixtures/facts/{report}.json", "--dry-run"] + (["--config", config] if config else [])
    compare(request, f"fix/{report}{'.config' if config else ''}.txt", cli(*args))


TOYS = [
    ("healthy_toy.py:build_bf16", []),
    ("var_toy.py:build_fp32", ["--autocast", "bf16"]),
]


@pytest.mark.parametrize("target,extra", TOYS, ids=[t for t, _ in TOYS])
def test_trace_toys(cli, request, target, extra):
    # --python naming this interpreter traces in this process, as the CLI does: the stand-ins a trace
    # leaves in place are taken away after each test (tests/conftest.py), so none changes what the
    # next test prints or what a check in this worker reads as installed
    name = target.replace(".py:", ".").replace(":", ".")
    compare(request, f"trace/{name}.txt", cli("trace", f"tests/trace/toys/{target}", *extra, "--python", sys.executable))


@pytest.mark.parametrize("log", ["undefined-symbol.log", "t4-llamafactory.log"])
def test_explain_commands_for_a_log_from_another_machine(cli, request, monkeypatch, log):
    # The log's environment (/opt/venv) is not on this machine and no environment with torch is
    # active: the commands are written for the training environment's `python`, and a note says so.
    from attn_doctor.explaining import target

    monkeypatch.setattr(target, "torch_of", lambda python, environ=None: None)
    compare(request, f"explain/elsewhere.{log.removesuffix('.log')}.txt", cli("explain", "--file", f"tests/fixtures/logs/{log}"))
