"""Real dtype bugs of real packages, as release pairs from PyPI (tests/realenv/real_bugs/*/case.toml):
the release with the bug, the release with its fix, the line the trace must name, and the issue and
commit each comes from. Each case's factory.py is ours (a small model built from the package); the
package's code comes from the registry, never from this repository."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent / "real_bugs"


@dataclass(frozen=True)
class Case:
    name: str
    folder: Path
    package: str
    buggy: str
    fixed: str
    deps: tuple
    no_deps: bool
    source: str
    fix_commit: str
    target: str
    args: tuple
    rule: str
    file: str
    line_contains: str

    def steps(self, version: str) -> tuple:
        """`uv pip install` steps after torch, for one of the two releases."""
        pin = "%s==%s" % (self.package, version)
        if self.no_deps:
            return (tuple(self.deps), ("--no-deps", pin)) if self.deps else (("--no-deps", pin),)
        return ((pin,) + tuple(self.deps),)

    def env_name(self, which: str) -> str:
        return "bug-%s-%s" % (self.name, which)


def load() -> list[Case]:
    cases = []
    for path in sorted(ROOT.glob("*/case.toml")):
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
        trace, expect = doc.get("trace") or {}, doc["expect"]
        cases.append(Case(doc["name"], path.parent, doc["package"], doc["buggy"], doc["fixed"],
                          tuple(doc.get("deps") or ()), bool(doc.get("install_no_deps")), doc["source"],
                          doc["fix_commit"], trace.get("target", "factory.py:build"), tuple(trace.get("args") or ()),
                          expect["rule"], expect["file"], expect["line_contains"]))
    return cases


def places(finding: dict) -> list[dict]:
    """Every file:line a finding names, with its source line: the chain, each operand's origin, the
    lines its value went through and the calls that led to it, the origins of inputs that were
    cast, the masks' makers, the sink and the user's frame that reached it."""
    out = []

    def add(entry):
        if isinstance(entry, dict) and entry.get("file") and entry.get("line"):
            out.append(entry)
        if isinstance(entry, dict):
            for step in list(entry.get("called_by") or ()) + list(entry.get("path") or ()):
                add(step)
            add(entry.get("via"))

    for entry in finding.get("chain") or ():
        add(entry)
        add(entry.get("operand_origin"))
    for origin in finding.get("origins") or ():
        add(origin)
    sink = finding.get("sink") or {}
    add(sink)
    add(sink.get("called_from"))
    for info in (sink.get("other_inputs") or {}).values():
        add(info.get("made_at"))
    return out
