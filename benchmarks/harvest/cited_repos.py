"""Every GitHub repository the corpus already cites, one owner/name per line (lower case).

A harvest of texts "from repositories never cited" checks each candidate against this list; sources
are written both as ``owner/repo#N`` and as github.com addresses, and both forms are read.
"""
from __future__ import annotations

import pathlib
import re
import sys
import tomllib

_ROOT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "corpus"
_URL = re.compile(r"github\.com/([\w.-]+)/([\w.-]+)", re.I)
_SHORT = re.compile(r"^([\w.-]+)/([\w.-]+)#\d+", re.I)


def cited(root: pathlib.Path = _ROOT) -> set[str]:
    repos: set[str] = set()
    for path in sorted(root.glob("*.toml")) + sorted(root.glob("pending/*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for case in data.get("case", []):
            for src in (case.get("source", ""), case.get("note", "")):
                short = _SHORT.match(src)
                for m in [*_URL.finditer(src), *([short] if short else [])]:
                    repos.add(f"{m.group(1)}/{m.group(2).removesuffix('.git')}".lower())
    return repos


if __name__ == "__main__":
    out = sorted(cited(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else _ROOT))
    sys.stdout.write("\n".join(out) + "\n")
