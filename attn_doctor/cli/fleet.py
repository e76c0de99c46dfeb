"""`attn-doctor fleet`: one fleet report from many per-node JSON reports."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._common import (FailOn, check_verbosity, emit, fail, json_option, no_color_option, print_schema, quiet_option,
                      schema_option, verbose_option)


def fleet(
    paths: Optional[list[Path]] = typer.Argument(None, metavar="REPORT.json|DIR ...", help="Reports from `check --json`, or folders of them (*.json inside)."),
    json_out: bool = json_option("attn-doctor/fleet"),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="Exit 1 when any node has errors (default), or warnings too."),
    expect: Optional[int] = typer.Option(None, "--expect", metavar="N", min=1, help="The number of reports there should be; fewer is a failure (exit 3) and is named."),
    schema: bool = schema_option("fleet"),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option("List every difference and every node."),
    no_color: bool = no_color_option(),
) -> None:
    """Aggregate per-node reports into one fleet report: identical nodes grouped, the odd ones out
    listed first with the exact facts that differ (path: majority -> this node), unreadable files named.

    Write the reports on each node with `attn-doctor check --json --output DIR/{host}.json` (for
    schedulers whose tasks cannot talk to each other; where they can, `check --distributed` under
    torchrun or srun gathers them itself).

    Examples:

      attn-doctor fleet reports/

      attn-doctor fleet reports/ --expect 64 --fail-on warning

      attn-doctor fleet node01.json node02.json --json > fleet.json

    Exit codes: 0 every node passes; 1 a node has errors (or warnings, with --fail-on warning);
    2 usage error (no such path, a folder without reports, no readable report at all);
    3 a report is unreadable or missing (--expect), or a node's probe could not run.
    """
    from ..fleet.aggregate import to_json
    from ..fleet.files import FleetUsageError, fleet_from_files

    if schema:
        raise print_schema("fleet")
    check_verbosity(verbose)
    if not paths:
        raise fail("give the reports to aggregate: files from `check --json`, or folders of them (see 'attn-doctor fleet -h')")
    try:
        report = fleet_from_files(paths, fail_on=fail_on.value, expect=expect)
    except FleetUsageError as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        raise fail(str(exc)) from None
    from ..render.fleet_human import render_fleet, render_summary

    emit(json_out, lambda: to_json(report), lambda console: render_fleet(report, console, verbose=verbose),
         lambda console: render_summary(report, console))
    raise typer.Exit(report.exit_code)
