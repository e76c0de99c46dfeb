"""``attn-doctor trace``: the CLI glue for the dtype tracer (registered by attn_doctor/cli.py as
``app.command("trace")(cli_trace.trace)``). Parse, run the core, render, exit with a code:
0 clean, 1 findings of severity error, 2 usage, 3 the trace could not run."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

TARGET_HELP = (
    "What to trace, as MODULE:FACTORY. FACTORY is a callable returning a model, or (model, example_inputs) where "
    "example_inputs is a tensor, a tuple of args or a dict of kwargs. MODULE is a dotted module importable from "
    "the current folder or a path to a .py file. Examples: mypkg.models:build_small, ./train.py:make_model"
)


def _capability(value):
    if not value:
        return None
    try:
        major, _, minor = value.partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        raise typer.BadParameter("--capability takes MAJOR.MINOR, for example 8.0 (A100) or 7.5 (T4)")


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
    capability: Optional[str] = typer.Option(
        None, "--capability", metavar="MAJOR.MINOR",
        help="Judge the kernels for a GPU of this compute capability (e.g. 7.5 for a T4). Default: the local GPU "
             "with --device cuda, else not checked."),
    attn_implementation: Optional[str] = typer.Option(
        None, "--attn-implementation", metavar="NAME",
        help="With --hf: the attention implementation to build with (sdpa, eager, flash_attention_2). Default: the "
             "config's, else sdpa."),
    seq_len: int = typer.Option(16, "--seq-len", min=1, help="Sequence length of generated token ids."),
    python: Optional[str] = typer.Option(
        None, "--python", metavar="PATH",
        help="Trace inside another interpreter (the venv your training runs in); it needs torch, not attn-doctor."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON (the exit code is the same)."),
    patch_only: bool = typer.Option(False, "--patch", help="Print only the suggested patches, as one unified diff "
                                                            "for `git apply` / `patch -p1`."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Show every attention call and tracebacks."),
) -> None:
    """Find where a half-precision tensor turns float32 on its way to an attention kernel.

    Runs one forward pass under a dtype tracer (on meta by default: no memory, no compute), stops at every attention
    call (SDPA, flash-attn, xformers, fla, transformers' dispatch), judges q/k/v against the kernel's real rules,
    and walks each bad input back to the line that promoted it.

    Examples:

      attn-doctor trace mypkg.models:build --autocast bf16

      attn-doctor trace ./var_model.py:build --dtype fp16 --train

      attn-doctor trace --hf ./my-checkpoint --attn-implementation flash_attention_2 --json
    """
    kwargs = dict(target=target, hf=hf, dtype=dtype, autocast=autocast, device=device, train=train,
                  capability=_capability(capability), attn_implementation=attn_implementation, seq_len=seq_len)
    if python:
        from attn_doctor.cli import UsageError, _validate_python, fail
        from attn_doctor.trace.launch import run_child

        try:
            python = _validate_python(python)
        except UsageError as exc:
            raise fail(str(exc)) from None
        report = run_child("trace", kwargs, python=python)
    else:
        import warnings

        # torch's own import-time notice on machines without numpy says nothing about the model
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        from attn_doctor.trace.api import trace as run_trace
        from attn_doctor.trace.child import stdout_to_stderr

        with stdout_to_stderr():
            report = run_trace(**kwargs)
    code = int(report.get("exit_code", 3))
    if json_out:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    elif patch_only:
        patches = [f["patch"] for f in report.get("findings", []) if f.get("patch")]
        sys.stdout.write("".join(patches))
        if not patches:
            sys.stderr.write("no patch to suggest\n")
    else:
        from attn_doctor.render.trace_human import render_trace

        render_trace(report, verbose=verbose)
    raise typer.Exit(code)
