"""Guards read from the table of torch's APIs by release (support/torch_api.py: the modules,
module-level names and functions' keywords each release has, read from its sources): whether the
torch in use predates a module, a name or a keyword the code uses. They read that table (loaded
once) and the lines around; nothing of the machine."""

from __future__ import annotations

import functools
import re
from typing import Optional

from .dispatch_guards import TORCH_STATED


# names a torch module binds by importing them (typing's, functools', warnings' helpers,
# typing_extensions' deprecated): the table of module-level names holds them too, but no code uses
# them as torch's API
_EXTRA_HELPERS = frozenset({"deprecated", "override", "Self", "TypeAlias", "ParamSpec", "TypeGuard", "Concatenate",
                            "Unpack", "TypeVarTuple", "Never", "LiteralString", "Required", "NotRequired"})


@functools.lru_cache(maxsize=1)
def _imported_helpers() -> frozenset:
    import abc
    import collections
    import collections.abc
    import contextlib
    import dataclasses
    import enum
    import itertools
    import typing
    import warnings

    names = set(_EXTRA_HELPERS)
    for module in (typing, collections, collections.abc, functools, contextlib, dataclasses, enum, abc, warnings, itertools):
        names.update(n for n in dir(module) if not n.startswith("_"))
    return frozenset(names)


def torch_api_added(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """A torch module, or a module-level name, that a later torch release added (read from the
    sources of several releases): the torch in use predates it. {"api", "since"} (since: the first
    release read that has it). None where every release read has it (a shadowing file or a broken
    install, not the torch's age), none has it, or the lines around it show a torch at or past that
    release."""
    from ..support.torch_api import added_in

    module, name = groups.get("module") or "", groups.get("name")
    if name is not None and name.startswith("_"):
        return None  # a private name: torch moves those between releases in both directions
    if name is not None and name in _imported_helpers():
        return None  # a helper the module imports (typing_extensions' deprecated, typing's names): not torch's API
    found = added_in(module, name) if module.startswith("torch") else None
    if found is None:
        return None
    without, since = found
    if _torch_at_or_past(without, [*before[-20:], *after[:20]]):
        return None  # a release past the last one read without it: it may have it
    return {"api": f"{module}.{name}" if name else module, "since": since}


def _torch_at_or_past(without: str, lines: list[str]) -> bool:
    """The lines show a torch release past `without` (the last release read without an API): it may have it."""
    from packaging.version import InvalidVersion, Version

    for line in lines:
        for m in TORCH_STATED.finditer(line):
            try:
                if Version(m.group("v")) > Version(without):
                    return True
            except InvalidVersion:
                continue
    return False


def torch_keyword_added(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """"f() got an unexpected keyword argument 'k'" where the message, or the code line just above
    it, calls torch's f (torch.f, F.f, torch.nn.functional.f) with k, and k is a keyword of f that a
    later torch release added (read from the releases' sources and their argument parsers): the
    torch in use predates it. {"api", "since"}. None where no such call is there (a function of that
    name in the code itself, a method), the table has no entry for it, or the lines show a torch at
    or past the release that added it."""
    from ..support.torch_api import keyword_added_in

    func, keyword = groups.get("func") or "", groups.get("keyword") or ""
    found = keyword_added_in(func, keyword)
    if found is None:
        return None
    lines = [*before[-20:], *after[:20]]
    # the traceback's code line above the error: torch's function called with that keyword
    call = re.compile(r"(?<![\w.])(?:torch|F|functional)(?:\.\w+)*\." + re.escape(func) + r"\b.*\b" + re.escape(keyword) + r"\s*=")
    if not groups.get("qualified") and not any(call.search(line) for line in before[-4:]):
        return None
    without, since = found
    if _torch_at_or_past(without, lines):
        return None
    return {"api": f"{func}(..., {keyword}=...)", "since": since}
