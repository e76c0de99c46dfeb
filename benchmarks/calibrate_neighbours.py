"""Build and calibrate the known-case search of `explain` (attn_doctor/explaining/neighbours.py).

    python benchmarks/calibrate_neighbours.py --build        # recipes/known_cases.json.gz from tests/corpus
    python benchmarks/calibrate_neighbours.py                # leave-one-out: what the search would say

Leave-one-out: every case of the corpus is searched against the others (its own entry excluded),
with the lines `explain` would search (those no signature matched). For a range of thresholds it
prints how many positives get a rule of their family, how many get a wrong one, and how many
negatives (unrelated failures, harmless logs) would raise an alarm: the threshold in
neighbours.py is the lowest with no false alarm.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from score_explain import load_corpus  # noqa: E402

from attn_doctor.explaining import neighbours  # noqa: E402
from attn_doctor.rules.signatures import normalise  # noqa: E402

INDEX = ROOT / "recipes" / neighbours.INDEX_NAME


def build(corpus: Path) -> dict:
    cases, _ = load_corpus(corpus)
    return neighbours.build(cases, normalise)


def write(doc: dict, path: Path = INDEX) -> None:
    data = json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(data)


def searched_lines(text: str, recipes) -> tuple[list[str], bool]:
    """The lines explain searches for a neighbour, and whether a family matched the text."""
    from attn_doctor.explaining.core import explain

    from attn_doctor.explaining.core import _scanner

    report = explain(io.BytesIO(text.encode("utf-8")), recipes, kind="text")
    matched = any(not m.harmless and m.likelihood != "unlikely" and m.resembles is None for m in report.matches)
    _rules, scanner = _scanner(recipes, False)
    return scanner.scan(io.BytesIO(text.encode("utf-8")), keep_all_lines=True).candidate_lines, matched


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "tests" / "corpus")
    ap.add_argument("--build", action="store_true", help="write recipes/known_cases.json.gz from the corpus")
    args = ap.parse_args()
    doc = build(args.corpus)
    if args.build:
        write(doc)
        print(f"wrote {INDEX.relative_to(ROOT)}: {len(doc['cases'])} cases")
        return 0
    from attn_doctor.rules.loader import load_recipes

    recipes = load_recipes()
    cases, _ = load_corpus(args.corpus)
    index = neighbours.Index(doc["cases"])
    judged = frozenset(r.id for r in recipes.rules for sig in r.signatures if not isinstance(sig, str) and sig.guard)
    rows = []
    for case in cases:
        lines, matched = searched_lines(case.text, recipes)
        rows.append((case, lines, matched, neighbours.key_lines(case.text, normalise)))
    saved = (neighbours.THRESHOLD, neighbours.MARGIN)
    print("as explain uses it (the lines no signature matched, on texts no family matched), and as a classifier")
    print("(every positive queried by its key lines: is the nearest case's cause its own?), leave-one-out:")
    print(f"{'threshold':>9} {'margin':>6}  {'unmatched: right':>16} {'wrong':>5}  {'all positives: right':>20} {'wrong':>5} {'precision':>9}  {'negatives: alarms':>17}")
    for threshold in (75, 80, 85, 90, 95):
        for margin in (5, 10, 15):
            neighbours.THRESHOLD, neighbours.MARGIN = float(threshold), float(margin)
            right = wrong = alarms = unmatched = all_right = all_wrong = 0
            alarm_ids = []
            for case, lines, matched, keys in rows:
                own = frozenset({case.id})
                if case.negative:
                    n = None if matched else index.nearest(lines, exclude=own, judged=judged)
                    if n is not None:
                        alarms += 1
                        alarm_ids.append(f"{case.id}~{n.case}")
                    continue
                k = index.nearest(keys, exclude=own, judged=judged)
                if k is not None:
                    all_right += bool(set(k.rules) & set(case.rules))
                    all_wrong += not (set(k.rules) & set(case.rules))
                if not matched:
                    unmatched += 1
                    n = index.nearest(lines, exclude=own, judged=judged)
                    if n is not None:
                        right += bool(set(n.rules) & set(case.rules))
                        wrong += not (set(n.rules) & set(case.rules))
            precision = all_right / max(1, all_right + all_wrong)
            print(f"{threshold:>9} {margin:>6}  {right:>9} of {unmatched:<4} {wrong:>5}  {all_right:>20} {all_wrong:>5} {precision:>9.2f}  {alarms:>17}  {' '.join(alarm_ids[:3])}")
    neighbours.THRESHOLD, neighbours.MARGIN = saved
    print(f"shipped: threshold {neighbours.THRESHOLD:.0f}, margin {neighbours.MARGIN:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
