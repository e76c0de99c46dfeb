"""The command blocks of the README and docs/ run as a reader runs them. Each ```bash block either
runs here (in a folder of its own per page, with the repository's tests/, recipes/, examples/ and a
copy of docs/ beside it, the files the page tells the reader to save written first), or says why
it cannot, in a marker right above it:

    <!-- needs: gpu | cluster | ray | a wheel | your files | ci -->

("ci": the README's Quickstart, which .ci/run runs verbatim; "your files": a log, a model or an
environment of the reader's own). A code block under `<!-- file: NAME -->` is saved as NAME, as the
page says to; a ```text block under `<!-- output-here: ARGS -->` is what `attn-doctor ARGS` prints
there, at that point of the page (`...` elides lines, as in tests/test_docs.py). A command that fails as a usage error (exit 2), or with a traceback or an internal
error, fails the test; exit codes 0, 1 (findings) and 3 (nothing to judge) are what the pages
describe."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
NEEDS = ("gpu", "cluster", "ray", "a wheel", "your files", "ci")
BLOCK = re.compile(r"(?:^<!-- (needs|file|quickstart|output-here)[:-] ?([^>]*?) -->\n)?^```(\w+)\n(.*?)^```",
                   re.S | re.M)


def blocks(page: Path):
    """(marker kind, marker value, language, body) of each top-level code block, in order."""
    return [(m.group(1), (m.group(2) or "").strip(), m.group(3), m.group(4))
            for m in BLOCK.finditer(page.read_text(encoding="utf-8"))]


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for name in ("tests", "recipes", "examples"):
        (work / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "docs", work / "docs")  # a page may regenerate docs/rules.md: not the repository's
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "attn-doctor").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m attn_doctor "$@"\n')
    (shim / "attn-doctor").chmod(0o755)
    (shim / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # this venv's, not the base one
    (shim / "python").chmod(0o755)
    return work


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_block_runs_or_says_why_not(page, tmp_path):
    found = blocks(page)
    unmarked = [b for b in found if b[2] == "bash" and b[0] is None]
    for kind, value, lang, body in found:
        if lang == "bash" and kind == "needs":
            assert value in NEEDS, f"{page.name}: `<!-- needs: {value} -->` is not one of {NEEDS}"
    if not unmarked and not any(b[0] == "output-here" for b in found):
        return
    work = _workdir(tmp_path)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", COLUMNS="200",
               NO_COLOR="1", ATTN_DOCTOR_STATE_DIR=str(tmp_path / "state"), PYTHONPATH=str(ROOT))
    ran = 0
    for kind, value, lang, body in found:
        if kind == "file":
            (work / value).write_text(body, encoding="utf-8")
            continue
        if kind == "output-here":
            from test_docs import _matches

            proc = subprocess.run(["attn-doctor", *shlex.split(value)], cwd=work, env=env, capture_output=True,
                                  text=True, timeout=600, stdin=subprocess.DEVNULL)
            output = proc.stdout.replace(str(work) + "/", "").replace(str(ROOT) + "/", "").splitlines()
            assert _matches(body.rstrip("\n").splitlines(), output), (
                f"{page.name}: `attn-doctor {value}` now prints:\n{proc.stdout}")
            continue
        if lang != "bash" or kind is not None:
            continue
        for line in body.splitlines():
            command = line.strip()
            if not command or command.startswith("#"):
                continue
            proc = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=600, stdin=subprocess.DEVNULL)
            said = proc.stdout + proc.stderr
            assert proc.returncode in (0, 1, 3) and "Traceback" not in said and "internal error" not in said, (
                f"{page.name}: `{command}` exited {proc.returncode}:\n{said[-3000:]}")
            ran += 1
    assert ran, f"{page.name}: an unmarked bash block with no command"
