"""The corpus of real failures (tests/corpus): well-formed, wide, and explained as well as promised.

The scorer (benchmarks/score_explain.py) runs as a user would run it, in a subprocess, with the
thresholds the project holds itself to; its output lists the cases that fail.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import score_explain  # noqa: E402

from attn_doctor.rules.loader import load_recipes  # noqa: E402

CASES, FAMILIES = score_explain.load_corpus()


def test_corpus_is_wide_enough():
    positives = [c for c in CASES if not c.negative]
    negatives = [c for c in CASES if c.negative]
    projects = {c.source.split("#")[0] for c in CASES}
    assert len(positives) >= 200, len(positives)
    assert len(negatives) >= 40, len(negatives)
    assert len(projects) >= 12, sorted(projects)


def test_every_case_has_a_family_with_rules_that_exist():
    rules = {r.id: r for r in load_recipes().rules}
    assert not [c.id for c in CASES if c.klass == "unlisted"], "cases still waiting for a family"
    for name, family in FAMILIES.items():
        for rule in family.get("rules", []):
            assert rule in rules, f"family {name} names rule {rule}, which does not exist"
            if family["class"] not in ("none", "unlisted"):
                assert rules[rule].signatures, f"{rule} has no signature: explain can never name it"


def test_every_cause_class_of_the_recipes_has_real_cases():
    classes = {r.cause for r in load_recipes().rules if r.signatures and r.cause}
    counts = Counter(c.klass for c in CASES)
    missing = sorted(k for k in classes if counts[k] == 0)
    assert not missing, f"no real case for {missing}"


def test_the_texts_are_as_posted():
    # a case is a user's paste, not a summary: it keeps at least one full message line
    for case in CASES:
        assert max(len(line) for line in case.text.splitlines()) >= 20, case.id


@pytest.mark.parametrize("wrapper", sorted(score_explain.VARIANTS))
def test_wrappers_change_the_text(wrapper):
    text = "[rank0]: RuntimeError: FlashAttention only supports Ampere GPUs or newer. (a line longer than eighty columns)\nsecond line"
    assert score_explain.VARIANTS[wrapper](text) != text


def test_scorer_meets_the_thresholds():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "score_explain.py"), "--json", "--variants",
         "--min-recall", "0.95", "--min-class-recall", "0.90", "--max-false-alarms", "0", "--min-variant-recall", "0.90"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr
    summary = json.loads(proc.stdout)
    failing = "\n".join(f"{c['verdict']} {c['variant']} {c['id']} ({c['source']}): expected {c['expected']}, {c['detail'] or c['got']}"
                        for c in summary["cases"])
    assert proc.returncode == 0, "\n".join(summary["problems"]) + "\n" + failing
    assert summary["false_alarms"] == 0


# What a user must never see in a remedy: a template field, an angle-bracket or capitalised stand-in
# for a fact the text did not give (`<torch>`, `cu<XY>`, `PACKAGE`), an unclosed optional part.
PLACEHOLDER = re.compile(r"\{[A-Za-z_]\w*\}|<[A-Za-z_]+>|cu<|\[\?|\?\]|\b(?:PACKAGE|PACKAGES|PKG|NAME|VERSION|PATH_TO\w*)\b")


def test_remedies_explain_prints_for_the_real_corpus_show_no_placeholder():
    from attn_doctor.explaining.core import explain

    recipes = load_recipes()
    bad = []
    for case in CASES:
        report = explain(io.BytesIO(case.text.encode("utf-8")), recipes, kind="text")
        for match in report.matches:
            for remedy in match.remedies:
                for text in (remedy.summary, remedy.detail or "", remedy.requirement or ""):
                    if PLACEHOLDER.search(text):
                        bad.append(f"{case.id} {match.rule}: {text}")
    assert not bad, "\n".join(bad[:20])


def test_scorer_rejects_an_invalid_corpus(tmp_path):
    (tmp_path / "families.toml").write_text((ROOT / "tests" / "corpus" / "families.toml").read_text())
    (tmp_path / "x.toml").write_text('[[case]]\nid = "a"\nsource = "not a source"\nfamily = "bf16-gpu"\ntext = "x"\n')
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "score_explain.py"), "--corpus", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "owner/repo#N" in proc.stderr
