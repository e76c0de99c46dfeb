"""A stratified sample of benchmarks/inject_generic.py in CI: generic one-line mutations (a cast
inserted, a dtype argument changed, a fill widened, a boolean mask made numbers, ...) of real model
files, from a codebase the rules were built on (transformers' Llama) and one held out
(x-transformers: its encoder with ALiBi and its Attend module), in an environment installed from the
registry. Each mutant is run in plain torch to decide whether it is observable, then traced on meta
and CPU: the trace must name the changed line of the observable ones, and the unchanged files must
trace clean."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGETS = "transformers/llama,x_transformers/encoder-alibi,x_transformers/attend"


def test_generic_mutations_are_named_at_their_line(realenv, tmp_path):
    env = realenv.get("open-world-sample")
    out = tmp_path / "sample.jsonl"
    py = str(env.python)
    proc = subprocess.run([py, "benchmarks/inject_generic.py", "--only", TARGETS, "--sample", "2", "--seed", "0",
                           "--workers", "2", "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=1200,
                          env=dict(os.environ, INJECT_PYTHON_DEV=py, INJECT_PYTHON_ZOO=py))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    healthy = [r for r in rows if r.get("kind") == "healthy"]
    assert {r["target"] for r in healthy} == set(TARGETS.split(",")), [r.get("target") for r in healthy]
    alarms = [(r["target"], r["dtype"], a["id"]) for r in healthy for a in r.get("false_alarms") or ()]
    assert not alarms, alarms
    observable = [r for r in rows if r.get("kind") != "healthy" and r.get("observable") == "yes"]
    missed = [(r["target"], r["dtype"], r["line"], r["new"]) for r in observable if not r.get("named")]
    assert len(observable) >= 8, (len(observable), proc.stdout[-2000:])
    assert len(missed) <= len(observable) // 10, missed
