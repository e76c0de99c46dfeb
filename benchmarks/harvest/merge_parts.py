"""Join a harvest's parts (part*.toml, each checked by check_harvest.py) into one held-out file.

    python benchmarks/harvest/merge_parts.py OUT.toml HEADER.txt PART.toml...

Keeps each part's cases as written (their text is copied byte for byte), and drops a case whose id
repeats or whose source repository already gave two cases.
"""
from __future__ import annotations

import re
import sys
import tomllib

from check_harvest import REPO


def blocks(text: str) -> list[str]:
    """The [[case]] blocks of a part, as written."""
    starts = [m.start() for m in re.finditer(r"(?m)^\[\[case\]\]\s*$", text)]
    return [text[a:b].rstrip() + "\n" for a, b in zip(starts, starts[1:] + [len(text)])]


def main(argv: list[str]) -> int:
    out, header, parts = argv[0], argv[1], argv[2:]
    per_repo: dict[str, int] = {}
    ids, kept, dropped = set(), [], []
    for part in parts:
        for block in blocks(open(part, encoding="utf-8").read()):
            case = tomllib.loads(block)["case"][0]
            m = REPO.search(case["source"])
            repo = f"{m.group(1)}/{m.group(2)}".lower()
            if case["id"] in ids or per_repo.get(repo, 0) >= 2:
                dropped.append(f"{part}: {case['id']} (id or repository repeats)")
                continue
            ids.add(case["id"])
            per_repo[repo] = per_repo.get(repo, 0) + 1
            kept.append(block)
    text = open(header, encoding="utf-8").read().rstrip() + "\n\n" + "\n".join(kept)
    tomllib.loads(text)
    open(out, "w", encoding="utf-8").write(text)
    for d in dropped:
        print("dropped", d)
    print(f"{len(kept)} cases from {len(per_repo)} repositories -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
