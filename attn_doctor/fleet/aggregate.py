"""The fleet report: reports grouped by fleet digest, minorities diffed against the majority. Pure.

Input is bounded by design: one small `Member` per rank or file, and one full report per distinct
digest (the group's representative), never one full report per rank.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Optional

import msgspec

from .. import __version__
from ..report import EXIT_FINDINGS, EXIT_OK, EXIT_PROBE_FAILED, STATUS_ORDER, Summary, Tool, now
from .digest import differences, fleet_view

FLEET_SCHEMA_ID = "attn-doctor/fleet"
FLEET_SCHEMA_VERSION = 1


class Member(msgspec.Struct, kw_only=True):
    """One rank (check --distributed) or one report file (fleet)."""

    rank: Optional[int] = None
    local_rank: Optional[int] = None
    host: str = ""
    file: Optional[str] = None
    node: Optional[str] = None  # the Ray node's id (fleet --ray): several nodes may share a host
    digest: str
    exit_code: int = 0
    summary: Summary = msgspec.field(default_factory=Summary)


class Difference(msgspec.Struct, kw_only=True):
    path: str  # facts.gpu.devices[0].name
    majority: Any
    value: Any


class Finding(msgspec.Struct, kw_only=True):
    rule: str
    name: str
    status: str
    message: Optional[str] = None


class Group(msgspec.Struct, kw_only=True):
    digest: str
    majority: bool
    size: int
    status: Literal["pass", "info", "warning", "error", "crashed", "unknown"]
    ranks: list[int] = []
    hosts: list[str] = []
    members: list[Member] = []
    # The group's key facts (GPU, driver, torch, kernels), from its representative report.
    key_facts: dict[str, Any] = {}
    findings: list[Finding] = []  # the rules that did not pass (same for every member: they share a digest)
    differences: list[Difference] = []  # against the majority group; empty for the majority
    report_received: bool = True  # False: the rank that was to upload the group's report never did


class Problem(msgspec.Struct, kw_only=True):
    # skipped: a folder's *.json entry that is not a regular file (a FIFO, a device, a broken link)
    kind: Literal["missing", "unreadable", "skipped", "late"]
    rank: Optional[int] = None
    host: Optional[str] = None
    file: Optional[str] = None
    node: Optional[str] = None  # the Ray node's id (fleet --ray)
    message: str


class FleetSummary(msgspec.Struct, kw_only=True):
    expected: Optional[int] = None  # world size, or --expect
    received: int = 0
    groups: int = 0
    hosts: int = 0
    agreeing: int = 0  # members in the majority group
    differing: int = 0  # members outside it
    failing: int = 0  # members whose own report fails (under the fleet's --fail-on)
    missing: int = 0
    unreadable: int = 0
    skipped: int = 0


class FleetReport(msgspec.Struct, kw_only=True):
    schema_: str = msgspec.field(default=FLEET_SCHEMA_ID, name="schema")
    schema_version: int = FLEET_SCHEMA_VERSION
    tool: Tool = msgspec.field(default_factory=Tool)
    created: str = ""
    command: Literal["fleet", "check --distributed"] = "fleet"
    launcher: Optional[str] = None  # torchrun | slurm | env (check --distributed); ray (fleet --ray)
    fail_on: str = "error"
    summary: FleetSummary = msgspec.field(default_factory=FleetSummary)
    problems: list[Problem] = []  # missing ranks, unreadable and skipped files: listed first
    groups: list[Group] = []  # differing and failing groups first, the majority last
    exit_code: int = 0


def member_fails(summary: Summary, fail_on: str) -> bool:
    return bool(summary.error or (fail_on == "warning" and summary.warning))


def fleet_exit_code(members: list[Member], problems: list[Problem], fail_on: str) -> int:
    """As check's: 1 when any member has errors (warnings too with --fail-on warning); else 3 when a
    rank is missing, a file unreadable or skipped, or a member's probe or check could not run; else 0."""
    if any(member_fails(m.summary, fail_on) for m in members):
        return EXIT_FINDINGS
    if problems or any(m.summary.probes_failed or m.summary.crashed for m in members):
        return EXIT_PROBE_FAILED
    return EXIT_OK


def key_facts(doc: dict) -> dict[str, Any]:
    """The few facts a person compares first, from one report (JSON builtins)."""
    facts = doc.get("facts") or {}
    gpu = facts.get("gpu") or {}
    torch = facts.get("torch") or {}
    packages = facts.get("packages") or {}
    devices = torch.get("devices") or gpu.get("devices") or []
    names: dict[str, int] = {}
    for d in devices:
        label = f"{d.get('name', '?')} (sm{(d.get('capability') or '?').replace('.', '')})"
        names[label] = names.get(label, 0) + 1
    out: dict[str, Any] = {
        "gpus": ", ".join(f"{n}x {label}" if n > 1 else label for label, n in names.items()) or ("no GPU" if gpu.get("source") not in (None, "skipped") else "GPUs not probed"),
        "driver": gpu.get("driver_version"),
        "torch": torch.get("version") or (packages.get("torch") or {}).get("version"),
        "torch_cuda": torch.get("cuda"),
    }
    if not out["torch"] and torch.get("status") not in (None, "ok", "skipped"):
        out["torch_status"] = torch.get("status")  # "missing", "broken": what sets the node apart first
    for name in ("triton", "flash-attn", "xformers", "transformers"):
        if name in packages:
            out[name] = packages[name].get("version")
    imports = facts.get("imports") or {}
    broken = sorted(m for m, r in imports.items() if isinstance(r, dict) and r.get("status") not in ("ok", "missing", "skipped"))
    if broken:
        out["imports_failing"] = broken
    return {k: v for k, v in out.items() if v is not None}


def _status(findings: list[Finding], received: bool) -> str:
    if not received:
        return "unknown"
    statuses = [f.status for f in findings if f.status in STATUS_ORDER]
    return min(statuses, key=lambda s: STATUS_ORDER[s]) if statuses else "pass"


def aggregate(
    members: list[Member],
    reports: dict[str, dict],
    problems: Optional[list[Problem]] = None,
    *,
    expected: Optional[int] = None,
    command: str = "fleet",
    launcher: Optional[str] = None,
    fail_on: str = "error",
) -> FleetReport:
    """Group `members` by digest; `reports` maps a digest to one full report (JSON builtins) with it."""
    problems = sorted(problems or [], key=lambda p: (p.kind, p.rank if p.rank is not None else -1, p.file or ""))
    by_digest: dict[str, list[Member]] = {}
    for m in sorted(members, key=_member_order):
        by_digest.setdefault(m.digest, []).append(m)
    # The majority: the largest group; ties go to the group holding the lowest rank / first file.
    ordered = sorted(by_digest.items(), key=lambda kv: (-len(kv[1]), _member_order(kv[1][0])))
    majority_digest = ordered[0][0] if ordered else None
    majority_view = fleet_view(reports[majority_digest]) if majority_digest in reports else None

    groups = []
    for digest, group_members in ordered:
        doc = reports.get(digest)
        findings = []
        if doc is not None:
            for r in doc.get("results") or []:
                if r.get("status") not in ("pass", "skipped"):
                    findings.append(Finding(rule=r.get("rule", "?"), name=r.get("name", ""), status=r.get("status", "?"), message=r.get("message") or r.get("title")))
            findings.sort(key=lambda f: (STATUS_ORDER.get(f.status, 9), f.rule))
        diffs = []
        if digest != majority_digest and doc is not None and majority_view is not None:
            diffs = [Difference(path=p, majority=a, value=b) for p, a, b in differences(majority_view, fleet_view(doc))]
        groups.append(
            Group(
                digest=digest,
                majority=digest == majority_digest,
                size=len(group_members),
                status=_status(findings, doc is not None),
                ranks=[m.rank for m in group_members if m.rank is not None],
                hosts=sorted({m.host for m in group_members if m.host}),
                members=group_members,
                key_facts=key_facts(doc) if doc is not None else {},
                findings=findings,
                differences=diffs,
                report_received=doc is not None,
            )
        )
    # Problems first (in `problems`), then failing minorities, then the other minorities, the majority last.
    groups.sort(key=lambda g: (g.majority, not any(member_fails(m.summary, fail_on) for m in g.members), STATUS_ORDER.get(g.status, 9)))
    majority = next((g for g in groups if g.majority), None)
    summary = FleetSummary(
        expected=expected,
        received=len(members),
        groups=len(groups),
        hosts=len({m.host for m in members if m.host}),
        agreeing=majority.size if majority else 0,
        differing=len(members) - (majority.size if majority else 0),
        failing=sum(1 for m in members if member_fails(m.summary, fail_on)),
        missing=sum(1 for p in problems if p.kind == "missing"),
        unreadable=sum(1 for p in problems if p.kind == "unreadable"),
        skipped=sum(1 for p in problems if p.kind == "skipped"),
    )
    return FleetReport(
        tool=Tool(version=__version__),
        created=now(),
        command=command,
        launcher=launcher,
        fail_on=fail_on,
        summary=summary,
        problems=problems,
        groups=groups,
        exit_code=fleet_exit_code(members, problems, fail_on),
    )


def _member_order(m: Member) -> tuple:
    return (m.rank if m.rank is not None else 1 << 62, m.file or "", m.node or "", m.local_rank or 0, m.host)


def compact_ranks(ranks: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2,5,7-8' (ClusterShell's RangeSet: Slurm's range syntax)."""
    from ClusterShell.RangeSet import RangeSet

    return str(RangeSet.fromlist([str(r) for r in set(ranks) if r >= 0])) if ranks else ""


# A host name that Slurm's syntax can fold: letters, digits, dots, dashes, underscores. Anything
# else (a bracket, a comma, a space, an escape: what a broken or hostile report may carry) is
# listed after, as it is, never parsed as a host list (node[1-99999999] would be expanded).
_PLAIN_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}\Z")


def compact_hosts(hosts: list[str], width: int = 0) -> tuple[str, int]:
    """Host names as Slurm writes them, 'node[0012-0015,0133],login1' (ClusterShell's NodeSet, made
    for that syntax), and how many are left out: with width > 0, whole entries up to about that many
    characters, the rest counted (listed in --json and with -v)."""
    from ClusterShell.NodeSet import NOGROUP_RESOLVER, NodeSet

    plain = [h for h in hosts if _PLAIN_HOST.match(h)]
    other = sorted({h for h in hosts if not _PLAIN_HOST.match(h)})
    nodes = NodeSet.fromlist(plain, resolver=NOGROUP_RESOLVER)
    total = len(nodes) + len(other)
    text = str(nodes)
    if not width or len(text) <= width:
        shown, count = ([text] if text else []), len(nodes)
    else:  # contiguous runs, folded together while they fit
        shown_set, count = NodeSet(resolver=NOGROUP_RESOLVER), 0
        for run in nodes.contiguous():
            trial = shown_set | run
            if len(str(trial)) > width and count:
                break
            shown_set, count = trial, len(trial)
        shown = [str(shown_set)]
    used = sum(len(t) + 1 for t in shown)
    for h in other:
        if width and used + len(h) > width and count:
            break
        shown.append(h)
        used += len(h) + 1
        count += 1
    return ",".join(shown), total - count


def to_json(report: FleetReport) -> bytes:
    from ..schemas import to_json as encode

    return encode(report)


def fleet_schema() -> dict:
    from ..schemas import json_schema

    return json_schema(FleetReport, "fleet", "attn-doctor fleet report")
