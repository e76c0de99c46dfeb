"""The messages Python itself raises, read from the interpreters' own shared libraries (libpython):
their printf-style strings, each as its literal parts between the placeholders.

A library that raises one of them word for word (Triton's code generator re-raising "not enough
values to unpack (expected 2, got 1)") says nothing a user's own code does not: the catalogue leaves
such messages out, since a text holding them names no cause of the stack. The messages are kept as
data (python_messages.jsonl.gz, read from the libpython of every Python release the package supports),
so the catalogue does not depend on the interpreter that rebuilds it.

    python benchmarks/catalogue/python_messages.py LIBPYTHON...   # rewrite python_messages.jsonl.gz
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "python_messages.jsonl.gz"
# a C format's conversion (%d, %.200s, %zd, %R, %U, 3.13's %T and %N...), where a value goes in the
# message; "%%" is a literal percent sign
_CONVERSION = re.compile(rb"(?<!%)%[-+ #0]*(?:\d+|\*)?(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[diouxXscRSUVApfgeETN]")
_RUN = re.compile(rb"[\x20-\x7e]{12,}")
MIN_LITERAL = 12
MIN_MESSAGES = 1000  # fewer read from a libpython means it was not one
FILLS = ("foo_bar", "2", "Tensor")  # what a placeholder holds in a user's text: a name, a count, a type


def read(path: Path) -> set[tuple[str, ...]]:
    """The messages of one libpython, each as its literal parts."""
    found = set()
    for run in _RUN.findall(path.read_bytes()):
        if b" " not in run:
            continue  # a symbol's or a file's name, not a sentence
        parts = tuple(re.sub(r"\s+", " ", p.decode("ascii")).replace("%%", "%") for p in _CONVERSION.split(run))
        if sum(len(p) for p in parts) >= MIN_LITERAL:
            found.add(parts)
    if len(found) < MIN_MESSAGES:
        raise ValueError(f"{path}: {len(found)} messages; not a libpython")
    return found


def messages() -> list[tuple[str, ...]]:
    """The shipped messages (python_messages.jsonl.gz: a header line naming the libraries read, then
    one message per line)."""
    with gzip.open(DATA, "rt", encoding="utf-8") as fh:
        rows = fh.read().splitlines()[1:]
    return [tuple(json.loads(row)) for row in rows if row.strip()]


def read_from() -> list[str]:
    """The libraries the shipped messages were read from (python_messages.jsonl.gz's header)."""
    with gzip.open(DATA, "rt", encoding="utf-8") as fh:
        return json.loads(fh.readline())["read_from"]


def lines() -> list[str]:
    """Each message as a user's text holds it, once per kind of value in its placeholders."""
    return sorted({fill.join(parts) for parts in messages() for fill in FILLS})


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    found: set[tuple[str, ...]] = set()
    for path in argv:
        found |= read(Path(path))
    head = json.dumps({"read_from": sorted(Path(p).name for p in argv)})
    with gzip.GzipFile(DATA, "wb", mtime=0) as fh:
        fh.write(("\n".join([head, *(json.dumps(list(parts)) for parts in sorted(found))]) + "\n").encode("utf-8"))
    print(f"wrote {len(found)} messages from {len(argv)} libraries to {DATA.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
