"""The realenv matrix's time per environment: what each environment cost to build and what the
doctor's calls in it took, printed at the session's end (from one process, or added up from
pytest-xdist's workers by tests/conftest.py)."""

from __future__ import annotations

from collections import defaultdict

# environment -> {"build": s, "reused": bool, "cli": s, "calls": n}
TIMES: dict = defaultdict(lambda: {"build": None, "reused": False, "cli": 0.0, "calls": 0})


def merge_times(into: dict, times: dict) -> None:
    """One worker's table into the session's: time adds up, an environment counts as kept only if
    every worker that needed it reused it."""
    for name, t in times.items():
        row = into.setdefault(name, {"build": None, "reused": True, "cli": 0.0, "calls": 0})
        if t["build"] is not None and not t["reused"]:
            row["build"] = (row["build"] or 0.0) + t["build"]
        row["reused"] = row["reused"] and t["reused"]
        row["cli"] += t["cli"]
        row["calls"] += t["calls"]


def write_times(terminalreporter, times: dict) -> None:
    if not times:
        return
    tr = terminalreporter
    tr.section("realenv: time per environment")
    tr.write_line(f"{'environment':28} {'build s':>9} {'attn-doctor s':>14} {'calls':>6}")
    for name in sorted(times):
        t = times[name]
        build = "kept" if t["reused"] else (f"{t['build']:.1f}" if t["build"] is not None else "-")
        tr.write_line(f"{name:28} {build:>9} {t['cli']:>14.1f} {t['calls']:>6}")
