"""`attn-doctor fix`: the command. Thin: options -> check -> plan -> confirm -> apply -> render."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ._common import capability_option, json_option, no_color_option, python_option, quiet_option, schema_option, verbose_option


def fix(
    run_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="With --undo: the run to undo (default: the latest)."),
    config: Optional[list[str]] = typer.Option(
        None, "--config", "-c", metavar="FILE", help="A training config to judge and fix (repeatable), in its own keys and spelling, "
        "every untouched byte kept: values, quotes, comments, order (YAML, JSON, TOML; config.env files get the line to change): LLaMA-Factory, axolotl, torchtune, TRL / alignment-handbook, ms-swift, accelerate, DeepSpeed, torchtitan (TOML), LitGPT, Lightning (LightningCLI, Hydra), NeMo (1.x and 2.x), NeMo-RL, Megatron-Bridge, LLM Foundry, Composer, verl, OpenRLHF, Oumi, nanotron, Open Instruct, H2O LLM Studio, kohya sd-scripts and musubi-tuner (TOML), OneTrainer, SimpleTuner (JSON, TOML, config.env), GPT-NeoX, prime-rl (TOML), ESPnet, a model's config.json, and any other YAML, JSON or "
        "TOML read generically for its precision, dtype and attention keys. A Python config (OpenMMLab) is read, never edited: "
        "its remedy is said for the command line (--cfg-options) or for your hand."
    ),
    python: Optional[str] = python_option(
        help="Fix this interpreter (or venv folder). Default: the active venv ($VIRTUAL_ENV), else the active conda env ($CONDA_PREFIX), else the interpreter attn-doctor runs in.",
    ),
    facts: Optional[Path] = typer.Option(
        None, "--facts", "--from-report", metavar="FILE", help="Judge with a report recorded elsewhere: only config files can then be fixed here."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Apply without asking (onboarding scripts)."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Print the plan, the exact commands and the file diffs; change nothing."),
    json_out: bool = json_option("attn-doctor/fix"),
    schema: bool = schema_option("fix"),
    only: Optional[list[str]] = typer.Option(None, "--only", metavar="RULE_ID", help="Act only on this rule (repeatable)."),
    skip: Optional[list[str]] = typer.Option(None, "--skip", metavar="RULE_ID", help="Leave this rule alone (repeatable)."),
    unsafe: bool = typer.Option(False, "--unsafe", help="Allow unsafe remedies (torch upgrades, edits inside installed packages); each says why it is unsafe."),
    apply_patch: bool = typer.Option(False, "--apply-patch", help="Apply the tracer's source patches to your files (by default they are only written as .patch files)."),
    patch_dir: Path = typer.Option(Path("."), "--patch-dir", metavar="DIR", help="Where .patch files are written."),
    trace: Optional[str] = typer.Option(
        None, "--trace", metavar="MODULE:FACTORY",
        help="Trace this model (as `attn-doctor trace MODULE:FACTORY`) and apply the patches it finds, each journaled, "
             "verified by tracing again and undone by --undo.",
    ),
    autocast: Optional[str] = typer.Option(None, "--autocast", metavar="bf16|fp16", help="With --trace: as trace's --autocast."),
    dtype: Optional[str] = typer.Option(None, "--dtype", metavar="bf16|fp16|fp32", help="With --trace: as trace's --dtype."),
    device: str = typer.Option("meta", "--device", metavar="meta|cpu|cuda", help="With --trace: as trace's --device."),
    train: bool = typer.Option(False, "--train", help="With --trace: trace forward and backward, as trace's --train."),
    factory_arg: Optional[list[str]] = typer.Option(
        None, "--factory-arg", "-a", metavar="KEY=VALUE", help="With --trace: an argument of the factory (repeatable)."),
    installer: str = typer.Option(
        "auto", "--installer", metavar="auto|uv|pip",
        help="What installs packages: uv (`uv pip --python TARGET`, the shortest window in which a package is half there) where it is found, else pip (auto); or the one named.",
    ),
    undo: bool = typer.Option(False, "--undo", help="Restore the files and the package set from before a fix run (the latest, or ID). "
                              "A file you edited after the fix is not overwritten: the undo is refused, unless --keep-edits."),
    keep_edits: bool = typer.Option(False, "--keep-edits", help="With --undo: where you edited a file after the fix, keep your "
                                    "version beside it (FILE.edited-ID) and restore the file as it was before the fix."),
    history: bool = typer.Option(False, "--history", help="List past fix runs."),
    gpu: Optional[str] = typer.Option(
        None, "--gpu", metavar="NAME",
        help="Plan for this GPU instead of this machine's, as `check --gpu` judges (t4, a100, h100, ...; `attn-doctor check "
             "--gpu list` shows them): from a login node, the config edits the job's GPU needs. Example: attn-doctor fix --gpu t4 "
             "-c axolotl.yml --dry-run"),
    capability: Optional[str] = capability_option(
        help="Plan for a GPU of this compute capability, as --gpu does for a named one (e.g. 7.5)."),
    quick: bool = typer.Option(False, "--quick", help="Judge without importing torch (packages, OS, GPUs, configs): faster, fewer findings."),
    no_sample: bool = typer.Option(False, "--no-sample", help="Skip the sample forward pass of the check."),
    no_smoke: bool = typer.Option(False, "--no-smoke", help="Skip the GPU smoke tests of the check (as `check --no-smoke`)."),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Run the sample forward pass and the smoke tests again even if their results are cached (as `check --no-cache`)."
    ),
    timeout: float = typer.Option(120.0, "--timeout", metavar="SECONDS", min=1.0, help="How long to wait for the torch probe."),
    recipes: Optional[Path] = typer.Option(None, "--recipes", metavar="DIR", help="Use the rules in DIR instead of the shipped recipes."),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option("Show diffs of package actions, manual details, tracebacks."),
    no_color: bool = no_color_option(),
) -> None:
    """Apply the remedies `check` finds: planned, journaled, verified, reversible.

    The pipeline: check -> plan (one remedy per finding, as data from the recipes; each install
    resolved by the installer without installing, so the plan says what it would pull in) -> show -> confirm
    -> snapshot (the package set and a byte copy of every file to edit, in a journal under the
    state directory; ATTN_DOCTOR_STATE_DIR overrides it) -> apply (the target's pip or uv, as an
    argument list; atomic file writes) -> re-check -> roll back every action whose rule still fires.

    Unsafe remedies (a torch upgrade, which triton>=3.0 means since torch pins triton; edits inside
    installed packages) need --unsafe. Externally managed Pythons (PEP 668) are never installed into.
    Config files keep every comment and their key order; flash_attn is spelt as the installed
    LLaMA-Factory version wants it. Ctrl-C, SIGTERM or SIGHUP while it changes things stops the
    installer and restores the run, with one line saying so (a second Ctrl-C while restoring is
    refused); a fix killed outright (SIGKILL) is restored by the next fix or fix --undo, pip's
    half-way leftovers (~name stash folders) included.

    Examples:

      attn-doctor fix --dry-run

      attn-doctor fix --yes --python ~/venvs/train

      attn-doctor fix --from-report t4.json --config train_lora.yaml --yes

      attn-doctor fix --only AD401 --json --yes

      attn-doctor fix --trace model.py:build --autocast bf16 --dry-run

      attn-doctor fix --history

      attn-doctor fix --undo

      attn-doctor fix --undo --keep-edits

    With --trace MODULE:FACTORY the dtype path judged is your model's, not the built-in sample's: the
    tracer's patches (a cast before the attention call, is_causal for a causal mask, ...) are plan
    steps, shown as diffs with --dry-run, applied with a copy of each file in the journal, verified by
    tracing the model again in a fresh process (a patch after which the finding stays is rolled back)
    and undone by --undo.

    Exit codes: 0 everything planned was applied and verified (or nothing to do, or --dry-run);
    1 an action failed, was rolled back or blocked (unsafe, PEP 668), the plan was declined, or the
    --trace model could not be traced;
    2 usage error (bad option, a --config file that is missing, empty or does not parse, no --yes
    without a terminal, a --trace target that does not name a factory);
    128 + the signal when interrupted (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP).
    """
    from ._common import UsageError, check_verbosity, fail, print_schema
    from ..fix.journal import JournalError

    if schema:
        raise print_schema("fix")
    check_verbosity(verbose)
    try:
        if run_id and not undo:
            raise UsageError(f"unexpected argument {run_id!r}: a run id goes with --undo")
        if keep_edits and not undo:
            raise UsageError("--keep-edits goes with --undo")
        if undo or history:
            # Options of a fix run would be silently ignored: --undo --dry-run would undo for real.
            given = [name for name, value in (("--dry-run", dry_run), ("--config", config), ("--python", python if history else None), ("--from-report", facts),
                     ("--gpu", gpu), ("--capability", capability),
                     ("--only", only), ("--skip", skip), ("--unsafe", unsafe), ("--apply-patch", apply_patch), ("--quick", quick),
                     ("--trace", trace),
                     ("--no-sample", no_sample), ("--no-smoke", no_smoke), ("--no-cache", no_cache), ("--undo", undo and history),
                     ("--installer", installer != "auto")) if value]
            if given:
                raise UsageError(f"{'--history' if history else '--undo'} does not take {', '.join(given)}")
        if history:
            return _history(json_out)
        if undo:
            return _undo(run_id, json_out, python, keep_edits)
        if installer not in ("auto", "uv", "pip"):
            raise UsageError(f"--installer takes auto, uv or pip, not {installer!r}")
        request = _trace_request(trace, facts, autocast=autocast, dtype=dtype, device=device, train=train,
                                 factory_arg=factory_arg)
        from ..options import CLI, CheckOptions
        from ._common import resolved

        # The same options and pipeline as `check` (attn_doctor.core.run_check), validated first.
        if (gpu is not None or capability is not None) and facts is not None:
            raise UsageError("--gpu / --capability judge this environment for another GPU; a report from --from-report has its own")
        _readable(config or [])
        check_options = resolved(CheckOptions(python=python, quick=quick, facts_file=facts, configs=tuple(config or ()),
                                              recipes_dir=recipes, timeout=timeout, sample=not no_sample, smoke=not no_smoke,
                                              use_cache=not no_cache, naming=CLI, gpu=gpu, capability=capability))
        return _fix(
            check_options=check_options,
            yes=yes,
            dry_run=dry_run,
            json_out=json_out,
            only=only or [],
            skip=skip or [],
            unsafe=unsafe,
            apply_patch=apply_patch or request is not None,
            patch_dir=patch_dir,
            installer=installer,
            verbose=verbose,
            request=request,
        )
    except typer.Exit:
        raise
    except Exception as exc:
        from ..gather import FactsFileError
        from ..fix.apply import FixError
        from ..fix.traced import TraceFailed
        from ..rules.loader import RecipeError

        if not isinstance(exc, (UsageError, FactsFileError, RecipeError, JournalError, FixError, TraceFailed)):
            raise
        if isinstance(exc, TraceFailed):
            raise fail(str(exc), 2 if exc.usage else 1) from None
        if verbose:
            import traceback

            traceback.print_exc()
        from ..fix.journal import UnknownRun

        raise fail(str(exc), 2 if isinstance(exc, (UsageError, FactsFileError, RecipeError, UnknownRun)) else 1) from None


def _readable(paths: list[str]) -> None:
    """fix changes only files it can read: a --config it cannot is a usage error (exit 2), said
    before anything runs, never a plan around it."""
    from ..boundary.inputs import shown
    from ..probes.configs import unreadable
    from ._common import UsageError

    for path in paths:
        why = unreadable(path)
        if why is not None:
            raise UsageError(f"--config {shown(path)}: {why}: fix cannot change a file it cannot read")


def _trace_request(trace, facts, *, autocast, dtype, device, train, factory_arg):
    """fix --trace's request, its trace options checked as trace checks them; None without --trace."""
    from ._common import UsageError

    given = [name for name, value in (("--autocast", autocast), ("--dtype", dtype), ("--device", device != "meta"),
                                      ("--train", train), ("--factory-arg", factory_arg)) if value]
    if trace is None:
        if given:
            raise UsageError(f"{', '.join(given)} go with --trace MODULE:FACTORY (the model to trace)")
        return None
    if facts is not None:
        raise UsageError("--trace traces a model here: it does not go with --from-report (a report recorded elsewhere)")
    from ..fix.traced import TraceRequest
    from ..tracing.errors import TraceError
    from ..tracing.runs.factory import parse_factory_args

    try:
        kwargs = parse_factory_args(factory_arg)
    except TraceError as exc:
        raise UsageError(exc.message) from None
    return TraceRequest(trace, {"dtype": dtype, "autocast": autocast, "device": device, "train": train,
                                "factory_kwargs": kwargs or None})


def _fix(*, check_options, yes, dry_run, json_out, only, skip, unsafe, apply_patch, patch_dir, installer, verbose,
         request=None):
    from ..fix.apply import STOP_SIGNALS, Interrupted

    # Until the plan is applied nothing changes: a stop signal ends the command with one line.
    def stop(signum, _frame):
        raise Interrupted(signum)

    import signal

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        _fix_steps(check_options=check_options, yes=yes, dry_run=dry_run, json_out=json_out, only=only, skip=skip, unsafe=unsafe,
                   apply_patch=apply_patch, patch_dir=patch_dir, installer=installer, verbose=verbose, request=request)
    except Interrupted as exc:
        _interrupted(exc.signum, None, [], None, json_out)
    finally:
        # Once a run was applied or interrupted, stop signals stay ignored until the process has
        # exited (a Ctrl-C at the very end would otherwise kill it with SIGINT, its report cut
        # short); a fix that changed nothing gives the caller's handlers back.
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _interrupted(signum: int, run_id, restored: list[str], error, json_out: bool) -> None:
    """The one line (with --json, also the document saying so), and exit 128 + the signal; later
    stop signals are ignored, so that the exit code says which one stopped the fix."""
    import signal

    from ..fix.apply import STOP_SIGNALS
    from ..render.fix_human import interrupted_line
    from ..render.fix_json import interrupted_json
    from ._common import emit, note

    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    note(interrupted_line(run_id, restored, error), always=True)  # -q too: it says what state the environment is in
    if json_out:
        emit(True, lambda: interrupted_json(signal.Signals(signum).name, run_id, restored, error, 128 + signum), lambda _console: None)
    raise typer.Exit(128 + signum)


def _fix_steps(*, check_options, yes, dry_run, json_out, only, skip, unsafe, apply_patch, patch_dir, installer, verbose,
               request=None):
    from ..core import run_check
    from ..fix.apply import FixInterrupted, apply_plan, recover_interrupted, stop_signals_refused
    from ..fix.journal import Lock, interrupted_runs, state_dir
    from ..fix.plan import Options, build_plan
    from ..render.fix_human import render_outcome, render_plan, render_summary, render_unapplied
    from ._common import quiet
    from ..render.fix_json import plan_json
    from ..rules.loader import load_recipes
    from ._common import emit, note as say, progress_on_terminal, show

    progress = progress_on_terminal(json_out)
    note = progress.update if progress else None
    try:
        interrupted = interrupted_runs()
        if interrupted:
            ids = ", ".join(j.id for j in interrupted)
            if dry_run:
                say(f"a previous fix ({ids}) was interrupted; `attn-doctor fix` or `fix --undo` restores the state before it")
            else:
                with Lock(state_dir()), stop_signals_refused(say):
                    recover_interrupted(progress=note)
                say(f"restored the state before the interrupted fix {ids}")

        def judged(report, update):
            """The check's report, with the --trace model's dtype path where one was named."""
            if request is None:
                return report
            from ..fix.traced import traced_report
            from ..rules.loader import load_selected

            if update:
                update(f"tracing {request.target}")
            recipes = load_selected(check_options.recipes_dir, check_options.only, check_options.skip)
            return traced_report(report, request, recipes, check_options.fail_on, progress=update)

        def check():
            return judged(run_check(check_options, note), note)

        from ._common import UsageError

        known = load_recipes(check_options.recipes_dir)
        unknown = known.unknown(only or [], "--only") or known.unknown(skip or [], "--skip")
        if unknown:
            raise UsageError(unknown)
        report = check()
        options = Options(unsafe=unsafe, apply_patch=apply_patch, only=only, skip=skip, patch_dir=patch_dir, installer=installer)
        plan = build_plan(report, options, known.data, known)
        plan.traced = request is not None
        # what each install would pull in, resolved by the installer before anything is confirmed
        from ..fix.packages import preview_plan

        preview_plan(plan, report.facts, progress.update if progress else None)
    finally:
        if progress:
            progress.stop()

    if dry_run or not plan.runnable and not _patches(plan):
        code = 0 if dry_run or not any(a.status == "blocked" for a in plan.actions) else 1

        emit(json_out, lambda: plan_json(plan, None, dry_run=dry_run, exit_code=code),
             lambda console: render_unapplied(plan, console, dry_run=dry_run, verbose=verbose),
             lambda console: render_summary(plan, None, console))
        raise typer.Exit(code)

    if not json_out and not (quiet() and yes):  # the plan to confirm; with --json, the document after the run holds it
        show(lambda console: render_plan(plan, console, dry_run=False, verbose=verbose))
    if not yes:
        if not sys.stdin.isatty():
            from ._common import fail

            raise fail("fix needs confirmation: run with --yes to apply, or --dry-run to see the plan only")
        if not typer.confirm(f"Apply {len(plan.runnable)} change(s)?", default=False, err=True):
            say("nothing changed")
            raise typer.Exit(1)

    progress = progress_on_terminal(json_out)
    try:
        journal = apply_plan(
            plan,
            report.facts,
            # The verification reuses the plan's smoke results and sample verdict where nothing
            # they depend on changed (a package change or another config shape runs them again).
            verify=lambda: judged(run_check(check_options, progress.update if progress else None, previous=report),
                                  progress.update if progress else None),
            command=sys.argv[1:],
            patch_dir=patch_dir,
            progress=progress.update if progress else None,
            refused=say,
            ignore_after=True,
        )
    except FixInterrupted as exc:
        if progress:
            progress.stop()
        return _interrupted(exc.signum, exc.run_id, exc.restored, exc.error, json_out)
    finally:
        if progress:
            progress.stop()
    bad = any(a.status in ("failed", "rolled-back", "blocked") for a in plan.actions)
    code = 1 if bad else 0
    emit(json_out, lambda: plan_json(plan, journal, dry_run=False, exit_code=code),
         lambda console: render_outcome(plan, journal, console), lambda console: render_summary(plan, journal, console))
    raise typer.Exit(code)


def _patches(plan) -> bool:
    return any(a.kind == "patch" and a.diff for a in plan.actions)


def _history(json_out: bool) -> None:
    from ..fix.journal import list_runs
    from ..render.fix_human import render_history
    from ..render.fix_json import history_json
    from ._common import emit

    runs = list_runs()
    emit(json_out, lambda: history_json(runs), lambda console: render_history(runs, console))
    raise typer.Exit(0)


def _undo(run_id: Optional[str], json_out: bool, python: Optional[str], keep_edits: bool = False) -> None:
    from ..fix.apply import restore_run, stop_signals_refused
    from ..fix.journal import DONE_STATUSES, JournalError, Lock, find_run, state_dir
    from ..render.fix_human import render_undo
    from ..render.fix_json import undo_json
    from ._common import emit, note

    with Lock(state_dir()), stop_signals_refused(note):
        journal = find_run(run_id)
        if python is not None:
            _same_target(python, journal)
        if journal.status in DONE_STATUSES:
            raise JournalError(f"run {journal.id} was already {'restored after an interruption' if journal.status == 'interrupted' else 'undone'}"
                               + (f" at {journal.data['undone_at']}" if journal.data.get("undone_at") else ""))
        changed = restore_run(journal, keep_edits=keep_edits)
    emit(json_out, lambda: undo_json(journal.id, changed), lambda console: render_undo(journal.id, changed, console))
    raise typer.Exit(0)


def _same_target(python: str, journal) -> None:
    """--undo --python P: accepted when P is the environment the run changed (its interpreter under
    any of its names, or its folder), refused otherwise: an undo acts on the journal's target."""
    from ..options import validate_python
    from ._common import UsageError

    recorded = journal.data.get("python") or ""
    if not _same_environment(validate_python(python) or python, recorded):
        raise UsageError(f"run {journal.id} changed {recorded}, not {python}: `attn-doctor fix --undo {journal.id}` undoes it "
                         "(an undo acts on the environment the run changed)")


def _same_environment(a: str, b: str) -> bool:
    # The environment's folder (bin/python -> the venv), not the resolved binary: every venv's
    # python links to the same base interpreter.
    import os
    from pathlib import Path

    prefix_a, prefix_b = Path(a).absolute().parent.parent, Path(b).absolute().parent.parent
    try:
        return os.path.samefile(prefix_a, prefix_b)
    except OSError:
        return prefix_a == prefix_b
