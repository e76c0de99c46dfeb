"""Reading the files users hand to attn-doctor, within bounds.

Every file input goes through here: reports (`check --from-report`/`--facts`, `fleet`), training
configs (`--config`), logs (`explain --file`). The bounds, and why:

- Only regular files, or stdin (``-``, or a path that is this process's stdin such as
  /dev/stdin): a FIFO waits for a writer forever, a character device (/dev/zero, /dev/urandom, a
  terminal) never ends. They are refused from their metadata, before anything opens them.
- Size: a report is read whole (a real one is ~50 KB) up to REPORT_MAX_BYTES; a config up to
  CONFIG_MAX_BYTES (JSON) or YAML_MAX_BYTES (YAML: the pure-Python YAML 1.1 loader reads ~0.3 MB/s,
  and a training YAML is a few KB). A log is streamed, so its size is not bounded: what explain
  keeps in memory is (attn_doctor/explaining/scan.py).
- Structure: MAX_DEPTH levels of nested lists and objects (a report has 10), and at most
  MAX_VALUES values once YAML aliases are expanded (an alias "bomb" is a few lines of text).
- A fleet folder: the *.json files directly inside it (not below), at most FLEET_MAX_FILES.

Bad input raises InputError, whose message says in one line what is wrong (the caller names the
file): a usage error, exit 2.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Any, BinaryIO, Optional, Union

MiB = 1 << 20
REPORT_MAX_BYTES = 32 * MiB
CONFIG_MAX_BYTES = 16 * MiB
YAML_MAX_BYTES = 1 * MiB
MAX_DEPTH = 64
MAX_VALUES = 1_000_000
FLEET_MAX_FILES = 100_000

PathLike = Union[str, os.PathLike]


class InputError(ValueError):
    """A file input that cannot be used; the message is one line, without the file's name."""


def is_stdin(path: PathLike) -> bool:
    return str(path) == "-"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _stdin_identity():
    try:
        st = os.fstat(0)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _check_stdin_usable() -> None:
    if sys.stdin is None or sys.stdin.closed:
        raise InputError("'-' reads stdin, but there is no stdin")
    try:
        tty = sys.stdin.isatty()
    except ValueError:
        tty = False
    if tty:
        raise InputError("'-' reads stdin, but stdin is a terminal: pipe the input in")


def stat_input(path: PathLike) -> os.stat_result:
    """The file's metadata, or InputError when it is missing or not a regular file (stdin aside)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError("no such file") from None
    except NotADirectoryError:
        raise InputError("no such file (a part of the path is not a folder)") from None
    except ValueError as exc:  # an embedded NUL byte
        raise InputError(f"not a usable path ({exc})") from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    return st


def check_input(path: PathLike, allow_stdin: bool = True) -> bool:
    """InputError unless `path` is a regular file or stdin; True for stdin (``-``, or a path that
    is this process's stdin: /dev/stdin, /proc/self/fd/0). Nothing is opened: a FIFO or a device
    is refused from its metadata."""
    if is_stdin(path):
        if not allow_stdin:
            raise InputError("'-' (stdin) is not accepted here: give a file")
        _check_stdin_usable()
        return True
    st = stat_input(path)
    if stat.S_ISREG(st.st_mode):
        return False
    if stat.S_ISDIR(st.st_mode):
        raise InputError("a folder, not a file")
    if allow_stdin and (st.st_dev, st.st_ino) == _stdin_identity():
        _check_stdin_usable()
        return True
    hint = " (pipe it in with '-' instead)" if allow_stdin else ""
    raise InputError(f"{_kind(st.st_mode)}, not a regular file: reading it could block or never end{hint}")


def open_input(path: PathLike, allow_stdin: bool = True) -> tuple[BinaryIO, bool]:
    """A binary stream on `path`, and whether it is stdin. Never blocks on the open: the file is
    checked from its metadata, opened non-blocking, and checked again (it could have been
    replaced in between)."""
    if check_input(path, allow_stdin):
        return sys.stdin.buffer, True
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError("not a regular file: reading it could block or never end")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), False
    except BaseException:
        os.close(fd)
        raise


def shown(path: PathLike, limit: int = 160) -> str:
    """A path for a one-line message: a name of thousands of characters is cut in the middle."""
    text = str(path)
    return text if len(text) <= limit else text[: limit // 2] + "..." + text[-limit // 2 :]


def read_bounded(path: PathLike, limit: int, allow_stdin: bool = True) -> bytes:
    """The whole input (a regular file or stdin), at most `limit` bytes."""
    stream, from_stdin = open_input(path, allow_stdin)
    try:
        want = limit + 1
        if not from_stdin:
            size = os.fstat(stream.fileno()).st_size
            if size > limit:
                raise InputError(f"{_size(size)}, larger than the {_size(limit)} this input accepts")
            want = size + 1  # a buffer of the file's size, not of the limit (a fleet reads thousands)
        data = stream.read(want)
        if len(data) == want and want <= limit:  # it grew since fstat: on to the limit
            data += stream.read(limit + 1 - len(data))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    finally:
        if not from_stdin:
            stream.close()
    if len(data) > limit:
        raise InputError(f"more than the {_size(limit)} this input accepts")
    return data


def _size(n: int) -> str:
    return f"{n / MiB:.0f} MiB" if n >= MiB else f"{n} bytes"


def check_structure(doc: Any, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> None:
    """InputError when `doc` nests deeper than max_depth, refers to itself (a YAML alias inside its
    own anchor) or holds more than max_values values once shared (aliased) parts are counted at
    each place they appear. Iterative, and linear in the distinct objects."""
    counted: dict[int, int] = {}  # id -> values in the subtree, aliases expanded
    on_path: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(doc, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if not isinstance(node, (dict, list, tuple, set)):
            continue
        key = id(node)
        children = list(node.values()) + list(node.keys()) if isinstance(node, dict) else list(node)
        if done:
            on_path.discard(key)
            total = 1 + sum(counted.get(id(c), 1) for c in children)
            if total > max_values:
                raise InputError(f"more than {max_values:,} values once its aliases are expanded")
            counted[key] = total
            continue
        if key in counted:
            continue  # a shared subtree, already measured
        if key in on_path:
            raise InputError("a value that contains itself (a YAML alias inside its own anchor)")
        if depth > max_depth:
            raise InputError(f"nested deeper than {max_depth} levels")
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in children)


def located(text: "str | bytes", line: int, column: int) -> str:
    """`line L, column C: <that line>` (1-based) for a parse error: where to look, and what is
    there, shown inert (control characters as '?', at most 120 characters)."""
    lines = (text.decode("utf-8", "replace") if isinstance(text, bytes) else text).splitlines()
    shown_line = lines[line - 1] if 0 < line <= len(lines) else ""
    shown_line = "".join(c if c.isprintable() else "?" for c in shown_line.strip())
    if len(shown_line) > 120:
        shown_line = shown_line[:117] + "..."
    return f"line {line}, column {column}" + (f": {shown_line}" if shown_line else "")


def _json_position(raw: bytes, message: str) -> Optional[tuple[int, int]]:
    """msgspec says `(byte N)`: the 1-based line and column of that byte."""
    import re

    found = re.search(r"\(byte (\d+)\)", message)
    if not found:
        return None
    before = raw[: int(found.group(1))]
    line = before.count(b"\n") + 1
    return line, len(before) - (before.rfind(b"\n") + 1) + 1


def decode_json(raw: bytes) -> Any:
    """JSON text as builtins (msgspec: strict JSON, fast), within the structure bounds."""
    import msgspec

    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        import re

        where = _json_position(raw, str(exc))
        problem = re.sub(r"\s*\(byte \d+\)", "", str(exc)).removeprefix("JSON is malformed: ")
        raise InputError(f"not valid JSON at {located(raw, *where)} ({problem})" if where else f"not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(f"nested deeper than {MAX_DEPTH} levels") from None
    check_structure(doc)
    return doc


def text_of(raw: bytes, what: str = "a text file") -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"not {what} (UTF-8)") from None


__all__ = [
    "CONFIG_MAX_BYTES",
    "FLEET_MAX_FILES",
    "InputError",
    "MAX_DEPTH",
    "MAX_VALUES",
    "REPORT_MAX_BYTES",
    "YAML_MAX_BYTES",
    "check_input",
    "check_structure",
    "decode_json",
    "is_stdin",
    "located",
    "open_input",
    "read_bounded",
    "shown",
    "stat_input",
    "text_of",
]
