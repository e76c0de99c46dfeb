"""How much of the message catalogue `explain` answers, and answers right: every in-scope site of
sites/*.jsonl.gz (the raise, assert, warning, log and TORCH_CHECK sites read from the libraries'
sources by extract_python.py and extract_cpp.py) made into the text a user would paste, in the
wrappers users paste it in, and explained.

A site's text is its message with each placeholder filled by a value of the kind its code names (a
dtype where the code reads ``q.dtype``, a version where it reads ``__version__``, a shape, a number;
else a word), said the way the library says it: ``RuntimeError: ...`` after a traceback line at the
site's file for a raise or a TORCH_CHECK, ``FILE:LINE: UserWarning: ...`` for a warning, a logger's
``WARNING ...`` line for a log call. Wrappers: the text as printed (plain), behind torchrun's
``[rankN]:`` prefix, behind a logger's timestamp and level, quoted in markdown (``> `...` ``), with
Windows paths, and cut before its last line (a Python raise whose message is written on its line:
the traceback then ends at that ``raise`` line).

Per library: the in-scope sites; those too short to recognise (under 12 characters of literal
text); those marked out of the stack, with their reason (recipes/catalogue.jsonl.gz leaves them
out); those the catalogue gives a family (classify.py); and, for each wrapper, the share of those
whose text explain answers with the family's root-cause class (right: its first finding's cause is
the class of the family's rule, or the notice is labelled harmless).

    python benchmarks/catalogue/coverage.py                   # the table per library
    python benchmarks/catalogue/coverage.py --library torch --misses 40   # some texts not answered right
    python benchmarks/catalogue/coverage.py --sample 400      # a random sample of sites (CI)
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


WRAPPERS = ("plain", "rank", "logger", "markdown", "windows", "cut")


def wrapped(site, text, wrapper):
    """The text in one of the wrappers users paste it in; None where the wrapper does not apply."""
    lines = text.rstrip("\n").split("\n")
    if wrapper == "plain":
        return text
    if wrapper == "rank":
        return "".join("[rank3]: %s\n" % l for l in lines)
    if wrapper == "logger":
        return "".join("2026-11-27 10:00:%02d,123 - train - ERROR - %s\n" % (i, l) for i, l in enumerate(lines))
    if wrapper == "markdown":
        return "I get this error:\n\n> `%s`\n\nany idea?\n" % lines[-1]
    if wrapper == "windows":
        if "site-packages" not in lines[0] + (lines[1] if len(lines) > 1 else ""):
            return None
        out = []
        for l in lines:
            m = re.match(r'(\s*File ")([^"]+)(".*)$', l) or re.match(r"(^)(/opt/venv/\S+?)(:\d+: \w*Warning: .*)$", l)
            if m:
                path = m.group(2).replace("/opt/venv/lib/python3.11/", "C:/Users/me/miniconda3/envs/t/Lib/").replace("/", "\\")
                l = m.group(1) + path + m.group(3)
            out.append(l)
        return "\n".join(out) + "\n"
    if wrapper == "cut":
        if site.get("source") == "cpp" or site.get("kind") != "raise" or not lines[0].startswith("Traceback"):
            return None
        call = site.get("call") or site.get("exception") or "RuntimeError"
        call = call.split("(", 1)[0]
        codes = site.get("placeholders") or []
        parts = site.get("parts") or []
        fstring = "".join(p.replace("{", "{{").replace("}", "}}") + ("{%s}" % codes[i] if i < len(parts) - 1 and i < len(codes)
                                                                      else "{x}" if i < len(parts) - 1 else "")
                          for i, p in enumerate(parts))
        if "\n" in fstring or len(fstring) > 300:
            return None  # a message over several lines: its raise line does not show it
        return "\n".join(lines[:-1]) + "\n    raise %s(f%r)\n" % (call, fstring)
    raise ValueError(wrapper)


def right(report, rule_cause, harmless):
    for m in report.matches:
        if m.harmless:
            continue
        if m.likelihood == "unlikely":
            continue
        return not harmless and m.cause == rule_cause
    return harmless and any(m.harmless for m in report.matches)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", action="append", help="only these libraries (repeatable)")
    ap.add_argument("--misses", type=int, default=0, help="print this many texts not answered right, per library")
    ap.add_argument("--sample", type=int, default=0, help="explain only this many random sites of each library (0: all; "
                    "coverage counts every site)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the counts per library and every site's verdicts here")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE))
    import random

    import classify
    from attn_doctor.explaining.core import explain
    from attn_doctor.rules.loader import load_recipes

    recipes = load_recipes()
    entries = {}
    with gzip.open(classify.OUT, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            entries[tuple(row["parts"])] = row
    paths = sorted(SITES.glob("*.jsonl.gz"))
    if not paths:
        print("coverage: no sites under %s (run extract_python.py / extract_cpp.py)" % SITES, file=sys.stderr)
        return 2
    sites = collections.defaultdict(list)
    for site in load_sites(paths):
        lib = site["library"] + ("-cpp" if site.get("source") == "cpp" else "")
        if args.library and site["library"] not in args.library and lib not in args.library:
            continue
        if site.get("scope") == "in":
            sites[lib].append(site)
    rnd = random.Random(args.seed)
    by_lib = collections.defaultdict(collections.Counter)
    outs = collections.Counter()
    misses = collections.defaultdict(list)
    rows = []
    seen = {}
    started = time.perf_counter()
    for lib in sorted(sites):
        # every site counts for coverage; only the sample is explained
        chosen = sites[lib] if not args.sample or len(sites[lib]) <= args.sample else rnd.sample(sites[lib], args.sample)
        chosen = {id(s) for s in chosen}
        for site in sites[lib]:
            c = by_lib[lib]
            c["in"] += 1
            if not readable(site):
                c["short"] += 1
                continue
            entry = entries.get(tuple(site.get("parts") or []))
            if entry is None:
                family, _, _ = classify.classify(site)
                if family.startswith("out:"):
                    c["out"] += 1
                    outs[family[4:]] += 1
                elif family == "unclassified":
                    c["unclassified"] += 1
                else:
                    c["out"] += 1  # classified by its condition alone with too few words to be shipped
                    outs["words too few to recognise (family read from the condition alone)"] += 1
                continue
            c["family"] += 1
            if id(site) not in chosen:
                continue
            rule = recipes.get(entry["rule"])
            harmless = rule.cause == "harmless"
            text = text_of(site)
            verdicts = {}
            for w in WRAPPERS:
                t = wrapped(site, text, w)
                if t is None:
                    continue
                if t not in seen:
                    seen[t] = explain(io.BytesIO(t.encode("utf-8")), recipes, kind="stdin")
                ok = right(seen[t], rule.cause, harmless)
                verdicts[w] = ok
                c[w + ":n"] += 1
                c[w + ":ok"] += ok
                if not ok and len(misses[lib]) < args.misses:
                    first = next((m for m in seen[t].matches if not m.harmless), None)
                    misses[lib].append("%s [%s, want %s %s; got %s] %s" % (
                        w, entry["family"], entry["rule"], rule.cause, "%s %s" % (first.rule, first.cause) if first else "nothing",
                        t.strip().splitlines()[-1][:160]))
            rows.append({"library": lib, "file": site.get("file"), "line": site.get("line"), "family": entry["family"],
                         "rule": entry["rule"], "verdicts": verdicts})
    seconds = time.perf_counter() - started
    head = "%-18s %6s %6s %6s %6s %6s %8s" % ("library", "in", "short", "out", "family", "uncls", "covered") + \
        "".join(" %8s" % w for w in WRAPPERS)
    print(head)
    print("-" * len(head))
    total = collections.Counter()

    def row(name, c):
        judged = c["in"] - c["short"]
        cov = 100.0 * (c["family"] + c["out"]) / judged if judged else 0.0
        cells = "".join(" %7.1f%%" % (100.0 * c[w + ":ok"] / c[w + ":n"]) if c[w + ":n"] else "        -" for w in WRAPPERS)
        return "%-18s %6d %6d %6d %6d %6d %7.1f%%" % (name, c["in"], c["short"], c["out"], c["family"], c["unclassified"], cov) + cells

    for lib in sorted(by_lib):
        total.update(by_lib[lib])
        print(row(lib, by_lib[lib]))
    print("-" * len(head))
    print(row("all", total))
    print("covered: sites with a family or marked out of the stack with a reason, of the in-scope sites long enough to "
          "recognise; each wrapper: the share of the sites with a family that explain answers with its cause class "
          "(%d texts explained in %.1f s)" % (len(seen), seconds))
    if outs:
        print("\nout of the stack, by reason:")
        for why, n in outs.most_common():
            print("  %5d  %s" % (n, why))
    for lib, texts in sorted(misses.items()):
        print("\n%s, not answered right:" % lib)
        for t in texts:
            print("  " + t)
    if args.json:
        args.json.write_text(json.dumps({"libraries": {lib: dict(c) for lib, c in sorted(by_lib.items())},
                                         "out": dict(outs), "sites": rows}, indent=0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
