"""In-place edits of JSON and TOML text: only the bytes of the values that change are touched.

Every other byte stays as written: numbers as the user wrote them (`5e8` is not re-dumped as
`500000000.0`), key order, indentation, spacing, comments (TOML). A value that is there is replaced
where it sits; a key that is not is inserted beside its siblings with their indentation. What this
cannot place safely (a TOML value over several lines, an inline table) is an EditError: edit it by
hand. edits.apply_settings reads every result back and refuses one that means anything else.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional


class TextEditError(Exception):
    """The edit cannot be placed in the text safely; the message says why, in one line."""


# ---------------------------------------------------------------- JSON: values with their places

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WS = re.compile(r"[ \t\n\r]*")


@dataclass
class Member:
    key_start: int  # offset of the key's opening quote
    start: int  # offset of the value's first character
    end: int  # offset after the value's last character
    node: Optional["Node"] = None  # the value's members, where it is an object


@dataclass
class Node:
    open: int  # offset of `{`
    close: int  # offset of `}`
    members: dict[str, Member] = field(default_factory=dict)


def json_tree(text: str) -> Node:
    """The document's top-level object with the place of every member, nested objects included."""
    pos = _WS.match(text, 0).end()
    if pos >= len(text) or text[pos] != "{":
        raise TextEditError("the JSON document is not an object")
    node, _end = _object(text, pos, 0)
    return node


def _object(text: str, pos: int, depth: int) -> tuple[Node, int]:
    if depth > 64:
        raise TextEditError("nested deeper than 64 levels")
    node = Node(open=pos, close=-1)
    pos = _WS.match(text, pos + 1).end()
    if text[pos] == "}":
        node.close = pos
        return node, pos + 1
    while True:
        if text[pos] != '"':
            raise TextEditError(f"unexpected {text[pos]!r} at offset {pos}")
        key_start = pos
        key, pos = json.decoder.scanstring(text, pos + 1)
        pos = _WS.match(text, pos).end()
        if text[pos] != ":":
            raise TextEditError(f"expected ':' at offset {pos}")
        pos = _WS.match(text, pos + 1).end()
        start = pos
        child, pos = _value(text, pos, depth + 1)
        node.members[key] = Member(key_start, start, pos, child)  # the last of a repeated key wins, as json.loads
        pos = _WS.match(text, pos).end()
        if text[pos] == ",":
            pos = _WS.match(text, pos + 1).end()
            continue
        if text[pos] == "}":
            node.close = pos
            return node, pos + 1
        raise TextEditError(f"expected ',' or '}}' at offset {pos}")


def _value(text: str, pos: int, depth: int) -> tuple[Optional[Node], int]:
    ch = text[pos]
    if ch == "{":
        return _object(text, pos, depth)
    if ch == "[":
        pos = _WS.match(text, pos + 1).end()
        if text[pos] == "]":
            return None, pos + 1
        while True:
            _child, pos = _value(text, pos, depth + 1)
            pos = _WS.match(text, pos).end()
            if text[pos] == ",":
                pos = _WS.match(text, pos + 1).end()
                continue
            if text[pos] == "]":
                return None, pos + 1
            raise TextEditError(f"expected ',' or ']' at offset {pos}")
    if ch == '"':
        return None, json.decoder.scanstring(text, pos + 1)[1]
    for word in ("true", "false", "null", "NaN", "Infinity", "-Infinity"):
        if text.startswith(word, pos):
            return None, pos + len(word)
    found = _NUMBER.match(text, pos)
    if not found or found.end() == pos:
        raise TextEditError(f"unexpected {ch!r} at offset {pos}")
    return None, found.end()


def json_set(text: str, settings: dict[str, Any]) -> str:
    """`text` with each dotted key set to its value, in place; the rest byte for byte."""
    ascii_only = all(ord(ch) < 128 for ch in text)
    for dotted, value in settings.items():
        text = _json_set_one(text, dotted.split("."), value, ascii_only)
    return text


def _json_set_one(text: str, parts: list[str], value: Any, ascii_only: bool) -> str:
    node = json_tree(text)
    for i, part in enumerate(parts):
        member = node.members.get(part)
        if member is None:
            return _json_insert(text, node, parts[i], _nested(parts[i + 1:], value), ascii_only)
        if i == len(parts) - 1:
            return text[: member.start] + json.dumps(value, ensure_ascii=ascii_only) + text[member.end:]
        if member.node is None:
            raise TextEditError(f"{'.'.join(parts[: i + 1])} is not an object in the file")
        node = member.node
    raise AssertionError("unreachable")


def _nested(parts: list[str], value: Any) -> Any:
    for part in reversed(parts):
        value = {part: value}
    return value


def _json_insert(text: str, node: Node, key: str, value: Any, ascii_only: bool) -> str:
    """A new member after the object's last one, on a line of its own with the siblings'
    indentation where they each have one, else inline."""
    members = list(node.members.values())
    if members:
        last = max(members, key=lambda m: m.end)
        indent = _line_indent(text, last.key_start)
        unit = _indent_unit(text, node, indent)
        if indent is not None:
            shown = _dumps_indented(value, indent, unit, ascii_only)
            return text[: last.end] + f",\n{indent}{json.dumps(key, ensure_ascii=ascii_only)}: {shown}" + text[last.end:]
        return text[: last.end] + f", {json.dumps(key, ensure_ascii=ascii_only)}: {json.dumps(value, ensure_ascii=ascii_only)}" + text[last.end:]
    return (text[: node.open + 1] + f"{json.dumps(key, ensure_ascii=ascii_only)}: {json.dumps(value, ensure_ascii=ascii_only)}"
            + text[node.close:])


def _line_indent(text: str, offset: int) -> Optional[str]:
    """The whitespace before `offset` on its line, where only whitespace comes before it there."""
    start = text.rfind("\n", 0, offset) + 1
    before = text[start:offset]
    return before if before.strip() == "" and start > 0 else None


def _indent_unit(text: str, node: Node, indent: Optional[str]) -> str:
    """One level of the file's indentation: the members' indentation less the line of the `{`."""
    outer = text[text.rfind("\n", 0, node.open) + 1 : node.open]
    outer = outer[: len(outer) - len(outer.lstrip())]
    if indent is not None and indent.startswith(outer) and len(indent) > len(outer):
        return indent[len(outer):]
    return "  "


def _dumps_indented(value: Any, indent: str, unit: str, ascii_only: bool) -> str:
    if not isinstance(value, dict):
        return json.dumps(value, ensure_ascii=ascii_only)
    text = json.dumps(value, indent=unit if set(unit) != {" "} else len(unit), ensure_ascii=ascii_only)
    return text.replace("\n", "\n" + indent)


# ---------------------------------------------------------------- TOML: one line per value

_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_ARRAY_HEADER = re.compile(r"^\s*\[\[")
_BARE = r"[A-Za-z0-9_-]+"
_KEY = rf"(?:{_BARE}|\"(?:[^\"\\]|\\.)*\"|'[^']*')"
_KEY_LINE = re.compile(rf"^(\s*)({_KEY}(?:\s*\.\s*{_KEY})*)\s*=\s*")


def _key_parts(text: str) -> list[str]:
    parts = re.findall(_KEY, text)
    return [p[1:-1] if p[:1] in ("'", '"') else p for p in parts]


def _toml_value_end(line: str, start: int) -> int:
    """Where the one-line value that starts at `start` ends (before any comment); TextEditError for a
    value over several lines."""
    ch = line[start:start + 1]
    if line.startswith(('"""', "'''"), start):
        raise TextEditError("a multi-line string")
    if ch == '"':
        at = start + 1
        while at < len(line):
            if line[at] == "\\":
                at += 2
                continue
            if line[at] == '"':
                return at + 1
            at += 1
        raise TextEditError("an unterminated string")
    if ch == "'":
        end = line.find("'", start + 1)
        if end < 0:
            raise TextEditError("an unterminated string")
        return end + 1
    if ch in "[{":
        depth, at, quote = 0, start, None
        while at < len(line):
            c = line[at]
            if quote:
                if c == "\\" and quote == '"':
                    at += 2
                    continue
                if c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif c in "[{":
                depth += 1
            elif c in "]}":
                depth -= 1
                if depth == 0:
                    return at + 1
            elif c == "#":
                break
            at += 1
        raise TextEditError("an array or inline table over several lines")
    found = re.match(r"[^\s#,\]}]+", line[start:])
    if not found:
        raise TextEditError("no value after '='")
    return start + found.end()


def toml_value(value: Any, like: str = "") -> str:
    """A value in TOML, a string in the quotes of the value it replaces where they can hold it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        if like.startswith("'") and "'" not in value and "\n" not in value:
            return f"'{value}'"
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TextEditError(f"a {type(value).__name__} value")


def toml_set(text: str, settings: dict[str, Any]) -> str:
    """`text` with each dotted key set to its value, in place on its line; a new key after the last
    key of its table (with that key's indentation), a new table at the end."""
    for dotted, value in settings.items():
        text = _toml_set_one(text, dotted.split("."), value)
    return text


def _toml_set_one(text: str, parts: list[str], value: Any) -> str:
    lines = text.splitlines(True)
    table: Optional[list[str]] = []
    last_in: dict[tuple, int] = {}  # table -> the index of its last key line
    header_at: dict[tuple, int] = {(): -1}
    for i, line in enumerate(lines):
        if _ARRAY_HEADER.match(line):
            table = None  # an array of tables: its keys are not addressed by a dotted name
            continue
        header = _HEADER.match(line)
        if header and not _KEY_LINE.match(line):
            table = _key_parts(header.group(1))
            header_at.setdefault(tuple(table), i)
            continue
        found = _KEY_LINE.match(line)
        if not found or table is None:
            continue
        last_in[tuple(table)] = i
        full = table + _key_parts(found.group(2))
        if full == parts:
            start = found.end()
            end = _toml_value_end(line, start)
            lines[i] = line[:start] + toml_value(value, line[start:end]) + line[end:]
            return "".join(lines)
    *parent, leaf = parts
    leaf_text = leaf if re.fullmatch(_BARE, leaf) else json.dumps(leaf)
    key = tuple(parent)
    if key in last_in or key in header_at:
        at = last_in.get(key, header_at[key])
        indent = _KEY_LINE.match(lines[at]).group(1) if key in last_in else ""
        new = f"{indent}{leaf_text} = {toml_value(value)}\n"
        if at >= 0 and not lines[at].endswith("\n"):
            lines[at] += "\n"
        lines.insert(at + 1, new)
        return "".join(lines)
    if not parent:
        return f"{leaf_text} = {toml_value(value)}\n" + text
    name = ".".join(p if re.fullmatch(_BARE, p) else json.dumps(p) for p in parent)
    tail = "" if text.endswith("\n") or not text else "\n"
    return text + tail + f"\n[{name}]\n{leaf_text} = {toml_value(value)}\n"
