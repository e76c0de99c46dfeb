"""The messages Python itself raises, read from the interpreter that runs this: the printf-style
strings of its shared library (libpython), or of its executable where Python is linked statically.

A library that raises one of them word for word (Triton's code generator re-raising "not enough
values to unpack (expected 2, got 1)") says nothing a user's own code does not: the catalogue leaves
such messages out, since a text holding them names no cause of the stack."""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from pathlib import Path

# a C format's conversion (%d, %.200s, %zd, %R, %U...), where a value goes in the message
_CONVERSION = re.compile(rb"%[-+ #0]*(?:\d+|\*)?(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[diouxXscRSUVApfgeE]")
_RUN = re.compile(rb"[\x20-\x7e]{12,}")
MIN_LITERAL = 12
FILLS = ("foo_bar", "2", "Tensor")  # what a placeholder holds in a user's text: a name, a count, a type


def binary() -> Path:
    """libpython where the interpreter links it dynamically, else the executable itself."""
    folder, name = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
    if folder and name and not name.endswith(".a"):
        path = Path(folder) / name
        if path.is_file():
            return path
    return Path(os.path.realpath(sys.executable))


def messages(path: Path | None = None) -> set[tuple[str, ...]]:
    """Each message as its literal parts between the placeholders."""
    found = set()
    for run in _RUN.findall((path or binary()).read_bytes()):
        if b" " not in run:
            continue  # a symbol's or a file's name, not a sentence
        parts = tuple(re.sub(r"\s+", " ", p.decode("ascii")) for p in _CONVERSION.split(run))
        if sum(len(p) for p in parts) >= MIN_LITERAL:
            found.add(parts)
    return found


def lines(path: Path | None = None) -> list[str]:
    """Each message as a user's text holds it, once per kind of value in its placeholders."""
    return sorted({fill.join(parts) for parts in messages(path) for fill in FILLS})
