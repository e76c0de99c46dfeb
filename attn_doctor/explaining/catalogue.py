"""The message catalogue: every message the attention stack's libraries can raise, warn or log about
attention, precision, kernels, builds and versions, read from their sources (benchmarks/catalogue/:
the sites, and the cause family each site's own check states), shipped as recipes/catalogue.jsonl.gz.

A line of the text is one of these messages when the literal parts of a site's message appear in it
in order (the placeholders' values in between); a line cut short (a paste stopped at the terminal's
width, a log truncated) still matches on the parts it holds when they are long enough, said with a
lower likelihood. Lookup goes through each entry's rarest word, so a line costs a few dictionary
reads and the regular expressions of the entries that share a word with it."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

CATALOGUE_NAME = "catalogue.jsonl.gz"
MIN_LITERAL = 12  # literal characters a match must cover: shorter texts are not recognisable
CUT_MIN = 24  # a line cut short matches on its parts when they cover at least this many characters...
CUT_SHARE = 0.5  # ...and this share of the message's literal text
GAP = 300  # characters a placeholder's value may take
CUT_TAIL = 80  # what a line cut short may hold after the parts it matched (a value, then the cut)
MAX_ENTRIES = 100_000  # a damaged or hostile file stops here
MAX_LINE = 2000
_WORD = re.compile(r"[a-z][a-z0-9_]{3,}")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Entry:
    parts: tuple[str, ...]  # literal text between placeholders, whitespace collapsed, lower case
    family: str
    rule: str
    at: tuple[str, ...]  # "library version file:line" of the sites that raise it
    literal: int  # characters of literal text


@dataclass(frozen=True)
class Hit:
    entry: Entry
    line: str
    covered: int  # literal characters the line holds
    complete: bool  # every part was found (else a line cut short)
    number: int = 0  # the line's number in the text, where known


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


class Catalogue:
    def __init__(self, entries: list[Entry]):
        self.entries = entries
        df = Counter(w for e in entries for w in set(_WORD.findall(" ".join(e.parts))))
        self._index: dict[str, list[int]] = {}
        for i, e in enumerate(entries):
            words = set(_WORD.findall(" ".join(e.parts)))
            if not words:
                continue
            # the rarest word of the message's first long part: a line cut short still holds it
            first = next((p for p in e.parts if len(p) >= 4 and _WORD.search(p)), None)
            pool = set(_WORD.findall(first)) if first else words
            key = min(pool, key=lambda w: (df[w], -len(w), w))
            self._index.setdefault(key, []).append(i)
        self._regex: dict[tuple[int, int], re.Pattern] = {}

    @classmethod
    def load(cls, path: Path) -> "Catalogue":
        entries = []
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for n, raw in enumerate(fh):
                if n >= MAX_ENTRIES:
                    break
                row = json.loads(raw)
                parts = tuple(p for p in (_norm(str(x)) for x in row["parts"]))
                literal = sum(len(p) for p in parts)
                if literal < MIN_LITERAL:
                    continue
                entries.append(Entry(parts=parts, family=str(row["family"]), rule=str(row["rule"]),
                                     at=tuple(str(a) for a in row.get("at", ())[:4]), literal=literal))
        return cls(entries)

    def _pattern(self, i: int, upto: int) -> re.Pattern:
        """The expression of entry i's first `upto` parts."""
        key = (i, upto)
        if key not in self._regex:
            parts = [p for p in self.entries[i].parts[:upto]]
            body = (".{0,%d}?" % GAP).join(re.escape(p) for p in parts if p)
            self._regex[key] = re.compile(body)
        return self._regex[key]

    def match(self, line: str) -> Optional[Hit]:
        """The catalogue entry this line is a message of, or None."""
        text = _norm(line[:MAX_LINE])
        best: Optional[Hit] = None
        for word in set(_WORD.findall(text)):
            for i in self._index.get(word, ()):
                hit = self._try(i, text, line)
                if hit is not None and (best is None or (hit.complete, hit.covered) > (best.complete, best.covered)):
                    best = hit
        return best

    def _try(self, i: int, text: str, line: str) -> Optional[Hit]:
        e = self.entries[i]
        n = len(e.parts)
        if self._pattern(i, n).search(text):
            return Hit(entry=e, line=line, covered=e.literal, complete=True)
        # a line cut short: the longest run of leading parts it holds, running to the line's end
        for upto in range(n - 1, 0, -1):
            covered = sum(len(p) for p in e.parts[:upto])
            if covered < CUT_MIN or covered < CUT_SHARE * e.literal:
                return None
            m = self._pattern(i, upto).search(text)
            if m is not None and len(text) - m.end() <= CUT_TAIL:
                return Hit(entry=e, line=line, covered=covered, complete=False)
        return None

    def first(self, lines: Iterable[str], numbers: Iterable[int] = ()) -> Optional[Hit]:
        """The best hit among the lines: a complete message before a cut one, the longer message
        first, the last line of the text among equals (where the final error is)."""
        import dataclasses
        import itertools

        best: Optional[Hit] = None
        for line, number in zip(lines, itertools.chain(numbers, itertools.repeat(0))):
            hit = self.match(line)
            if hit is not None and number:
                hit = dataclasses.replace(hit, number=number)
            if hit is not None and (best is None or (hit.complete, hit.covered) >= (best.complete, best.covered)):
                best = hit
        return best


def where(entry: Entry) -> tuple[str, str]:
    """(library and releases, first site) of an entry, for the finding's words."""
    libs: dict[str, list[str]] = {}
    first_site = ""
    for at in entry.at:
        bits = at.split(" ", 2)
        if len(bits) != 3:
            continue
        lib, version, site = bits
        libs.setdefault(lib, [])
        if version and version not in libs[lib]:
            libs[lib].append(version)
        first_site = first_site or site
    named = ", ".join("%s %s" % (lib, "/".join(v)) if v else lib for lib, v in libs.items())
    return named or "the library", first_site or "its source"
