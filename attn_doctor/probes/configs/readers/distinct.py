"""The evidence that a file is one framework's: what in it only that framework writes (a reader's
DISTINCT entries and its distinct(doc)). Apart from the list of readers, so that a reader may ask
it of a part of its file (an mcli run file's parameters) without importing the list it is on."""

from __future__ import annotations

from ..plan import get, has


def evidence(reader, doc: dict) -> list[str]:
    """What in `doc` only `reader`'s framework writes: each DISTINCT entry found (a dotted key that is
    there, or `key: value` for a (dotted key, values) pair whose value is one of them; a value ending
    in `*` matches as a prefix), then what reader.distinct(doc) finds in the file's structure."""
    found: list[str] = []
    for entry in getattr(reader, "DISTINCT", ()):
        if isinstance(entry, str):
            if has(doc, entry):
                found.append(entry)
            continue
        key, values = entry
        value = get(doc, key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and _one_of(str(value), values):
            found.append(f"{key}: {value}")
    extra = getattr(reader, "distinct", None)
    if extra is not None:
        found += [item for item in extra(doc) if item not in found]
    return found


def _one_of(value: str, values: tuple) -> bool:
    text = value.strip().lower()
    return any(text.startswith(v[:-1].lower()) if v.endswith("*") else text == v.lower() for v in values)
