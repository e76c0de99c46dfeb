"""Which torch release added a module or a module-level name, read from the Python sources of
several releases (benchmarks/catalogue/extract_torch_api.py writes recipes/support/torch_api.json.gz).
Only what the newest release read has and the oldest lacks is in the table: a name every release has
(torch.cuda) says nothing of the torch's age. Standard library only, like dispatch.py beside it."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path
from typing import Optional

NAME = "torch_api.json.gz"
MAX_BYTES = 8 << 20  # a damaged or hostile file stops here


def default_path() -> Path:
    """Beside the support matrix, in the installed wheel or the checkout."""
    from .table import default_path as matrix_path

    return matrix_path().parent / NAME


@lru_cache(maxsize=1)
def table() -> dict:
    """{"releases": [...], "modules": {...}, "names": {...}}, empty where the file is missing or unreadable."""
    empty = {"releases": [], "modules": {}, "names": {}}
    try:
        with gzip.open(default_path(), "rb") as fh:
            doc = json.loads(fh.read(MAX_BYTES))
    except (OSError, ValueError, EOFError):
        return empty
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), t) for k, t in
                                            (("releases", list), ("modules", dict), ("names", dict))):
        return empty
    return doc


def added_in(module: str, name: Optional[str] = None) -> Optional[tuple[str, str]]:
    """(the last release read without it, the first release read with it) for torch's `module` or
    its module-level `name`; None when every release read has it, none has it, or it is no torch's."""
    doc = table()
    releases = [r for r in doc["releases"] if isinstance(r, str)]
    if name is None:
        index = doc["modules"].get(module)
    else:
        names = doc["names"].get(module)
        index = names.get(name) if isinstance(names, dict) else None
    if not isinstance(index, int) or not 0 < index < len(releases):
        return None
    return releases[index - 1], releases[index]
