"""`attn-doctor fleet`: the fleet report from per-node JSON reports (`check --output DIR/{host}.json -q`)."""

from __future__ import annotations

import gc
import os
import stat
from pathlib import Path
from typing import Any, Optional

import msgspec

from ..boundary.inputs import FLEET_MAX_FILES, REPORT_MAX_BYTES, InputError, check_input, read_bounded, shown
from .aggregate import FleetReport, Member, Problem, aggregate
from .view import REPORT_VIEW, Representatives, read_full, read_report


class FleetUsageError(Exception):
    """Nothing to aggregate (no such path, an empty folder): a usage error, exit 2."""


def expand(paths: list[Path]) -> tuple[list[Path], list[Problem]]:
    """The report files to read, and the `skipped` problems: files as given; a folder stands for
    the *.json entries directly inside it (sorted; not its subfolders, and at most FLEET_MAX_FILES).
    A path given by name that is not a regular file (a FIFO, a device) is a usage error; a *.json
    entry of a folder that is not one (a FIFO, a device or a link to one, a broken link, a folder)
    is skipped and named with the reason: reading it could block or never end, and a report left
    out without a word would make the fleet look complete when it is not."""
    files: list[tuple[Path, tuple]] = []  # with the file's identity (device, inode): a file named twice is read once
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
            try:
                with os.scandir(p) as entries:  # one stat per entry, no path resolved per file
                    for entry in entries:
                        if not entry.name.endswith(".json"):
                            continue
                        x = p / entry.name
                        try:
                            st = entry.stat()
                        except OSError:
                            st = None
                        if st is not None and stat.S_ISREG(st.st_mode):
                            found.append((x, (st.st_dev, st.st_ino)))
                        else:
                            skipped.append(Problem(kind="skipped", file=str(x), message=_not_a_report_file(x) or "not a regular file"))
                        if len(found) + len(skipped) > FLEET_MAX_FILES:
                            raise FleetUsageError(f"{shown(p)}: more than {FLEET_MAX_FILES:,} *.json entries in one folder")
            except OSError as exc:
                raise FleetUsageError(f"{shown(p)}: cannot read the folder: {exc.strerror or exc}") from None
            if not found and not skipped:
                raise FleetUsageError(f"{shown(p)}: a folder without *.json reports")
            files.extend(sorted(found, key=lambda f: str(f[0])))
        else:
            try:
                st = os.stat(p)
                files.append((p, (st.st_dev, st.st_ino)))
            except (OSError, ValueError):
                files.append((p, (None, str(p))))  # stdin ('-'): read as given
    if len(files) > FLEET_MAX_FILES:
        raise FleetUsageError(f"more than {FLEET_MAX_FILES:,} reports given")
    seen, unique = set(), []
    for f, identity in files:
        if identity not in seen:
            seen.add(identity)
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


def report_from_json(raw: bytes) -> dict:
    """A rank's or a Ray node's bytes as a validated report (JSON builtins, defaults filled in), or
    ValueError saying in one line why not: at most REPORT_MAX_BYTES and MAX_DEPTH, an attn-doctor
    report of a schema version this doctor reads, every field of its type."""
    if len(raw) > REPORT_MAX_BYTES:
        raise ValueError(f"larger than {REPORT_MAX_BYTES // (1 << 20)} MiB: not a report")
    report, _ = read_full(raw)
    return msgspec.to_builtins(report)


def member_of(doc: Any, digest: str, file: Optional[str] = None) -> Member:
    """The member for a report: decoded (view.read_report, read_full) or as JSON builtins."""
    report = msgspec.convert(doc, REPORT_VIEW) if isinstance(doc, dict) else doc
    env = report.facts.env

    def _int(name: str) -> Optional[int]:
        try:
            return int(env[name])
        except (KeyError, ValueError):
            return None

    return Member(
        rank=_int("RANK"),
        local_rank=_int("LOCAL_RANK"),
        host=report.facts.platform.hostname or (Path(file).stem if file else ""),
        file=file,
        digest=digest,
        exit_code=report.exit_code,
        summary=report.summary,
    )


def _read_all(files: list[Path], reports: Representatives, problems: list[Problem]):
    """A member for each readable report (its report kept when its digest is new); a problem for each other."""
    for f in files:
        try:
            raw = read_bounded(f, REPORT_MAX_BYTES)
            view, digest = read_report(raw)
            reports.keep(digest, raw)
        except (InputError, ValueError) as exc:
            problems.append(Problem(kind="unreadable", file=str(f), message=str(exc)))
            continue
        yield member_of(view, digest, str(f))


def fleet_from_files(paths: list[Path], *, fail_on: str = "error", expect: Optional[int] = None) -> FleetReport:
    files, problems = expand(paths)
    members: list[Member] = []
    # Streamed: one small Member per file, and one report per distinct digest (kept compressed,
    # made builtins only when the aggregate describes its group) is all the aggregate needs.
    reports = Representatives()
    # Decoding makes thousands of short-lived container objects per report, each a nudge to the
    # cycle collector, which then walks every member kept so far: a third of the time at 10,000
    # reports. Nothing here makes a cycle (decoded JSON cannot), so reference counting frees it all.
    collecting = gc.isenabled()
    gc.disable()
    try:
        members.extend(_read_all(files, reports, problems))
    finally:
        if collecting:
            gc.enable()

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
