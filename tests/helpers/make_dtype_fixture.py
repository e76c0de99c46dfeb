"""Write tests/fixtures/facts/dtype-promotion.json: the recorded H200 facts plus a dtype path whose
findings come from really tracing the VAR-style and RWKV7-style toys (run by hand, not by tests).

    python tests/helpers/make_dtype_fixture.py
"""

import json
from pathlib import Path

from attn_doctor.tracing import trace

HERE = Path(__file__).resolve().parents[1]
FACTS = HERE / "fixtures" / "facts"


def main() -> None:
    facts = json.loads((FACTS / "h200.json").read_text())
    findings = []
    samples = []
    for name, target, autocast in (
        ("var_toy", "tests/trace/toys/var_toy.py:build", "fp16"),
        ("rwkv7_toy", "tests/trace/toys/rwkv7_toy.py:build", "fp16"),
    ):
        report = trace(target=target, autocast=autocast, device="meta", capability=(9, 0))
        for finding in report["findings"]:
            finding["sample"] = name
            # Paths relative to the repository: the fixture must not carry this machine's layout.
            for item in [finding.get("sink") or {}] + list(finding.get("chain") or []):
                if item.get("file"):
                    item["file"] = str(Path(item["file"]).resolve().relative_to(HERE.parent))
            finding["patch"] = None
            findings.append(finding)
        samples.append({"name": name, "status": "ran", "reason": None, "summary": report["summary"]})
    facts["dtype_path"] = {
        "status": "ok",
        "device": "meta",
        "dtype": "fp16",
        "autocast": "fp16",
        "capability": "9.0",
        "verdict": "error",
        "samples": samples,
        "findings": findings,
        "error": None,
    }
    (FACTS / "dtype-promotion.json").write_text(json.dumps(facts, indent=2) + "\n")
    print(f"{len(findings)} findings: {[f['id'] for f in findings]}")


if __name__ == "__main__":
    main()
