"""No case of the numerics sweep is lost: one whose call raised (FlashAttention 4's MLA case once
ended `Operation creation failed:` in the facts and nowhere else) is said once, with the library,
the case and what it raised, as not measured, in the human report and the JSON. Real CLI runs on a
recorded H100 report with the erring case added."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FACTS = Path(__file__).parent / "fixtures" / "facts"


def _report_with_a_raising_case(tmp_path: Path) -> Path:
    doc = json.loads((FACTS / "h100-numerics.json").read_text())
    doc["smoke"]["numerics_cases"]["mla-128-96"] = {"cls": "MLA: q/k head dim 128, v head dim 96", "shape": [1, 4, 4, 256, 256, 128]}
    for dtype in ("bfloat16", "float16"):
        doc["smoke"]["numerics"].append({"backend": "flash_attn_4", "dtype": dtype, "case": "mla-128-96", "status": "error",
                                         "error": "Operation creation failed:\n  (the compiler's own lines)"})
    path = tmp_path / "h100-fa4.json"
    path.write_text(json.dumps(doc))
    return path


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attn_doctor", "check", *args], capture_output=True, text=True, timeout=240)


def test_a_case_that_raised_is_said_once_as_not_measured(tmp_path):
    report = _report_with_a_raising_case(tmp_path)
    said = ("Not measured against float64: FlashAttention 4 (flash-attn-4) at mla-128-96 (bf16, fp16: MLA: q/k head dim 128, "
            "v head dim 96) raised 'Operation creation failed:'.")
    human = run("--from-report", str(report))
    assert human.stdout.count(said) == 1, human.stdout
    assert "flash_attn_4 2 raised" in human.stdout  # the sweep's own line counts it too
    doc = json.loads(run("--from-report", str(report), "--json").stdout)
    found = [r for r in doc["results"] if r["rule"] == "AD718"]
    assert [(r["status"], r["message"]) for r in found] == [("info", said)]
    # a note: the exit code is the one the report had without it
    assert doc["exit_code"] == json.loads(run("--from-report", str(FACTS / "h100-numerics.json"), "--json").stdout)["exit_code"]


def test_a_sweep_where_every_case_ran_says_nothing_of_it():
    doc = json.loads(run("--from-report", str(FACTS / "h100-numerics.json"), "--json").stdout)
    assert {r["rule"]: r["status"] for r in doc["results"]}["AD718"] == "pass"


XFORMERS = FACTS / "h200-xformers-numerics.json"


def test_a_library_whose_extension_does_not_load_is_said_once_by_its_cause():
    # the real H200 run: xformers 0.0.35 (built for torch 2.10.0+cu128) raised at each of its 18
    # cases; the cause is its extension, said by AD312, not 18 cases "not measured"
    doc = json.loads(run("--from-report", str(XFORMERS), "--json").stdout)
    by_rule = {r["rule"]: r for r in doc["results"]}
    assert by_rule["AD312"]["status"] == "error" and "libcudart.so.12" in by_rule["AD312"]["message"]
    assert by_rule["AD718"]["status"] == "skipped" and "AD312" in by_rule["AD718"]["reason"]
    assert "AD718" in by_rule["AD312"]["evidence"]["covers"].split()


def test_a_library_that_raised_at_every_case_for_no_known_cause_is_said_once(tmp_path):
    doc = json.loads(XFORMERS.read_text())
    doc["builds"].pop("xformers")  # the extension's failure unknown: nothing says the cause
    path = tmp_path / "xformers-raised.json"
    path.write_text(json.dumps(doc))
    out = json.loads(run("--from-report", str(path), "--json").stdout)
    found = next(r for r in out["results"] if r["rule"] == "AD718")
    assert found["status"] == "info"
    assert found["message"].count("xformers") == 1
    assert "at every case it was called on (18 cases, fp16, bf16) raised 'No operator found for" in found["message"]


def test_a_library_that_raised_at_every_case_is_said_the_same_whatever_the_hash_seed(tmp_path):
    import os

    doc = json.loads(XFORMERS.read_text())
    doc["builds"].pop("xformers")
    for i, r in enumerate(x for x in doc["smoke"]["numerics"] if x["backend"] == "xformers"):
        if i % 3 == 0:
            r["error"] = "CUDA error: an illegal memory access was encountered"
    path = tmp_path / "xformers-two-errors.json"
    path.write_text(json.dumps(doc))
    said = set()
    for seed in ("1", "2", "3"):
        out = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--from-report", str(path), "--json"],
                             capture_output=True, text=True, timeout=240, env=dict(os.environ, PYTHONHASHSEED=seed))
        found = next(r for r in json.loads(out.stdout)["results"] if r["rule"] == "AD718")
        said.add(found["message"])
    assert len(said) == 1
    assert "(and 1 other error)" in said.pop()
