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

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ...facts import ConfigFile
from ...boundary.inputs import InputError, check_structure
# the documents' reading, as the probe's callers (fix, fleet, the tests) name it from here
from .documents import (ConfigReadError, _parse_yaml, _sniff, format_of, is_yaml, load_document,  # noqa: F401
                        load_with_format, not_settings, parse_text, yaml_error_place)
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
    # the file's own keys only: bases it names are not there (what a key's absence would say is unknown)
    partial: bool = False


def claimants(doc: dict, fmt: str) -> tuple[list, Optional[Any], int, list]:
    """The readers with evidence only their framework writes, as (score, reader, evidence), after a
    reader gives way to the one that builds on it; and the best-scoring reader by markers, its score
    and keys (recognise decides from these)."""
    from .readers import READERS, evidence  # the readers load where a config is read, not in every check

    claimed, best, best_score, best_keys = [], None, 0, []
    as_written = (doc, {})
    as_read = None  # the document as a framework that reads hyphens as underscores sees it (made once)
    for reader in READERS:
        if fmt not in reader.FORMATS:
            continue
        hyphens = getattr(reader, "HYPHENS_ARE_UNDERSCORES", False)
        if hyphens and as_read is None:
            as_read = spelled_as_underscores(doc)
        seen, spelled = as_read if hyphens else as_written
        score = sum(reader.MARKERS[k] for k in reader.MARKERS if k in seen)
        extra = getattr(reader, "recognise_extra", None)
        if extra is not None:
            score += extra(seen)
        found = [_respelled(f, spelled) for f in evidence(reader, seen)]  # said as the file writes them
        if found:
            claimed.append((score + 5 * len(found), reader, found))
        if score > best_score:
            best, best_score, best_keys = reader, score, [_respelled(k, spelled) for k in reader.MARKERS if k in seen]
    # a reader that another claimant's framework builds on gives way to it (a gpt-neox YAML is a DeepSpeed config too)
    names = {reader.NAME for _s, reader, _f in claimed}
    return [c for c in claimed if not set(getattr(c[1], "SUBSUMED_BY", ())) & names], best, best_score, best_keys


def spelled_as_underscores(doc: dict) -> tuple[dict, dict]:
    """`doc` with each top-level key's hyphens read as underscores, as GPT-NeoX reads its YAML
    (neox_arguments: `conf_key.replace("-", "_")`), and {key as read: key as written} for the keys
    so changed. A key written both ways keeps the underscore one's value (NeoX refuses the file)."""
    out, spelled = {}, {}
    for key, value in doc.items():
        read_as = key.replace("-", "_") if isinstance(key, str) else key
        if read_as != key:
            if read_as in doc:
                continue
            spelled[read_as] = key
        out[read_as] = value
    return out, spelled


def _respelled(name: str, spelled: dict) -> str:
    """A dotted key as the file writes its first part."""
    head, dot, rest = name.partition(".")
    return spelled.get(head, head) + dot + rest


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
    spelled: dict = {}
    if getattr(reader, "HYPHENS_ARE_UNDERSCORES", False):
        doc, spelled = spelled_as_underscores(doc)
    reading = reader.read(doc, Context(base=Path(absolute).parent, env=env if env is not None else os.environ,
                                       partial=bool(getattr(doc, "missing_bases", None))))
    unread = unread_keys(doc, reading.read)
    if spelled:  # said and edited as the file writes them
        unread = [_respelled(k, spelled) for k in unread]
        reading.settings = {_respelled(k, spelled): v for k, v in reading.settings.items()}
        reading.edits = {intent: {_respelled(k, spelled): v for k, v in edit.items()} for intent, edit in reading.edits.items()}
        reading.refused = {_respelled(k, spelled): v for k, v in reading.refused.items()}
        reading.refused_by = {_respelled(k, spelled): v for k, v in reading.refused_by.items()}
        reading.conflicts = {", ".join(_respelled(p, spelled) for p in k.split(", ")): v for k, v in reading.conflicts.items()}
        for entry in reading.plan.values():
            if getattr(entry, "key", None):
                entry.key = ", ".join(_respelled(p, spelled) for p in entry.key.split(", "))
    if fmt == "python":
        why = f"{why}; {_python_read(doc)}"
        unread = _python_unread(doc, unread)
        missing = getattr(doc, "missing_bases", None)
        if missing:
            # what only the absent bases set is unknown: no framework default is asserted for it
            reading.plan = {k: v for k, v in reading.plan.items() if v.source != "default"}
            why += (f"; its _base_ file{'s' if len(missing) > 1 else ''} {', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}"
                    f" {'are' if len(missing) > 1 else 'is'} not there: read from its own keys, no default assumed")
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


