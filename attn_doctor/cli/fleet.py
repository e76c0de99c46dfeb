"""`attn-doctor fleet`: one fleet report from many per-node JSON reports."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._common import FailOn, emit, fail, write_json


def fleet(
    paths: Optional[list[Path]] = typer.Argument(None, metavar="REPORT.json|DIR ...", help="Reports from `check --json`, or folders of them (*.json inside)."),
    json_out: bool = typer.Option(False, "--json", help="Print the fleet report as JSON (schema attn-doctor/fleet v1). Never changes the exit code."),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="Exit 1 when any node has errors (default), or warnings too."),
    expect: Optional[int] = typer.Option(None, "--expect", metavar="N", min=1, help="The number of reports there should be; fewer is a failure (exit 3) and is named."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="List every difference and every node."),
    schema: bool = typer.Option(False, "--schema", help="Print the JSON Schema of the fleet report (`fleet --json`) and exit."),
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
    from ..fleet.aggregate import fleet_schema, to_json
    from ..fleet.files import FleetUsageError, fleet_from_files

    if schema:
        from ..render.json import to_json as json_document

        write_json(json_document(fleet_schema()))
        raise typer.Exit(0)
    if not paths:
        raise fail("give the reports to aggregate: files from `check --json`, or folders of them (see 'attn-doctor fleet -h')")
    try:
        report = fleet_from_files(paths, fail_on=fail_on.value, expect=expect)
    except FleetUsageError as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        raise fail(str(exc)) from None
    from ..render.fleet_human import render_fleet

    emit(json_out, lambda: to_json(report), lambda console: render_fleet(report, console, verbose=verbose))
    raise typer.Exit(report.exit_code)
