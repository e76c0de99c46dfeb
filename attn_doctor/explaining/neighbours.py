"""The known case a text resembles, when no family matched it: a similarity search (rapidfuzz) over
the key lines of the corpus of real failures (tests/corpus, shipped as recipes/known_cases.json.gz),
negatives and harmless texts included. A text whose nearest case is a negative, or not near enough,
resembles nothing: the threshold is calibrated on the corpus's negatives (benchmarks/
calibrate_neighbours.py), so that an unrelated failure raises no alarm.

Words are compared after the facts that differ between two reports of one failure are blanked
(paths, numbers, hex, quoted names), and two lines count as alike only where they name the same
things (a library, a dtype, a kind of failure): the facts of the text, not only its wording."""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

INDEX_NAME = "known_cases.json.gz"
KEY_LINES = 3  # lines of a case kept for the search: its last error lines
LINE_CHARS = 300
# The score a nearest line needs (0-100) and its lead over the nearest negative: calibrated by
# benchmarks/calibrate_neighbours.py on the corpus, leave-one-out.
THRESHOLD = 85.0
MARGIN = 10.0
AGREE = 3  # cases within MARGIN of the nearest that must name its cause

_ERRORISH = re.compile(
    r"(?i)error|exception|failed|fails|not supported|unsupported|requires?\b|cannot|can't|could not|not found|"
    r"not installed|not available|no module|undefined symbol|\bnan\b|out of memory|warning|assert|refus|invalid|"
    r"incompatible|mismatch|abort"
)
# (a bare library name, libcudart.so.12, is no path: which library is missing is the fact that matters)
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.@+-]+){2,}[\\/]?|(?<!\S)\S*[\\/][^\s\\/]*\.so\b|\S+\.(?:py|cpp|cu|h|hpp|whl)\b(?::\d+)?")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,}\b")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SPACE = re.compile(r"\s+")
# What a line is about: libraries, dtypes, kinds of failure. Two lines are alike only when they
# share what they name; a line that names none of these is compared on its words alone.
_TERMS = re.compile(
    r"(?i)\b(flash[-_ ]?attn\w*|flash[-_ ]?attention\w*|xformers|triton|sage_?attn\w*|sageattention|flashinfer|vllm|"
    r"sdpa|scaled_dot_product_attention|cudnn|cublas|bf16|bfloat16|fp16|float16|half|fp8|float8\w*|fp32|float32|"
    r"nan|inf|out of memory|oom|undefined symbol|glibc|cuda|rocm|hip|mps|compute capability|sm_?\d+|ampere|hopper|"
    r"volta|turing|head[_ ]?dim\w*|mask|autocast|no module|kernel image|ptxas|deepspeed|accelerate|peft|"
    r"transformers|diffusers|unsloth|liger|fla\b|mamba\w*|apex|bitsandbytes|lib[a-z0-9_+-]+(?:\.[a-z0-9]+)*?\.so)\b"
)


def normalised(line: str) -> str:
    """A line with the facts that differ between two reports of one failure blanked."""
    line = _PATH.sub(" P ", line)
    line = _HEX.sub(" H ", line)
    line = _NUMBER.sub("0", line)
    return _SPACE.sub(" ", line).strip().lower()[:LINE_CHARS]


def terms(line: str) -> frozenset[str]:
    return frozenset(re.sub(r"[-_ ]", "", t.lower()) for t in _TERMS.findall(line))


# The dtypes a line states, each under one name: two messages that state other dtypes ("Float and
# BFloat16" against "BFloat16 and Byte", a quantised weight) are other failures however alike the words.
_DTYPE_WORDS = re.compile(r"(?i)\b(?:torch\.)?(float(?:16|32|64)?|bfloat16|bf16|fp16|fp32|half|double|byte|uint8|"
                          r"char|int(?:8|16|32|64)?|long|short|bool)\b")
_DTYPE_NAME = {"float": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16", "half": "float16",
               "bf16": "bfloat16", "float64": "float64", "double": "float64", "byte": "uint8", "char": "int8",
               "int": "int32", "long": "int64", "short": "int16"}


# the names a line quotes (a module, an attribute, an argument), by their parts: where two lines quote
# names that share no part, the names are what each is about, however alike the words around them
# ('mmcv' is not 'torch.nn.attention'; 'selective_scan_fn' and 'selective_scan_cuda' are one op's)
_QUOTED_NAME = re.compile(r"'([A-Za-z_][\w.]{1,80})'")
_NAME_PART = re.compile(r"[a-z][a-z0-9]{2,}")


# parts every codebase uses, which tie no two names together ('use_cuda' is not 'selective_scan_cuda')
_COMMON_PARTS = frozenset({"cuda", "cpu", "gpu", "torch", "model", "models", "module", "modules", "attention", "attn",
                           "ops", "utils", "util", "core", "ext", "lib", "kernel", "kernels", "layer", "layers",
                           "functional", "func", "init", "main", "src", "impl", "base", "common"})


def quoted(line: str) -> tuple[frozenset[str], ...]:
    """Each name the line quotes, as its parts (the name itself where every part is common)."""
    names = [name.lower() for name in _QUOTED_NAME.findall(line)]
    return tuple(frozenset(set(_NAME_PART.findall(name)) - _COMMON_PARTS or {name}) for name in names)


# Python's own type names, which a TypeError quotes as its facts ("'<' not supported between
# instances of 'str' and 'float'"): another pair of types is another failure
_TYPE_NAMES = frozenset({"str", "int", "float", "complex", "bool", "bytes", "tuple", "list", "dict", "set", "nonetype", "object"})


def same_names(a: tuple[frozenset[str], ...], b: tuple[frozenset[str], ...]) -> bool:
    """Whether two lines quote the same things: the same Python types where both quote types,
    else a name of one that shares a part with a name of the other (a module and another of its
    attributes are alike: 'triton' ... 'ops' and 'triton' ... 'Function')."""
    types_a = {name for name in a if name <= _TYPE_NAMES}
    types_b = {name for name in b if name <= _TYPE_NAMES}
    if types_a and types_b:
        return types_a == types_b
    return bool(frozenset().union(*a) & frozenset().union(*b))


def dtypes(line: str) -> frozenset[str]:
    return frozenset(_DTYPE_NAME.get(d.lower(), d.lower()) for d in _DTYPE_WORDS.findall(line))


# lines that say nothing of their own: a warnings call, a caret line, a traceback's header, a bare
# `UserWarning:`, a compiler's count of its errors ("1 error generated when compiling for gfx900.")
_NOISE = re.compile(r"^(?:warnings\.warn\(|[\^~ ]+$|traceback \(most recent call last\)|\w*warning:?$|\d+ errors? generated\b"
                    # a raise of an exception class with no words of its own (a stub's `raise ImportError`)
                    r"|raise [\w.]+(?:\(\s*\)?)?$"
                    # Python's words between two tracebacks, whatever the two errors
                    r"|during handling of the above exception, another exception occurred|the above exception was the direct cause of the following exception"
                    # torch's lines after every CUDA error, whatever the error
                    r"|cuda kernel errors might be asynchronously reported|for debugging consider passing cuda_launch_blocking"
                    r"|compile with .?torch_use_cuda_dsa.? to enable device-side assertions"
                    # ptxas's and nvcc's closing lines after whatever error came before them
                    r"|ptxas fatal\W*ptx assembly aborted due to errors|error: command .{0,80}nvcc.{0,80} failed with exit (?:code|status) 0?\d+"
                    # a launcher's or installer's pointer to more detail, printed under whatever failed
                    r"|set the environment variable hydra_full_error=\d for a complete stack trace|error executing job with overrides"
                    r"|to enable traceback see: https?://pytorch\.org/docs/stable/elastic/errors\.html"
                    # vLLM's line after whatever failed in its engine process
                    r"|(?:runtimeerror: )?engine core initialization failed\. see root cause above"
                    r"|note: this error originates from a subprocess, and is likely not a problem with pip"
                    # transformers' lazy import, above whatever its module raised on import
                    r"|(?:runtimeerror: )?failed to import [\w.]+ because of the following error \(look up to see its traceback\):?\W*$"
                    # the reporter's own words introducing a paste
                    r"|(?:but |and |then |so )?i(?:'m| am| have| ve|'ve)? (?:encountered|got|get|getting|received|see|saw|hit|ran into|run into|am getting) "
                    r"(?:the |this |an? )?(?:following |same )?(?:error|problem|issue|exception)s?(?: message)?\W*$"
                    # nn.Module.__getattr__'s own raise, shown above every missing attribute of any module
                    r"|raise \w*attributeerror\(f?[\"']'\{[^}]*\}' object has no attribute '\{[^}]*\}')", re.I)
_WORD = re.compile(r"[a-z]{3,}")


# a traceback's frame or its code line (an assignment, tuple targets included, from a call)
# a C++ backtrace's frame ("1 0x7fcb... tensorrt_llm::common::throwRuntimeError(...) + 100", torch's
# "frame #3: c10::Error::Error(...) + 0x8c"): the same throwing frames head every error of a library
_FRAME = re.compile(r'^(?:file "|file p|at [\w.$]+\(|\w[\w.]*(?:\s*,\s*\w[\w.]*)*\s*=\s*[\w.]+\(|[\w.]+\([^()]*\)$'
                    r'|0 h |frame #0: |#0 +h )')
_EXCEPTION = re.compile(r"\w+(?:error|exception)\b")
# the operating system's words for a path (which normalised() blanks): what such a line is about was its path
_OS_ERROR = re.compile(r"^(?:\w+error: )?(?:\[errno 0\] )?(?:no such file or directory|permission denied|file exists|"
                       r"is a directory|not a directory)\b[: ]*(?:'[^'\w]*p[^'\w]*'|p)?[.: ]*$")


# a report template's field holding one name (ComfyUI's "- **Exception Type:** RuntimeError",
# "- **Node Type:** ..."): the template is the same in every report, the name says nothing alone
_FIELD_ONE_NAME = re.compile(r"^[-*]\s*\*\*[\w ]{1,30}:\*\*\s*[\w.]*\s*$")


def informative(line: str) -> bool:
    """A line that says something of its own: an exception and its message, an error in words;
    not a traceback's frame or code line, a bare `UserWarning:` or `warnings.warn(`."""
    n = normalised(line)
    if _NOISE.match(n) or _FRAME.match(n) or _OS_ERROR.match(n) or _FIELD_ONE_NAME.match(n):
        return False
    words = len(_WORD.findall(n.replace(" p ", " ")))
    return words >= 2 if _EXCEPTION.search(n) else words >= 4


def key_lines(text: str, normalise) -> list[str]:
    """The lines of a case that carry its failure: its last error-like lines, else its last lines."""
    lines = [normalise(raw) for raw in text.splitlines()]
    lines = [line for line in lines if line and informative(line)]
    errorish = [line for line in lines if _ERRORISH.search(line)]
    return [line[:LINE_CHARS] for line in (errorish or lines)[-KEY_LINES:]]


@dataclass
class Neighbour:
    case: str
    source: str
    family: str
    rules: list[str]
    score: float  # 0-100
    line: str  # the input's line
    example: str  # the case's line


class Index:
    """The searchable key lines of the known cases."""

    def __init__(self, entries: list[dict]):
        self.entries = entries
        self.lines: list[str] = []
        self.owner: list[int] = []
        self.line_terms: list[frozenset[str]] = []
        self.line_dtypes: list[frozenset[str]] = []
        self.line_quoted: list[tuple[frozenset[str], ...]] = []
        for i, entry in enumerate(entries):
            for line in entry["lines"]:
                self.lines.append(normalised(line))
                self.owner.append(i)
                self.line_terms.append(terms(line))
                self.line_dtypes.append(dtypes(line))
                self.line_quoted.append(quoted(line))

    @classmethod
    def load(cls, path: Path) -> "Index":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            doc = json.load(f)
        return cls(doc["cases"])

    def nearest(self, lines: Iterable[str], exclude: frozenset[str] = frozenset(),
                judged: frozenset[str] = frozenset()) -> Optional[Neighbour]:
        """The known case nearest to any of `lines`, when it is a failure (not a negative), near
        enough, every case about as near (within MARGIN, up to AGREE of them) names the same cause,
        and no negative is about as near; None otherwise. `judged`: rules whose families read facts
        (an allocation's size against the GPU): their cases are never offered on words alone."""
        from rapidfuzz import fuzz, process

        near: dict[int, tuple[float, str, str]] = {}  # case -> (score, input line, case line)
        for raw in lines:
            if not informative(raw):
                continue
            query = normalised(raw)
            qterms = terms(raw)
            qtypes = dtypes(raw)
            qquoted = quoted(raw)
            if not qterms and not _ERRORISH.search(query):
                continue  # names nothing of the stack and states no failure: a resolver's or a runner's header line
            for choice, score, j in process.extract(query, self.lines, scorer=fuzz.ratio, limit=15,
                                                    score_cutoff=THRESHOLD - MARGIN):
                i = self.owner[j]
                if self.entries[i]["id"] in exclude:
                    continue
                if qterms and not (qterms & self.line_terms[j]):
                    continue  # the two lines name different things, or the case's line none of the pieces this one names
                if qtypes and self.line_dtypes[j] and qtypes != self.line_dtypes[j]:
                    continue  # the two lines state other dtypes
                if qquoted and self.line_quoted[j] and not same_names(qquoted, self.line_quoted[j]):
                    continue  # the two lines quote other names (No module named 'mmcv' is not 'torch.nn.attention')
                if i not in near or score > near[i][0]:
                    near[i] = (score, raw, choice)
        near = {i: v for i, v in near.items() if not (self.entries[i]["rules"][:1] and self.entries[i]["rules"][0] in judged)}
        if not near:
            return None
        ranked = sorted(near.items(), key=lambda item: -item[1][0])
        top_score = ranked[0][1][0]
        if top_score < THRESHOLD:
            return None
        close = [self.entries[i] for i, (score, _r, _c) in ranked if score >= top_score - MARGIN]
        if any(not entry["rules"] for entry in close):
            return None  # a negative is as near: this wording is no cause on its own
        agreed = set(close[0]["rules"])
        for entry in close[1:AGREE]:
            agreed &= set(entry["rules"])
        agreed -= judged
        if not agreed:
            return None
        i, (score, raw, example) = ranked[0]
        entry = self.entries[i]
        rules = [r for r in entry["rules"] if r in agreed]
        return Neighbour(case=entry["id"], source=entry["source"], family=entry["family"], rules=rules,
                         score=round(score, 1), line=raw[:LINE_CHARS], example=example)


def build(cases, normalise) -> dict:
    """The index document of corpus cases (benchmarks/score_explain.py's Case objects)."""
    entries = []
    for case in sorted(cases, key=lambda c: c.id):
        # a harmless or unrelated text has no cause to offer: resembling it means nothing to fix
        entries.append({"id": case.id, "source": case.source, "family": case.family, "rules": [] if case.negative else list(case.rules),
                        "lines": key_lines(case.text, normalise)})
    return {"schema": "attn-doctor/known-cases", "schema_version": 1, "cases": entries}
