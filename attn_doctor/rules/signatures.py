"""Signatures: compiled once, each with the literal substrings ("anchors") a line must contain
before the regular expression is worth running. Standard library only: the loader validates
recipes with it, and `check --quick` must stay fast."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Optional

try:  # Python 3.11+
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
    from re import _constants as _sre_c  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - 3.10
    import sre_constants as _sre_c  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

# A message is recognised whatever its case: applications re-word a library's refusal in lower case
# ("flashattention only supports ampere gpus or newer"), web UIs shout it. Anchors are searched in
# a lower-cased copy of the input (scan.py), the expressions run case-insensitively.
MATCH_FLAGS = re.IGNORECASE
MIN_ANCHOR = 4  # a shorter mandatory literal would let too many unrelated lines through
WRAP_SAFE = 6  # an anchor this long or longer is searched as its two halves (see split_anchors)


# Named fragments a signature may use as <<name>>: one wording of a kind of statement, written once
# and read for its facts (named groups) by explaining/stated.py. Each holds named groups, so a
# pattern uses each fragment once.
_ARCH = r"(?:kepler|maxwell|pascal|volta|turing|ampere|ada(?:[- ]lovelace)?|lovelace|hopper|blackwell)"
# a capability as written (8.0, 80, sm_90, 120); never a longer number (a file's line: "logging.cc:361")
_CC = r"(?:sm_?|sm )?(?:1[0-2]\d|\d{1,2})(?:\.\d)?(?!\d)"
# "cc" as an abbreviation of compute capability ("cc 8.0", "cc8.0"), never a file's extension ("logging.cc")
_CC_WORD = r"(?<![.\w])cc(?![a-z_])"
_VERB = (r"(?:requires?|required|needs?|needed|only supports?|(?:is |are )?only supported|supported only"
         r"|only (?:works|runs|available)|must (?:be|have|run)|minimum|at least)")
_HALF = r"(?:torch\.)?(?:float16|bfloat16|fp16|bf16|half|bfloat|float8\w*|fp8\w*)"
# a GPU architecture's major version, and a list of them ("10.x and 11.x"; "SM 10.x or SM 12.x")
_MAJOR = r"(?:1[0-2]|[3-9])"
_MAJORS = _MAJOR + r"\.x(?:(?:, | and | or |/)" + _MAJOR + r"\.x)*"
_SM_MAJORS = _MAJOR + r"\.x(?:(?:, | and | or |/)(?:sm\s*|sm_)?" + _MAJOR + r"\.x)*"
_ANY_FLOAT = r"(?:torch\.)?(?:float16|bfloat16|fp16|bf16|half|float32|float64|fp32|fp64|float|double)\b"
_HALVES = _HALF + r"(?:\s*(?:,|or|and|/|\|)\s*(?:torch\.)?" + _HALF + r")+"
FRAGMENTS = {
    # a stated capability or architecture floor: "requires compute capability 8.9 or higher",
    # "only supports Ampere GPUs or newer", "sm_90 or newer", "capability below 8.0 are not supported"
    "floor": (
        r"(?:\b" + _VERB + r"\b(?:(?!\.\s+(?-i:[A-Z]))[^\n]){0,60}?(?:compute[ _]capability|capability|" + _CC_WORD + r"|\bsm_?|\barch)\s*(?:of\s+|is\s+|=\s*|:\s*)?"
        r"(?:at least\s+|>=?\s*|≥\s*|greater than\s+|higher than\s+)?(?P<need_cc>" + _CC + r")(?![\d.]*\s*(?:GB|GiB|MB))"
        r"|(?:compute[ _]capability|capability|" + _CC_WORD + r"|\bsm_?)\s*(?:of\s+)?(?:>=?\s*|≥\s*)?(?P<need_cc2>" + _CC + r")\+?\s*"
        r"(?:or (?:higher|newer|above|later|greater)\s+)?(?:is |are )?(?:required|needed)"
        r"|(?:compute[ _]capability|capability)\s*(?:below|less than|lower than|<)\s*(?P<below_cc>" + _CC + r")[^\n]{0,30}?(?:not supported|unsupported)"
        # vLLM's "Min capability: 80. Current capability: 75."
        r"|\bmin(?:imum)?\.?\s+(?:compute[ _])?capability\s*(?:is\s*|of\s*|=\s*|:\s*)(?P<need_cc3>" + _CC + r")\b"
        r"|\b" + _VERB + r"\s+(?:(?:in|for|with|by)\s+)?(?:an?\s+)?(?:nvidia\s+)?(?:gpus?\s+(?:of|with)\s+)?(?:the\s+)?(?P<need_arch>" + _ARCH + r")"
        r"(?:\s+(?:architecture|arch|gpus?|cards?|series|generation))?\s*(?:\(?sm_?\d+\)?\s*)?(?:or|and|\+)\s*(?:newer|later|above|higher|up|beyond)\b"
        r")"
    ),
    # the one architecture (or the few) a kernel is built for, as a major version: "This kernel requires
    # 10.x architecture", "Only SM 10.x and 11.x are supported", "requires an SM 9.x GPU"
    "only_arch": (
        r"(?:\b(?:requires?|needs?|supports? only|only supports?|(?:is |are )?only supported on)\s+(?:an?\s+)?"
        # a major is an architecture only with its word: "requires 12.x" alone is a CUDA or a library version
        r"(?:(?:sm\s*|sm_)(?P<only_majors>" + _SM_MAJORS + r")\b"
        r"|(?P<only_majors4>" + _MAJORS + r")\s*(?:architectures?|arch|GPUs?|devices?)\b)"
        r"|\bonly\s+(?:sm\s*|sm_)(?P<only_majors2>" + _SM_MAJORS + r")\s+(?:is|are)\s+supported"
        r"|\bonly supported on [^\n]{0,40}?\bcompute capability\s*(?:==?|equal to)\s*\[?"
        r"(?P<only_exact>" + _MAJOR + r"\.\d(?:\s*,\s*" + _MAJOR + r"\.\d)*)\b)"
    ),
    # what the same sentence says the GPU has (optional): "but your GPU has compute capability 8.6"
    "have": (
        r"(?:[^\n]{0,80}?\b(?:your|the|current|this|detected|found|got|but|has|have|is)\b[^\n]{0,40}?"
        r"(?:(?:capability|\bsm_?|" + _CC_WORD + r")\s*(?:is\s*|of\s*|=\s*|:\s*)?\(?(?P<have_cc>\d{1,3}(?:\.\d|, ?\d)?)\)?"
        r"|(?:gpu|device|card) (?:has|is) (?:sm_?)?(?P<have_cc2>\d{1,2}\.\d)))?"
    ),
    # a kernel's dtype list: "must be float16 or bfloat16", "only supports fp16 and bf16",
    # "expected query dtype to be one of [torch.float16, torch.bfloat16]"
    "half_only": (
        r"(?:(?:must|should|needs? to|has to|have to|is required to|are required to)\s+(?:be|have)\s+(?:in\s+|of\s+)?(?:the\s+)?"
        r"(?:(?:same\s+)?(?:dtype|type|data ?type|precision)s?\s*)?(?:of\s+|:\s*)?(?:either\s+)?(?P<need_dtypes>" + _HALVES + r")"
        r"|only supports?\s+(?:the\s+)?(?:dtypes?\s+|data ?types?\s+)?(?P<need_dtypes2>" + _HALVES + r")"
        r"|(?:expected|expects|supports? only|supported dtypes?(?: are| is)?:?)\s+(?:query |q |inputs? |tensors? )?(?:dtypes?\s+)?"
        r"(?:to be\s+)?(?:one of\s+)?[\[{(]?(?P<need_dtypes3>" + _HALVES + r"))"
    ),
    # the floating dtypes an op is written for, float or half: "view_as_complex is only supported for float and
    # double tensors", "X only supports float32 and float64"
    "dtype_list": (
        r"(?:(?:is |are )?only supported for|only supports?|(?:must|should) be(?: of)?(?: type)?|supports? only)\s+(?:the\s+)?"
        r"(?P<need_dtypes4>" + _ANY_FLOAT + r"(?:\s*(?:,|or|and|/)\s*(?:and\s+|or\s+)?" + _ANY_FLOAT + r")+)(?:\s+(?:tensors?|inputs?|dtypes?))?"
    ),
    # a half dtype the same sentence says it got: "but got a tensor of scalar type: Half"
    "have_half": (
        r"[^\n]{0,60}?\b(?:got|found|received|passed)\b[^\n]{0,30}?(?:scalar type|dtype|type)\s*:?\s*"
        r"(?P<dtype>(?:torch\.)?(?:float16|bfloat16|half|bf16|fp16))\b"
    ),
    # what the same sentence says the tensors are (optional): "got torch.float32"
    "have_dtype": (
        r"(?:[^\n]{0,60}?\b(?:got|found|received|passed|is|was|are|were)\s*:?\s*(?:dtype\s*)?(?:=\s*)?"
        r"(?P<have_dtype>(?:torch\.)?(?:float32|float64|fp32|float|double|float16|bfloat16|half|int\d+)\b))?"
    ),
}
_FRAGMENT = re.compile(r"<<(\w+)>>")


def expand(pattern: str) -> str:
    """A pattern with its <<fragments>> written out."""
    def one(m: re.Match) -> str:
        if m.group(1) not in FRAGMENTS:
            raise SignatureError(f"{pattern!r}: unknown fragment <<{m.group(1)}>> (known: {', '.join(sorted(FRAGMENTS))})")
        return FRAGMENTS[m.group(1)]

    return _FRAGMENT.sub(one, pattern) if "<<" in pattern else pattern


class SignatureError(ValueError):
    """A signature that cannot be used: the message says why."""


class LazyPattern:
    """A regular expression compiled when first used: a log meets a few dozen of the signatures'
    anchors, and compiling all of them costs more than scanning most logs. Only made for a pattern
    already parsed once (its anchors were found), so the compile cannot fail."""

    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern, self.flags, self._compiled = pattern, flags, None

    def compiled(self) -> re.Pattern:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def search(self, *args):
        return self.compiled().search(*args)

    def match(self, *args):
        return self.compiled().match(*args)

    def finditer(self, *args):
        return self.compiled().finditer(*args)

    def __getattr__(self, name):
        return getattr(self.compiled(), name)


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
    guard: Optional[str] = None
    joinable: bool = True
    facts: Optional[str] = None


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


def compile_signature(rule_id: str, signature, known: Optional[tuple] = None) -> CompiledSignature:
    """A recipe signature (a string, or a Signature table) compiled and checked; with `known` (its
    (anchors, context anchors) as an earlier compile of the same text found them), its expressions
    compiled only when first used."""
    if isinstance(signature, str):
        pattern, severity, context, note, component, priority, decisive = signature, None, None, None, None, 0, True
    else:
        pattern, severity, context, note = signature.pattern, signature.severity, signature.context, signature.note
        component, priority, decisive = signature.component, signature.priority, signature.decisive
    analyzer = None if isinstance(signature, str) else signature.analyzer
    guard = None if isinstance(signature, str) else signature.guard
    facts = None if isinstance(signature, str) else signature.facts
    if analyzer is not None or guard is not None or facts is not None:
        from .analyzers import ANALYZERS, FACT_JUDGEMENTS, GUARDS

        if analyzer is not None and analyzer not in ANALYZERS:
            raise SignatureError(f"unknown analyzer {analyzer!r} (known: {', '.join(sorted(ANALYZERS))})")
        if guard is not None and guard not in GUARDS:
            raise SignatureError(f"unknown guard {guard!r} (known: {', '.join(sorted(GUARDS))})")
        if facts is not None and facts not in FACT_JUDGEMENTS:
            raise SignatureError(f"unknown facts judgement {facts!r} (known: {', '.join(sorted(FACT_JUDGEMENTS))})")
    written = expand(pattern)
    joinable = True if isinstance(signature, str) else signature.join
    if known is not None:
        return CompiledSignature(rule_id, pattern, LazyPattern(written, MATCH_FLAGS), list(known[0]), severity,
                                 LazyPattern(context, MATCH_FLAGS) if context else None, list(known[1]), note,
                                 LazyPattern(component) if component else None, priority, decisive, analyzer,
                                 guard, joinable, facts)
    try:
        regex = re.compile(written, MATCH_FLAGS)
    except re.error as exc:
        raise SignatureError(f"invalid regular expression {pattern!r}: {exc}") from None
    given = None if isinstance(signature, str) else signature.anchors
    if given is not None:
        missing = [a for a in given if not a.strip() or a.lower() not in written.lower()]
        if not given or missing:
            raise SignatureError(f"{pattern!r}: anchors {missing or given!r} are not literals of the pattern")
        anchors = sorted({a.strip() for a in given})
    else:
        anchors = split_anchors(anchors_of(written))
    compiled_context, context_anchors = None, []
    if context:
        try:
            compiled_context = re.compile(context, MATCH_FLAGS)
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
                             compiled_component, priority, decisive, analyzer, guard, joinable, facts)


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


def compile_rules(rules, known: Optional[dict] = None) -> list[CompiledSignature]:
    """Every signature of `rules`, compiled and checked; with `known` (what anchors_known returned
    for the same signatures' text), their expressions compiled only when first used."""
    sigs = [(rule.id, sig) for rule in rules for sig in rule.signatures]
    entries = (known or {}).get("anchors")
    if not isinstance(entries, list) or len(entries) != len(sigs) or not all(_well_formed(e) for e in entries):
        entries = [None] * len(sigs)
    return [compile_signature(rule_id, sig, tuple(e) if e else None) for (rule_id, sig), e in zip(sigs, entries)]


def _well_formed(entry) -> bool:
    return (isinstance(entry, list) and len(entry) == 2
            and all(isinstance(part, list) and all(isinstance(a, str) and a for a in part) for part in entry)
            and bool(entry[0]))


def anchors_known(compiled: list[CompiledSignature]) -> dict:
    """The anchors of compiled signatures, to give compile_rules the next time."""
    return {"anchors": [[list(c.anchors), list(c.context_anchors)] for c in compiled]}


def signatures_key(rules) -> str:
    """A digest of every signature's text (and this Python's, whose parser found the anchors): the
    key under which their anchors are kept."""
    import hashlib
    import json
    import sys

    parts = []
    for rule in rules:
        for sig in rule.signatures:
            if isinstance(sig, str):
                parts.append([rule.id, sig])
            else:
                parts.append([rule.id, sig.pattern, sig.context, sig.component, sig.anchors])
    doc = [sys.version, sorted(FRAGMENTS.items()), MIN_ANCHOR, WRAP_SAFE, parts]
    return hashlib.sha256(json.dumps(doc, default=str).encode()).hexdigest()


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


# Typographic and full-width punctuation (a paste through a chat, a document or a Chinese or
# Japanese input method) as the ASCII a message is written in.
_PUNCTUATION = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "：": ": ", "，": ", ", "（": "(", "）": ")",
                              "；": "; ", "。": ". ", "\u00a0": " ", "\u3000": " ", "\t": " "})
# the spaces around a full-width colon, comma, semicolon or full stop: its ASCII form brings its own
_FULLWIDTH_SPACED = re.compile(r"[ \t\u3000]+(?=[：，；。])|(?<=[：，；。])[ \t\u3000]+")
_SPACES = re.compile(r" {2,}")
_ENTITY = re.compile(r"&(?:quot|amp|lt|gt|apos|nbsp|#\d{2,4}|#x[0-9a-fA-F]{2,4});")
_MD_ESCAPE = re.compile(r"\\([_*`\[\]#])")
# a drive letter or a UNC share: the line's backslashes are a path's (D:\\x\\__init__.py), not markdown's
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\|\\\\[\w.-]+\\")
_MARKUP = re.compile(r"`+|\*\*|__(?=\w)|(?<=\w)__")


def without_ansi(line: str) -> str:
    """A log line with its ANSI colours and cursor codes removed, nothing else changed."""
    return _ANSI.sub("", line) if "\x1b" in line else line


def shown(line: str) -> str:
    """A log line as evidence shows it: ANSI colours and launcher / logger prefixes removed,
    the words left as written."""
    line = without_ansi(line)
    for _ in range(6):
        m = _PREFIX.match(line)
        if not m or not m.end():
            break
        line = line[m.end():]
    return line.strip().rstrip("│┃").rstrip()


def normalise(line: str) -> str:
    """The message part of a log line, as signatures read it: what `shown` keeps, with
    typographic punctuation as ASCII and runs of spaces as one."""
    return tidied(shown(line))


def tidied(line: str) -> str:
    """A line `shown` already cleaned, with typographic punctuation as ASCII and runs of spaces as one."""
    if "&" in line and _ENTITY.search(line):
        line = html.unescape(line)  # a message copied from a web page's source: &quot;Half&quot;, &#x27;
    if not line.isascii() or "\t" in line:
        line = _FULLWIDTH_SPACED.sub("", line).translate(_PUNCTUATION)
    if '\\"' in line:
        line = line.replace('\\"', '"')  # a message quoted inside JSON (an API's or a tool's "message": "...")
    if "\\'" in line:
        line = line.replace("\\'", "'")  # ... or inside a Python repr of a dict or an exception ({'message': '... for \\'Half\\''})
    if "\\" in line and _MD_ESCAPE.search(line) and not _WINDOWS_PATH.search(line):
        line = _MD_ESCAPE.sub(r"\1", line)  # markdown's source escapes (a Reddit or GitHub post as stored): CXXABI\_1.3.15, \[rank0\]
    if "  " in line:
        line = _SPACES.sub(" ", line)
    return line.strip()


def unmarked(text: str) -> str:
    """A line without markdown's code and bold marks, for a second try at matching: a message
    quoted in prose (`flash_attn` seems to be not installed) is the message itself."""
    return _MARKUP.sub("", text) if ("`" in text or "**" in text or "__" in text) else text
