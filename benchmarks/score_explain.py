"""Score `attn-doctor explain` on the corpus of real failures (tests/corpus/*.toml).

Every case is a text a user posted, with its source, its family (tests/corpus/families.toml: the
mechanism, its root-cause class and the rules that name it) and the wrappers it came in. The whole
corpus is explained in this one process through the same core the CLI calls, and scored:

- a positive case is *right* when explain's first finding (the first match that is not harmless
  and not ruled out) is one of its family's rules, *wrong cause* when the first finding is another
  rule, *missed* when nothing is found (a match ruled "unlikely" counts as missed, with its reason);
- a negative or harmless case is a *false alarm* when explain raises a problem (a match of
  severity error or warning that is not harmless and not ruled out: explain's exit code 1);
  a harmless case must also be labelled harmless.

`--variants` also runs every positive case through the wrappers logs add (rank prefixes, Ray,
srun labels, glog, ANSI colours, CRLF, lines wrapped at 80 columns) and scores those.

    python benchmarks/score_explain.py                      # the table, and the cases that fail
    python benchmarks/score_explain.py --min-recall 0.95 --min-class-recall 0.90 --max-false-alarms 0
    python benchmarks/score_explain.py --json               # machine-readable
    python benchmarks/score_explain.py --only held_out_2.toml   # one batch on its own (a held-out set)

Exit code: 0, or 1 when a threshold given is not met, 2 when the corpus is invalid.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WRAPPERS = {"plain", "traceback", "rank", "ray", "slurm", "deepspeed", "glog", "logging", "ansi", "crlf",
            "wrapped", "truncated", "chinese", "windows"}
# a repository's issue or pull request (owner/repo#N), or the address of a page (a forum thread, a model hub discussion)
SOURCE = re.compile(r"^(?:[\w.-]+/[\w.-]+#\d+|https?://[^\s/]+/\S+)$")


class CorpusError(ValueError):
    pass


@dataclass
class Case:
    id: str
    source: str
    family: str
    text: str
    file: str
    wrapper: list[str] = field(default_factory=list)
    note: str = ""
    rules: list[str] = field(default_factory=list)  # expected rules (first preferred); [] = must raise nothing
    klass: str = ""

    @property
    def negative(self) -> bool:
        return self.klass in ("none", "harmless")


def load_corpus(folder: Path = ROOT / "tests" / "corpus") -> tuple[list[Case], dict]:
    families = tomllib.loads((folder / "families.toml").read_text(encoding="utf-8"))["family"]
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for path in sorted(folder.glob("*.toml")):
        if path.name == "families.toml":
            continue
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise CorpusError(f"{path.name}: not valid TOML: {exc}") from None
        for i, entry in enumerate(raw.get("case", [])):
            where = f"{path.name}: case {entry.get('id', '#' + str(i + 1))}"
            unknown = set(entry) - {"id", "source", "family", "wrapper", "note", "text", "rules"}
            if unknown:
                raise CorpusError(f"{where}: unknown keys {sorted(unknown)}")
            for key in ("id", "source", "family", "text"):
                if not isinstance(entry.get(key), str) or not entry[key].strip():
                    raise CorpusError(f"{where}: `{key}` is missing or empty")
            if entry["id"] in seen:
                raise CorpusError(f"{where}: id already used in {seen[entry['id']]}")
            seen[entry["id"]] = path.name
            if not SOURCE.match(entry["source"]):
                raise CorpusError(f"{where}: source {entry['source']!r} is not owner/repo#N nor a page's address")
            fam = families.get(entry["family"])
            if fam is None:
                raise CorpusError(f"{where}: unknown family {entry['family']!r} (see families.toml)")
            wrapper = entry.get("wrapper", [])
            bad = set(wrapper) - WRAPPERS
            if bad:
                raise CorpusError(f"{where}: unknown wrappers {sorted(bad)}")
            cases.append(Case(
                id=entry["id"], source=entry["source"], family=entry["family"], text=entry["text"], file=path.name,
                wrapper=list(wrapper), note=entry.get("note", ""),
                rules=list(entry.get("rules") or fam.get("rules", [])), klass=fam["class"],
            ))
    return cases, families


# -- wrappers: what launchers and terminals do to the same text ----------------------------------

def _per_line(prefix: str):
    return lambda text: "\n".join(prefix + line for line in text.splitlines())


def _ansi(text: str) -> str:
    out = []
    for line in text.splitlines():
        if re.search(r"Error|error|Warning", line):
            line = "\x1b[1;31m" + line + "\x1b[0m"
        elif line.strip().startswith("File "):
            line = "\x1b[2m" + line + "\x1b[22m"
        out.append(line)
    return "\n".join(out)


def _hard_wrap(text: str, width: int = 80) -> str:
    out = []
    for line in text.splitlines():
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out)


VARIANTS = {
    "rank": _per_line("[rank3]: "),
    "ray": _per_line("(RayWorkerWrapper pid=48213, ip=10.0.0.7) "),
    "srun": _per_line("5: "),
    "glog": _per_line("E1122 10:01:02.123456 48213 trainer.py:42] "),
    "ansi": _ansi,
    "crlf": lambda text: text.replace("\n", "\r\n"),
    "wrap80": _hard_wrap,
}


# -- scoring ------------------------------------------------------------------------------------

@dataclass
class Outcome:
    case: Case
    variant: str
    verdict: str  # right | wrong | missed | false-alarm | clean
    got: str = ""  # the first finding's rule, or ""
    detail: str = ""
    got_class: str = ""  # the first finding's root-cause class


def _first_finding(report):
    for m in report.matches:
        if not m.harmless and m.likelihood != "unlikely":
            return m
    return None


def score_case(case: Case, report, variant: str = "") -> Outcome:
    first = _first_finding(report)
    if case.negative:
        alarm = [m for m in report.matches if not m.harmless and m.likelihood != "unlikely" and m.severity in ("error", "warning")]
        if alarm:
            return Outcome(case, variant, "false-alarm", alarm[0].rule, f"{alarm[0].rule} {alarm[0].title}")
        if case.klass == "harmless" and not any(m.harmless for m in report.matches):
            return Outcome(case, variant, "missed", first.rule if first else "", "not labelled harmless")
        return Outcome(case, variant, "clean", "")
    if first is None:
        unlikely = [m for m in report.matches if m.likelihood == "unlikely" and m.rule in case.rules]
        detail = f"{unlikely[0].rule} ruled unlikely: {unlikely[0].likelihood_reason}" if unlikely else "no known signature matched"
        return Outcome(case, variant, "missed", "", detail)
    if first.rule in case.rules:
        return Outcome(case, variant, "right", first.rule, got_class=first.cause or "")
    also = [m.rule for m in report.matches if m.rule in case.rules]
    return Outcome(case, variant, "wrong", first.rule, f"first {first.rule} ({first.cause})" + (f", {also[0]} later" if also else ""),
                   got_class=first.cause or "")


def run(cases: list[Case], variants: bool = False, kind: str = "text"):
    from attn_doctor.explaining.core import explain
    from attn_doctor.rules.loader import load_recipes

    recipes = load_recipes()
    outcomes: list[Outcome] = []
    started = time.perf_counter()
    for case in cases:
        if case.klass == "unlisted":
            continue
        report = explain(io.BytesIO(case.text.encode("utf-8")), recipes, kind=kind, exclude=frozenset({case.id}))
        outcomes.append(score_case(case, report))
    seconds = time.perf_counter() - started
    variant_outcomes: list[Outcome] = []
    if variants:
        for case in cases:
            if case.negative or case.klass == "unlisted":
                continue
            for name, wrap in VARIANTS.items():
                report = explain(io.BytesIO(wrap(case.text).encode("utf-8")), recipes, kind=kind, exclude=frozenset({case.id}))
                variant_outcomes.append(score_case(case, report, name))
    return outcomes, variant_outcomes, seconds


def summarise(outcomes: list[Outcome]) -> dict:
    by_class: dict[str, Counter] = defaultdict(Counter)
    for o in outcomes:
        by_class[o.case.klass][o.verdict] += 1
    positives = [o for o in outcomes if not o.case.negative]
    negatives = [o for o in outcomes if o.case.negative]
    right = sum(o.verdict == "right" for o in positives)
    classes = {}
    for klass, counts in sorted(by_class.items()):
        n = sum(counts.values())
        if klass in ("none", "harmless"):
            classes[klass] = {"cases": n, "false_alarms": counts["false-alarm"], "missed": counts["missed"]}
        else:
            classes[klass] = {"cases": n, "right": counts["right"], "wrong": counts["wrong"], "missed": counts["missed"],
                              "recall": round(counts["right"] / n, 3)}
    right_class = sum(o.verdict == "right" or (o.verdict == "wrong" and o.got_class == o.case.klass) for o in positives)
    return {
        "positives": len(positives),
        "right": right,
        "right_class": right_class,
        "class_recall": round(right_class / len(positives), 3) if positives else 1.0,
        "wrong": sum(o.verdict == "wrong" for o in positives),
        "missed": sum(o.verdict == "missed" for o in positives),
        "recall": round(right / len(positives), 3) if positives else 1.0,
        "negatives": len(negatives),
        "false_alarms": sum(o.verdict == "false-alarm" for o in negatives),
        "harmless_unlabelled": sum(o.verdict == "missed" for o in negatives),
        "classes": classes,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "tests" / "corpus")
    ap.add_argument("--only", action="append", metavar="FILE",
                    help="score only the cases of this corpus file (e.g. held_out_2.toml; repeatable): a held-out batch on its own")
    ap.add_argument("--variants", action="store_true", help="also score every positive case under each log wrapper")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--all", action="store_true", help="list every case, not only those that fail")
    ap.add_argument("--min-recall", type=float)
    ap.add_argument("--min-class-recall", type=float, help="for every class with at least --class-min-cases cases")
    ap.add_argument("--class-min-cases", type=int, default=5)
    ap.add_argument("--min-variant-recall", type=float)
    ap.add_argument("--max-false-alarms", type=int)
    ap.add_argument("--max-seconds", type=float)
    ap.add_argument("--kind", choices=("text", "stdin"), default="text",
                    help="how each text reaches explain: as an argument (text, the default) or piped in (stdin, as `explain -`)")
    args = ap.parse_args(argv)
    try:
        cases, _families = load_corpus(args.corpus)
    except (CorpusError, OSError, KeyError) as exc:
        print(f"score_explain: invalid corpus: {exc}", file=sys.stderr)
        return 2
    if args.only:
        wanted = {Path(name).name for name in args.only}
        unknown = wanted - {c.file for c in cases}
        if unknown:
            print(f"score_explain: no cases in {sorted(unknown)}", file=sys.stderr)
            return 2
        cases = [c for c in cases if c.file in wanted]
    outcomes, variant_outcomes, seconds = run(cases, args.variants, args.kind)
    summary = summarise(outcomes)
    summary["seconds"] = round(seconds, 2)
    summary["projects"] = len({c.source.split("#")[0] for c in cases})
    summary["unlisted"] = sum(c.klass == "unlisted" for c in cases)
    if variant_outcomes:
        vs = summarise(variant_outcomes)
        summary["variants"] = {"runs": vs["positives"], "right": vs["right"], "recall": vs["recall"],
                               "by_variant": {name: round(sum(o.verdict == "right" for o in variant_outcomes if o.variant == name)
                                                          / max(1, sum(o.variant == name for o in variant_outcomes)), 3)
                                              for name in VARIANTS}}
    failures = [o for o in outcomes + variant_outcomes if o.verdict not in ("right", "clean")]
    shown = outcomes + variant_outcomes if args.all else failures

    problems = []
    if args.min_recall is not None and summary["recall"] < args.min_recall:
        problems.append(f"recall {summary['recall']:.3f} < {args.min_recall}")
    if args.min_class_recall is not None:
        for klass, c in summary["classes"].items():
            if "recall" in c and c["cases"] >= args.class_min_cases and c["recall"] < args.min_class_recall:
                problems.append(f"class {klass}: recall {c['recall']:.3f} < {args.min_class_recall}")
    if args.max_false_alarms is not None and summary["false_alarms"] > args.max_false_alarms:
        problems.append(f"{summary['false_alarms']} false alarms > {args.max_false_alarms}")
    if args.max_false_alarms is not None and summary["harmless_unlabelled"]:
        problems.append(f"{summary['harmless_unlabelled']} harmless messages not labelled harmless")
    if args.min_variant_recall is not None and variant_outcomes and summary["variants"]["recall"] < args.min_variant_recall:
        problems.append(f"recall under wrappers {summary['variants']['recall']:.3f} < {args.min_variant_recall}")
    if args.max_seconds is not None and seconds > args.max_seconds:
        problems.append(f"{seconds:.2f} s > {args.max_seconds} s")

    if args.json:
        summary["cases"] = [{"id": o.case.id, "source": o.case.source, "family": o.case.family, "variant": o.variant,
                             "verdict": o.verdict, "expected": o.case.rules, "got": o.got, "detail": o.detail} for o in shown]
        summary["problems"] = problems
        print(json.dumps(summary, indent=2))
    else:
        _print(summary, shown, problems, len(cases))
    return 1 if problems else 0


def _print(summary: dict, shown: list[Outcome], problems: list[str], n: int) -> None:
    print(f"corpus: {n} cases from {summary['projects']} projects, explained in {summary['seconds']:.2f} s (one process)"
          + (f"; {summary['unlisted']} of a mechanism with no family yet, not scored" if summary["unlisted"] else ""))
    print(f"{'class':<22} {'cases':>5} {'right':>5} {'wrong':>5} {'missed':>6} {'recall':>7}")
    for klass, c in summary["classes"].items():
        if "recall" in c:
            print(f"{klass:<22} {c['cases']:>5} {c['right']:>5} {c['wrong']:>5} {c['missed']:>6} {c['recall']:>7.1%}")
    print(f"{'all positives':<22} {summary['positives']:>5} {summary['right']:>5} {summary['wrong']:>5} {summary['missed']:>6} {summary['recall']:>7.1%}")
    print(f"(right = the first finding is a rule of the case's family; {summary['right_class']} of {summary['positives']} "
          f"({summary['class_recall']:.1%}) name at least the right root-cause class)")
    for klass in ("none", "harmless"):
        c = summary["classes"].get(klass)
        if c:
            extra = f", {c['missed']} not labelled harmless" if klass == "harmless" else ""
            print(f"{'negatives: ' + klass:<22} {c['cases']:>5} cases, {c['false_alarms']} false alarms{extra}")
    if "variants" in summary:
        v = summary["variants"]
        per = ", ".join(f"{k} {r:.1%}" for k, r in v["by_variant"].items())
        print(f"under wrappers: {v['right']}/{v['runs']} right ({v['recall']:.1%}): {per}")
    if shown:
        print()
        for o in shown:
            tag = f"[{o.variant}] " if o.variant else ""
            print(f"{o.verdict:<11} {tag}{o.case.id} ({o.case.source}, {o.case.family}; expected {'/'.join(o.case.rules) or 'nothing'}): {o.detail or o.got}")
    for p in problems:
        print(f"THRESHOLD NOT MET: {p}")


if __name__ == "__main__":
    sys.exit(main())
