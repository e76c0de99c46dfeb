"""Validate a harvested held-out file: well-formed cases, known families, sources never cited.

    python benchmarks/harvest/check_harvest.py FILE.toml [--cited LIST]

Prints one line per problem and exits 1 when there is any; the cited list defaults to what
cited_repos.py reads from tests/corpus (so a file must be checked before it is copied there).
"""
from __future__ import annotations

import argparse
import pathlib
import re
import sys
import tomllib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from cited_repos import cited  # noqa: E402
from score_explain import WRAPPERS  # noqa: E402

_CORPUS = pathlib.Path(__file__).resolve().parents[2] / "tests" / "corpus"
REPO = re.compile(r"(?:github\.com/)?([\w.-]+)/([\w.-]+?)(?:\.git)?(?:#\d+|/(?:issues|pull|discussions)/\d+)", re.I)


def families() -> set[str]:
    data = tomllib.loads((_CORPUS / "families.toml").read_text(encoding="utf-8"))
    return set(data.get("family", {})) | {"negative"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", type=pathlib.Path)
    ap.add_argument("--cited", type=pathlib.Path)
    args = ap.parse_args(argv)
    known = set(args.cited.read_text().split()) if args.cited else cited()
    fams = families()
    data = tomllib.loads(args.file.read_text(encoding="utf-8"))
    problems, ids = [], set()
    for case in data.get("case", []):
        cid = case.get("id", "?")
        for key in ("id", "source", "family", "text"):
            if not case.get(key):
                problems.append(f"{cid}: no {key}")
        if cid in ids:
            problems.append(f"{cid}: duplicate id")
        ids.add(cid)
        if set(case.get("wrapper") or ()) - WRAPPERS:
            problems.append(f"{cid}: unknown wrappers {sorted(set(case['wrapper']) - WRAPPERS)}")
        if case.get("family") and case["family"] not in fams:
            problems.append(f"{cid}: unknown family {case['family']!r}")
        m = REPO.search(case.get("source", ""))
        if not m:
            problems.append(f"{cid}: source is not a GitHub issue/discussion: {case.get('source')!r}")
        elif f"{m.group(1)}/{m.group(2)}".lower() in known:
            problems.append(f"{cid}: {m.group(1)}/{m.group(2)} is already cited")
    for p in problems:
        print(p)
    print(f"{len(data.get('case', []))} cases, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
