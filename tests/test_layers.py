"""The layering contract (pyproject.toml, [tool.importlinter]) holds: no module imports from a layer
above its own, annotations included. import-linter reads the code's imports, as
benchmarks/structure.py does to draw the structure."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """lint-imports on the tree at `root` (its pyproject's contract, its attn_doctor), uncached."""
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})


def test_the_layering_contract_is_kept():
    proc = _lint_imports(ROOT)
    assert proc.returncode == 0 and "1 kept, 0 broken" in proc.stdout, proc.stdout + proc.stderr


def test_an_import_for_annotations_only_against_the_layering_breaks_it(tmp_path):
    # The import that once closed a circle through the whole pipeline: the exceptions module
    # naming the API's types for its annotations. A copy of the tree with it put back must fail.
    shutil.copytree(ROOT / "attn_doctor", tmp_path / "attn_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    errors = tmp_path / "attn_doctor" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .api import check\n")
    proc = _lint_imports(tmp_path)
    assert proc.returncode == 1 and "0 kept, 1 broken" in proc.stdout, proc.stdout + proc.stderr
    assert "attn_doctor.errors -> attn_doctor.api" in proc.stdout
