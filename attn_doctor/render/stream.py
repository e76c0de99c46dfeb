"""The human report as it forms, on a terminal: each section is printed as soon as the probes it
is judged from are in (flutter doctor's line per validator), in the report's order, with one live
line beneath it for what is still running and for how long. The first lines (the tool, the
target) print before any probe starts. At the end, what is left of the report, then its footer:
the same lines `render.human.render` prints at once, in the same order.

Piped output and --json never stream (the CLI decides): a log gets the whole report at once.
"""

from __future__ import annotations

import time
from typing import Optional

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from ..report import Report
from .human import AREAS, header_lines, render_area, render_footer, render_header

# The probes (attn_doctor.probes.PARTS) whose answers each section's rules read: a section is
# final once these are in. tests/test_stream.py holds this against every rule and recorded facts.
AREA_NEEDS = {
    "system": {"environment", "stack"},  # whether torch imports
    "gpu": {"environment", "node", "stack"},  # torch's architectures and build against the GPU
    "torch": {"environment", "node", "stack"},
    "kernels": {"environment", "node", "stack"},
    "libraries": {"environment", "node", "stack"},
    "dtype": {"environment", "node", "stack", "sample"},
    "config": {"environment", "node", "stack", "sample"},
}

# What the live line says is still running, by the part not yet in.
RUNNING = {"node": "testing the GPU", "stack": "importing torch and the attention libraries", "sample": "the sample forward pass"}


class CheckStream:
    """Feed it `partial(parts, report)` as each part of the probing comes in, `progress(message)`
    for what the probes say they do, and `finish(report)` with the final report."""

    def __init__(self, console: Console, verbose: bool = False, clock=time.monotonic, version: Optional[str] = None, target=None):
        """version and target (facts.Target): the header, printed at once; else with the first part."""
        self.console, self.verbose, self.clock = console, verbose, clock
        self.started = clock()
        self.printed: set[str] = set()
        self.header = version is not None
        if self.header:
            header_lines(console, version, "probed", target)
        self.parts: frozenset = frozenset()
        self.message: Optional[str] = None
        self.spinner = Spinner("dots", style="cyan")
        self.live = Live(console=console, transient=True, refresh_per_second=8, get_renderable=self._live_line,
                         redirect_stdout=False, redirect_stderr=False)
        self.live.start()

    def progress(self, message: str) -> None:
        self.message = message

    def partial(self, parts: frozenset, report: Report) -> None:
        self.parts = parts
        if not self.header:
            render_header(report, self.live.console)
            self.header = True
        for area, _title in AREAS:
            if area in self.printed:
                continue
            if not AREA_NEEDS[area] <= parts:
                break  # the report's order: a later section waits for the earlier ones
            render_area(report, area, self.live.console, self.verbose)
            self.printed.add(area)
        self.live.refresh()

    def finish(self, report: Optional[Report]) -> None:
        """Stop the live line; print the rest of the report (None: the check ended without one)."""
        self.live.stop()
        if report is None:
            return
        if not self.header:
            render_header(report, self.console)
        for area, _title in AREAS:
            if area not in self.printed:
                render_area(report, area, self.console, self.verbose)
        render_footer(report, self.console, self.verbose)

    def _live_line(self) -> Spinner:
        waiting = [RUNNING[p] for p in RUNNING if p not in self.parts]
        what = ", ".join(waiting) if waiting else (self.message or "judging")
        self.spinner.update(text=Text(f"{what}  {self.clock() - self.started:.1f} s", style="dim"))
        return self.spinner
