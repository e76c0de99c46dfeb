"""``attn-doctor trace``: the CLI glue for the dtype tracer (registered by attn_doctor/cli/__init__.py as
``app.command("trace")(cli_trace.trace)``). Parse, run the core, render, exit with a code:
0 clean, 1 findings of severity error, 2 usage, 3 the trace could not run or reached no attention
call (nothing was judged)."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from ._common import (FailOn, capability_option, json_option, no_color_option, python_option, quiet_option, schema_option,
                      verbose_option)

TARGET_HELP = (
    "What to trace, as MODULE:FACTORY. FACTORY is a callable returning a model, or (model, example_inputs) where "
    "example_inputs is a tensor, a tuple of args or a dict of kwargs; it gets device=meta (the trace device) if it "
    "takes a `device` parameter, and --factory-arg values. MODULE is a dotted module importable from the current "
    "folder or a path to a .py file. Examples: mypkg.models:build_small, ./train.py:make_model"
)


def _capability(value):
    if not value:
        return None
    try:
        major, _, minor = value.partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        raise typer.BadParameter("--capability takes MAJOR.MINOR, for example 8.0 (A100) or 7.5 (T4)")


def _trace_here(kwargs, bytecode, progress):
    """The trace in this process: torch and transformers imported with their bytecode where check
    keeps it (and so do the route children this trace may start)."""
    import os
    import warnings

    prefix = bytecode.get("PYTHONPYCACHEPREFIX")
    # what this process had, put back once the trace returns: a caller that runs the CLI in its own
    # process (a test, a notebook) keeps its bytecode settings
    saved = (sys.pycache_prefix, sys.dont_write_bytecode,
             {k: os.environ.get(k) for k in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")})
    if prefix:
        sys.pycache_prefix, sys.dont_write_bytecode = prefix, False
        os.environ["PYTHONPYCACHEPREFIX"] = prefix
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    # torch's own import-time notice on machines without numpy says nothing about the model
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from ..tracing import state
    from ..tracing.runs.api import trace as run_trace
    from ..tracing.runs.child import stdout_to_stderr

    state.PROGRESS[0] = progress.update if progress else None
    try:
        with stdout_to_stderr():
            return run_trace(**kwargs)
    finally:
        state.PROGRESS[0] = None
        if prefix:
            sys.pycache_prefix, sys.dont_write_bytecode = saved[0], saved[1]
            for key, value in saved[2].items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _with_known_bugs(report):
    """The known kernel bugs its calls meet (recipes/numerics.toml), judged on the report."""
    import os

    from ..rules.known_calls import add_known_bugs
    from ..rules.loader import load_recipes

    return add_known_bugs(report, load_recipes().data, os.environ)


def trace(
    target: Optional[str] = typer.Argument(None, help=TARGET_HELP, show_default=False),
    hf: Optional[str] = typer.Option(
        None, "--hf", metavar="PATH",
        help="Trace a transformers model built from a local config.json or checkpoint folder, on meta, with no "
             "weights loaded and nothing downloaded. Example: --hf ./Qwen2-7B --attn-implementation flash_attention_2"),
    dtype: Optional[str] = typer.Option(
        None, "--dtype", metavar="bf16|fp16|fp32",
        help="Cast the model (and floating example inputs) to this dtype first, like model.to(torch.bfloat16). "
             "Buffers and parameters the model keeps in fp32 on purpose are cast too, so use the factory for those."),
    autocast: Optional[str] = typer.Option(
        None, "--autocast", metavar="bf16|fp16",
        help="Run the forward inside an autocast region of this dtype. Off CUDA, CUDA's autocast policy is "
             "emulated (norms, normalize, softmax, exp, pow, sum run in fp32 as on the GPU)."),
    device: str = typer.Option(
        "meta", "--device", metavar="meta|cpu|cuda",
        help="meta (default): no memory, no compute, any model size; cpu: real numbers; cuda: the real GPU, real "
             "autocast and the real kernels."),
    train: bool = typer.Option(False, "--train", help="Trace in training mode, forward and backward."),
    capability: Optional[str] = capability_option(
        help="Judge the kernels for a GPU of this compute capability (e.g. 7.5 for a T4). Default: the local GPU "
             "with --device cuda, else not checked."),
    attn_implementation: Optional[str] = typer.Option(
        None, "--attn-implementation", metavar="NAME",
        help="With --hf: the attention implementation to build with (sdpa, eager, flash_attention_2). Default: what "
             "from_pretrained would use: the config's attn_implementation, else transformers' choice for the "
             "architecture (sdpa where it supports it, else eager)."),
    factory_arg: Optional[List[str]] = typer.Option(
        None, "--factory-arg", "-a", metavar="KEY=VALUE",
        help="A keyword argument for FACTORY (repeatable). VALUE is a Python literal (2, 0.1, True, None, 'x', "
             "[1, 2]) or else a string. Example: -a depth=4 -a dtype=bfloat16"),
    seq_len: int = typer.Option(16, "--seq-len", min=1, help="Sequence length of generated token ids."),
    shadow: Optional[bool] = typer.Option(
        None, "--shadow/--no-shadow", show_default=False,
        help="Measure every op's precision against a float64 shadow of the forward pass, run on CPU (a second "
             "run after a meta trace; a 2-layer build of a large --hf config): the op that loses precision or "
             "overflows (AD626, AD627), whatever the code's spelling, and masks of 1 and 0 added as numbers "
             "(AD624). Default: measured where it costs seconds (a forward reading up to 5e7 elements), said "
             "where not; --shadow measures any size, --no-shadow skips it."),
    python: Optional[str] = python_option(
        help="Trace inside another interpreter (the venv your training runs in); it needs torch, not attn-doctor. "
             "Default: the active venv ($VIRTUAL_ENV), else the active conda env ($CONDA_PREFIX), where either is "
             "not the environment attn-doctor runs in; else in-process."),
    json_out: bool = json_option("attn-doctor/trace"),
    schema: bool = schema_option("trace"),
    patch_only: bool = typer.Option(False, "--patch", help="Print only the suggested patches, as one unified diff "
                                                            "for `git apply` / `patch -p1`."),
    fail_on: FailOn = typer.Option(
        FailOn.error, "--fail-on",
        help="Exit 1 on errors (default), or on warnings too: a call that falls back to a slower kernel (AD603, "
             "AD604, AD610-AD613, AD618-AD620, AD277) then fails CI."),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option("Show every attention call and tracebacks."),
    no_color: bool = no_color_option(),
) -> None:
    """Find where a half-precision tensor turns float32 (or float64) on its way to an attention kernel.

    Runs one forward pass under a dtype tracer (on meta by default: no memory, no compute), stops at every attention
    call (SDPA, flash-attn, xformers, fla, transformers' attention functions, attention written out as matmul /
    softmax / matmul), judges q/k/v and the mask against the kernel's real rules, and walks each bad input back to
    the line that promoted it. An error raised at an attention call is a finding too.

    Where flash-attn (2, 3 or 4), xformers, SageAttention or the kernels hub does not import, a stand-in with that
    library's checks and messages takes its place, so the model takes the path it takes where the library is
    installed. If the model then calls it, the installed path (say, an SDPA
    fallback) is traced as well and both are reported: "as installed: SDPA — clean", "with flash-attn 2.8.3:
    fails at model.py:42". With --device cuda the installed path is the verdict and the other is advice; on meta
    and cpu both count.

    Each call site's kernel on the target GPU is named (SDPA's flash, cuDNN, mem-efficient or math: torch asked with
    --device cuda, else its choice emulated for --capability, default sm90), and a call that falls back to a slower
    kernel is a warning naming the change that gives it the faster one; with --device cuda the cost is timed.

    Exit codes: 0 clean (warnings allowed, unless --fail-on warning); 1 errors found (warnings too with --fail-on
    warning); 2 usage error; 3 the trace could not run (the model
    does not build or import, transformers refuses the config) or it reached no attention call, so nothing was
    judged.

    Examples:

      attn-doctor trace mypkg.models:build --autocast bf16

      attn-doctor trace ./var_model.py:build -a depth=4 --dtype fp16 --train

      attn-doctor trace --hf ./my-checkpoint --attn-implementation flash_attention_2 --json
    """
    from ._common import check_verbosity, print_schema

    if schema:
        raise print_schema("trace")
    check_verbosity(verbose)
    from ..tracing.errors import TraceError
    from ..tracing.runs.factory import parse_factory_args

    if json_out and patch_only:
        from ._common import fail

        raise fail("give one of --json (the whole report) or --patch (the patches only)")

    try:
        factory_kwargs = parse_factory_args(factory_arg)
    except TraceError as exc:
        from ._common import fail

        raise fail(exc.message) from None
    kwargs = dict(target=target, hf=hf, dtype=dtype, autocast=autocast, device=device, train=train,
                  capability=_capability(capability), attn_implementation=attn_implementation, seq_len=seq_len,
                  factory_kwargs=factory_kwargs or None, shadow=shadow)
    from ._common import UsageError, emit, fail, progress_on_terminal, warn, write_text
    from ..options import CLI, resolve_target

    try:
        # --python, else the active venv or conda env: the user's model imports from there.
        where = resolve_target(python, naming=CLI)
    except UsageError as exc:
        raise fail(str(exc)) from None
    # a file that is not there is said at once, before torch is imported (here or in the child)
    from ..tracing.runs.factory import target_problem
    from ..tracing.runs.hf_models import hf_config_problem

    problem = (target_problem(target) if target and not hf else None) or (hf_config_problem(hf) if hf and not target
                                                                          else None)
    if problem:
        raise fail(problem)
    if where.ignored:
        warn(f"{where.ignored}: tracing in the interpreter attn-doctor runs in ({where.python})")
    progress = progress_on_terminal(json_out or patch_only, "looking for torch's bytecode", lines=True)
    try:
        from ..probes import trace_bytecode_env

        bytecode = trace_bytecode_env(where.python)
        if not where.own:
            from ..schemas import envelope
            from ..tracing.runs.launch import run_child

            # the child's report, or the failure run_child describes, in the envelope
            report = envelope("trace", run_child("trace", kwargs, python=where.python, timeout=1800, env=bytecode,
                                                 progress=progress.update if progress else None))  # may trace two paths
        else:
            # --python naming this very interpreter traces here too: a child would import it all again
            report = _trace_here(kwargs, bytecode, progress)
        if where.source == "option" or not where.own:
            report["interpreter"] = {"python": where.python, "source": where.source, "why": where.why}
    finally:
        if progress:
            progress.stop()
    report = _with_known_bugs(report)
    code = int(report.get("exit_code", 3))
    if fail_on == FailOn.warning and code == 0 and (report.get("summary") or {}).get("warnings"):
        code = 1
    if report.get("status") == "usage_error":
        # Bad input is one line on stderr, as for every command; the traceback with -v.
        from ._common import fail

        error = report.get("error") or {}
        if verbose and error.get("traceback"):
            from ..render.console import inert  # its source lines are the user's files: printed inert

            sys.stderr.write(inert(str(error["traceback"]).rstrip("\n")) + "\n")
        raise fail(" ".join(str(error.get("message") or "usage error").split()))
    if patch_only and not json_out:
        patches = [f["patch"] for f in report.get("findings", []) if f.get("patch")]
        write_text("".join(patches))
        if not patches:
            sys.stderr.write("no patch to suggest\n")
    else:
        from ..render.json import plain_json
        from ..render.trace_human import render_quiet, render_trace

        emit(json_out, lambda: plain_json(report), lambda console: render_trace(report, console, verbose=verbose),
             lambda console: render_quiet(report, console))
    raise typer.Exit(code)
