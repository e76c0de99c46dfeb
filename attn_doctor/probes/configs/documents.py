"""A config file's data, as the training tools would read it: YAML 1.1 (PyYAML's safe_load), TOML,
JSON (with // and /* */ comments, as the frameworks that allow them strip them), a shell KEY=VALUE
file, a Python config read without running it; all within attn_doctor/boundary/inputs.py's bounds.
Below the readers and shapes.py, which read other files (a base config, a model's config.json)
through it, so that nothing here imports the package that lists the readers."""

from __future__ import annotations

import os

import json
import re
import warnings
from pathlib import Path
from typing import Any, Optional

from ...boundary.inputs import CONFIG_MAX_BYTES, MAX_DEPTH, YAML_MAX_BYTES, InputError, check_structure, located, read_bounded, text_of


class ConfigReadError(Exception):
    pass


def is_yaml(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


def format_of(path: Path) -> Optional[str]:
    """yaml | json | toml from the file's suffix; None where it says nothing (the text decides)."""
    suffix = path.suffix.lower()
    return {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml", ".env": "env", ".py": "python"}.get(suffix)


def load_document(path: Path) -> Any:
    """The file's data, as the training tools would read it (YAML 1.1 / JSON as Python's json
    reads it / TOML), within the bounds of attn_doctor/boundary/inputs.py: a regular file, CONFIG_MAX_BYTES
    (YAML_MAX_BYTES for YAML), MAX_DEPTH levels, MAX_VALUES values with YAML aliases expanded."""
    return load_with_format(path)[0]


def load_with_format(path: Path) -> tuple[Any, str]:
    """(the file's data, its format). A file whose suffix names no format is read as JSON, else TOML,
    else YAML, the first that parses."""
    fmt = format_of(path)
    try:
        raw = read_bounded(path, CONFIG_MAX_BYTES if fmt == "json" else YAML_MAX_BYTES, allow_stdin=False)
        if b"\x00" in raw[:8192]:
            # NUL bytes are never in a text config: said as what it is, not as a parse error at byte 0
            raise InputError("a binary file, not a text config")
        text = text_of(raw, "a text config: a binary file, or not UTF-8 text")
    except InputError as exc:
        raise ConfigReadError(str(exc)) from None
    if not text.strip():
        raise ConfigReadError("the file is empty")
    try:
        if fmt == "python":
            doc = _parse_python(path, text)
        elif fmt is not None:
            doc = _PARSERS[fmt](text)
        else:
            doc, fmt = _sniff(text)
    except RecursionError:
        raise ConfigReadError(f"nested deeper than {MAX_DEPTH} levels") from None
    try:
        check_structure(doc)
    except InputError as exc:
        raise ConfigReadError(str(exc)) from None
    return doc, fmt


def parse_text(path: Path, text: str) -> Any:
    """`text` read as the file at `path` is read (its suffix's format, else the first that parses),
    unbounded: for text the caller made from a file already read within the bounds (fix's edits)."""
    fmt = format_of(path)
    if fmt == "python":
        return _parse_python(path, text)
    return _PARSERS[fmt](text) if fmt is not None else _sniff(text)[0]


def _parse_python(path: Path, text: str) -> Any:
    """A Python config read statically (pyconfig.py: never imported or run); its _base_ files within
    the same bounds as the file."""
    from .pyconfig import PythonConfigError, load

    def read_base(base: Path) -> str:
        if not os.path.exists(base):
            raise FileNotFoundError(str(base))  # a base that is not there: the leaf is read without it
        try:
            return text_of(read_bounded(base, YAML_MAX_BYTES, allow_stdin=False), "a Python config in UTF-8")
        except InputError as exc:
            raise ValueError(str(exc)) from None

    try:
        return load(path, text, read_base)
    except PythonConfigError as exc:
        raise ConfigReadError(str(exc)) from None


def _sniff(text: str) -> tuple[Any, str]:
    errors = []
    for fmt in ("json", "toml", "yaml"):
        try:
            return _PARSERS[fmt](text), fmt
        except ConfigReadError as exc:
            errors.append(str(exc))
    raise ConfigReadError("not JSON, TOML or YAML (the file name does not say which; " + "; ".join(errors) + ")")


def _parse_toml(text: str) -> Any:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigReadError(f"TOML syntax error: {_toml_problem(exc, text)}") from None


def _toml_problem(exc: Exception, source: str) -> str:
    """tomllib's message as `the problem at line L, column C: <that line>`."""
    text = str(exc)
    found = re.search(r"\(at line (\d+), column (\d+)\)", text)
    problem = text[: found.start()].strip() if found else text
    return (problem[:200] + (f" at {located(source, int(found.group(1)), int(found.group(2)))}" if found else ""))


def _parse_yaml(text: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)  # PyYAML's safe_load: `off` is False, as LLaMA-Factory sees it
    yaml.allow_duplicate_keys = True  # PyYAML keeps the last of a repeated key (accelerate's own test configs repeat one)
    # A framework's own tag (levanter's `!include`, OmegaConf-style loaders) is read as the value it
    # tags: the file is still YAML, and its other keys are still judged. Nothing is constructed.
    yaml.constructor.add_multi_constructor("!", _tagged_as_plain)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a reused anchor is loaded as PyYAML loads it; no stderr noise
            return yaml.load(text)
    except YAMLError as exc:
        raise ConfigReadError(f"YAML syntax error{yaml_error_place(exc, text)}") from None


def _tagged_as_plain(constructor, _suffix, node):
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    if isinstance(node, MappingNode):
        return constructor.construct_mapping(node, deep=True)
    if isinstance(node, SequenceNode):
        return constructor.construct_sequence(node, deep=True)
    return constructor.construct_scalar(node)


def yaml_error_place(exc: Exception, text: str) -> str:
    """` at line L, column C: <that line> (the problem)` for a ruamel.yaml error, or `: the problem`
    where it knows no place."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if mark is None:
        return f": {problem}"
    return f" at {located(text, mark.line + 1, mark.column + 1)} ({problem})"


def _blank_comments(text: str) -> Optional[str]:
    """JSON with // and /* */ comments (Coqui TTS, VS Code-style configs, read by their frameworks with
    the comments stripped) as plain JSON, each comment blanked to spaces so that lines and columns stay
    where they were; None where there is no comment outside a string."""
    out, i, n, in_string, found = [], 0, len(text), False, False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i, found = end, True
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i, found = end, True
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out) if found else None


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        plain = _blank_comments(text)
        if plain is not None:
            try:
                return json.loads(plain)
            except json.JSONDecodeError as again:
                exc = again
        raise ConfigReadError(f"JSON syntax error at {located(text, exc.lineno, exc.colno)} ({exc.msg})") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4300 by default)
        raise ConfigReadError(f"not a usable JSON config: {exc}") from None


_PARSERS = {"yaml": lambda text: _parse_yaml(text), "json": lambda text: _parse_json(text), "toml": _parse_toml,
            "env": lambda text: _parse_env(text)}


def _parse_env(text: str):
    from .readers.diffusion.simpletuner import parse_env

    try:
        return parse_env(text)
    except ValueError as exc:
        raise ConfigReadError(f"not a shell KEY=VALUE file: {exc}") from None


def not_settings(doc: Any) -> str:
    """Why a parsed file holds no settings, in plain words."""
    if doc is None:
        return "the file holds no settings (only comments, or an empty document)"
    what = "a list" if isinstance(doc, list) else "a single value"
    return f"the file holds {what}, not settings (expected key: value pairs)"
