"""The layering contract (pyproject.toml, [tool.importlinter]) holds: no module imports from a layer
above its own, annotations included; and, whatever the contract says, the imports between the
package's top-level rooms form a graph without a circle. import-linter reads the code's imports, as
benchmarks/structure.py does to draw the structure."""

from __future__ import annotations

import json
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
    assert proc.returncode == 0 and "3 kept, 0 broken" in proc.stdout, proc.stdout + proc.stderr


def test_an_import_for_annotations_only_against_the_layering_breaks_it(tmp_path):
    # The import that once closed a circle through the whole pipeline: the exceptions module
    # naming the API's types for its annotations. A copy of the tree with it put back must fail.
    shutil.copytree(ROOT / "attn_doctor", tmp_path / "attn_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    errors = tmp_path / "attn_doctor" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .api import check\n")
    proc = _lint_imports(tmp_path)
    assert proc.returncode == 1 and "2 kept, 1 broken" in proc.stdout, proc.stdout + proc.stderr
    assert "attn_doctor.errors -> attn_doctor.api" in proc.stdout


def test_an_import_up_through_tracings_rooms_breaks_its_contract(tmp_path):
    # the calls' vocabulary (a floor below the tracer) reaching up into the tracer must fail
    shutil.copytree(ROOT / "attn_doctor", tmp_path / "attn_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    sinks = tmp_path / "attn_doctor" / "tracing" / "calls" / "sinks.py"
    sinks.write_text(sinks.read_text() + "\n\ndef _late():\n    from ..dtype_path import tracer\n\n    return tracer\n")
    proc = _lint_imports(tmp_path)
    assert proc.returncode == 1 and "2 kept, 1 broken" in proc.stdout, proc.stdout + proc.stderr
    assert "attn_doctor.tracing.calls.sinks -> attn_doctor.tracing.dtype_path.tracer" in proc.stdout


# The room graph from the code alone (grimp, the graph import-linter checks): an edge for every
# import between two top-level rooms of attn_doctor, in functions and under TYPE_CHECKING too.
# Prints one circle of rooms, or [] where there is none.
_ROOM_CIRCLE = """
import graphlib, json, grimp
graph = {}
full = grimp.build_graph("attn_doctor", cache_dir=None)
for importer in full.modules:
    for imported in full.find_modules_directly_imported_by(importer):
        a, b = importer.split(".")[1:2], imported.split(".")[1:2]
        if a and b and a != b:
            graph.setdefault(a[0], set()).add(b[0])
try:
    graphlib.TopologicalSorter(graph).prepare()
    print(json.dumps([]))
except graphlib.CycleError as exc:
    print(json.dumps(exc.args[1]))
"""


def _room_circle(root: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _ROOM_CIRCLE], cwd=root, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_rooms_import_one_another_without_a_circle():
    # Counted from the code, not from the contract: siblings allowed to import each other (":") or
    # an exempted import (ignore_imports) would let a circle back in that lint-imports accepts.
    assert _room_circle(ROOT) == []


def test_a_circle_between_rooms_is_found_even_inside_a_function(tmp_path):
    shutil.copytree(ROOT / "attn_doctor", tmp_path / "attn_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    model = tmp_path / "attn_doctor" / "rules" / "model.py"
    model.write_text(model.read_text() + "\n\ndef _result():\n    from ..report import Result\n\n    return Result\n")
    circle = _room_circle(tmp_path)
    assert {"rules", "report"} <= set(circle) and circle[0] == circle[-1], circle
