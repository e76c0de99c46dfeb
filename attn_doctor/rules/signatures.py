"""Signatures: compiled once, each with the literal substrings ("anchors") a line must contain
before the regular expression is worth running. Standard library only: the loader validates
recipes with it, and `check --quick` must stay fast."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

try:  # Python 3.11+
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
    from re import _constants as _sre_c  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - 3.10
    import sre_constants as _sre_c  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

MIN_ANCHOR = 4  # a shorter mandatory literal would let too many unrelated lines through
WRAP_SAFE = 6  # an anchor this long or longer is searched as its two halves (see split_anchors)


class SignatureError(ValueError):
    """A signature that cannot be used: the message says why."""


@dataclass
class CompiledSignature:
    rule: str
    pattern: str
    regex: re.Pattern
    anchors: list[str]
    severity: Optional[str] = None
    context: Optional[re.Pattern] = None
    context_anchors: list[str] = field(default_factory=list)
    note: Optional[str] = None
    component: Optional[re.Pattern] = None
    priority: int = 0
    decisive: bool = True
    analyzer: Optional[str] = None


def _leading(items) -> str:
    out = []
    for op, av in items:
        if op is not _sre_c.LITERAL:
            break
        out.append(chr(av))
    return "".join(out)


def _branches(item):
    """The alternatives of a BRANCH item, or of a flag-less group holding only a BRANCH."""
    op, av = item
    if op is _sre_c.BRANCH:
        return av[1]
    if op is _sre_c.SUBPATTERN:
        _group, add_flags, _del_flags, inner = av
        inner = list(inner)
        if not add_flags and len(inner) == 1 and inner[0][0] is _sre_c.BRANCH:
            return inner[0][1][1]
    return None


def _options(items) -> list[list[str]]:
    """Sets of literals, any one of which every match contains; the caller keeps the strongest."""
    items = list(items)
    options = [[r] for r in _literal_runs(items) if len(r.strip()) >= MIN_ANCHOR]
    prefix = ""
    for item in items:
        if item[0] is _sre_c.LITERAL:
            prefix += chr(item[1])
            continue
        branches = _branches(item)
        if branches is None and item[0] is _sre_c.SUBPATTERN and not item[1][1]:
            options.extend(_options(list(item[1][3])))  # a group: what every match of it contains
        if branches is not None:
            alts = []
            for branch in branches:
                branch = list(branch)
                joined = prefix + _leading(branch)
                inner = _strongest(_options(branch))
                best = max([joined] + inner, key=len) if len(inner) <= 1 else (joined if len(joined) >= min(map(len, inner)) else None)
                if best is None:
                    alts.extend(inner)
                elif len(best.strip()) >= MIN_ANCHOR:
                    alts.append(best)
                else:
                    alts = None
                    break
            if alts:
                options.append(sorted(set(alts)))
        prefix = ""
    return options


def _strongest(options: list[list[str]]) -> list[str]:
    options = [o for o in options if o and all(len(a.strip()) >= MIN_ANCHOR for a in o)]
    if not options:
        return []
    return max(options, key=lambda o: (min(len(a) for a in o), -len(o)))


def _literal_runs(items) -> list[str]:
    runs, current = [], []
    for op, av in items:
        if op is _sre_c.LITERAL:
            current.append(chr(av))
            continue
        if current:
            runs.append("".join(current))
            current = []
        if op is _sre_c.SUBPATTERN:
            _group, add_flags, _del_flags, inner = av
            inner_items = list(inner)
            if not add_flags and not any(o is _sre_c.BRANCH for o, _ in inner_items):
                runs.extend(_literal_runs(inner_items))
        elif op is _sre_c.MAX_REPEAT or op is _sre_c.MIN_REPEAT:
            low, _high, inner = av
            if low >= 1:
                runs.extend(_literal_runs(list(inner)))
    if current:
        runs.append("".join(current))
    return runs


def anchors_of(pattern: str) -> list[str]:
    """Literal substrings one of which every match must contain."""
    try:
        parsed = _sre_parse.parse(pattern)
    except re.error as exc:
        raise SignatureError(f"invalid regular expression {pattern!r}: {exc}") from None
    if parsed.state.flags & re.IGNORECASE:
        raise SignatureError(f"{pattern!r}: case-insensitive signatures cannot be pre-filtered; use (?i:...) around a part")
    options = _options(list(parsed))
    best = _strongest(options)
    if not best:
        raise SignatureError(
            f"{pattern!r}: needs a literal text of at least {MIN_ANCHOR} characters in every alternative "
            "(the scanner pre-filters lines with it; it also keeps a signature from matching anything)"
        )
    if min(len(a.strip()) for a in best) < 2 * WRAP_SAFE:
        # A short anchor is not split in halves, so one line break inside it would hide the whole
        # message from the pre-filter: a second literal of the message keeps it findable.
        rest = _strongest([o for o in options if o != best])
        best = sorted(set(best) | set(rest))
    return best


def compile_signature(rule_id: str, signature) -> CompiledSignature:
    """A recipe signature (a string, or a Signature table) compiled and checked."""
    if isinstance(signature, str):
        pattern, severity, context, note, component, priority, decisive = signature, None, None, None, None, 0, True
    else:
        pattern, severity, context, note = signature.pattern, signature.severity, signature.context, signature.note
        component, priority, decisive = signature.component, signature.priority, signature.decisive
    analyzer = None if isinstance(signature, str) else signature.analyzer
    if analyzer is not None:
        from .analyzers import ANALYZERS

        if analyzer not in ANALYZERS:
            raise SignatureError(f"unknown analyzer {analyzer!r} (known: {', '.join(sorted(ANALYZERS))})")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise SignatureError(f"invalid regular expression {pattern!r}: {exc}") from None
    anchors = split_anchors(anchors_of(pattern))
    compiled_context, context_anchors = None, []
    if context:
        try:
            compiled_context = re.compile(context)
        except re.error as exc:
            raise SignatureError(f"invalid context expression {context!r}: {exc}") from None
        context_anchors = anchors_of(context)
    compiled_component = None
    if component:
        try:
            compiled_component = re.compile(component)
        except re.error as exc:
            raise SignatureError(f"invalid component expression {component!r}: {exc}") from None
    return CompiledSignature(rule_id, pattern, regex, anchors, severity, compiled_context, context_anchors, note,
                             compiled_component, priority, decisive, analyzer)


def split_anchors(anchors: list[str]) -> list[str]:
    """Each long anchor as its two halves: a message wrapped once over two lines keeps one of them
    whole, and the scanner then joins the neighbouring lines."""
    out = []
    for a in anchors:
        a = a.strip()  # an anchor's edge spaces can fall on a line break: the literal inside cannot
        if len(a) >= 2 * WRAP_SAFE:
            half = len(a) // 2
            out += [a[:half].strip(), a[half:].strip()]
        else:
            out.append(a)
    return sorted({a for a in out if a})


def compile_rules(rules) -> list[CompiledSignature]:
    return [compile_signature(rule.id, sig) for rule in rules for sig in rule.signatures]


# -- normalising a log line before matching ------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# What launchers and loggers put before a message; stripped repeatedly from the start of a line.
_PREFIX = re.compile(
    r"""^(?:
        \s*\[(?:rank|default|RANK\ ?)\d+\]:?\s?              # torchrun / deepspeed: [rank3]: [default0]:
      | \s*\d{1,4}:\ +(?=\S)                                 # srun --label: "3: "
      | \s*\((?:[A-Za-z_]\w*\ )?pid=\d+(?:,\ ip=[\d.]+)?\)\s  # ray: (WorkerDict pid=8238)
      | \s*[IWEF]\d{4}\ [\d:.]+\s+\d+\ [\w./-]+:\d+\]\s?      # glog: E1122 10:01:02.123 12345 file.cc:123]
      | \s*\[[IWEF]\d{4}\ [\d:.]+\s+\d+\ [\w./-]+:\d+\]\s?    # [W1122 10:01:02.123 123 file.cpp:45]
      | \s*\[?\d{4}-\d\d-\d\d[ T][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\]?\s*  # [2026-11-22 10:01:02,123]
      | \s*\d\d/\d\d/\d{4}\ [\d:]+\s*                       # 11/22/2026 10:01:02
      | \s*-\s(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s-\s(?:[\w.]+\s-\s)?  # - WARNING - transformers.x -
      | \s*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\s*(?:[:|\]-]\s*)?(?=\S)  # ERROR: / ERROR |
      | \s*\[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)(?:\|[\w.:-]+)?\]\s*(?:[\d\-: ,]+>>\s*)?  # [INFO|x.py:12] 2026-.. >>
      | \s*\[(?:[\w.-]+\.py:\d+(?::[\w<>]+)?)\]\s*          # [trainer.py:123]
      | \s*[│┃|]\s                                          # rich traceback borders
      | \s*>(?=\s)\s?                                       # a markdown quote: "> RuntimeError: ..."
    )""",
    re.VERBOSE,
)


def normalise(line: str) -> str:
    """The message part of a log line: ANSI colours and launcher / logger prefixes removed."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    for _ in range(6):
        m = _PREFIX.match(line)
        if not m or not m.end():
            break
        line = line[m.end():]
    return line.strip().rstrip("│┃").rstrip()
