"""A stratified sample of the message catalogue's coverage (benchmarks/catalogue/coverage.py): for
each library of the stack, in-scope sites of its sources made into the texts users paste (six
wrappers) and explained by the shipped explain. The full run is the benchmark; this holds each
library's share to the issue's floor on a random sample of it."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "benchmarks" / "catalogue"


def test_each_library_is_covered_and_answered_right_on_a_sample(tmp_path, capsys):
    import importlib.util

    # loaded by path: the name `coverage` is also coverage.py's, which pytest-cov may have imported
    spec = importlib.util.spec_from_file_location("catalogue_coverage", HERE / "coverage.py")
    catalogue_coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(catalogue_coverage)
    out = tmp_path / "coverage.json"
    assert catalogue_coverage.main(["--sample", "40", "--seed", "7", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    libraries = doc["libraries"]
    assert {"torch", "torch-cpp", "triton", "transformers", "flash-attn", "flash-attn-cpp", "xformers", "flashinfer",
            "sageattention", "kernels", "deepspeed", "accelerate", "bitsandbytes"} <= set(libraries)
    for lib, c in libraries.items():
        judged = c["in"] - c.get("short", 0)
        covered = c.get("family", 0) + c.get("out", 0)
        assert covered >= 0.95 * judged, (lib, c)
    ok = sum(c.get(w + ":ok", 0) for c in libraries.values() for w in ("plain", "rank", "logger", "markdown", "windows", "cut"))
    n = sum(c.get(w + ":n", 0) for c in libraries.values() for w in ("plain", "rank", "logger", "markdown", "windows", "cut"))
    assert n > 1000 and ok >= 0.95 * n, (ok, n)
    for site in doc["sites"]:
        assert site["family"] and site["rule"].startswith("AD")
