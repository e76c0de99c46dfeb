"""`attn-doctor fleet`: the fleet report from per-node JSON reports (`check --json --output DIR/{host}.json`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import msgspec

from ..inputs import FLEET_MAX_FILES, REPORT_MAX_BYTES, InputError, check_input, decode_json, read_bounded, shown
from ..report import SCHEMA_ID, SCHEMA_VERSION, Report, Summary
from .aggregate import FleetReport, Member, Problem, aggregate
from .digest import report_digest


class FleetUsageError(Exception):
    """Nothing to aggregate (no such path, an empty folder): a usage error, exit 2."""


def expand(paths: list[Path]) -> tuple[list[Path], list[Problem]]:
    """The report files to read, and the `skipped` problems: files as given; a folder stands for
    the *.json entries directly inside it (sorted; not its subfolders, and at most FLEET_MAX_FILES).
    A path given by name that is not a regular file (a FIFO, a device) is a usage error; a *.json
    entry of a folder that is not one (a FIFO, a device or a link to one, a broken link, a folder)
    is skipped and named with the reason: reading it could block or never end, and a report left
    out without a word would make the fleet look complete when it is not."""
    files: list[Path] = []
    skipped: list[Problem] = []
    for p in paths:
        try:
            check_input(p)
            is_folder = False
        except InputError as exc:
            if str(exc) != "a folder, not a file":
                reason = "no such file or folder" if str(exc) == "no such file" else exc
                raise FleetUsageError(f"{shown(p)}: {reason}") from None
            is_folder = True
        if is_folder:
            found = []
            for x in p.glob("*.json"):
                reason = _not_a_report_file(x)
                if reason is None:
                    found.append(x)
                else:
                    skipped.append(Problem(kind="skipped", file=str(x), message=reason))
                if len(found) + len(skipped) > FLEET_MAX_FILES:
                    raise FleetUsageError(f"{shown(p)}: more than {FLEET_MAX_FILES:,} *.json entries in one folder")
            if not found and not skipped:
                raise FleetUsageError(f"{shown(p)}: a folder without *.json reports")
            files.extend(sorted(found))
        else:
            files.append(p)
    if len(files) > FLEET_MAX_FILES:
        raise FleetUsageError(f"more than {FLEET_MAX_FILES:,} reports given")
    seen, unique = set(), []
    for f in files:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique, sorted(skipped, key=lambda s: s.file or "")


def _not_a_report_file(entry: Path) -> Optional[str]:
    """None for a regular file (a link to one included); else why it is not read, in a few words."""
    try:
        check_input(entry, allow_stdin=False)
        return None
    except InputError as exc:
        reason = str(exc)
    if reason == "a folder, not a file":
        reason = "a folder, not a report file"
    if entry.is_symlink():
        try:
            target = os.readlink(entry)
        except OSError:
            target = "?"
        target = shown(target, 80)
        reason = f"a broken symbolic link (to {target})" if reason.startswith("no such file") else f"a symbolic link to {target}: {reason}"
    return reason


def load_report(path: Path) -> dict:
    """A report as JSON builtins (defaults filled in), or ValueError saying in one line why not.
    Bounded as --from-report is: a regular file, REPORT_MAX_BYTES, MAX_DEPTH (attn_doctor/inputs.py)."""
    try:
        raw = read_bounded(path, REPORT_MAX_BYTES)
    except InputError as exc:
        raise ValueError(str(exc)) from None
    return report_from_json(raw)


def report_from_json(raw: bytes) -> dict:
    """A report file's or a rank's bytes as a validated report (JSON builtins, defaults filled
    in), or ValueError saying in one line why not: at most REPORT_MAX_BYTES and MAX_DEPTH, an
    attn-doctor report of a schema version this doctor reads, every field of its type."""
    if len(raw) > REPORT_MAX_BYTES:
        raise ValueError(f"larger than {REPORT_MAX_BYTES // (1 << 20)} MiB: not a report")
    try:
        doc = decode_json(raw)
    except InputError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_ID:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"not an attn-doctor report (schema {found!r}; expected {SCHEMA_ID!r} from `check --json`)")
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ValueError(f"report schema version {version!r} is newer than this attn-doctor understands ({SCHEMA_VERSION})")
    try:
        report = msgspec.convert(doc, Report)
    except msgspec.ValidationError as exc:
        raise ValueError(f"invalid report: {str(exc)[:300]}") from None
    return msgspec.to_builtins(report)


def member_of(doc: dict, digest: str, file: Optional[str] = None) -> Member:
    facts = doc.get("facts") or {}
    env = facts.get("env") or {}

    def _int(name: str) -> Optional[int]:
        try:
            return int(env[name])
        except (KeyError, ValueError):
            return None

    return Member(
        rank=_int("RANK"),
        local_rank=_int("LOCAL_RANK"),
        host=(facts.get("platform") or {}).get("hostname") or (Path(file).stem if file else ""),
        file=file,
        digest=digest,
        exit_code=doc.get("exit_code", 0),
        summary=msgspec.convert(doc.get("summary") or {}, type=Summary),
    )


def fleet_from_files(paths: list[Path], *, fail_on: str = "error", expect: Optional[int] = None) -> FleetReport:
    files, problems = expand(paths)
    members: list[Member] = []
    reports: dict[str, dict] = {}
    for f in files:
        try:
            doc = load_report(f)
        except ValueError as exc:
            problems.append(Problem(kind="unreadable", file=str(f), message=str(exc)))
            continue
        digest = report_digest(doc)
        reports.setdefault(digest, doc)  # one full report per distinct digest is all the aggregate needs
        members.append(member_of(doc, digest, str(f)))
    if not members:
        raise FleetUsageError(
            "no readable report among " + ", ".join(f"{p.file} ({p.message})" for p in problems[:5]) + (" ..." if len(problems) > 5 else "")
        )
    # A rank recorded twice (two files from one rank) would be counted twice; ranks are informative only here.
    if expect is not None and len(files) < expect:
        problems.append(Problem(kind="missing", message=f"{expect - len(files)} of {expect} expected reports are missing (found {len(files)} files)"))
    fleet = aggregate(members, reports, problems, expected=expect, command="fleet", fail_on=fail_on)
    if expect is not None:
        fleet.summary.missing = max(0, expect - len(files))
    return fleet
