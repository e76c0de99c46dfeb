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
