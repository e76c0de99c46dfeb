"""The config probe: read the training configs given with ``--config`` and make of each a
framework-neutral training plan (plan.py) that the rules judge.

Each framework has one reader (readers/: LLaMA-Factory, axolotl, torchtune, TRL and the alignment
handbook, ms-swift, accelerate, DeepSpeed, torchtitan, LitGPT and Lightning, a model's config.json),
written from that framework's own code: it says how strongly a file's keys show the framework
(its MARKERS), and reads the file's precision and attention settings as that framework interprets
them, its defaults included. The file name is not used: users name configs freely.

A file no reader recognises, or that cannot be read, is kept with its reason (status "unknown" /
"error"): the rules report it as a finding and the rest of the check goes on.

YAML is read as the frameworks read it (PyYAML's safe_load, YAML 1.1: `off`/`on`/`yes`/`no` are
booleans); TOML with tomllib; JSON with json. All within attn_doctor/boundary/inputs.py's bounds.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ...facts import ConfigFile
from ...boundary.inputs import CONFIG_MAX_BYTES, MAX_DEPTH, YAML_MAX_BYTES, InputError, check_structure, located, read_bounded, text_of
from .plan import UNREAD_MAX, unread_keys
from .shapes import attention_shapes, head_dim_of, local_model_config  # noqa: F401  (the probe's public helpers)

# A file is taken for a framework when its keys score at least this much (a marker key is worth 1-5).
RECOGNISED_FROM = 4


@dataclass(frozen=True)
class Context:
    """What a reader may look at besides the file: its folder (a relative model path), and the
    environment variables a framework reads (accelerate's ACCELERATE_MIXED_PRECISION)."""

    base: Optional[Path] = None
    env: Optional[Mapping[str, str]] = None


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


def claimants(doc: dict, fmt: str) -> tuple[list, Optional[Any], int, list]:
    """The readers with evidence only their framework writes, as (score, reader, evidence), after a
    reader gives way to the one that builds on it; and the best-scoring reader by markers, its score
    and keys (recognise decides from these)."""
    from .readers import READERS, evidence  # the readers load where a config is read, not in every check

    claimed, best, best_score, best_keys = [], None, 0, []
    for reader in READERS:
        if fmt not in reader.FORMATS:
            continue
        keys = [k for k in reader.MARKERS if k in doc]
        score = sum(reader.MARKERS[k] for k in keys)
        extra = getattr(reader, "recognise_extra", None)
        if extra is not None:
            score += extra(doc)
        found = evidence(reader, doc)
        if found:
            claimed.append((score + 5 * len(found), reader, found))
        if score > best_score:
            best, best_score, best_keys = reader, score, keys
    # a reader that another claimant's framework builds on gives way to it (a gpt-neox YAML is a DeepSpeed config too)
    names = {reader.NAME for _s, reader, _f in claimed}
    return [c for c in claimed if not set(getattr(c[1], "SUBSUMED_BY", ())) & names], best, best_score, best_keys


def choose_reader(doc: dict, fmt: str) -> tuple[Optional[Any], str]:
    """The reader check reads the file with: the framework's beyond doubt, else the generic reader
    where the file holds the idioms every framework shares; (None, why) where neither."""
    reader, why = recognise(doc, fmt)
    if reader is not None:
        return reader, why
    from .readers import FALLBACK

    generic_why = FALLBACK.recognise(doc)
    if generic_why is None:
        return None, why
    # a file that looks like a framework's without proof: what it says, and no default of that framework
    looks = f" ({why}: no framework default assumed)" if " suggest " in why else ""
    return FALLBACK, f"{generic_why}{looks}"


def recognise(doc: dict, fmt: str) -> tuple[Optional[Any], str]:
    """The reader whose framework the file is beyond doubt, and why (the evidence only it writes);
    (None, why not) where no reader has such evidence: why then names the framework the keys
    suggest, if any ("keys a, b are LLM Foundry / Composer's too, but none only it writes")."""
    claimed, best, best_score, best_keys = claimants(doc, fmt)
    if claimed:
        _score, reader, found = max(claimed, key=lambda c: c[0])
        return reader, "only " + reader.LABEL + " writes " + ", ".join(str(f) for f in found[:4]) + (", ..." if len(found) > 4 else "")
    if best is not None and best_score >= RECOGNISED_FROM:
        shown = ", ".join(best_keys[:5]) if best_keys else "its structure"
        return None, f"{shown} suggest {best.LABEL}, but nothing only {best.LABEL} writes"
    top = ", ".join(str(k) for k in list(doc)[:8]) + (", ..." if len(doc) > 8 else "")
    return None, f"its keys ({top or 'none'}) are not those of a framework attn-doctor reads"


def detect_kind(doc: dict, fmt: str = "yaml") -> str:
    reader, _why = recognise(doc, fmt)
    return reader.NAME if reader is not None else "unknown"


def unreadable(path: str) -> Optional[str]:
    """Why the file at `path` cannot be read as a config (in plain words), or None where it can."""
    try:
        doc, _fmt = load_with_format(Path(path).expanduser())
    except ConfigReadError as exc:
        return str(exc)
    return None if isinstance(doc, dict) else not_settings(doc)


def probe_config(path: str, env: Optional[Mapping[str, str]] = None) -> ConfigFile:
    """One config file; never raises: an unreadable file is a ConfigFile with status error, one no
    reader recognises has kind "unknown" and says why."""
    p = Path(path).expanduser()
    absolute = os.path.abspath(p)
    try:
        doc, fmt = load_with_format(p)
    except ConfigReadError as exc:
        return ConfigFile(path=absolute, status="error", error=str(exc), format=format_of(p))
    return _read(absolute, doc, fmt, env)


def probe_config_text(path: str, text: str, env: Optional[Mapping[str, str]] = None) -> ConfigFile:
    """The file at `path` as it would be read if it held `text` (fix judges an edit before it writes
    it): the same readers, its folder as the context."""
    absolute = os.path.abspath(Path(path).expanduser())
    try:
        doc = parse_text(Path(absolute), text)
        fmt = format_of(Path(absolute)) or _sniff(text)[1]
        check_structure(doc)
    except ConfigReadError as exc:
        return ConfigFile(path=absolute, status="error", error=str(exc), format=format_of(Path(absolute)))
    except (InputError, RecursionError) as exc:
        return ConfigFile(path=absolute, status="error", error=str(exc) or "nested too deep", format=format_of(Path(absolute)))
    return _read(absolute, doc, fmt, env)


def _read(absolute: str, doc: Any, fmt: str, env: Optional[Mapping[str, str]]) -> ConfigFile:
    if not isinstance(doc, dict):
        return ConfigFile(path=absolute, status="error", format=fmt, error=not_settings(doc))
    reader, why = choose_reader(doc, fmt)
    if reader is None:
        return ConfigFile(path=absolute, kind="unknown", format=fmt, why=why, unread=unread_keys(doc, set()))
    reading = reader.read(doc, Context(base=Path(absolute).parent, env=env if env is not None else os.environ))
    unread = unread_keys(doc, reading.read)
    if fmt == "python":
        why = f"{why}; {_python_read(doc)}"
        unread = _python_unread(doc, unread)
    return ConfigFile(path=absolute, kind=reader.NAME, format=fmt, why=why, settings={k: _plain(v) for k, v in reading.settings.items()},
                      plan=reading.plan, unread=unread, edits=reading.edits,
                      refused=reading.refused, refused_by=reading.refused_by, conflicts=reading.conflicts)


def _python_read(doc: Any) -> str:
    files = len(getattr(doc, "files", ()) or ())
    skipped = len(getattr(doc, "not_evaluated", ()) or ()) + len(getattr(doc, "skipped", ()) or ())
    bases = f" and its {files - 1} _base_ file{'s' if files > 2 else ''}" if files > 1 else ""
    return (f"read as Python without running it (the file{bases})"
            + (f"; {skipped} value{'s' if skipped != 1 else ''} not evaluated" if skipped else ""))


def _python_unread(doc: Any, unread: list[str]) -> list[str]:
    """The keys not understood, a setting whose value was not evaluated said with its expression
    (never read as a value), then each statement that changes settings and was not evaluated."""
    from .plan import get, looks_like_setting

    out = list(unread)
    for dotted in getattr(doc, "not_evaluated", ()):
        if not looks_like_setting(dotted):
            continue
        value = get(doc, dotted)
        said = f"{dotted} (not evaluated: {getattr(value, 'expr', value)})"
        out = [said if k == dotted else k for k in out] if dotted in out else out + [said]
    out += [f"not evaluated: {stmt}" for stmt in getattr(doc, "skipped", ())]
    return out[:UNREAD_MAX]


def probe_configs(paths: Optional[list[str]], env: Optional[Mapping[str, str]] = None) -> list[ConfigFile]:
    return [probe_config(p, env) for p in (paths or [])]


def _plain(value: Any) -> Any:
    if value is None or type(value) in (bool, int, float, str):
        return value
    return str(value)  # a str subclass (a Python config's symbol) as its text too


def reader_of(kind: str):
    """The reader of a framework by its name (fix writes a remedy through it)."""
    from .readers import by_name

    return by_name(kind)


