"""A small cache for results that are a pure function of the installed code.

The sample forward pass judges tiny models of the installed attention libraries: its verdict
depends only on the package set, the Python, the dtype and the GPU capability it is judged for,
and attn-doctor's own version. Computing it cold means importing those libraries (transformers
5 alone took 10 s on an H200 node), so a repeated `check` reuses it while nothing changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

from . import __version__


def cache_dir() -> Path:
    override = os.environ.get("ATTN_DOCTOR_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("attn-doctor"))


def key(kind: str, **parts: Any) -> str:
    blob = json.dumps({"kind": kind, "attn_doctor": __version__, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def get(kind: str, digest: str) -> Optional[dict]:
    path = cache_dir() / kind / f"{digest}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent or corrupt: recompute
    return data if isinstance(data, dict) else None


def wait(kind: str, digest: str, timeout: float, fresh_after: Optional[float] = None, poll: float = 0.2) -> Optional[dict]:
    """Wait for another process to put this entry (newer than `fresh_after`, if given)."""
    import time

    path = cache_dir() / kind / f"{digest}.json"
    deadline = time.monotonic() + timeout
    while True:
        try:
            fresh = fresh_after is None or path.stat().st_mtime >= fresh_after - 1.0
        except OSError:
            fresh = False
        if fresh:
            value = get(kind, digest)
            if value is not None:
                return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll)


def put(kind: str, digest: str, value: dict) -> None:
    """Atomic write; a cache that cannot be written is not an error."""
    folder = cache_dir() / kind
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(value, fh)
        os.replace(tmp, folder / f"{digest}.json")
    except OSError:
        pass
