"""Streaming the input: large binary chunks, one multi-pattern search for every anchor (signature
literals, version lines, generic error words), and the regular expressions only on the few lines
an anchor hit. Memory stays flat whatever the size; a gigantic single line is read in windows."""

from __future__ import annotations

import codecs
import gzip
import io
import os
import re
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Iterable, Optional

from ..facts import EXTENSION_DISTRIBUTIONS, distribution_of
from . import versions as _versions
from ..rules.loader import keep, read_kept
from ..rules.signatures import (CompiledSignature, anchors_known, compile_rules, normalise, shown, signatures_key, without_ansi,
                                tidied, unmarked)

CHUNK = 8 << 20
LINE_WINDOW = 4096  # bytes kept each side of a hit on a gigantic line
EVIDENCE_KEEP = 5  # evidence lines kept per signature
GENERIC_ANCHORS = ["Error", "error:", "ERROR", "Exception", "Warning", "WARNING", "Traceback", "FAILED", "fatal", "assert",
                   # "raise X(...)": a traceback cut before its last line still shows the message there
                   "raise ",
                   # exception classes named otherwise (OutOfResources, UnsupportedLanguageConstruct)
                   "unsupported", "outofresources"]
CANDIDATE_LINES = 200
HEAD_BYTES = 64 << 10  # the start of the input read whole for a short paste's lines
SHORT_PASTE = 40  # an input of at most this many lines is a paste: each of its lines may be a library's message
JOIN_MAX = 1000  # a line longer than this is no wrapped part of a message: never joined with its neighbours
# Where a traceback says who raised: a frame's file, or a path in the message itself
# A frame whose file line was cut off still names its package in the code it shows: a call into a
# compiled extension module (`out = flash_attn_gpu.fwd(`, `_C_flashattention.fwd(`).
_CALLED_EXTENSIONS = sorted((m for m in EXTENSION_DISTRIBUTIONS if not m.startswith("flash_attn_3")), key=len, reverse=True)
FRAME_ANCHORS = ["site-packages", "dist-packages", 'File "', " in _flash_attn", *(f"{m}." for m in _CALLED_EXTENSIONS)]
_CODE_PACKAGE = re.compile(r"\bin _(?P<fn>flash_attn)\w*\s*$|=\s*(?P<ext>%s)\.\w+\(" % "|".join(map(re.escape, _CALLED_EXTENSIONS)))
PACKAGE_PATH = re.compile(r"(?:site|dist)-packages[/\\]+(?P<name>[A-Za-z_][\w.-]*?)(?:[/\\]|\.cpython|\.abi3|\.so\b|\.py\b|-[\d])")
# a line IPython prints around the one that ran in a frame, unmarked (no "-->"), inside a function (its
# code indented past the number): never run there, so a message written in it is none the text met
_CODE_AROUND = re.compile(r"^\s*\d+ {3,}\S")
FRAME_REACH = 40  # lines after a frame during which it still names the component of a message


@dataclass
class Evidence:
    line: int  # 1-based
    text: str


@dataclass
class SignatureHits:
    signature: CompiledSignature
    count: int = 0
    evidence: list[Evidence] = field(default_factory=list)
    groups: dict[str, str] = field(default_factory=dict)  # named groups of the first match
    block: Optional[tuple[int, list[str]]] = None  # for an analyzer: the first match's line and the lines after it
    report_end: int = 0  # read by an analyzer: the offset of its report's last line in the block


@dataclass
class ScanResult:
    hits: dict[int, SignatureHits] = field(default_factory=dict)  # signature index -> hits
    contexts_seen: set[int] = field(default_factory=set)  # signature indexes whose context matched
    versions: _versions.LogVersions = field(default_factory=_versions.LogVersions)
    candidate_lines: list[str] = field(default_factory=list)
    candidate_numbers: list[int] = field(default_factory=list)  # each candidate line's number (1-based)
    # each candidate line joined with the lines that continue it (a message hard-wrapped: continued())
    candidate_wrapped: list[tuple[str, ...]] = field(default_factory=list)
    # every line of a short paste (SHORT_PASTE lines at most) with its number: a title or a quote
    # holds a library's message without the words an error or a warning line carries
    paste_lines: list[tuple[str, int]] = field(default_factory=list)
    # the whole of a short paste, every line with its number (matched or not): what the text is made of
    whole_paste: list[tuple[str, int]] = field(default_factory=list)
    bytes: int = 0
    lines: int = 0
    notes: list[str] = field(default_factory=list)
    engine: str = ""


class _Finder:
    """All occurrences of a set of literal byte strings: Aho-Corasick (ahocorasick-rs) when it is
    installed, else one alternation regex plus a substring test per hit line."""

    def __init__(self, anchors: list[bytes], force_regex: bool = False):
        self.anchors = anchors
        self._ac = None
        # ATTN_DOCTOR_SCAN_ENGINE=regex forces the fallback (benchmarks and tests compare the two)
        if not force_regex and os.environ.get("ATTN_DOCTOR_SCAN_ENGINE") != "regex":
            try:
                import ahocorasick_rs

                # the DFA: built in ~20 ms for the signatures' thousand anchors, then searched about
                # three times faster than the default NFA (100 MB in 0.3 s instead of 0.8 s)
                self._ac = ahocorasick_rs.BytesAhoCorasick(anchors, matchkind=ahocorasick_rs.MATCHKIND_STANDARD,
                                                           implementation=ahocorasick_rs.Implementation.DFA)
            except ImportError:
                self._ac = None
        self.engine = "aho-corasick" if self._ac is not None else "regex"
        self._regex = re.compile(_trie_pattern(anchors)) if self._ac is None else None

    def positions(self, buf, end: int) -> list[tuple[int, int]]:
        """(anchor index or -1, start) for hits starting before `end`; -1 = some anchor, test the line."""
        if self._ac is not None:
            found = self._ac.find_matches_as_indexes(buf, overlapping=True)
            return sorted((s, i) for i, s, _e in found if s < end)
        return [(m.start(), -1) for m in self._regex.finditer(buf, 0, min(len(buf), end + 256)) if m.start() < end]


def _trie_pattern(anchors: list[bytes]) -> bytes:
    """One regex for many literals with common prefixes factored out (sre tries one branch per
    byte instead of every literal at every position)."""
    trie: dict = {}
    for a in anchors:
        node = trie
        for byte in a:
            node = node.setdefault(byte, {})
        node[None] = True  # an anchor ends here: the shortest anchor is enough for a hit

    def emit(node) -> bytes:
        if None in node:
            return b""
        parts = [re.escape(bytes([byte])) + emit(child) for byte, child in sorted(node.items())]
        return parts[0] if len(parts) == 1 else b"(?:" + b"|".join(parts) + b")"

    return emit(trie)


def _open(source) -> tuple[BinaryIO, list[str]]:
    """A binary stream of UTF-8-ish bytes: gzip and UTF-16 inputs are decoded on the fly."""
    notes: list[str] = []
    raw = source if hasattr(source, "read") else open(source, "rb")
    stream = raw if hasattr(raw, "peek") else io.BufferedReader(raw)
    head = stream.peek(4)[:4]
    if head[:2] == b"\x1f\x8b":
        notes.append("the input is gzip-compressed: decompressed while reading")
        stream = io.BufferedReader(_TolerantGzip(gzip.GzipFile(fileobj=stream), notes))  # type: ignore[arg-type]
        head = stream.peek(4)[:4]
    if head[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        notes.append("the input is UTF-16 (e.g. PowerShell `>` redirection): decoded while reading")
        text = io.TextIOWrapper(stream, encoding="utf-16", errors="replace")
        stream = _Utf8Reader(text)  # type: ignore[assignment]
    return stream, notes


class _TolerantGzip(io.RawIOBase):
    """A gzip stream that ends where the data does: a log of a crashed job is often cut short, and
    what was read before the cut is still worth explaining."""

    def __init__(self, inner, notes: list[str]):
        self._inner = inner
        self._notes = notes
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._done:
            return 0
        try:
            data = self._inner.read(len(buffer))
        except (EOFError, OSError, zlib.error) as exc:  # truncated or corrupt: stop here
            self._done = True
            self._notes.append(f"the gzip data is truncated or corrupt ({exc}): only what came before was searched")
            return 0
        buffer[: len(data)] = data
        return len(data)


class _Utf8Reader:
    def __init__(self, text: io.TextIOWrapper):
        self._text = text

    def read(self, n: int) -> bytes:
        return self._text.read(n // 2).encode("utf-8", "replace")


def _line_bounds(buf, pos: int, lo: int, hi: int) -> tuple[int, int, bool]:
    """Start and end of the line around pos, clipped to a window; True when clipped."""
    window_lo = max(lo, pos - LINE_WINDOW)
    start = max(buf.rfind(b"\n", window_lo, pos), buf.rfind(b"\r", window_lo, pos)) + 1
    clipped = False
    if start == 0 and window_lo > 0:
        start, clipped = window_lo, True
    window_hi = min(hi, pos + LINE_WINDOW)
    ends = [e for e in (buf.find(b"\n", pos, window_hi), buf.find(b"\r", pos, window_hi)) if e != -1]
    if ends:
        end = min(ends)
    else:
        end = window_hi
        clipped = clipped or window_hi < hi
    return start, end, clipped


def _decode(raw) -> str:
    return bytes(raw).decode("utf-8", "replace")


class Scanner:
    """Built once per recipe set and reused: one scan at a time (scan() keeps its state on self)."""

    def __init__(self, signatures: list[CompiledSignature], gpu_table, force_regex: bool = False):
        self.signatures = signatures
        self.gpu_table = gpu_table
        kinds: dict[bytes, list[tuple[str, int]]] = {}
        for i, sig in enumerate(signatures):
            for a in sig.anchors:
                kinds.setdefault(a.encode().lower(), []).append(("sig", i))
            for a in sig.context_anchors:
                kinds.setdefault(a.encode().lower(), []).append(("ctx", i))
        for a in _versions.ANCHORS:
            kinds.setdefault(a.encode().lower(), []).append(("ver", 0))
        for a in GENERIC_ANCHORS:
            kinds.setdefault(a.encode().lower(), []).append(("gen", 0))
        for a in FRAME_ANCHORS:
            kinds.setdefault(a.encode().lower(), []).append(("frame", 0))
        self.anchor_bytes = list(kinds)
        self.anchor_kinds = [kinds[a] for a in self.anchor_bytes]
        self.finder = _Finder(self.anchor_bytes, force_regex)
        self.max_anchor = max(len(a) for a in self.anchor_bytes)

    # -- the loop over chunks

    def scan(self, source, progress: Optional[Callable[[int], None]] = None, keep_all_lines: bool = False) -> ScanResult:
        result = ScanResult(engine=self.finder.engine)
        stream, result.notes = _open(source)
        self._cache: dict[str, list[tuple[int, Optional[re.Match]]]] = {}
        self._candidates: deque[str] = deque(maxlen=CANDIDATE_LINES)
        self._candidate_numbers: deque[int] = deque(maxlen=CANDIDATE_LINES)
        self._candidate_wrapped: deque[tuple[str, ...]] = deque(maxlen=CANDIDATE_LINES)
        self._keep_all = keep_all_lines
        self._head_lines: list[str] = []
        self._head_raw: list[str] = []
        self._read_head: set[int] = set()  # lines of the head a signature read
        self._frame: tuple[int, Optional[str]] = (-FRAME_REACH - 1, None)  # the last frame: line, package
        self._last_text: Optional[str] = None  # the last line whose versions were read
        carry = b""
        prev_line = ""
        line_base = 0  # newlines before buf[0]
        region_start = 0  # buf[:region_start] was scanned: the context kept for the lines after it
        first = True
        while True:
            data = stream.read(CHUNK)
            eof = not data
            if first:
                first = False
                self._inspect_head(data, result)
            result.bytes += len(data)
            buf = carry + data if carry else data
            if not buf:
                break
            if eof:
                region_end = len(buf)
            else:
                region_end = self._region_end(buf)
            self._scan_region(buf, region_start, region_end, line_base, prev_line, result)
            last_start = max(buf.rfind(b"\n", max(0, region_end - LINE_WINDOW), max(0, region_end - 1)), 0)
            prev_line = normalise(_decode(buf[last_start:region_end]))
            if eof:
                line_base += buf.count(b"\n", 0, region_end)
            else:
                # the lines before the next region stay in the buffer: a guard reads a traceback's
                # frames above its message, wherever a chunk ended
                keep = _context_start(buf, region_end)
                line_base += buf.count(b"\n", 0, keep)
                carry, region_start = buf[keep:], region_end - keep
            if progress:
                progress(result.bytes)
            if eof:
                break
        result.lines = line_base + (0 if not result.bytes or self._ends_with_newline else 1)
        result.candidate_lines = list(self._candidates)
        result.candidate_numbers = list(self._candidate_numbers)
        result.candidate_wrapped = list(self._candidate_wrapped)
        if result.lines <= SHORT_PASTE:
            tried = set(self._candidate_numbers) | self._read_head
            result.paste_lines = [(t, n) for n, t in enumerate(self._head_lines, 1) if t and n not in tried
                                  and not _CODE_AROUND.match(self._head_raw[n - 1])]
            if result.bytes <= HEAD_BYTES:
                # the whole text, each line whole: what it is made of can be said of all of it
                result.whole_paste = [(t, n) for n, t in enumerate(self._head_raw, 1) if t.strip()]
        return result

    _ends_with_newline = True

    def _inspect_head(self, data: bytes, result: ScanResult) -> None:
        head = data[:HEAD_BYTES]
        decoded = [_decode(line) for line in head.split(b"\n", SHORT_PASTE + 1)[:SHORT_PASTE]]
        self._head_lines = [_shorten(normalise(line)) for line in decoded]
        # as written, less colour codes: a logger's level prefix says what kind of line it is
        self._head_raw = [without_ansi(line) for line in decoded]  # whole: within HEAD_BYTES, read to its end
        if not head:
            return
        nul = head.count(b"\x00")
        if nul:  # text logs never hold NUL bytes
            result.notes.append(f"the input looks binary ({nul} NUL bytes in its first {len(head)} bytes): only its text was searched")
            return
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 4:  # not just a character cut at the chunk's end
                result.notes.append(f"the input is not valid UTF-8 (first bad byte at offset {exc.start}): undecodable bytes were replaced")

    def _region_end(self, buf: bytes) -> int:
        """Where to stop this round: after the third-last newline (the two lines after a hit line
        stay available for joining wrapped messages); on a gigantic line, a window before the end."""
        end = len(buf)
        for _ in range(3):
            end = buf.rfind(b"\n", 0, end)
            if end == -1:
                break
        if end == -1 or len(buf) - end > 2 * CHUNK:
            return max(0, len(buf) - max(LINE_WINDOW, self.max_anchor))
        return end + 1

    def _scan_region(self, buf: bytes, region_start: int, region_end: int, line_base: int, prev_line: str, result: ScanResult) -> None:
        self._ends_with_newline = buf.endswith(b"\n") or buf.endswith(b"\r")
        lowered = buf.lower()  # every anchor is lower case (ASCII lower-casing keeps byte offsets)
        positions = [p for p in self.finder.positions(lowered, region_end) if p[0] >= region_start]
        if not positions:
            return
        counted_to, newlines = 0, 0
        i, n = 0, len(positions)
        while i < n:
            pos = positions[i][0]
            start, end, clipped = _line_bounds(buf, pos, 0, len(buf))
            anchors = set()
            while i < n and positions[i][0] < end:
                anchors.add(positions[i][1])
                i += 1
            newlines += buf.count(b"\n", counted_to, start)
            counted_to = start
            raw = buf[start:end]
            if -1 in anchors:  # regex fallback: which anchors does this line hold?
                low = lowered[start:end]
                anchors = {k for k, a in enumerate(self.anchor_bytes) if a in low}
            self._line(buf, start, end, raw, anchors, line_base + newlines + 1, prev_line, clipped, result)

    # -- one hit line

    def _line(self, buf, start, end, raw, anchors, lineno, prev_line, clipped, result: ScanResult) -> None:
        kinds = [k for a in anchors for k in self.anchor_kinds[a]]
        display = shown(_decode(raw))
        text = tidied(display)
        if clipped:
            text = "…" + text + "…"
            display = "…" + display + "…"
        matched_any = False
        own = None
        if any(kind == "frame" for kind, _ in kinds):
            m = PACKAGE_PATH.search(text)
            own = m.group("name") if m else None
            code = _CODE_PACKAGE.search(text) if own is None else None
            if code:
                ext = code.group("ext")
                self._frame = (lineno, code.group("fn") or distribution_of(ext).replace("-", "_"))
            elif text.startswith('File "') or own:
                self._frame = (lineno, own)
        frame_line, frame_package = self._frame
        component = own or (frame_package if lineno - frame_line <= FRAME_REACH else None)
        sig_ids = sorted({idx for kind, idx in kinds if kind == "sig"})
        if sig_ids:
            key = text
            cached = self._cache.get(key)
            if cached is None:
                cached = []
                plain = unmarked(text)
                for idx in sig_ids:
                    m = self.signatures[idx].regex.search(text)
                    if m is None and plain != text:
                        m = self.signatures[idx].regex.search(plain)
                    if m is not None:
                        cached.append((idx, m, None))
                    elif len(text) <= JOIN_MAX and self.signatures[idx].joinable:
                        m, joined = self._joined(buf, start, end, prev_line, text, self.signatures[idx].regex)
                        if m is not None:
                            cached.append((idx, m, joined))
                if len(self._cache) < 10000:
                    self._cache[key] = cached
            for idx, m, joined in cached:
                sig = self.signatures[idx]
                # the component is the package whose frame raised, "" when the text shows none; a
                # signature's component pattern may accept "" (e.g. "not raised by xformers")
                if sig.component is not None and not sig.component.search(component or ""):
                    continue  # raised by another package than this signature speaks of
                guarded = None
                if sig.guard:
                    from ..rules.analyzers import GUARD_LINES, GUARDS

                    guarded = GUARDS[sig.guard](m.groupdict(), _prev_lines(buf, start, GUARD_LINES), _next_lines(buf, end, GUARD_LINES))
                    if guarded is None:
                        continue  # the facts around the words say it is not this cause
                matched_any = True
                whole = _wrapped_symbol(m, buf, end)
                if whole is not None:
                    joined = (joined or display) + whole[1]
                hits = result.hits.get(idx)
                if hits is None:
                    groups = {k: v for k, v in m.groupdict().items() if v}
                    if whole is not None:
                        groups["symbol"] = whole[0]
                    groups.update(guarded or {})
                    if component:
                        groups.setdefault("component", component)
                    hits = result.hits[idx] = SignatureHits(sig, groups=groups)
                hits.count += 1
                if sig.analyzer and hits.block is None:
                    hits.block = (lineno, [text] + _block_after(buf, end))
                if len(hits.evidence) < EVIDENCE_KEEP:
                    hits.evidence.append(Evidence(lineno, _shorten(joined or display)))
        # a line repeated (a warning printed per step and per rank) tells nothing new: its contexts
        # were searched and its versions read already (reading the same line twice in a row changes
        # nothing; another line between them may, so only the last one read is skipped)
        if text != self._last_text:
            for kind, idx in kinds:
                if kind == "ctx" and idx not in result.contexts_seen and (self.signatures[idx].context.search(text) or self.signatures[idx].context.search(unmarked(text))):
                    result.contexts_seen.add(idx)
            if any(kind == "ver" for kind, _ in kinds):
                result.versions.read(text, self.gpu_table)
                self._last_text = text
        if matched_any and lineno <= SHORT_PASTE:
            self._read_head.add(lineno)
        if not matched_any and (self._keep_all or any(kind == "gen" for kind, _ in kinds)) and text and not _CODE_AROUND.match(display):
            if not self._candidates or self._candidates[-1] != text:
                self._candidates.append(_shorten(text))
                self._candidate_numbers.append(lineno)
                self._candidate_wrapped.append(_wrapped(buf, end, text))

    def _joined(self, buf, start, end, prev_line, text, regex):
        """A message wrapped over lines: try the line with its neighbours, joined with and without a space."""
        nxt = []
        for line in _next_lines(buf, end, 2):
            if len(line) > JOIN_MAX or _NEW_MESSAGE.match(line):
                break  # an exception, a frame or a logger's line starts a message of its own
            nxt.append(line)
        before = []
        if not _NEW_MESSAGE.match(text):
            for line in reversed(_prev_lines(buf, start, 2) if start > 0 else ([prev_line] if prev_line else [])):
                if len(line) > JOIN_MAX:
                    break
                before.insert(0, line)
                if _NEW_MESSAGE.match(line):
                    break
        prev = before[-1] if before else ""
        options = []
        # a terminal or a log viewer wraps at a column (mid-word: no space) or at a word (a space)
        if nxt:
            options += [text + " " + nxt[0], text + nxt[0]]
        if prev:
            options += [prev + " " + text, prev + text]
        # each break on its own: a column wrap that falls on a space loses that space to the
        # line's stripping, so one break needs a space back and the next one does not
        seps = [(a, b) for a in (" ", "") for b in (" ", "")]
        if prev and nxt:
            options += [prev + a + text + b + nxt[0] for a, b in seps]
        if len(nxt) > 1:
            options += [text + a + nxt[0] + b + nxt[1] for a, b in seps]
        if len(before) > 1:  # a long line wrapped three times, hit on its last part
            options += [before[0] + a + before[1] + b + text for a, b in seps]
        for option in options:
            m = regex.search(option)
            if m:
                if any(regex.search(line) for line in (nxt[:2] + before[-2:])):
                    return None, None  # a neighbour holds the whole message: the match is that line's
                return m, option
        return None, None


def _wrapped_symbol(m: re.Match, buf, end: int) -> Optional[tuple[str, str]]:
    """A mangled symbol a terminal cut at the line's end (`..._ZN3c104cuda9SetDevi` / `ceEi`): the
    whole name and the tail the next lines added; None where the match has no symbol at its end."""
    groups = m.groupdict()
    symbol = groups.get("symbol")
    if not symbol or not symbol.startswith("_Z") or m.end("symbol") != len(m.string.rstrip()):
        return None
    from ..failures import rejoined_symbol

    whole = rejoined_symbol(symbol, _next_lines(buf, end, 3))
    return None if whole is None else (whole[0], whole[0][len(symbol):])


# A line that begins a message of its own, never the continuation of a wrapped one: an exception's
# "XError:" line (or a warning's "FILE:LINE: XWarning:"), a traceback's header or frame, a logger's
# level, a markdown fence, a notebook's frame (IPython's "File PATH:LINE, in f()", its "---> LINE" code
# line). An exception's class is CamelCase (ncclUnhandledCudaError too): an
# all-lower-case fragment ending in "Exception:" is the rest of a word a terminal wrapped mid-word
# ("... with a cu" / "dnnException:").
_NEW_MESSAGE = re.compile(
    r"(?:(?:\S+:\d+: )?(?:[\w.]*\.)?(?:[A-Z_]\w*|[a-z]+[A-Z]\w*)?(?:Error|Exception|Warning|Interrupt|Exit):|Traceback \(most recent|File \"|File [^\s\x22][^\n]*?:\d+, in |-+> ?\d+ |(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\b|```|~~~)"
)

CONTEXT_BYTES = 64 << 10


def _context_start(buf: bytes, region_end: int) -> int:
    """Where the lines kept before the next region start: GUARD_LINES lines, at most CONTEXT_BYTES."""
    from ..rules.analyzers import GUARD_LINES

    floor = max(0, region_end - CONTEXT_BYTES)
    keep = region_end
    for _ in range(GUARD_LINES):
        nl = buf.rfind(b"\n", floor, max(floor, keep - 1))
        if nl == -1:  # fewer lines than that: from the buffer's start, or the first whole line after the cut
            return floor if floor == 0 else (buf.find(b"\n", floor, region_end) + 1 or region_end)
        keep = nl + 1
    return keep


def _lines_after(buf, end: int, window: int = LINE_WINDOW, around: bool = False):
    """The lines after the one ending at `end`, normalised, blank ones included: (line, whole), where
    a line with no end within `window` bytes is cut there and is not whole (unless the text ends).
    around: a notebook's code line around the one that ran (as written, before normalising) ends them."""
    pos = end
    while pos < len(buf):
        pos += 1 if buf[pos:pos + 2] != b"\r\n" else 2
        nl = [e for e in (buf.find(b"\n", pos, pos + window), buf.find(b"\r", pos, pos + window)) if e != -1]
        stop = min(nl) if nl else min(len(buf), pos + window)
        raw = _decode(buf[pos:stop])
        if around and _CODE_AROUND.match(raw):
            return
        yield normalise(raw), bool(nl) or stop == len(buf)
        pos = stop


def _next_lines(buf, end: int, count: int) -> list[str]:
    out = []
    for line, _ in _lines_after(buf, end):
        if len(out) >= count:
            break
        if line:
            out.append(line)
    return out


WRAP_MIN = 40  # a line shorter than this was not hard-wrapped: its message ends on it
WRAP_LINES = 4  # the lines after a wrapped one that may continue its message


def _wrapped(buf, end: int, text: str) -> tuple[str, ...]:
    return continued(text, _lines_after(buf, end, JOIN_MAX + 2, around=True))


def continued(text: str, following: Iterable[tuple[str, bool]]) -> tuple[str, ...]:
    """`text` joined with the first, the first two, ... of the `following` (line, read whole) that continue
    its message: up to WRAP_LINES, stopping at a line cut, too long, blank, or starting a message."""
    if len(text) < WRAP_MIN or len(text) > JOIN_MAX:
        return ()
    joined, out = text, []
    for line, whole in following:
        if len(out) >= WRAP_LINES or not whole or not line.strip() or _NEW_MESSAGE.match(line) or len(joined) + len(line) > JOIN_MAX:
            break
        joined = joined.rstrip() + " " + line.strip()
        out.append(joined)
    return tuple(out)


def _block_after(buf, end: int) -> list[str]:
    """The normalised lines after a match, blank ones kept (they end reports), for an analyzer."""
    from ..rules.analyzers import BLOCK_LINES

    stop = min(len(buf), end + BLOCK_LINES * 512)
    lines = _decode(buf[end:stop]).replace("\r\n", "\n").replace("\r", "\n").split("\n")[1:BLOCK_LINES + 1]
    return [normalise(line) for line in lines]


def _prev_lines(buf, start: int, count: int) -> list[str]:
    """Up to `count` lines before the line starting at `start`, oldest first."""
    out: list[str] = []
    while len(out) < count and start > 0:
        end = start - 1
        if end > 0 and buf[end - 1:end + 1] == b"\r\n":
            end -= 1
        lo = max(0, end - LINE_WINDOW)
        s = max(buf.rfind(b"\n", lo, end), buf.rfind(b"\r", lo, end)) + 1
        out.insert(0, normalise(_decode(buf[s:end])))
        start = s
    return out


def _shorten(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


ANCHORS_FILE = "anchors.msgpack"


def compiled_signatures(sig_rules) -> list[CompiledSignature]:
    """The signatures compiled, their anchors taken from the user's private cache where an earlier
    run found them for the very same text (finding them parses every expression: a third of a short
    explain); the expressions themselves are then compiled only when a line meets their anchors."""
    key = signatures_key(sig_rules)
    known = read_kept(ANCHORS_FILE, key)
    compiled = compile_rules(sig_rules, known)
    if known is None:
        keep(ANCHORS_FILE, key, anchors_known(compiled))
    return compiled
