"""The notices-only reading: a short paste whose messages are all warnings or notices (a logger's
WARNING or INFO line, Python's `UserWarning:`, torch's TORCH_WARN) with nothing that failed. Such a
text names no failure at all, so where no signature, catalogue site or known case explains it, it is
said as that: harmless lines, and where the error would be if the run did fail.

Pure: the lines and the forms (recipes' `data.notices_only`) in, the notice lines out."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional


@lru_cache(maxsize=4)
def _compiled(*forms: tuple[str, ...]) -> tuple[Optional[re.Pattern], ...]:
    return tuple(re.compile("|".join(f"(?:{p})" for p in ps)) if ps else None for ps in forms)


def notice_lines(lines: list[tuple[str, int]], forms: dict) -> Optional[list[tuple[str, int]]]:
    """The (line, number) of each warning or notice when every other line of `lines` (the whole
    paste) says nothing failed, no notice tells of a symptom (a NaN, memory running out) and at
    least one is a notice; else None."""
    notice, failure, symptom = _compiled(*(tuple(forms.get(k) or ()) for k in ("notice", "failure", "symptom")))
    if not lines or notice is None or failure is None:
        return None
    found = []
    for text, number in lines:
        if notice.search(text):
            if symptom is not None and symptom.search(text):
                return None
            found.append((text, number))
        elif failure.search(text):
            return None
    return found or None
