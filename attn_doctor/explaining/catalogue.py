"""The message catalogue: every message the attention stack's libraries can raise, warn or log about
attention, precision, kernels, builds and versions, read from their sources (benchmarks/catalogue/:
the sites, and the cause family each site's own check states), shipped as recipes/catalogue.jsonl.gz.

A line of the text is one of these messages when the literal parts of a site's message appear in it
in order (the placeholders' values in between); a line cut short (a paste stopped at the terminal's
width, a log truncated) still matches on the parts it holds when they are long enough, said with a
lower likelihood. Lookup goes through each entry's rarest word, so a line costs a few dictionary
reads and the regular expressions of the entries that share a word with it."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import gzip
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

CATALOGUE_NAME = "catalogue.jsonl.gz"
MIN_LITERAL = 12  # literal characters a match must cover: shorter texts are not recognisable
WHOLE_BELOW = 24  # a message with less literal text than this must be the line's whole message
START_BELOW = 48  # one with less than this must start where a message starts, not inside a sentence
CUT_MIN = 24  # a line cut short matches on its parts when they cover at least this many characters...
CUT_SHARE = 0.5  # ...and this share of the message's literal text
SQUEEZED_PARTS = 5  # a message known in another release's punctuation has at most this many parts...
SQUEEZED_PART_MIN = 4  # ...each at least this long
GAP = 300  # characters a placeholder's value may take
KEY_WORDS = 5  # the index key is the rarest of a message's first words
CUT_WORDS = 60  # words of a message a cut line is compared on
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
    error: bool = True  # the sites raise, assert or check it; False: they warn or log it


@dataclass(frozen=True)
class Hit:
    entry: Entry
    line: str
    covered: int  # literal characters the line holds
    complete: bool  # every part was found (else a line cut short)
    number: int = 0  # the line's number in the text, where known
    raised: bool = False  # read from the `raise` line of a traceback cut before its message


# what `_try` returns for a line that is the entry's message but whose two dtypes differ in no
# precision (float against double, Long against Float): no finding, and none of its rule either
_NOT_PRECISION = object()


_QUOTED = re.compile(r"^[\s>*_-]*`+|`+[\s.]*$")  # markdown's quote marks and backticks around a pasted message
# a traceback cut before its last line ends at the raise, whose message is written there
_RAISE = re.compile(r"""^\s*raise\s+[\w.]+\(\s*[rbfRBF]{0,2}(?P<q>'''|\"\"\"|'|")(?P<msg>.*?)(?P=q)""")
_FIELD = re.compile(r"\{[^{}]*\}")
# a message quoted inside the writer's own sentence (a page's '遇到"RuntimeError: ..."错误', “...”,
# 「...」), tried where the whole line is no message: the quoted words are the message, cut or whole
_QUOTE_MARKS = re.compile('["\u201c\u300c]')
_IN_PROSE = re.compile('"([^"\n]{%d,%d})"|\u201c([^\u201d\n]{%d,%d})\u201d|\u300c([^\u300d\n]{%d,%d})\u300d'
                       % ((CUT_MIN, MAX_LINE) * 3))
IN_PROSE_MAX = 3  # quoted runs tried in one line
# the source line Python prints under a warning, which follows the warning's own message line
_WARN_ECHO = re.compile(r"^\s*warnings\.warn(?:_explicit)?\(")
# the header Python's warnings module prints before a warning's message ("x.py:51: UserWarning: ")
_WARNED = re.compile(r"\.py:\d+: (?:\w+\.)*\w*Warning: ")
# Where a message starts in a normalised line: the line's start, after punctuation ("Error: ",
# "[rank0]: ", "- ", a quote), or after a log level's word. A short message inside a sentence
# ("PyTorch was not compiled with CUDA support") is another writer's sentence that holds its words.
_LEVELS = ("warning", "warn", "error", "info", "debug", "critical", "fatal", "notice")
_STARTS = "(?:^|(?<=[^a-z0-9_\\s])|(?<=[^a-z0-9_\\s] )%s)" % "".join("|(?<=\\b%s )" % w for w in _LEVELS)
_START_AT = re.compile(_STARTS)


_SENTENCE_END = re.compile(r"(?<![0-9])(?<!\be\.g)(?<!\bi\.e)(?<!\betc)[.!?](?=\s)")


@functools.lru_cache(maxsize=None)
def _headline(e: "Entry") -> float:
    """The length of the message's first sentence where its literal start holds one, followed by
    more of its own words (a title that quotes the headline of a longer notice: "[deepspeed] fp16
    dynamic loss scale overflow!"), else infinity: a line holding that whole sentence is the notice cut
    short. Only notices are read this way: a refusal's first sentence is often generic."""
    first = e.parts[0] if e.parts else ""
    m = _SENTENCE_END.search(first)
    return m.end() if m is not None and m.end() >= CUT_MIN else float("inf")


def _norm(text: str) -> str:
    # backticks anywhere: a release that marks names in its message (`torch.nn...`) and one that does
    # not, or a user who did, say the same
    return _SPACE.sub(" ", _QUOTED.sub("", text).replace("`", "")).strip().lower()


_NOT_ALNUM = re.compile(r"[^a-z0-9.<>=!]+|(?<![0-9])\.|\.(?![0-9])")


@functools.lru_cache(maxsize=256)  # one line is tried against many entries
def _squeeze(text: str) -> str:
    """Letters and digits only, with a number's dots and the comparison signs kept (1.13 is not
    11.3, != is not ==): a message's words whatever its punctuation and spacing."""
    return _NOT_ALNUM.sub("", text)


@functools.lru_cache(maxsize=256)
def _squeezed_starts(text: str) -> tuple[str, tuple[int, ...]]:
    """The squeezed text and, in it, the positions where a message can start in `text` (_START_AT):
    one pass over the line, however many entries are tried on it."""
    kept = [0] * (len(text) + 1)  # kept[i]: characters of text[:i] the squeeze keeps
    last = n = 0
    for m in _NOT_ALNUM.finditer(text):
        for i in range(last, m.start()):
            kept[i] = n
            n += 1
        for i in range(m.start(), m.end()):
            kept[i] = n
        last = m.end()
    for i in range(last, len(text) + 1):
        kept[i] = n
        n += 1
    return _squeeze(text), tuple(sorted({kept[s.start()] for s in _START_AT.finditer(text)}))


def _raised(line: str) -> Optional[str]:
    """The message written on a `raise X(f"...")` line, its fields as values; None for another line."""
    m = _RAISE.match(line)
    return _FIELD.sub("x", m.group("msg")) if m else None


class Catalogue:
    def __init__(self, entries: list[Entry]):
        self.entries = entries
        df = Counter(w for e in entries for w in set(_WORD.findall(" ".join(e.parts))))
        self._index: dict[str, list[int]] = {}
        for i, e in enumerate(entries):
            words = set(_WORD.findall(" ".join(e.parts)))
            if not words:
                continue
            # the rarest of the message's first words: a line cut short still holds them
            first = next((p for p in e.parts if len(p) >= 4 and _WORD.search(p)), None)
            pool = set(_WORD.findall(first)[:KEY_WORDS]) if first else words
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
                                     at=tuple(str(a) for a in row.get("at", ())[:4]), literal=literal,
                                     error=str(row.get("kind", "raise")) not in ("warn", "log")))
        return cls(entries)

    def _pattern(self, i: int, upto: int) -> re.Pattern:
        """The expression of entry i's first `upto` parts."""
        key = (i, upto)
        if key not in self._regex:
            parts = [p for p in self.entries[i].parts[:upto]]
            escaped = [re.escape(p) for p in parts if p]
            if upto == len(self.entries[i].parts) and len(parts[-1]) > 1 and parts[-1][-1:] in (".", "!"):
                # a paste that drops the closing stop, where the message ends: not the first words of a longer sentence
                escaped[-1] = re.escape(parts[-1][:-1]) + r"(?:[.!]|(?=\s*(?:$|[\"'`)\]])))"
            body = ("(.{0,%d}?)" % GAP).join(escaped)
            if parts and not parts[0]:
                body = "(.{0,%d}?)" % GAP + body  # the value the message starts with
            if upto == len(self.entries[i].parts) and parts and not parts[-1]:
                body += "(.{0,%d})" % GAP  # the value the message ends with
            if self.entries[i].literal < WHOLE_BELOW:
                # a short message ("not implemented") is recognised only as the line's whole message
                body = r"(?:^|[:\]] )\s*%s\s*[.!]?\s*$" % body
            self._regex[key] = re.compile(body)
        return self._regex[key]

    def match(self, line: str) -> Optional[Hit]:
        """The catalogue entry this line is a message of, or None."""
        if _WARN_ECHO.match(line):
            return None
        raised = _raised(line[:MAX_LINE])
        best = self._best(_norm(raised if raised is not None else line[:MAX_LINE]), line, raised)
        if best is None and raised is None and _QUOTE_MARKS.search(line):
            for m in itertools.islice(_IN_PROSE.finditer(line[:MAX_LINE]), IN_PROSE_MAX):
                best = self._best(_norm(next(g for g in m.groups() if g is not None)), line, None)
                if best is not None:
                    break
        return best

    def _best(self, text: str, line: str, raised: Optional[str]) -> Optional[Hit]:
        hits: list[Hit] = []
        judged: set[str] = set()  # rules whose message the dtype judge found no precision mismatch in
        for word in set(_WORD.findall(text)):
            for i in self._index.get(word, ()):
                hit = self._try(i, text, line)
                if hit is _NOT_PRECISION:
                    judged.add(self.entries[i].rule)
                elif hit is not None:
                    hits.append(dataclasses.replace(hit, complete=False, raised=True) if raised is not None else hit)
        best: Optional[Hit] = None
        warned = _WARNED.search(line[:MAX_LINE]) is not None
        for hit in hits:
            # a shorter message of the same rule inside the judged one (another library's "mat1 and
            # mat2 must have the same dtype" in torch's "..., but got Long and Float") is judged with it
            if hit.entry.rule in judged:
                continue
            # words a library raises, printed here by Python's warnings as another library's warning
            # (flute's "utils.py:51: UserWarning: Only CUDA devices are supported"): not that raise
            if warned and hit.entry.error and hit.entry.family != "harmless":
                continue
            if best is None or (hit.complete, hit.covered) > (best.complete, best.covered):
                best = hit
        return best

    def _try(self, i: int, text: str, line: str) -> "Optional[Hit] | object":
        e = self.entries[i]
        n = len(e.parts)
        anchored = WHOLE_BELOW <= e.literal < START_BELOW and bool(e.parts[0])
        if anchored:
            # where a message can start (the pattern keeps its literal start, which the regex engine
            # scans for quickly; the place is checked after)
            m = next((f for f in self._pattern(i, n).finditer(text) if _START_AT.match(text, f.start())), None)
        else:
            m = self._pattern(i, n).search(text)
        if m is not None:
            if _packed_weight(e, m.groups()):
                return _NOT_PRECISION
            return Hit(entry=e, line=line, covered=e.literal, complete=True)
        # a line cut short (a terminal's width, a truncated log): the line ends inside the message,
        # after its first parts and some leading words of the next
        if e.literal < 2 * CUT_MIN:
            return None  # a short message is recognised whole or not at all
        m = self._cut_pattern(i).search(text)
        if m is not None:
            covered = m.end("tail") - m.start() - len(m.group("tail")) - sum(len(v or "") for k, v in m.groupdict().items()
                                                                           if k != "tail")
            covered -= len(m.group(0)) - len(m.group(0).lstrip(" :]"))  # the prefix's separator
            if covered >= CUT_MIN and (covered >= CUT_SHARE * e.literal or (e.family == "harmless" and covered >= _headline(e))):
                return Hit(entry=e, line=line, covered=covered, complete=False)
        # the whole message in another release's punctuation (a comma dropped, names quoted): its
        # letters and digits, in order, with the values between its parts (a message long enough to
        # be cut, as above)
        squeezed = self._squeezed_pattern(i)
        if squeezed is None:
            return None
        if anchored:  # where a message can start, as above
            squeezed_text, starts = _squeezed_starts(text)
            m = next((f for f in (squeezed.match(squeezed_text, q) for q in starts) if f is not None), None)
        else:
            m = squeezed.search(_squeeze(text))
        if m is not None:
            return _NOT_PRECISION if _packed_weight(e, m.groups()) else Hit(entry=e, line=line, covered=e.literal, complete=True)
        return None

    def _squeezed_pattern(self, i: int) -> Optional[re.Pattern]:
        """The message's letters and digits with its values between: None where a part is too short
        to anchor (a one-letter part between two values backtracks at every letter of a long line)."""
        key = (i, -2)
        if key not in self._regex:
            parts = [_squeeze(p) for p in self.entries[i].parts]
            inner = [p for p in parts if p]
            if not inner or len(parts) > SQUEEZED_PARTS or any(len(p) < SQUEEZED_PART_MIN for p in inner):
                self._regex[key] = None
            else:
                body = ("(.{0,%d}?)" % GAP).join(re.escape(p) for p in inner)
                self._regex[key] = re.compile(body)
        return self._regex[key]

    def _cut_pattern(self, i: int) -> re.Pattern:
        """The message's literal text as nested optional words, anchored at the line's end: the
        line holds a leading run of the message and stops (a value between parts is let through)."""
        key = (i, -1)
        if key not in self._regex:
            words = []
            for k, part in enumerate(self.entries[i].parts):
                if k:
                    words.append(None)  # a placeholder's value
                words += part.split()
            words = words[:CUT_WORDS]
            while words and words[-1] is None:
                words.pop()
            # a value is only let through with the word after it: a cut inside a value is not a match
            # (or the line ends inside the value: "query.dtype: struct c10")
            steps, pending = [], ""
            for n, w in enumerate(words[1:]):
                if w is None:
                    pending = "(?P<v%d>.{0,%d}?)" % (n, GAP)
                    continue
                step = pending + r"\s*" + re.escape(w)
                if pending:
                    step = r"(?:%s|(?P<c%d>\s+\S+(?:\s+\S+){0,2}?)(?=\s*$))" % (step, n)
                steps.append(step)
                pending = ""
            body = ""
            for step in reversed(steps):
                body = "(?:%s%s)?" % (step, body)
            # the message starts the line or follows its prefix ("RuntimeError: ", "[rank0]: "); the
            # tail (the cut word) is never counted
            self._regex[key] = (re.compile(r"(?:^|[:\]] )\s*" + re.escape(words[0]) + body + r"(?P<tail>\s*\S{0,20})\s*$")
                                if words and words[0] else re.compile(r"(?!)"))
        return self._regex[key]

    def first(self, lines: Iterable[str], numbers: Iterable[int] = ()) -> Optional[Hit]:
        """The best hit among the lines: a failure's message before a library's notice, a complete
        message before a cut one, the longer message first, the last line of the text among equals
        (where the final error is)."""
        best: Optional[Hit] = None

        def rank(h: Hit) -> tuple:
            return h.entry.family != "harmless", h.complete, h.covered

        for line, number in zip(lines, itertools.chain(numbers, itertools.repeat(0))):
            hit = self.match(line)
            if hit is not None and number:
                hit = dataclasses.replace(hit, number=number)
            if hit is not None and (best is None or rank(hit) >= rank(best)):
                best = hit
        return best


def _types_the_same(parts) -> bool:
    """torch's convolution: "Input type (X) and bias type (Y) should be the same", its parts around
    two types and the words that they must be the same."""
    return (len(parts) >= 3 and sum(p.rstrip().endswith("type (") for p in parts[:-1]) >= 2
            and parts[-1].lstrip(") ").startswith("should be the same"))


def _packed_weight(entry: Entry, values) -> bool:
    """Two dtypes that must match and do not differ in precision (one dtype on two devices, or a
    packed 8-bit weight against a float op): AD651's guard, which no precision family explains;
    nor does an expected and a found dtype of which neither is a half type (float against double:
    the user's data, not the stack's precision)."""
    from ..rules.analyzers import dtypes_differ, is_half

    said = [v.strip(" .,:'\"") for v in values if v and v.strip()]
    if any(p.startswith(("expected scalar type", "expected dtype")) for p in entry.parts):
        return len(said) == 2 and not any(is_half(v) for v in said)
    if not (any("same dtype" in p or "same type" in p or "same scalar type" in p or "dtypes match" in p for p in entry.parts)
            or _types_the_same(entry.parts)):
        return False
    return len(said) == 2 and dtypes_differ({"a_dtype": said[0], "b_dtype": said[1]}, [], []) is None


# where a check with no message of its own prints its condition
_CONDITION = re.compile(
    r"Expected (?P<a>.{3,300}?) to be true, but got false"
    r"|Check failed: \(?(?P<b>.{3,300}?)\)? is false"
    r"|Assertion [`'\"](?P<c>.{3,300}?)['`\"] failed"
    r"|'(?P<d>.{3,300}?)' failed(?::|$)"
    # torch 1.0's AT_ASSERTM, behind the exception's name
    r"|^(?:\w+(?:Error|Exception): )?(?P<e>.{3,300}?) ASSERT FAILED at\b")


def failed_condition(line: str) -> Optional[str]:
    """The condition a failed check prints, or None."""
    m = _CONDITION.search(line[:MAX_LINE])
    if m is None:
        return None
    return next(g for g in m.groups() if g)


def condition_rule(condition: str, table) -> Optional[str]:
    """The rule the condition's words name (the catalogue_conditions table), or None."""
    for pattern, rule in table:
        if re.search(pattern, condition):
            return rule
    return None


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


def loaded(recipes: "Recipes") -> Optional["Catalogue"]:
    """The message catalogue shipped beside the recipes, loaded once per recipe set; None where the
    folder has none (someone's own --recipes) or it cannot be read."""
    cache = recipes.__dict__.setdefault("_explain_scanners", {})
    if "catalogue" not in cache:
        from pathlib import Path

        folders = {Path(p).parent for p in recipes.sources.values()}
        paths = [f / CATALOGUE_NAME for f in folders if (f / CATALOGUE_NAME).is_file()]
        try:
            cache["catalogue"] = Catalogue.load(paths[0]) if len(paths) == 1 else None
        except (OSError, ValueError, KeyError, TypeError, EOFError):
            cache["catalogue"] = None  # a damaged catalogue: explain without it
    return cache["catalogue"]


def finding(scan, recipes: "Recipes", live, target, named: set[str], among_read: bool = False):
    """The finding of the library message among the lines no signature read (the message
    catalogue), else of the condition a failed check printed, or None."""
    if not scan.candidate_lines and not scan.hits and not scan.paste_lines:
        return None
    catalogue = loaded(recipes)
    if catalogue is None:
        return None

    # lines a signature read without a finding (the support matrix could not judge them) are
    # messages too
    # (among_read: the lines generic readings took, too)
    unread = [(e.text, e.line) for hits in scan.hits.values() if among_read or hits.signature.rule not in named
              for e in hits.evidence]
    # a line a finding already explains (a harmless notice's included) is not read again
    taken = {e.text for hits in scan.hits.values() if hits.signature.rule in named and not among_read for e in hits.evidence}
    pairs = [p for p in unread + list(zip(scan.candidate_lines, scan.candidate_numbers)) if p[0] not in taken]
    lines = [t for t, _ in pairs]
    numbers = [n for _, n in pairs]
    hit = catalogue.first(lines, numbers)
    if hit is None or not hit.complete:
        # a message hard-wrapped over lines: its first line with those that continue it
        wrapped = [(w, n) for (t, n), joins in zip(zip(scan.candidate_lines, scan.candidate_numbers), scan.candidate_wrapped)
                   if t not in taken for w in joins if not any(e in w[len(t):] for e in taken)]
        joined = catalogue.first([w for w, _ in wrapped], [n for _, n in wrapped]) if wrapped else None
        if joined is not None and (hit is None or (joined.complete, joined.covered) > (hit.complete, hit.covered)):
            hit = joined
    if hit is None and scan.paste_lines:
        # a short paste whose lines carry no error or warning word (an issue's title quoting a notice):
        # read only as a library's notice, since a plain sentence can hold a refusal's words
        rest = [(t, n) for t, n in scan.paste_lines if t not in taken]
        hit = catalogue.first([t for t, _ in rest], [n for _, n in rest])
        if hit is None:  # a notice printed over lines (transformers' "Some weights ... / You should probably TRAIN ...")
            joins = _paste_joins(rest)
            hit = catalogue.first([w for w, _ in joins], [n for _, n in joins]) if joins else None
        if hit is not None and hit.entry.family != "harmless":
            hit = None
    if hit is not None:
        if hit.entry.rule in named:
            return None
        library, site = where(hit.entry)
        how = ("its message" if hit.complete else
               "the raise that writes its message (the traceback stops before the message itself)" if hit.raised else
               "the start of its message (the line is cut short)")
        rule = recipes.get(hit.entry.rule)
        family = (rule.name if rule is not None and hit.entry.family.startswith("rule:") else hit.entry.family)
        reason = (f"the line is {how} as {library} raises it at {site}, read from its source: the check there states "
                  f"the cause ({family})")
        refusal = _inert(hit.line)
        from .report import Site

        likelihood = "confirmed" if hit.complete else "possible"
        statuses = recipes.data.get("catalogue_statuses", {})
        if rule is not None and rule.cause == "cuda-call" and any(
                re.search(p, hit.line) for p in statuses.get("not_the_stack", [])):
            likelihood, reason = "unlikely", statuses.get("reason", reason)
        return _site_match(rule, scan, live, target, {"library": library, "site": site, "refusal": refusal},
                           hit.number, likelihood, reason,
                           Site(library=library, at=list(hit.entry.at), family=hit.entry.family, line=refusal, complete=hit.complete))
    table = recipes.data.get("catalogue_conditions", {}).get("rules", [])
    for line, number in reversed(list(zip(lines, numbers))):
        condition = failed_condition(line)
        rule_id = condition_rule(condition, table) if condition else None
        if rule_id is None or rule_id in named or recipes.get(rule_id) is None:
            continue
        refusal = _inert(line)
        reason = f"a check failed with no message of its own; its condition `{_inert(condition)}` states the constraint"
        return _site_match(recipes.get(rule_id), scan, live, target,
                           {"library": "a library", "site": f"its check `{_inert(condition)}`", "refusal": refusal},
                           number, "possible", reason, None)
    return None


def _paste_joins(lines: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Each line of a short paste joined with the lines right after it that continue it, as a scan
    joins a log's wrapped lines (scan.continued), numbered by its first line; a gap in the numbers (a
    blank line, a line a signature read) ends a message."""
    from .scan import continued

    out = []
    for i, (text, number) in enumerate(lines):
        following = itertools.takewhile(lambda pair: pair[1][1] == number + 1 + pair[0], enumerate(lines[i + 1:]))
        out.extend((joined, number) for joined in continued(text, ((line, True) for _, (line, _) in following)))
    return out


def _inert(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _site_match(rule, scan, live, target, captures: dict, number: int, likelihood: str, reason: str, site):
    """The finding of a rule read from a library's message or check (its captures: library, site,
    refusal)."""
    from .matched import rule_match
    from .report import EvidenceLine

    if rule is None:
        return None
    return rule_match(rule, live if live is not None else scan.versions.to_facts(), target, captures=captures, priority=-5,
                      likelihood=likelihood, reason=reason, evidence=[EvidenceLine(line=number, text=captures["refusal"])],
                      site=site)
