"""``attn-doctor explain``: the CLI glue (registered by attn_doctor/cli/__init__.py).
Parse, read the input, run the core, render, exit: 0 nothing to fix, 1 a known problem found,
2 usage (no input, unreadable file, stdin from a terminal)."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Optional

import typer

from ._common import json_option, no_color_option, python_option, quiet_option, schema_option, verbose_option


def explain(
    text: Optional[list[str]] = typer.Argument(
        None, metavar="[TEXT]...", show_default=False,
        help="An error message or traceback (quote it). A single TEXT that is the path of an existing file reads "
             "that file, as --file does. '-' reads the input from stdin; with no TEXT and no --file, a piped stdin "
             "is read too."),
    file: Optional[Path] = typer.Option(
        None, "--file", "-f", metavar="LOG",
        help="Read a log file (any size, streamed; gzip and UTF-16 are decoded)."),
    check: bool = typer.Option(
        False, "--check",
        help="Also probe this environment (as `attn-doctor check` does) and say, for each cause, whether it is present now."),
    python: Optional[str] = python_option("The interpreter (or venv folder) of the environment the log came from: the remedies' commands are written for it, and --check probes it. Default: the environment the log's traceback shows where it is on this machine, else the active one where it has torch, else the commands say \"python of your training environment\"."),
    json_out: bool = json_option("attn-doctor/explain"),
    schema: bool = schema_option("explain"),
    recipes: Optional[Path] = typer.Option(None, "--recipes", metavar="DIR", help="Use the rules in DIR instead of the shipped recipes."),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option("Show the full explanations, every evidence line, links and tracebacks."),
    no_color: bool = no_color_option(),
) -> None:
    """Explain an error message, a traceback or a whole training log: the cause and the fix.

    Finds every known failure signature (flash-attn, PyTorch SDPA, transformers, Triton, import
    failures, GPU architecture, fla / LLaMA-Factory / x-transformers), shows the lines it matched,
    reads the versions the log prints (pip freeze, collect_env, nvidia-smi) to say which cause fits,
    and gives the remedies `attn-doctor fix` applies. Harmless warnings are said to be harmless.
    A line no signature knows that is one of the stack's own messages (the catalogue of every
    raise, warning and check site of torch, triton, flash-attn, xformers, flashinfer, SageAttention,
    vLLM, SGLang, transformers, accelerate, DeepSpeed, bitsandbytes, CTranslate2 and the kernels hub) is
    explained by the cause its check states, with the site that raises it. ANSI colours, rank
    prefixes ([rank3]:), logger prefixes and wrapped lines are handled.

    Examples:

      attn-doctor explain "RuntimeError: FlashAttention only supports Ampere GPUs or newer."

      attn-doctor explain --file slurm-4242.out

      journalctl -u train | attn-doctor explain -

      attn-doctor explain --file train.log.gz --check --json

    Exit codes: 0 nothing to fix (nothing matched, or only harmless messages); 1 a known problem
    was found; 2 usage error (no input, unreadable file, stdin is a terminal).
    """
    from ._common import CLI, UsageError, check_verbosity, emit, fail, print_schema, progress_on_terminal, validate_python as _validate_python

    if schema:
        raise print_schema("explain")
    check_verbosity(verbose)
    from ..rules.loader import RecipeError, load_recipes

    try:
        source, kind, path = _input(text, file)
        target = _validate_python(python, CLI) if python else None
        loaded = load_recipes(recipes)
    except (UsageError, RecipeError) as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        raise fail(str(exc)) from None

    from ..explaining.core import explain as run_explain
    from ..options import resolve_target

    status = progress_on_terminal(json_out, "reading the input")
    try:
        live = None
        if check:
            from ..probes import collect_facts

            if status:
                status.update("probing this environment (--check)")
            live = collect_facts(python=target, progress=status.update if status else None)
            if status:
                status.update("reading the input")
        total = _size(source)

        def progress(done: int) -> None:
            if status:
                status.update(f"reading the input: {done / 1e6:.0f} MB" + (f" of {total / 1e6:.0f} MB" if total else ""))

        report = run_explain(source, loaded, kind=kind, path=path, live=live, progress=progress,
                             python=target, default_python=resolve_target().python)
    except OSError as exc:
        raise fail(f"{path or 'input'}: cannot read: {exc.strerror or exc}") from None
    finally:
        if status:
            status.stop()
    from ..render.explain_human import render, render_summary
    from ..schemas import to_json

    emit(json_out, lambda: to_json(report), lambda console: render(report, console, verbose=verbose),
         lambda console: render_summary(report, console))
    raise typer.Exit(report.exit_code)


def _input(text, file):
    from ._common import UsageError

    if file is not None and text:
        raise UsageError("give the input once: TEXT, --file LOG, or '-' for stdin")
    named = ""
    if file is None and text and len(text) == 1 and _names_a_file(text[0]):
        file, text = Path(text[0]), None  # `attn-doctor explain train.log`: the log, not its name
        named = "TEXT names a file, read as one: "
    if file is not None:
        if str(file) == "-":
            text = ["-"]
        else:
            # A log of any size is streamed; what could never end (a FIFO, /dev/zero) is refused
            # unless it is stdin (attn_doctor/boundary/inputs.py).
            from ..boundary.inputs import InputError, open_input, shown

            try:
                handle, from_stdin = open_input(file)
            except InputError as exc:
                raise UsageError(f"{named or '--file '}{shown(file)}: {exc}") from None
            if from_stdin:
                text = ["-"]
            else:
                return handle, "file", str(file)
    if not text and sys.stdin is not None and not _isatty(sys.stdin):
        text = ["-"]  # `... | attn-doctor explain`, as `-` reads it
    if not text:
        raise UsageError("nothing to explain: give an error message, --file LOG, or pipe a log in (see 'attn-doctor explain -h')")
    if text == ["-"]:
        if sys.stdin is None or sys.stdin.isatty():
            raise UsageError("'-' reads stdin, but stdin is a terminal: pipe a log in (e.g. `cat train.log | attn-doctor explain -`)")
        return sys.stdin.buffer, "stdin", None
    return io.BytesIO(" ".join(text).encode("utf-8", "surrogateescape")), "text", None


def _names_a_file(arg: str) -> bool:
    """One argument that is the path of a regular file (no error message is one line naming an
    existing file and nothing else)."""
    if not arg or "\n" in arg or len(arg) > 4096:
        return False
    try:
        return Path(arg).is_file()
    except (OSError, ValueError):
        return False


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed or replaced
        return True  # nothing to read from it either


def _size(source) -> int:
    try:
        import os

        return os.fstat(source.fileno()).st_size
    except (OSError, AttributeError, io.UnsupportedOperation, ValueError):
        return 0
