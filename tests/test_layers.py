"""The layering contract (pyproject.toml, [tool.importlinter]) holds: no module imports from a layer
above its own, annotations included; and, whatever the contract says, the imports between the
package's top-level rooms form a graph without a circle, and so do the imports between its
modules. import-linter reads the code's imports, as benchmarks/structure.py does to draw the
structure."""

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


# The import graph from the code alone (grimp, the graph import-linter checks): an edge for every
# import between two modules of attn_doctor (or, with ROOMS, between two top-level rooms), in
# functions and under TYPE_CHECKING too. Prints one circle, or [] where there is none.
_CIRCLE = """
import graphlib, json, grimp, sys
rooms = sys.argv[1] == "rooms"
graph = {}
full = grimp.build_graph("attn_doctor", cache_dir=None)
for importer in full.modules:
    graph.setdefault(importer, set())
    for imported in full.find_modules_directly_imported_by(importer):
        if rooms:
            a, b = importer.split(".")[1:2], imported.split(".")[1:2]
            if a and b and a != b:
                graph.setdefault(a[0], set()).add(b[0])
        else:
            graph[importer].add(imported)
try:
    graphlib.TopologicalSorter(graph).prepare()
    print(json.dumps([]))
except graphlib.CycleError as exc:
    print(json.dumps(exc.args[1]))
"""


def _circle(root: Path, of: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _CIRCLE, of], cwd=root, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _room_circle(root: Path) -> list[str]:
    return _circle(root, "rooms")


def _module_circle(root: Path) -> list[str]:
    return _circle(root, "modules")


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


def test_no_module_imports_itself_through_others():
    # A circle inside one room (a package's __init__ and the module that reads it back, a run and
    # the inputs it tries) is one too: a function-level import hides it from Python, not from a
    # reader of the code, and the order the modules load in then decides whether it works.
    assert _module_circle(ROOT) == []


def test_a_circle_of_modules_inside_one_room_is_found(tmp_path):
    # the circle that once ran through tracing's entry points: the inputs, tried before a trace,
    # reaching back into the run that imports them for its autocast context
    shutil.copytree(ROOT / "attn_doctor", tmp_path / "attn_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    inputs = tmp_path / "attn_doctor" / "tracing" / "runs" / "hf_inputs.py"
    inputs.write_text(inputs.read_text() + "\n\ndef _late():\n    from .run import guess_inputs\n\n    return guess_inputs\n")
    circle = _module_circle(tmp_path)
    assert {"attn_doctor.tracing.runs.hf_inputs", "attn_doctor.tracing.runs.run"} <= set(circle), circle
    assert circle[0] == circle[-1], circle
    assert _room_circle(tmp_path) == []  # a circle the room graph cannot see
