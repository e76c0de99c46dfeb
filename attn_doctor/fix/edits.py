"""Config edits and atomic file writes: the only code in attn-doctor that writes a user's file.

YAML (LLaMA-Factory, accelerate) is parsed with ruamel.yaml's round-trip loader, which knows where
each key and value sits in the text; the value is then replaced in place, so every other byte
(comments, key order, quoting, blank lines, indentation) stays exactly as it was. JSON (a model's
config.json, DeepSpeed) is edited in place too (text_edits.py): numbers keep their spelling (`5e8`),
keys their order, lines their indentation; TOML (torchtitan, prime-rl, kohya) likewise, value by value on
its line, comments kept. Every edit is read back with the loader the training tool uses and must mean what was
intended, and nothing else may have changed.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Optional

from ..probes.configs import ConfigReadError, detect_kind, is_yaml, load_with_format, parse_text
from ..probes.configs.plan import get as _get
from ..rules.checks.llamafactory_values import llamafactory_flash_attn_intent, llamafactory_flash_attn_value
from .text_edits import TextEditError, json_set, toml_set


class EditError(Exception):
    """An edit that cannot be made safely: the message says why, in one line."""


# ---------------------------------------------------------------- atomic writes


def atomic_write(path: Path, data: bytes, mode: Optional[int] = None) -> None:
    """Write, fsync, rename: the file is the old bytes or the new, never half of either.

    The new file keeps the old one's permission bits (and owner, where we may set it).
    """
    path = Path(path)
    st = None
    try:
        st = path.stat()
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".attn-doctor-tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode if mode is not None else (st.st_mode & 0o7777 if st else 0o644))
        if st is not None:
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except (PermissionError, OSError):
                pass
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(str(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    a = old.decode("utf-8", "replace").splitlines(True)
    b = new.decode("utf-8", "replace").splitlines(True)
    return "".join(difflib.unified_diff(a, b, fromfile=path, tofile=path, n=2))


# ---------------------------------------------------------------- what a remedy means per kind


def settings_for(kind: str, key: str, value: Any, doc: dict, llamafactory_version: Optional[str]) -> dict[str, Any]:
    """The settings to write for one remedy, coherent with the rest of the file.

    Precision flags are exclusive: turning fp16 on turns bf16 (and pure_bf16) off; the DeepSpeed
    fp16 block goes with a disabled bf16 block. `flash_attn` is spelt as the installed
    LLaMA-Factory version wants it. A transformers dtype goes to whichever key the file uses.
    """
    if kind == "llamafactory":
        if key == "flash_attn":
            intent = llamafactory_flash_attn_intent(value) or "auto"
            return {"flash_attn": llamafactory_flash_attn_value(llamafactory_version, intent)}
        if key in ("fp16", "bf16", "pure_bf16") and value is True:
            out = {key: True}
            for other in ("fp16", "bf16", "pure_bf16"):
                if other != key and other in doc and doc[other] is not False:
                    out[other] = False
            return out
        return {key: value}
    if kind == "transformers":
        if key in ("torch_dtype", "dtype"):
            keys = [k for k in ("dtype", "torch_dtype") if doc.get(k) not in (None, value)] or [key]
            return {k: value for k in keys}
        if key == "attn_implementation":
            keys = [k for k in ("attn_implementation", "_attn_implementation") if k in doc] or [key]
            return {k: value for k in keys}
        return {key: value}
    if kind == "deepspeed":
        if key in ("fp16.enabled", "bf16.enabled") and value is True:
            other = "bf16" if key.startswith("fp16") else "fp16"
            out = {key: True}
            for alias in ("bf16", "bfloat16") if other == "bf16" else ("fp16",):
                block = doc.get(alias)
                if isinstance(block, dict) and block.get("enabled") not in (False,):
                    out[f"{alias}.enabled"] = False
            return out
        return {key: value}
    return {key: value}


def edit_config(path: Path, kind: str, key: str, value: Any, llamafactory_version: Optional[str] = None) -> tuple[bytes, bytes, dict]:
    """(old bytes, new bytes, settings written) for one remedy on one file. Changes nothing on disk."""
    path = Path(path)
    try:
        old = path.read_bytes()
        doc, fmt = load_with_format(path)
    except (OSError, ConfigReadError) as exc:
        raise EditError(f"{path}: {exc}") from None
    if not isinstance(doc, dict):
        raise EditError(f"{path}: not a mapping of settings")
    found = detect_kind(doc, fmt)
    if found != kind:
        raise EditError(f"{path}: expected a {kind} config, found {found}")
    settings = settings_for(kind, key, value, doc, llamafactory_version)
    new = apply_settings(path, old, settings)
    return old, new, settings


def apply_settings(path: Path, text: bytes, settings: dict[str, Any]) -> bytes:
    """`text` with `settings` written; verified by reading it back."""
    if path.suffix.lower() == ".py":
        shown = " ".join(f"{k}={v}" for k, v in settings.items())
        raise EditError(f"a Python config is read, never edited or run; pass --cfg-options {shown} to the training "
                        "command, or set it in the file by hand")
    if path.suffix.lower() == ".env":
        shown = ", ".join(f"{k}={v}" for k, v in settings.items())
        raise EditError(f"a shell KEY=VALUE file is not edited automatically; set {shown} by hand")
    setter = toml_set if path.suffix.lower() == ".toml" else _yaml_set if is_yaml(path) else json_set
    try:
        new = _in_its_line_endings(lambda plain: setter(plain, settings), text.decode("utf-8")).encode("utf-8")
    except TextEditError as exc:
        raise EditError(f"{exc}; edit it by hand") from None
    _verify(path, text, new, settings)
    return new


def _in_its_line_endings(edit, text: str) -> str:
    """edit(text), whose new lines end in \n, with the file's own line endings: a file whose every
    line ends in \r\n (written on Windows) gets its new lines in \r\n too, and keeps the others."""
    if "\r\n" not in text or text.count("\n") != text.count("\r\n"):
        return edit(text)
    return edit(text.replace("\r\n", "\n")).replace("\n", "\r\n")


def _verify(path: Path, old: bytes, new: bytes, settings: dict[str, Any]) -> None:
    before = _parse(path, old)
    try:
        after = _parse(path, new)
    except Exception as exc:  # noqa: BLE001 - whatever the loader says, the edit is not written
        raise EditError(f"{path}: the edited file would not read back ({type(exc).__name__}); left unchanged, edit it by hand") from None
    for dotted, value in settings.items():
        if _get(after, dotted) != value or type(_get(after, dotted)) is not type(value):
            raise EditError(f"{path}: the edit of {dotted} did not read back as {value!r} (left unchanged)")
    for dotted in settings:
        _pop(before, dotted)
        _pop(after, dotted)
    _drop_empty(before)
    _drop_empty(after)
    if before != after:
        raise EditError(f"{path}: editing {', '.join(settings)} would change other settings (left unchanged)")


def _parse(path: Path, data: bytes) -> Any:
    return parse_text(path, data.decode("utf-8"))  # the loader the check read it with


def _pop(doc: Any, dotted: str) -> None:
    parts = dotted.split(".")
    for part in parts[:-1]:
        if not isinstance(doc, dict):
            return
        doc = doc.get(part)
    if isinstance(doc, dict):
        doc.pop(parts[-1], None)


def _drop_empty(doc: dict) -> None:
    for k in [k for k, v in doc.items() if v == {}]:
        del doc[k]


# ---------------------------------------------------------------- YAML: in-place value edits

# Strings YAML 1.1 (PyYAML, what LLaMA-Factory and accelerate load with) would read as something
# else than a string when left unquoted.
_YAML11_SPECIAL = re.compile(r"^(y|n|yes|no|on|off|true|false|null|~|[-+.0-9].*)$", re.IGNORECASE)
_SCALAR = re.compile(r"""^('(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^\s#][^#\n]*?)(?=\s+#|\s*$)""")
# A scalar inside a flow mapping ({"key": value, ...} over several lines, as GPT-NeoX writes its
# configs): it ends at the comma or the closing bracket after it.
_FLOW_SCALAR = re.compile(r"""^('(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^\s#,\[\]{}][^#\n,\[\]{}]*?)(?=\s*[,}\]]|\s+#|\s*$)""")


def _yaml_scalar(value: Any, like: str = "") -> str:
    if isinstance(value, (list, tuple)):
        import json

        return json.dumps(value)  # a one-line flow sequence (JSON is YAML): [[["global"], 12]]
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    quote = like[:1] if like[:1] in ("'", '"') else ""
    if not quote and not _plain_string(text):
        quote = '"'
    return f"{quote}{text}{quote}" if quote else text


def _plain_string(text: str) -> bool:
    """`text` written unquoted reads back as that same string under YAML 1.1 (PyYAML's safe_load):
    `16-mixed` does, `off`, `1e5` or `16` do not."""
    if not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$", text) or _YAML11_SPECIAL.match(text) and not text[:1].isdigit():
        return False
    from ..probes.configs import ConfigReadError, parse_text

    try:
        return parse_text(Path("value.yaml"), f"value: {text}\n") == {"value": text}
    except ConfigReadError:
        return False


def _yaml_set(text: str, settings: dict[str, Any]) -> str:
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    from ruamel.yaml.error import YAMLError

    try:
        doc = YAML(typ="rt", pure=True).load(text)
    except YAMLError as exc:
        from ..probes.configs import yaml_error_place

        raise EditError(f"the round-trip YAML loader cannot read it{yaml_error_place(exc, text)}; edit it by hand") from None
    if not isinstance(doc, CommentedMap):
        raise EditError("not a mapping of settings")
    # {key: value, ...}: a value on its key's line is replaced in place as in block style; a new key
    # goes on a line of its own after a sibling whose line ends in a comma
    flow = bool(doc.fa.flow_style())
    if flow and len({doc.lc.key(k)[0] for k in doc}) <= 1:
        # {key: value, ...} on one line: no line of its own for a value or a new key
        raise EditError("a flow-style mapping on one line ({key: value, ...}); edit it by hand")
    scalar = _FLOW_SCALAR if flow else _SCALAR
    lines = text.splitlines(True)
    inserts: list[tuple[int, str]] = []
    for key, value in settings.items():
        if "." in key:
            inserts += _yaml_set_nested(doc, lines, key, value, settings)
            continue
        if not flow and key in doc and doc[key] is None and _fill_empty(lines, doc.lc.key(key)[0], key, value):
            continue  # `fp16:` with no value (axolotl's examples): the value written after the colon
        if key in doc:
            line_no, col = doc.lc.value(key)
            line = lines[line_no]
            rest = line[col:]
            if isinstance(value, (list, tuple)):
                end = _flow_sequence_end(rest)
                if line_no != doc.lc.key(key)[0] or end is None:
                    raise EditError(f"{key}: its value is not a sequence on one line; edit it by hand")
                lines[line_no] = line[:col] + _yaml_scalar(value) + rest[end:]
                continue
            match = scalar.match(rest)
            if line_no != doc.lc.key(key)[0] or not match:
                raise EditError(f"{key}: its value is not a one-line scalar; edit it by hand")
            lines[line_no] = line[:col] + _yaml_scalar(value, match.group(1)) + rest[match.end():]
        elif flow:
            inserts.append(_flow_insert(doc, lines, key, value))
        else:
            # A new key goes right after its sibling precision/attention key when there is one,
            # else at the end, with the file's indentation of top-level keys (none).
            anchor = next((k for k in ("bf16", "fp16", "pure_bf16", "flash_attn") if k in doc), None)
            at = _last_line_of(doc, anchor, lines) + 1 if anchor else len(lines)
            inserts.append((at, f"{key}: {_yaml_scalar(value)}\n"))
    for at, new_line in sorted(inserts, reverse=True):
        if at > 0 and at <= len(lines) and not lines[at - 1].endswith("\n"):
            lines[at - 1] += "\n"
        lines.insert(at, new_line)
    return "".join(lines)


def _flow_sequence_end(rest: str) -> int | None:
    """Where a flow sequence that opens `rest` ("[[...], 12]], ...") closes on the same line (the
    index after its last bracket); None where `rest` opens none or it goes on past the line."""
    if not rest.startswith("["):
        return None
    depth, quote = 0, ""
    for i, ch in enumerate(rest):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        elif ch == "\n":
            return None
    return None


def _flow_insert(node, lines: list[str], key: str, value: Any) -> tuple[int, str]:
    """A new key of a flow mapping written over several lines: on the line after a sibling whose
    one-line scalar value ends in a comma, at its indentation, its key quoted as the sibling's is."""
    for sibling in node:
        key_line, key_col = node.lc.key(sibling)
        line = lines[key_line]
        if node.lc.value(sibling)[0] != key_line or isinstance(node[sibling], (dict, list)):
            continue
        if not line.rstrip("\r\n").split("#")[0].rstrip().endswith(","):
            continue
        quote = line[key_col] if line[key_col] in "\"'" else ""
        return key_line + 1, " " * key_col + f"{quote}{key}{quote}: {_yaml_scalar(value, quote)},\n"
    raise EditError(f"{key}: no one-line setting followed by a comma to put it beside in the flow mapping; edit it by hand")


def _yaml_set_nested(doc, lines: list[str], dotted: str, value: Any, settings: dict[str, Any]) -> list[tuple[int, str]]:
    """One nested key (`model.attn_config.attn_impl`), in place on its own line where it is there; a
    new one on the line after a one-line sibling of its mapping, at that sibling's indentation (the
    key edited beside it first). Lines are changed in `lines`; insertions are returned."""
    from ruamel.yaml.comments import CommentedMap

    *parents, leaf = dotted.split(".")
    node = doc
    for part in parents:
        node = node.get(part) if isinstance(node, CommentedMap) else None
        if not isinstance(node, CommentedMap):
            raise EditError(f"{dotted}: {part} is not a mapping in the file; edit it by hand")
    flow = bool(node.fa.flow_style())
    if flow and leaf not in node:
        raise EditError(f"{dotted}: {parents[-1]} is a flow mapping without {leaf}; edit it by hand")
    if not flow and leaf in node and node[leaf] is None and _fill_empty(lines, node.lc.key(leaf)[0], leaf, value):
        return []
    if leaf in node:
        line_no, col = node.lc.value(leaf)
        line = lines[line_no]
        rest = line[col:]
        match = (_FLOW_SCALAR if flow else _SCALAR).match(rest)
        if line_no != node.lc.key(leaf)[0] or not match:
            raise EditError(f"{dotted}: its value is not a one-line scalar; edit it by hand")
        lines[line_no] = line[:col] + _yaml_scalar(value, match.group(1)) + rest[match.end():]
        return []
    prefix = ".".join(parents) + "."
    edited = [k[len(prefix):] for k in settings if k.startswith(prefix) and "." not in k[len(prefix):] and k[len(prefix):] in node]
    siblings = edited + [k for k in node if k not in edited]
    for sibling in siblings:
        key_line, key_col = node.lc.key(sibling)
        if node.lc.value(sibling)[0] == key_line and not isinstance(node[sibling], (dict, list)):
            return [(key_line + 1, " " * key_col + f"{leaf}: {_yaml_scalar(value)}\n")]
    raise EditError(f"{dotted}: no one-line sibling to put it beside; edit it by hand")


def _fill_empty(lines: list[str], line_no: int, key: str, value: Any) -> bool:
    """`KEY:` alone on its line (an empty value, a comment after it allowed): the value written after
    the colon, the comment and the line ending kept. False where the line is not that."""
    line = lines[line_no]
    body = line.rstrip("\r\n")
    m = re.match(r"^(\s*%s\s*:)[ \t]*(#.*)?$" % re.escape(str(key)), body)
    if not m:
        return False
    comment = "  " + m.group(2) if m.group(2) else ""
    lines[line_no] = m.group(1) + " " + _yaml_scalar(value) + comment + line[len(body):]
    return True


def _last_line_of(doc, key: str, lines: list[str]) -> int:
    return doc.lc.value(key)[0]
