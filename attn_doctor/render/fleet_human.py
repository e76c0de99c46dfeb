"""The human fleet report: problems and differing groups first, the agreeing majority last, compact."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from ..fleet.aggregate import FleetReport, Group, compact_hosts, compact_ranks, member_fails
from .human import MARKS

DIFFERENCES_SHOWN = 12  # per group without -v; --json and -v list them all
HOSTS_WIDTH = 100  # characters of compacted host names per group without -v; --json lists every host
FILES_SHOWN = 8
PROBLEMS_SHOWN = 20  # missing ranks, unreadable files: one line each up to this many without -v


def _line(console: Console, status: str, text: str, indent: int = 0, style: str = "") -> None:
    mark, colour = MARKS.get(status, ("?", "magenta"))
    line = Text(" " * indent)
    line.append(f"[{mark}] " if indent == 0 else f"{mark} ", style=f"bold {colour}")
    line.append(text, style=style)
    console.print(line)


def _value(value: Any) -> str:
    # whole: a difference cut at 120 characters hid the very path or version that differs
    return value if isinstance(value, str) else repr(value) if not isinstance(value, (list, dict)) else str(value)


def _hosts(hosts: list[str], verbose: bool = False) -> str:
    """Hosts as Slurm writes them (node[0012-0015,0133]), cut at about HOSTS_WIDTH characters
    unless verbose."""
    text, more = compact_hosts(hosts, 0 if verbose else HOSTS_WIDTH)
    return text + (f" +{more:,} more (-v or --json lists them all)" if more else "")


def _files(files: list[str]) -> str:
    if len(files) <= FILES_SHOWN:
        return ", ".join(files)
    return ", ".join(files[:FILES_SHOWN]) + f" +{len(files) - FILES_SHOWN:,} more"


def _who(group: Group, verbose: bool = False) -> str:
    n = group.size
    nodes = [_node(m) for m in group.members if m.node]
    if nodes:
        per_gpu = any(m.local_rank is not None for m in group.members)  # --per-gpu: a node may hold several
        noun = ("check" if n == 1 else "checks") if per_gpu else ("node" if n == 1 else "nodes")
        text = f"{n:,} {noun}" + (f" ({_files(nodes)})" if n <= FILES_SHOWN else "")
    elif group.ranks:
        noun = "rank" if n == 1 else "ranks"
        text = f"{n:,} {noun} ({compact_ranks(group.ranks)})"
    else:
        noun = "report" if n == 1 else "reports"
        files = [m.file for m in group.members if m.file]
        # the host names say which nodes (the files are in -v and --json); without them, the files
        text = f"{n:,} {noun}" + (f" ({_files(files)})" if files and not group.hosts else "")
    if group.hosts:
        text += f" on {_hosts(group.hosts, verbose)}"
    return text


def _node(m) -> str:
    """A Ray node by its id's first 12 hex digits (several nodes may share one host)."""
    return f"node {m.node[:12]}" + (f" GPU {m.local_rank}" if m.local_rank is not None else "")


def _key_facts(group: Group) -> str:
    k = group.key_facts
    parts = ["torch %s" % k["torch_status"]] if k.get("torch_status") else []
    parts.append(k.get("gpus", ""))
    if k.get("driver"):
        parts.append(f"driver {k['driver']}")
    if k.get("torch"):
        parts.append(f"torch {k['torch']}" + (f" (CUDA {k['torch_cuda']})" if k.get("torch_cuda") else ""))
    for name in ("triton", "flash-attn", "xformers", "transformers"):
        if name in k:
            parts.append(f"{name} {k[name]}")
    if k.get("imports_failing"):
        parts.append("import failing: " + ", ".join(k["imports_failing"]))
    return ", ".join(p for p in parts if p)


def _group_status(group: Group, fail_on: str) -> str:
    if not group.report_received:
        return "crashed"
    if any(member_fails(m.summary, fail_on) for m in group.members):
        return "error"
    if not group.majority:
        return "warning"  # differs from the fleet: worth a look even when it passes on its own
    return group.status if group.status in ("warning", "info") else "pass"


def render_fleet(fleet: FleetReport, console: Console, verbose: bool = False) -> None:
    s = fleet.summary
    header = Text("attn-doctor fleet ", style="bold")
    header.append(fleet.tool.version, style="dim")
    unit = "check" if fleet.launcher == "ray" else "rank" if fleet.command != "fleet" else "report"
    scope = f"{s.received:,} {unit}{'s' if s.received != 1 else ''}"
    if s.expected is not None:
        scope += f" of {s.expected:,}"
    scope += f" on {s.hosts:,} host{'s' if s.hosts != 1 else ''}"
    if fleet.launcher:
        scope += f" ({fleet.launcher})"
    header.append(f"  {scope}", style="dim")
    console.print(header)

    problems = fleet.problems if verbose else fleet.problems[:PROBLEMS_SHOWN]
    for problem in problems:
        label = f"{problem.file}: {problem.kind}: " if problem.kind in ("unreadable", "skipped") and problem.file else ""
        _line(console, "crashed", label + problem.message)
    if len(fleet.problems) > len(problems):
        console.print(Text(f"    ... {len(fleet.problems) - len(problems):,} more problems (-v or --json lists them all)", style="dim"))

    for group in fleet.groups:
        status = _group_status(group, fleet.fail_on)
        if group.majority:
            agree = "agree" if group.size > 1 else "reports"
            head = f"{_who(group, verbose)} {agree}" + (" (the majority)" if len(fleet.groups) > 1 else "") + f": {_key_facts(group)}"
        else:
            head = f"{_who(group, verbose)} differ{'s' if group.size == 1 else ''} from the majority: {_key_facts(group)}"
        if not group.report_received:
            head += " (its report never arrived: the uploading rank died)"
        _line(console, status, head)
        shown = group.differences if verbose else group.differences[:DIFFERENCES_SHOWN]
        for d in shown:
            console.print(Text(f"    {d.path}: {_value(d.majority)} -> {_value(d.value)}"))
        if len(group.differences) > len(shown):
            console.print(Text(f"    ... {len(group.differences) - len(shown)} more differences (-v or --json lists them all)", style="dim"))
        for f in group.findings:
            if f.status in ("error", "warning", "crashed") or (verbose and f.status == "info"):
                _line(console, f.status, f"{f.rule} {f.message or f.name}", indent=4)
        if verbose:
            for m in group.members:
                where = f"rank {m.rank}" if m.rank is not None else _node(m) if m.node else (m.file or "")
                console.print(Text(f"    {where} on {m.host or '?'}: exit {m.exit_code}", style="dim"))
    render_summary(fleet, console)


def render_summary(fleet: FleetReport, console: Console) -> None:
    """The last line, and all of it with -q."""
    s = fleet.summary
    parts = []
    if s.expected is not None and fleet.launcher == "ray":
        parts.append(f"{s.received:,} of {s.expected:,} checks reported")
    elif s.expected is not None and fleet.command != "fleet":
        parts.append(f"{s.received:,} of {s.expected:,} ranks reported")
    else:
        parts.append(f"{s.received:,} report{'s' if s.received != 1 else ''}")
    if s.groups > 1:
        parts.append(f"{s.groups:,} distinct configurations, {s.differing:,} differ{'s' if s.differing == 1 else ''} from the majority")
    elif s.groups == 1:
        parts.append("all identical")
    if s.failing:
        parts.append(f"{s.failing:,} failing")
    if s.missing:
        parts.append(f"{s.missing:,} missing")
    if s.unreadable:
        parts.append(f"{s.unreadable:,} unreadable")
    if s.skipped:
        parts.append(f"{s.skipped:,} skipped")
    console.print(Text(", ".join(parts) + f"  (exit code {fleet.exit_code})", style="bold"))


def render_own_verdict(report, why: str, console: Console) -> None:
    """A rank that could not hand its report over (`why`: 'rank 3 (node07): ...'): its own check's
    verdict in one line, so that it is not lost with the fleet's."""
    from .oneline import oneline

    who = why.split(":", 1)[0]
    status = "error" if report.exit_code == 1 else "crashed" if report.exit_code == 3 else "pass"
    _line(console, status, f"{who}, its own check only (not handed to rank 0): {oneline(report, limit=240)}")
