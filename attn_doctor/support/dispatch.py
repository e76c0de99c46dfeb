"""Which dtypes torch's own kernels dispatch, by the kernel name torch's `"NAME" not implemented for
'Half'` message carries, read from torch's sources of several releases
(benchmarks/catalogue/extract_dispatch.py writes recipes/support/torch_dispatch.json.gz). Standard
library only, like the rest of this package's ground floor."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path
from typing import Optional

NAME = "torch_dispatch.json.gz"
MAX_BYTES = 4 << 20  # a damaged or hostile file stops here


def beside_matrix(name: str) -> Path:
    """A support table's path beside the support matrix, in the installed wheel or the checkout."""
    from .table import default_path as matrix_path

    return matrix_path().parent / name


def read_table(path: Path, max_bytes: int, shape: dict) -> Optional[dict]:
    """A gzipped JSON support table whose top-level keys have the types `shape` names, or None where
    it is missing, unreadable, too large to be ours or of another shape."""
    try:
        with gzip.open(path, "rb") as fh:
            doc = json.loads(fh.read(max_bytes))
    except (OSError, ValueError, EOFError):
        return None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), t) for k, t in shape.items()):
        return None
    return doc


def default_path() -> Path:
    return beside_matrix(NAME)


@lru_cache(maxsize=1)
def table() -> dict:
    """{"releases": [...], "kernels": {...}}, or an empty table where the file is missing or unreadable."""
    return read_table(default_path(), MAX_BYTES, {"releases": list, "kernels": dict}) or {"releases": [], "kernels": {}}


def first_release_with(kernel: str, dtype: str, device: str = "cuda") -> Optional[str]:
    """The oldest torch release read whose `device` kernel `kernel` dispatches `dtype` ("Half",
    "BFloat16"), where the oldest release read does not and the newest does; None otherwise: the
    dtype never dispatched, always (no release read shows it added), or the name is not torch's
    (an extension's own kernel)."""
    doc = table()
    entry = doc["kernels"].get(kernel)
    slot = entry.get(device) if isinstance(entry, dict) else None
    if not isinstance(slot, dict) or not doc["releases"]:
        return None
    listed = slot.get(dtype)
    has = [r for r in listed if isinstance(r, str)] if isinstance(listed, list) else []
    releases = [r for r in doc["releases"] if isinstance(r, str)]
    if len(releases) < 2 or releases[-1] not in has or releases[0] in has:
        return None  # only a release that lacks it and a later one that has it show it was added
    return next((r for r in releases if r in has), None)


def devices_of(kernel: str) -> frozenset:
    """The devices ("cpu", "cuda") torch's sources have a kernel of this name for; empty where the
    name is not torch's."""
    entry = table()["kernels"].get(kernel)
    return frozenset(d for d in entry if isinstance(d, str)) if isinstance(entry, dict) else frozenset()


def releases_read() -> list:
    """The torch releases the table was read from, oldest first."""
    return [r for r in table()["releases"] if isinstance(r, str)]
