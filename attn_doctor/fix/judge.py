"""Judging a config edit before fix offers it: the edited text is read as the check reads the file
(the same readers), the facts are the check's with that file's reading in its place, and every rule
is evaluated on them (the config rules and the known-crash combinations, AD504 and AD506 among them).

An edit is offered only where, for its file, its own finding is gone and no rule fires that did not
fire before (a remedy must never make the job worse: fp16 weights under a GradScaler, bf16 written
back by a later remedy, a precision the framework refuses). Pure: nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import msgspec

from ..diagnosis.engine import evaluate
from ..report import Report
from ..rules.loader import Recipes

FAILING = ("error", "warning")


class Judge:
    def __init__(self, report: Report, recipes: Recipes):
        self.facts = report.facts
        self.recipes = recipes
        self.before = {file: _failures(report.results, file) for file in self._files()}
        self._cache: dict[tuple[str, bytes], dict[str, str]] = {}

    def _files(self) -> list[str]:
        return [c.path for c in self.facts.configs]

    def failures(self, file: str, text: Optional[bytes]) -> dict[str, str]:
        """rule -> message of each error or warning about `file` (by its evidence) if it held `text`
        (None: as the check found it)."""
        if text is None:
            return self.before.get(file, {})
        key = (file, text)
        if key not in self._cache:
            from ..probes.configs import probe_config_text

            reading = probe_config_text(file, text.decode("utf-8", "replace"), os.environ)
            configs = [reading if c.path == file else c for c in self.facts.configs]
            facts = msgspec.structs.replace(self.facts, configs=configs)
            self._cache[key] = _failures(evaluate(self.recipes, facts), file)
        return self._cache[key]

    def verdict(self, rule: str, file: str, before: Optional[bytes], after: bytes) -> Optional[str]:
        """Why the edit from `before` to `after` must not be offered for `rule`'s finding, or None."""
        was, now = self.failures(file, before), self.failures(file, after)
        worse = [r for r in now if r not in was]
        if worse:
            first = worse[0]
            return f"not offered: the edited file would fail {first} ({now[first]})"
        if rule in now:
            return f"not offered: {rule} would still fire on the edited file ({now[rule]})"
        return None

    def resolved(self, rule: str, file: str, text: bytes) -> bool:
        """The finding of `rule` no longer concerns `file` once it holds `text` (an earlier edit did it)."""
        return rule not in self.failures(file, text)


def _failures(results, file: str) -> dict[str, str]:
    out = {}
    target = os.path.abspath(file)
    for result in results:
        if result.status not in FAILING:
            continue
        files = result.evidence.get("config_files") or ([result.evidence["config"]] if result.evidence.get("config") else [])
        if any(os.path.abspath(str(Path(f))) == target for f in files):
            out[result.rule] = result.message or result.title
    return out
