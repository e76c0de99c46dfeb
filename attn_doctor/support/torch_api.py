"""Which torch release added a module, a module-level name or a function's keyword argument, read
from the sources of several releases (benchmarks/catalogue/extract_torch_api.py writes
recipes/support/torch_api.json.gz).
Only what the newest release read has and the oldest lacks is in the table: a name every release has
(torch.cuda) says nothing of the torch's age. Standard library only; read as dispatch.py reads its table."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Optional

from .dispatch import beside_matrix, read_table

NAME = "torch_api.json.gz"
MAX_BYTES = 8 << 20  # a damaged or hostile file stops here


def default_path() -> Path:
    return beside_matrix(NAME)


@lru_cache(maxsize=1)
def table() -> dict:
    """{"releases": [...], "modules": {...}, "names": {...}, "kwargs": {...}}, empty where the file is
    missing or unreadable."""
    shape = {"releases": list, "modules": dict, "names": dict, "kwargs": dict}
    return read_table(default_path(), MAX_BYTES, shape) or {k: t() for k, t in shape.items()}


def _pair(index) -> Optional[tuple[str, str]]:
    releases = [r for r in table()["releases"] if isinstance(r, str)]
    if not isinstance(index, int) or isinstance(index, bool) or not 0 < index < len(releases):
        return None
    return releases[index - 1], releases[index]


def keyword_added_in(function: str, keyword: str) -> Optional[tuple[str, str]]:
    """(the last release read without it, the first release read with it) for `keyword` of the torch
    functions named `function` (the bare name a TypeError prints); None when the first release read
    that has the function takes it already, or takes **kwargs, or no torch function has that name."""
    keywords = table()["kwargs"].get(function)
    return _pair(keywords.get(keyword)) if isinstance(keywords, dict) else None


def added_in(module: str, name: Optional[str] = None) -> Optional[tuple[str, str]]:
    """(the last release read without it, the first release read with it) for torch's `module` or
    its module-level `name`; None when every release read has it, none has it, or it is no torch's."""
    doc = table()
    if name is None:
        index = doc["modules"].get(module)
    else:
        names = doc["names"].get(module)
        index = names.get(name) if isinstance(names, dict) else None
    return _pair(index)
