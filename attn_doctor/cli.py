"""The command line. Thin: parse options, call the core, render, map to an exit code."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from . import __version__

EXIT_CODES_HELP = """\
Exit codes: 0 no errors found; 1 errors found (or warnings, with --fail-on warning);
2 usage error (bad option, unreadable --facts file, invalid recipe, --python that is not an
interpreter); 3 a probe could not run (timed out or crashed) or a check crashed.
"""

app = typer.Typer(
    name="attn-doctor",
    help=(
        "Diagnose and fix the FlashAttention / mixed-precision stack of PyTorch: GPU architecture and bf16, "
        "torch / triton / flash-attn builds, and the dtypes that reach the attention kernel.\n\n" + EXIT_CODES_HELP
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class FailOn(str, Enum):
    error = "error"
    warning = "warning"


class UsageError(Exception):
    pass


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def fail(message: str, code: int = 2) -> "typer.Exit":
    _stderr_console().print(f"[bold red]attn-doctor: error:[/] {message}", markup=True, highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"attn-doctor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """attn-doctor."""


def _validate_python(python: Optional[str]) -> Optional[str]:
    if python is None:
        return None
    path = Path(python).expanduser()
    if os.sep not in python and not path.exists():
        # A bare name (`--python python3.11`), as a shell would find it on PATH. The PATH entry is
        # kept as found, not resolved: a venv's bin/python is a symlink, yet its own environment.
        found = shutil.which(python)
        if found is None:
            raise UsageError(f"--python {python}: no such file, and no {python} on PATH")
        path = Path(found)
    if path.is_dir():
        # Accept a venv folder: /path/to/venv -> /path/to/venv/bin/python
        for candidate in (path / "bin" / "python", path / "Scripts" / "python.exe"):
            if candidate.exists():
                path = candidate
                break
        else:
            raise UsageError(f"--python {python}: a folder without bin/python; give the interpreter's path")
    if not path.exists():
        raise UsageError(f"--python {python}: no such file")
    if not os.access(path, os.X_OK):
        raise UsageError(f"--python {python}: not executable")
    return str(path.absolute())


def _output_path(template: str) -> Path:
    host = socket.gethostname().split(".")[0] or "host"
    return Path(template.replace("{host}", host)).expanduser()


@app.command(
    help=(
        "Probe this machine and a Python environment, and print a diagnosis with remedies.\n\n"
        "Tiers: --quick reads package metadata, the OS and the GPUs (NVML / nvidia-smi) without importing torch; "
        "the full check also imports torch in the target interpreter and tests, each in an isolated process, "
        "CUDA initialisation, the SDPA backends and the imports of flash_attn, xformers, triton and fla; "
        "then a sample forward pass over the installed attention paths shows the dtypes reaching the kernels.\n\n"
        "Examples:\n\n"
        "  attn-doctor check\n\n"
        "  attn-doctor check --python ~/venvs/train/bin/python\n\n"
        "  attn-doctor check --json --output reports/{host}.json\n\n"
        "  attn-doctor check --from-report colleague.json\n\n"
        "  attn-doctor check --config train_lora.yaml --config ds_z2.json\n\n" + EXIT_CODES_HELP
    )
)
def check(
    quick: bool = typer.Option(False, "--quick", "-q", help="Do not import torch: metadata, OS and GPUs only (well under a second)."),
    python: Optional[str] = typer.Option(
        None, "--python", "-p", metavar="PATH", help="Diagnose this interpreter (a path, a venv folder, or a name on PATH such as python3.11) instead of the current one."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON (schema attn-doctor/report v1). Never changes the exit code."),
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
        help="Run the sample forward pass again even if this package set was judged before (its verdict is cached per package set, Python and GPU).",
    ),
    no_smoke: bool = typer.Option(
        False,
        "--no-smoke",
        help="Skip the GPU smoke tests (a tiny forward + backward per attention backend and native dtype, checked against float64).",
    ),
    timeout: float = typer.Option(120.0, "--timeout", metavar="SECONDS", min=1.0, help="How long to wait for the torch probe."),
    recipes: Optional[Path] = typer.Option(None, "--recipes", metavar="DIR", help="Use the rules in DIR instead of the shipped recipes."),
    config: Optional[list[str]] = typer.Option(
        None,
        "--config",
        "-c",
        metavar="FILE",
        help="Also judge this training config against the machine (repeatable): a LLaMA-Factory YAML, a model's config.json, an accelerate config or a DeepSpeed JSON; the kind is detected from its keys.",
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
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show passing and skipped checks, evidence, timings and tracebacks."),
) -> None:
    if distributed:
        from .fleet.distributed import run_distributed_check

        # All of check's options, whatever they are now: the fleet branch forwards those run_check takes.
        raise typer.Exit(run_distributed_check(dict(locals())))
    from .core import FactsFileError, run_check
    from .rules.loader import RecipeError

    try:
        target = _validate_python(python)
        if facts is not None and (python or quick):
            raise UsageError("--facts/--from-report diagnoses a recorded report; it cannot be combined with --python or --quick")
        for path in config or []:
            if not Path(path).expanduser().is_file():
                raise UsageError(f"--config {path}: no such file")
        progress = _progress() if not json_out and sys.stderr.isatty() else None
        try:
            report = run_check(
                configs=config,
                python=target,
                quick=quick,
                facts_file=facts,
                recipes_dir=recipes,
                fail_on=fail_on.value,
                timeout=timeout,
                progress=progress.update if progress else None,
                sample=not no_sample,
                smoke=not no_smoke,
                use_cache=not no_cache,
            )
        finally:
            if progress:
                progress.stop()
        if target and report.facts.probe("environment") and report.facts.probe("environment").status != "ok":
            raise UsageError(f"--python {python}: not a working Python interpreter ({report.facts.probe('environment').error})")
    except (UsageError, FactsFileError, RecipeError) as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        raise fail(str(exc)) from None

    from .render.json import to_json

    if output:
        path = _output_path(output)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(to_json(report))
        except OSError as exc:
            raise fail(f"--output {path}: cannot write: {exc.strerror or exc}") from None
    if json_out:
        sys.stdout.buffer.write(to_json(report))
        sys.stdout.flush()
    else:
        from rich.console import Console

        from .render.human import render

        # Piped into a log or grep: one line per finding, no wrapping at 80 columns.
        render(report, Console(highlight=False, soft_wrap=not sys.stdout.isatty()), verbose=verbose)
    raise typer.Exit(report.exit_code)


class _Progress:
    """A spinner on stderr while the probes run (only on a terminal)."""

    def __init__(self):
        self._status = _stderr_console().status("probing")
        self._status.start()

    def update(self, message: str) -> None:
        self._status.update(message)

    def stop(self) -> None:
        self._status.stop()


def _progress() -> _Progress:
    return _Progress()


@app.command(
    help=(
        "List the rules attn-doctor knows, or show one in full (what it checks, why it matters, the remedies).\n\n"
        "Examples:\n\n  attn-doctor rules\n\n  attn-doctor rules AD301\n\n  attn-doctor rules flash-attn-undefined-symbol\n\n"
        "  attn-doctor rules --schema   (the JSON Schema of the --json report)"
    )
)
def rules(
    rule_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="A rule id (AD301) or name (flash-attn-undefined-symbol)."),
    json_out: bool = typer.Option(False, "--json", help="Print as JSON."),
    schema: bool = typer.Option(False, "--schema", help="Print the JSON Schema of `check --json` reports."),
    recipes: Optional[Path] = typer.Option(None, "--recipes", metavar="DIR", help="Read rules from DIR instead of the shipped recipes."),
) -> None:
    import msgspec

    from .rules.loader import RecipeError, load_recipes

    if schema:
        from .render.json import report_schema

        typer.echo(msgspec.json.format(msgspec.json.encode(report_schema()), indent=2).decode())
        raise typer.Exit(0)
    try:
        loaded = load_recipes(recipes)
    except RecipeError as exc:
        raise fail(str(exc)) from None
    from rich.console import Console

    from .render.rules import render_rule, render_rules

    console = Console(highlight=False, soft_wrap=True) if sys.stdout.isatty() else Console(highlight=False, width=200)
    if rule_id:
        rule = loaded.get(rule_id)
        if rule is None:
            raise fail(f"no rule {rule_id!r}; `attn-doctor rules` lists them")
        if json_out:
            typer.echo(msgspec.json.format(msgspec.json.encode(rule), indent=2).decode())
        else:
            render_rule(rule, console)
        raise typer.Exit(0)
    if json_out:
        typer.echo(msgspec.json.format(msgspec.json.encode(loaded.rules), indent=2).decode())
    else:
        render_rules(loaded.rules, console)


# Commands that live in their own modules: attn_doctor/cli_<name>.py defines a function <name>
# (Typer annotations, heavy imports inside the function: `check --quick` must stay fast).
COMMAND_MODULES = ("trace", "fix", "explain", "fleet")


def _register_optional_commands() -> None:
    import importlib

    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f".cli_{name}", __package__)
        except ModuleNotFoundError as exc:
            if exc.name == f"{__package__}.cli_{name}":
                continue  # not built (yet)
            raise
        fn = getattr(module, name)
        app.command(name, help=fn.__doc__)(fn)


_register_optional_commands()


def _click_exceptions():
    """Click's exception classes: typer >= 0.27 vendors click, and moved Abort in 0.28."""
    import importlib

    modules = []
    for name in ("typer._click.exceptions", "typer.exceptions", "click.exceptions"):
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            pass
    click_exc = tuple({m.ClickException for m in modules if hasattr(m, "ClickException")})
    abort = tuple({m.Abort for m in modules if hasattr(m, "Abort")})
    return click_exc, abort


def main() -> None:
    ClickException, Abort = _click_exceptions()
    command = typer.main.get_command(app)
    try:
        code = command.main(args=sys.argv[1:], prog_name="attn-doctor", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except ClickException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `attn-doctor`: the help is the answer
            typer.echo(exc.format_message())
            sys.exit(0)
        # One line, naming the problem; the usage is one -h away.
        sub = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
        hint = f"attn-doctor {sub} -h" if sub in getattr(command, "commands", {}) else "attn-doctor -h"
        _stderr_console().print(f"attn-doctor: error: {exc.format_message()} (see '{hint}')", markup=False, soft_wrap=True)
        sys.exit(2)
    except Abort:
        _stderr_console().print("attn-doctor: interrupted", markup=False)
        sys.exit(130)
    except KeyboardInterrupt:
        _stderr_console().print("attn-doctor: interrupted")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - a bug in attn-doctor: one line, traceback with -v
        if "-v" in sys.argv or "--verbose" in sys.argv:
            import traceback

            traceback.print_exc()
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        _stderr_console().print(
            f"attn-doctor: internal error: {type(exc).__name__}: {first} (a bug; -v shows the traceback)",
            markup=False,
        )
        sys.exit(3)


if __name__ == "__main__":
    main()
