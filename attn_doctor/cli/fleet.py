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
    ray: bool = typer.Option(
        False, "--ray", rich_help_panel="Ray clusters",
        help="Instead of report files: connect to a running Ray cluster and run one check on every alive node, pinned to it, in the Python its workers run in (needs Ray beside attn-doctor: pip install ray).",
    ),
    address: Optional[str] = typer.Option(
        None, "--address", metavar="ADDRESS", rich_help_panel="Ray clusters",
        help="With --ray: the cluster (host:port of its GCS, or ray://host:10001). Default: $RAY_ADDRESS, else the cluster running on this machine.",
    ),
    runtime_env: Optional[str] = typer.Option(
        None, "--runtime-env", metavar="FILE|JSON", rich_help_panel="Ray clusters",
        help="With --ray: run the checks in this runtime_env (a JSON or YAML file, or the mapping as JSON), e.g. the one your verl / OpenRLHF job's workers use. Default: the cluster's own environment.",
    ),
    per_gpu: bool = typer.Option(False, "--per-gpu", rich_help_panel="Ray clusters", help="With --ray: one check per GPU of each node (each sees its GPU alone), not one per node."),
    timeout: Optional[float] = typer.Option(
        None, "--timeout", metavar="SECONDS", min=1.0, rich_help_panel="Ray clusters",
        help="With --ray: how long to wait for the nodes; a node that has not answered by then is named. Default: $ATTN_DOCTOR_GATHER_TIMEOUT, else 60 s with --quick and 180 s without.",
    ),
    quick: bool = typer.Option(False, "--quick", rich_help_panel="Ray clusters", help="With --ray: the nodes run `check --quick` (no torch import)."),
    no_smoke: bool = typer.Option(False, "--no-smoke", rich_help_panel="Ray clusters", help="With --ray: the nodes skip the GPU smoke tests."),
) -> None:
    """Aggregate per-node reports into one fleet report: identical nodes grouped, the odd ones out
    listed first with the exact facts that differ (path: majority -> this node), unreadable files named.

    Write the reports on each node with `attn-doctor check --output DIR/{host}.json -q` (for
    schedulers whose tasks cannot talk to each other; where they can, `check --distributed` under
    torchrun or srun gathers them itself).

    Examples:

      attn-doctor fleet reports/

      attn-doctor fleet reports/ --expect 64 --fail-on warning

      attn-doctor fleet node01.json node02.json --json > fleet.json

      attn-doctor fleet --ray --runtime-env runtime_env.yaml

    Exit codes: 0 every node passes; 1 a node has errors (or warnings, with --fail-on warning);
    2 usage error (no such path, a folder without reports, no readable report at all; with --ray:
    Ray not installed, an unusable --runtime-env); 3 a report is unreadable or missing (--expect),
    a node did not answer or could not run its check (--ray: or the cluster could not be reached),
    or a node's probe could not run.
    """
    from ..fleet.aggregate import to_json
    from ..fleet.files import FleetUsageError, fleet_from_files

    if schema:
        raise print_schema("fleet")
    check_verbosity(verbose)
    if ray:
        if paths or expect is not None:
            raise fail("--ray checks the cluster's nodes itself: it takes no report files and no --expect (every alive node is expected)")
        report = _ray_fleet(address, runtime_env, per_gpu, timeout, quick, no_smoke, fail_on.value, json_out, verbose)
        from ..render.fleet_human import render_fleet, render_summary

        emit(json_out, lambda: to_json(report), lambda console: render_fleet(report, console, verbose=verbose),
             lambda console: render_summary(report, console))
        raise typer.Exit(report.exit_code)
    if address or runtime_env or per_gpu or timeout is not None or quick or no_smoke:
        raise fail("--address, --runtime-env, --per-gpu, --timeout, --quick and --no-smoke go with --ray")
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


def _ray_fleet(address, runtime_env, per_gpu, timeout, quick, no_smoke, fail_on, json_out, verbose):
    """The fleet report of a Ray cluster; a usage error exits 2, an unreachable cluster 3."""
    import os

    from ..fleet.distributed import GATHER_TIMEOUT_ENV, LaunchError, default_gather_timeout
    from ..fleet.rayfleet import RayConnectError, RayUsageError, load_runtime_env, run_fleet
    from ._common import progress_on_terminal

    try:
        # check --distributed's deadline, and 30 s more for Ray to start a worker process on each node
        wait = timeout if timeout is not None else default_gather_timeout(quick, False, 120.0) + (0.0 if os.environ.get(GATHER_TIMEOUT_ENV) else 30.0)
        env = load_runtime_env(runtime_env)
    except (LaunchError, RayUsageError) as exc:
        raise fail(str(exc)) from None
    check_args = (["--quick"] if quick else []) + (["--no-smoke"] if no_smoke else []) + ["--fail-on", fail_on]
    spinner = progress_on_terminal(json_out, "connecting to the Ray cluster")
    try:
        return run_fleet(address=address, check_args=check_args, runtime_env=env, per_gpu=per_gpu, timeout=wait, fail_on=fail_on,
                         progress=spinner.update if spinner else None)
    except RayUsageError as exc:
        raise fail(str(exc)) from None
    except RayConnectError as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        raise fail(str(exc), 3) from None
    finally:
        if spinner:
            spinner.stop()
