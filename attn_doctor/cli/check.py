"""`attn-doctor check`: options -> one check session (core.run_check) -> render -> exit code."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ._common import (EXIT_CODES_HELP, FailOn, UsageError, capability_option, check_verbosity, emit, fail, json_option,
                      no_color_option, print_schema, python_option, quiet_option, resolved, write_text,
                      schema_option, streaming_console, verbose_option)
from ._common import progress as _progress

HELP = (
        "Probe this machine and a Python environment, and print a diagnosis with remedies.\n\n"
        "Tiers: --quick reads package metadata, the OS and the GPUs (NVML / nvidia-smi) without importing torch; "
        "the full check also imports torch in the target interpreter and tests, each in an isolated process, "
        "CUDA initialisation, the imports of flash_attn (2, 3 and 4), xformers, triton and fla, and on a GPU a "
        "forward + backward through each attention backend installed (SDPA's, flash-attn's, xformers', "
        "and flex_attention compiled by torch.compile); "
        "then a sample forward pass over the installed attention paths shows the dtypes reaching the kernels. "
        "Each result is kept as long as what it depends on: SDPA's tests on this GPU until the machine reboots; "
        "torch's build, the imports and the libraries' and compiled kernels' tests per package set, GPU architecture "
        "and driver, shared through the cache folder (--cache-dir) so that one node of a cluster pays and the others "
        "read. A check whose results are all cached takes well under a second. On a terminal the report prints "
        "section by section as the probes finish.\n\n"
        "Examples:\n\n"
        "  attn-doctor check\n\n"
        "  attn-doctor check --python ~/venvs/train/bin/python\n\n"
        "  attn-doctor check --output reports/{host}.json -q\n\n"
        "  attn-doctor check --from-report colleague.json\n\n"
        "  attn-doctor check --config train_lora.yaml --config ds_z2.json\n\n"
        "  attn-doctor check --gpu t4 --config axolotl.yml   (will it run on the T4 partition?)\n\n" + EXIT_CODES_HELP
)


def check(
    quick: bool = typer.Option(False, "--quick", help="Do not import torch: metadata, OS and GPUs only (well under a second)."),
    python: Optional[str] = python_option(
        help="Diagnose this interpreter (a path, a venv folder, or a name on PATH such as python3.11). Default: the active venv ($VIRTUAL_ENV), else the active conda env ($CONDA_PREFIX), else the interpreter attn-doctor runs in; the report says which and why."
    ),
    json_out: bool = json_option("attn-doctor/report"),
    schema: bool = schema_option("check"),
    only: Optional[list[str]] = typer.Option(None, "--only", metavar="RULE", help="Report only this rule (an id such as AD301, or its name; repeatable)."),
    skip: Optional[list[str]] = typer.Option(None, "--skip", metavar="RULE", help="Leave this rule out of the report (repeatable)."),
    output: Optional[str] = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Also write the JSON report to FILE ({host} is replaced by the host name)."
    ),
    facts: Optional[Path] = typer.Option(
        None,
        "--facts",
        "--from-report",
        metavar="FILE",
        help="Diagnose facts recorded elsewhere (a report from `check --json`) instead of probing this machine.",
    ),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="Exit 1 on errors (default), or on warnings too (strict onboarding)."),
    no_sample: bool = typer.Option(
        False,
        "--no-sample",
        help="Skip the sample forward pass (tiny models of the installed attention paths, traced on meta for the dtypes reaching the kernels).",
    ),
    no_cache: bool = typer.Option(
        False,
        "--no-cache",
        help="Run every test again (the torch probe, the kernel tests, the sample forward pass) instead of reusing cached results, and store the new ones.",
    ),
    no_smoke: bool = typer.Option(
        False,
        "--no-smoke",
        help="Skip the GPU smoke tests (a tiny forward + backward per attention backend and native dtype, checked against "
             "float64; flex_attention is compiled with torch.compile, which takes 10-20 s the first time).",
    ),
    timeout: float = typer.Option(120.0, "--timeout", metavar="SECONDS", min=1.0, help="How long to wait for the torch probe."),
    recipes: Optional[Path] = typer.Option(None, "--recipes", metavar="DIR", help="Use the rules in DIR instead of the shipped recipes."),
    config: Optional[list[str]] = typer.Option(
        None,
        "--config",
        "-c",
        metavar="FILE",
        help="Also judge this training config against the machine (repeatable): LLaMA-Factory, axolotl, torchtune, TRL / alignment-handbook, ms-swift, accelerate, DeepSpeed, torchtitan (TOML), LitGPT, Lightning (LightningCLI, Hydra), NeMo (1.x and 2.x), NeMo-RL, Megatron-Bridge, LLM Foundry, Composer, verl, OpenRLHF, Oumi, nanotron, Open Instruct, H2O LLM Studio, kohya sd-scripts and musubi-tuner (TOML), OneTrainer, SimpleTuner (JSON, TOML, config.env), GPT-NeoX, prime-rl (TOML), ESPnet, OpenMMLab / MMEngine Python configs (read with their _base_ files, never run), a model's config.json. The framework is recognised "
             "from the file's keys, read as that framework reads it (its defaults included) and the report says what was read; "
             "any other YAML, JSON or TOML is read generically for the precision, dtype and attention keys every framework "
             "shares; a file that cannot be read, or has none of them, is a finding.",
    ),
    gpu: Optional[str] = typer.Option(
        None, "--gpu", metavar="NAME",
        help="Judge for this GPU instead of this machine's (t4, v100, a10, l4, a100, h100, h200, b200, rtx4090, rtx5090, ...; "
             "`--gpu list` shows them all; any case, or as nvidia-smi prints it: \"Tesla V100-SXM2-16GB\"): the configs and the sample forward pass, with this environment's software, from "
             "a login node without that GPU. Nothing is tested on a GPU; the report says which facts were assumed.",
    ),
    cache_dir: Optional[Path] = typer.Option(
        None,
        "--cache-dir",
        metavar="DIR",
        help="Where results are cached and shared (default: $ATTN_DOCTOR_CACHE_DIR, else the user's cache folder). On a cluster, a folder on a shared file system: one process per package set (and GPU architecture, for the kernel tests) computes, every other node reuses.",
    ),
    cache_trust: Optional[str] = typer.Option(
        None,
        "--cache-trust",
        metavar="owner|group",
        help="Whose entries in the cache folder a check believes: owner (default: you, root and the folder's owner) or group (also the members of the group of a setgid cache folder, as a cluster's admins set one up). Any other entry is ignored (-v says so) and computed again. Default: $ATTN_DOCTOR_CACHE_TRUST, else owner.",
    ),
    prepare: bool = typer.Option(
        False,
        "--prepare",
        help="Compute and cache what a cluster's nodes share, print what was stored, and exit: the sample forward pass's verdict per GPU capability (no GPU needed: a container image's build step, see examples/Dockerfile) and, on a node with GPUs, the stack's results (torch, the imports, the kernel tests: compiled flex_attention, FA2/3/4, xformers) for its GPU architecture and driver.",
    ),
    capability: Optional[list[str]] = capability_option(
        help="Judge for a GPU of this compute capability, as --gpu does for a named one (e.g. 7.5). With --prepare: a capability to judge the sample for (repeatable; default: this node's GPUs, else 8.0, 9.0 and 10.0, and no GPU).",
    ),
    distributed: bool = typer.Option(
        False,
        "--distributed",
        help=(
            "Fleet mode under torchrun or srun: every rank checks its own GPU and environment, rank 0 gathers the "
            "reports (torch.distributed's TCPStore, no NCCL) and prints one fleet report, odd ranks first; rank 0 "
            "exits with the fleet's code. Example: torchrun --nproc_per_node 8 -m attn_doctor check --distributed "
            "--fail-on warning. See examples/onboard-*.sh."
        ),
    ),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option("Show passing and skipped checks, evidence, timings and tracebacks."),
    no_color: bool = no_color_option(),
    one_line: bool = typer.Option(
        False, "--oneline",
        help="Print the verdict alone, in one ASCII line of at most 80 bytes (OK / FAIL <worst rule> / UNKNOWN <what could not run>): for monitors that keep a command's first bytes, such as node-problem-detector's custom plugins (examples/k8s/).",
    ),
) -> None:
    from ..gather import FactsFileError
    from ..options import CLI, CheckOptions
    from ..rules.loader import RecipeError

    if schema:
        raise print_schema("report")
    if gpu is not None and gpu.strip().lower() == "list":
        from ..gpus import listing

        write_text("\n".join(listing()) + "\n")
        raise typer.Exit(0)
    check_verbosity(verbose)
    options = CheckOptions(
        python=python, quick=quick, facts_file=facts, configs=tuple(config or ()), recipes_dir=recipes,
        fail_on=fail_on.value, timeout=timeout, sample=not no_sample, smoke=not no_smoke, use_cache=not no_cache,
        cache_dir=cache_dir, cache_trust=cache_trust, output=output, naming=CLI, only=tuple(only or ()),
        skip=tuple(skip or ()), gpu=gpu,
        capability=capability[0] if capability and not prepare and len(capability) == 1 else None,
    )
    interactive = not json_out and not quiet and sys.stderr.isatty()
    try:
        if one_line and (json_out or distributed or prepare):
            raise UsageError("--oneline prints one check's verdict: it does not go with --json, --distributed or --prepare")
        if capability and not prepare and len(capability) > 1:
            raise UsageError("--capability: give one (a check judges for one GPU; --prepare takes several)")
        if gpu is not None and (prepare or distributed):
            raise UsageError("--gpu judges this environment for a GPU it does not have; it does not go with --prepare or --distributed")
        if prepare and (distributed or facts is not None or quick or no_sample):
            raise UsageError("--prepare computes the sample verdicts of this environment; it does not take --distributed, --from-report, --quick or --no-sample")
        options = resolved(options)  # the target (--python, else the active environment), warned about once
        if prepare:
            raise typer.Exit(_prepare(options, capability or [], json_out, interactive))
        if distributed:
            raise typer.Exit(_distributed(options, json_out, verbose, interactive))
        from ..core import run_check

        console = streaming_console() if interactive and not one_line else None
        if console is not None:
            raise typer.Exit(_streamed(options, console, verbose))
        progress = _progress() if interactive else None
        try:
            report = run_check(options, progress.update if progress else None)
        finally:
            if progress:
                progress.stop()
    except (UsageError, FactsFileError, RecipeError) as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        if one_line:  # a monitor keeps stdout alone: the reason goes there too (exit 2 all the same)
            from ..render.oneline import oneline_unknown

            write_text(oneline_unknown(str(exc)) + "\n")
        raise fail(str(exc)) from None

    from ..schemas import to_json

    if one_line:
        from ..render.oneline import oneline

        write_text(oneline(report) + "\n")
        raise typer.Exit(report.exit_code)

    def human(console, summary=False):  # rich is imported only for human output
        from ..render import human

        human.render_quiet(report, console) if summary else human.render(report, console, verbose=verbose)

    emit(json_out, lambda: to_json(report), human, lambda console: human(console, summary=True))
    raise typer.Exit(report.exit_code)



def _streamed(options, console, verbose: bool) -> int:
    """The check on a terminal: each section printed as its probes finish, a live line for the rest."""
    from .. import __version__
    from ..core import run_check
    from ..gather import target_facts
    from ..render.stream import CheckStream

    stream = CheckStream(console, verbose=verbose, version=__version__, target=target_facts(options.target))
    report = None
    try:
        report = run_check(options, stream.progress, partial=stream.partial)
    finally:
        stream.finish(report)
    return report.exit_code


def _distributed(options, json_out: bool, verbose: bool, interactive: bool) -> int:
    """check --distributed: this rank's check through the same run_check; rank 0 renders the fleet."""
    from ..fleet.distributed import FleetError, run_distributed_check

    try:
        fleet = run_distributed_check(options, progress_factory=_progress if interactive else None)
    except FleetError as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        if exc.report is not None:  # its check ran: its own verdict, one line (its JSON with --json)
            from ..render.fleet_human import render_own_verdict
            from ..schemas import to_json as report_json

            emit(json_out, lambda: report_json(exc.report), lambda console: render_own_verdict(exc.report, str(exc), console))
        raise fail(str(exc), exc.code) from None
    if fleet is None:
        return 0  # not rank 0: its report was handed over
    from ..fleet.aggregate import to_json as fleet_json
    from ..render.fleet_human import render_fleet

    from ..render.fleet_human import render_summary

    emit(json_out, lambda: fleet_json(fleet), lambda console: render_fleet(fleet, console, verbose=verbose),
         lambda console: render_summary(fleet, console))
    return fleet.exit_code


def _prepare(options, capabilities: list[str], json_out: bool, interactive: bool) -> int:
    """check --prepare: compute and store the sample verdicts; print what is stored."""
    from ..core import prepare_cache

    progress = _progress() if interactive else None
    try:
        prepared = prepare_cache(options, capabilities, progress.update if progress else None)
    finally:
        if progress:
            progress.stop()
    from ..render.prepare import prepared_json, prepared_ok, render_prepared

    code = 0 if prepared_ok(prepared) else 3  # 3: a verdict or the stack's results could not be computed
    emit(json_out, lambda: prepared_json(prepared, code), lambda console: render_prepared(prepared, code, console))
    return code
