"""How much of the message catalogue `explain` answers: every in-scope site of sites/*.jsonl.gz (the
raise, assert, warning, log and TORCH_CHECK sites read from the libraries' sources by
extract_python.py and extract_cpp.py) made into the text a user would paste, and explained.

A site's text is its message with each placeholder filled by a value of the kind its code names (a
dtype where the code reads ``q.dtype``, a version where it reads ``__version__``, a shape, a number;
else a word), said the way the library says it: ``RuntimeError: ...`` after a traceback line at the
site's file for a raise or a TORCH_CHECK, ``FILE:LINE: UserWarning: ...`` for a warning, a logger's
``WARNING ...`` line for a log call. Sites with the same text are explained once.

Verdicts per site: *named* (explain's first finding that is not harmless nor ruled unlikely: some
rule's cause), *harmless* (labelled a harmless notice), *none* (no rule, no family, no known case).
This is a lower bound of what the catalogue must reach (a named site may still be named for the wrong
cause: the catalogue's own family per site is what decides that, and the sites carry none yet).

    python benchmarks/catalogue/coverage.py                  # the table per library
    python benchmarks/catalogue/coverage.py --library torch --misses 40   # some unanswered sites
    python benchmarks/catalogue/coverage.py --json out.json  # every site's verdict
"""

from __future__ import annotations

import argparse
import collections
import gzip
import io
import json
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SITES = HERE / "sites"

# the value a placeholder gets, by the words of the code behind it (first match wins)
FILLERS = (
    (re.compile(r"dtype", re.I), "torch.float16"),
    (re.compile(r"version", re.I), "2.5.1"),
    (re.compile(r"shape|size\(|sizes|\.size\b", re.I), "[2, 8, 1024, 64]"),
    (re.compile(r"capab|\bsm\b|arch", re.I), "sm_75"),
    (re.compile(r"device", re.I), "cuda:0"),
    (re.compile(r"head_?dim|headdim|\bd\b|dim", re.I), "256"),
    (re.compile(r"len|num|count|\bn\b|seq|batch|\bb\b|\bh\b", re.I), "4096"),
    (re.compile(r"path|file|dir", re.I), "/opt/venv/lib/python3.11/site-packages/flash_attn_2_cuda.so"),
)
MIN_LITERAL = 12  # a message whose literal text is shorter than this is not a message one can recognise


def load_sites(paths):
    for path in paths:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)


def _fill(code):
    for pattern, value in FILLERS:
        if code and pattern.search(code):
            return value
    return "x"


def message(site):
    parts = site.get("parts") or []
    codes = site.get("placeholders") or []
    out = []
    for i, part in enumerate(parts):
        out.append(part)
        if i < len(parts) - 1:
            out.append(_fill(codes[i] if i < len(codes) else ""))
    return "".join(out)


def text_of(site):
    """The text a user pastes for this site: the library's own way of printing it."""
    msg = message(site).strip()
    exc = site.get("exception") or "RuntimeError"
    kind = site.get("kind")
    file = site.get("file") or "module.py"
    where = "/opt/venv/lib/python3.11/site-packages/" + file
    if kind == "warn" or exc.endswith("Warning"):
        category = exc if exc.endswith("Warning") else "UserWarning"
        return "%s:%s: %s: %s\n" % (where, site.get("line") or 1, category, msg)
    if kind == "log" or exc.upper() in ("WARNING", "ERROR", "CRITICAL", "INFO", "EXCEPTION", "WARNING_ONCE"):
        return "[2026-11-27 10:00:00,000] WARNING %s\n" % msg
    if site.get("source") == "cpp":
        exc = {"check": "RuntimeError", "error": "RuntimeError", "assert": "RuntimeError"}.get(kind, exc)
        if exc in ("std::runtime_error", "std::invalid_argument", "c10::Error"):
            exc = "RuntimeError"
    function = site.get("function") or "<module>"
    return ("Traceback (most recent call last):\n  File \"%s\", line %s, in %s\n%s: %s\n"
            % (where, site.get("line") or 1, function.rsplit(".", 1)[-1], exc.rsplit(".", 1)[-1], msg))


def readable(site):
    return site.get("scope") == "in" and sum(len(p.strip()) for p in site.get("parts") or []) >= MIN_LITERAL


def verdict(report):
    for m in report.matches:
        if not m.harmless and m.likelihood != "unlikely":
            return "named", m.rule
    if any(m.harmless for m in report.matches):
        return "harmless", next(m.rule for m in report.matches if m.harmless)
    return "none", ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", action="append", help="only these libraries (repeatable)")
    ap.add_argument("--misses", type=int, default=0, help="print this many unanswered sites per library")
    ap.add_argument("--json", type=Path, help="write every site's verdict here")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from attn_doctor.explaining.core import explain
    from attn_doctor.rules.loader import load_recipes

    recipes = load_recipes()
    paths = sorted(SITES.glob("*.jsonl.gz")) + sorted(SITES.glob("*.jsonl"))
    if not paths:
        print("coverage: no sites under %s (run extract_python.py / extract_cpp.py)" % SITES, file=sys.stderr)
        return 2
    by_lib = collections.defaultdict(lambda: collections.Counter())
    misses = collections.defaultdict(list)
    seen = {}
    rows = []
    started = time.perf_counter()
    for site in load_sites(paths):
        lib = site["library"] + ("-cpp" if site.get("source") == "cpp" else "")
        if args.library and site["library"] not in args.library and lib not in args.library:
            continue
        by_lib[lib]["sites"] += 1
        if site.get("scope") != "in":
            continue
        by_lib[lib]["in"] += 1
        if not readable(site):
            by_lib[lib]["short"] += 1
            continue
        text = text_of(site)
        if text not in seen:
            seen[text] = verdict(explain(io.BytesIO(text.encode("utf-8")), recipes, kind="text"))
        v, rule = seen[text]
        by_lib[lib][v] += 1
        rows.append({"library": lib, "file": site.get("file"), "line": site.get("line"), "verdict": v, "rule": rule,
                     "text": text})
        if v == "none" and len(misses[lib]) < args.misses:
            misses[lib].append(text.strip().splitlines()[-1][:200])
    seconds = time.perf_counter() - started
    head = "%-22s %7s %7s %7s %7s %7s %7s %8s" % ("library", "sites", "in", "short", "named", "harmls", "none", "answered")
    print(head)
    print("-" * len(head))
    total = collections.Counter()
    for lib in sorted(by_lib):
        c = by_lib[lib]
        total.update(c)
        judged = c["named"] + c["harmless"] + c["none"]
        print("%-22s %7d %7d %7d %7d %7d %7d %7.1f%%" % (lib, c["sites"], c["in"], c["short"], c["named"], c["harmless"],
                                                        c["none"], 100.0 * (c["named"] + c["harmless"]) / judged if judged else 0))
    judged = total["named"] + total["harmless"] + total["none"]
    print("-" * len(head))
    print("%-22s %7d %7d %7d %7d %7d %7d %7.1f%%" % ("all", total["sites"], total["in"], total["short"], total["named"],
                                                    total["harmless"], total["none"],
                                                    100.0 * (total["named"] + total["harmless"]) / judged if judged else 0))
    print("in: in-scope sites; short: in scope, under %d characters of literal text; answered: named or harmless of the "
          "rest; %d distinct texts explained in %.1f s" % (MIN_LITERAL, len(seen), seconds))
    for lib, texts in sorted(misses.items()):
        print("\n%s, unanswered:" % lib)
        for t in texts:
            print("  " + t)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
