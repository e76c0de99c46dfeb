"""attn-doctor's Python API: the doctor inside a training script, a notebook or a test.

Four functions, each the Python face of a command; they call the same core functions as the CLI,
return the objects its JSON output serialises, and never print or exit::

    import attn_doctor

    report = attn_doctor.check(quick=True)            # -> attn_doctor.report.Report
    explained = attn_doctor.explain(traceback_text)    # -> attn_doctor.explaining.report.ExplainReport
    traced = attn_doctor.trace(model, (x,), dtype="bf16")  # -> TraceReport
    attn_doctor.preflight(model, example_inputs=(x,))  # raises attn_doctor.PreflightError on findings

Errors are typed (attn_doctor/errors.py): UsageError for bad arguments, ProbeError when a trace
could not run, PreflightError when preflight() finds problems. A broken environment is never an
exception: it is what the report says.

Importing this module is cheap (no torch); check(quick=True) never imports torch in the caller.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional, Union

from . import findings as findings_mod
from .errors import AttnDoctorError, ProbeError, UsageError
from .options import _as_path, _capability, _config_paths, _dtype_name, _fail_on, _path_or_none, _timeout
# The classes the annotations name, imported at run time (msgspec structs, no torch):
# typing.get_type_hints() resolves the API's annotations in this module's namespace.
from .explaining.report import ExplainReport
from .fleet.aggregate import FleetReport
from .report import Report
# The result types (attn_doctor/results.py), public here too: `attn_doctor.api.Finding`.
from .results import Finding, PreflightError, PreflightResult, Severity, TraceReport

if TYPE_CHECKING:
    import torch
else:
    class _TorchOnFirstUse:
        """`torch` for the annotations (torch.nn.Module, torch.dtype): imported when a type is
        looked up (typing.get_type_hints), never when this module is: check(quick=True) must not
        import torch, and the API's functions import it themselves where they need it."""

        def __getattr__(self, name: str) -> Any:
            import importlib

            return getattr(importlib.import_module("torch"), name)

    torch = _TorchOnFirstUse()

__all__ = [
    "AttnDoctorError", "Finding", "PreflightError", "PreflightResult", "ProbeError", "TraceReport", "UsageError",
    "check", "explain", "preflight", "trace",
]

PathLike = Union[str, "os.PathLike[str]"]
ConfigArg = Union[None, PathLike, Sequence[PathLike]]
FailOn = Literal["error", "warning"]
# A dtype as the CLI spells it ("bf16"), as torch names it ("bfloat16"), or the torch.dtype itself.
DtypeArg = Union[None, str, "torch.dtype"]

logger = logging.getLogger("attn_doctor")

# ------------------------------------------------------------------------------------------ check


def check(
    python: Optional[PathLike] = None,
    config: ConfigArg = None,
    *,
    quick: bool = False,
    sample: bool = True,
    smoke: bool = True,
    fail_on: FailOn = "error",
    timeout: float = 120.0,
    use_cache: bool = True,
    cache_dir: Optional[PathLike] = None,
    cache_trust: Optional[str] = None,
    recipes: Optional[PathLike] = None,
    from_report: Optional[PathLike] = None,
    output: Optional[PathLike] = None,
    gpu: Optional[str] = None,
    capability: Optional[str] = None,
) -> "Report":
    """Diagnose a Python environment, as ``attn-doctor check`` does, and return the Report.

    python: the interpreter to diagnose (a path, a venv folder, or a name on PATH); None: the active
        environment, as the CLI picks it (``$VIRTUAL_ENV``, else ``$CONDA_PREFIX``, else this one).
    config: a training config file or several (LLaMA-Factory, axolotl, torchtune, TRL, ms-swift,
        accelerate, DeepSpeed, torchtitan, LitGPT, Lightning (LightningCLI, Hydra), a model's config.json), read as its
        framework reads it and judged against the machine; ``report.facts.configs`` holds each
        one's training plan. A file that cannot be read is a finding (AD512), not an exception.
    gpu / capability: judge for this GPU ("t4", "h100", ...) or compute capability ("7.5") instead
        of this machine's, as ``check --gpu`` does (``report.facts.assumed_gpu`` says so).
    quick: metadata, OS and GPUs only; torch is not imported (here nor in the target). Well under
        a second. sample / smoke: False skips the sample forward pass / the GPU smoke tests.
    fail_on: "warning" makes warnings count in ``report.exit_code`` too (strict onboarding).
    from_report: diagnose the facts of a report written by ``check --json`` instead of probing.
    output: also write the JSON report there (``{host}`` becomes the host name).
    cache_trust: whose entries in the cache folder are believed: "owner" (you, root, the folder's
        owner) or "group" (also the members of a setgid cache folder's group); None:
        ``$ATTN_DOCTOR_CACHE_TRUST``, else "owner". README, "Security".

    The Report is the object ``check --json`` serialises (``msgspec.json.encode(report)``):
    ``report.results`` (one Result per rule: ``rule``, ``status`` "pass" / "error" / "warning" /
    "info" / "skipped" / "crashed", ``title``, ``message``, ``remedies``), ``report.summary`` (counts)
    and ``report.exit_code`` (0 clean, 1 findings, 3 a probe could not run), ``report.facts``.

    Raises UsageError for bad arguments (a python that is not an interpreter, a GPU not in the
    catalogue, an invalid recipe folder or report file). A broken environment is not an exception: it is what
    the report describes.
    """
    from .options import API, CheckOptions

    options = CheckOptions(
        python=_path_or_none(python, "python"), quick=quick, facts_file=_as_path(from_report),
        configs=_config_paths(config), recipes_dir=_as_path(recipes), fail_on=_fail_on(fail_on),
        timeout=_timeout(timeout), sample=sample, smoke=smoke, use_cache=use_cache,
        cache_dir=_as_path(cache_dir), cache_trust=cache_trust, output=_path_or_none(output, "output"), naming=API,
        gpu=gpu, capability=capability,
    )
    return _run_check(options)


def _run_check(options) -> "Report":
    from .core import run_check
    from .gather import FactsFileError
    from .rules.loader import RecipeError

    try:
        return run_check(options)
    except (FactsFileError, RecipeError) as exc:
        # The CLI exits 2 for these: input the caller gave (a report, a config, a recipe folder).
        raise UsageError(str(exc)) from exc


# ---------------------------------------------------------------------------------------- explain


def explain(
    text: Union[str, bytes, None] = None,
    *,
    file: Optional[PathLike] = None,
    check: bool = False,
    python: Optional[PathLike] = None,
    recipes: Optional[PathLike] = None,
) -> "ExplainReport":
    """Explain an error message, a traceback or a whole log, as ``attn-doctor explain`` does.

    text: the message or log itself (str or bytes); or file: a log file of any size (streamed;
    gzip and UTF-16 are decoded). check=True also probes this environment (or ``python``) and says,
    for each cause, whether it is present now (``match.live``). python: the interpreter of the
    environment the log came from (the commands are written for it).

    Returns the ExplainReport that ``explain --json`` serialises: ``matches`` (each with ``rule``,
    ``title``, ``severity``, ``likelihood`` "confirmed" / "possible" / "unlikely", ``message``,
    ``evidence`` lines, ``remedies`` and ``commands``), ``candidates`` (the closest known messages
    when nothing matched), ``exit_code`` (1 when a known problem was found). Each remedy's
    ``command`` is an argument list for ``python`` (else the environment the log's traceback shows,
    where it is on this machine, else the active venv or conda env where it has torch, else the word
    ``python`` for the training environment's interpreter, which ``notes`` says): its pip, or
    ``uv pip --python`` where it has none; ``commands`` shows them quoted.

    Raises UsageError for no input, both inputs or an unreadable file.
    """
    import io

    from .rules.loader import RecipeError, load_recipes

    if (text is None) == (file is None):
        raise UsageError("explain() takes the input once: text (a message or log) or file=PATH")
    try:
        loaded = load_recipes(_as_path(recipes))
    except RecipeError as exc:
        raise UsageError(str(exc)) from exc
    if file is not None:
        from .boundary.inputs import InputError, open_input, shown

        try:
            source, _ = open_input(Path(os.fspath(file)).expanduser(), allow_stdin=False)
        except InputError as exc:
            raise UsageError(f"file={shown(file)}: {exc}") from None
        kind, path = "file", os.fspath(file)
    else:
        if not isinstance(text, (str, bytes)):
            raise UsageError(f"explain(text) takes a str or bytes, not {type(text).__name__}")
        data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
        source, kind, path = io.BytesIO(data), "text", None
    live = None
    from .options import API, resolve_target, validate_python

    target = validate_python(_path_or_none(python, "python"), API) if python is not None else None
    if check:
        from .probes import collect_facts

        live = collect_facts(python=target)
    from .explaining.core import explain as run_explain

    try:
        return run_explain(source, loaded, kind=kind, path=path, live=live,
                           python=target, default_python=resolve_target(naming=API).python)
    except OSError as exc:
        raise UsageError(f"{path or 'input'}: cannot read: {exc.strerror or exc}") from None
    finally:
        if kind == "file":
            source.close()


# ------------------------------------------------------------------------------------------ trace


def trace(
    model: "torch.nn.Module",
    example_inputs: Any = None,
    *,
    dtype: DtypeArg = None,
    autocast: DtypeArg = None,
    device: Literal["meta", "cpu", "cuda"] = "meta",
    train: bool = False,
    capability: Union[None, str, tuple[int, int]] = None,
    shadow: Optional[bool] = None,
) -> TraceReport:
    """Trace one forward pass of a live model and judge every attention call's dtypes.

    The model is never touched: the tracer runs on a copy. On ``device="meta"`` (the default) the
    copy's parameters and buffers are meta tensors (no memory, no compute, any size); the user's own
    parameters keep their storage, values, dtype, device and ``requires_grad``, and the model keeps
    its train/eval mode. Where meta cannot run the forward (data-dependent Python such as
    ``.item()``), the trace is retried on a CPU copy with the real weights (under 4 GB).
    ``device="cpu"`` / ``"cuda"`` trace a real copy there (it costs the model's size in memory).

    example_inputs: a tensor, a tuple of positional arguments, a dict of keyword arguments, or
        (args, kwargs). None: token ids, for a model whose first layer is an embedding.
    dtype: cast the copy first ("bf16", "fp16", "fp32", or torch.bfloat16, ...), like
        ``model.to(torch.bfloat16)``; floating example inputs are cast with it.
    autocast: run the forward in an autocast region of that dtype ("bf16" / "fp16"); off CUDA,
        CUDA's autocast policy is emulated, so the trace shows what a GPU run does.
    train: also run the backward pass. capability: judge the kernels for a GPU of this compute
        capability, e.g. (7, 5) or "7.5" for a T4 (default: not checked off the GPU).
    shadow: measure every op's precision against a float64 shadow of the forward (AD626 precision
        lost, AD627 overflow, AD624 masks of 1 and 0), on a CPU copy of the model (with
        ``device="meta"``, a second run there, for a model under 512 MB): None (default) where it
        costs seconds (a forward reading up to 5e7 elements), True whatever it costs, False never.

    Returns a TraceReport (``.ok``, ``.findings``, ``.to_dict()``). Raises UsageError for bad
    arguments (not an nn.Module, an unknown dtype, no example inputs for a model without an
    embedding) and ProbeError when the trace could not run (the forward raised before reaching an
    attention call; ``exc.report`` holds the TraceReport).
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"trace() takes a torch.nn.Module, not {type(model).__name__}")
    if device not in ("meta", "cpu", "cuda"):
        raise UsageError(f"device must be 'meta', 'cpu' or 'cuda', not {device!r}")
    options = dict(dtype=_dtype_name(dtype, "dtype"), autocast=_dtype_name(autocast, "autocast"), train=bool(train),
                   capability=_capability(capability), shadow=shadow)
    if options["autocast"] == "fp32":
        raise UsageError("autocast must be 'bf16' or 'fp16' (autocast to fp32 is no autocast)")
    module = _unwrap(model)
    was_training = model.training
    try:
        data = _trace_copy(module, example_inputs, device, options)
    finally:
        model.train(was_training)  # belt and braces: the tracer only ever sets the copy's mode
    report = TraceReport.from_dict(_with_known_bugs(data))
    if report.status == "usage_error":
        raise UsageError(_message(report, "usage error"))
    if report.status == "failed":
        raise ProbeError(f"the trace could not run: {_message(report, 'failed')}", report)
    return report


def _with_known_bugs(data: dict) -> dict:
    """The known kernel bugs the traced calls meet (recipes/numerics.toml), judged on the report."""
    import os

    from .rules.known_calls import add_known_bugs
    from .rules.loader import load_recipes

    return add_known_bugs(data, load_recipes().data, os.environ)


def _trace_copy(module: "torch.nn.Module", example_inputs: Any, device: str, options: dict) -> dict:
    """The core tracer on a copy of `module` (meta where the trace device is meta), with a CPU retry
    on a real copy where meta cannot run the forward."""
    from .tracing.runs.run import CPU_RETRY_LIMIT_BYTES

    from .tracing.runs import shadow_pass

    copy, note = _model_copy(module, device)
    shadow = options["shadow"]
    data = _core_trace(copy, example_inputs, device, dict(options, shadow=shadow if device != "meta" else False))
    data.setdefault("notes", []).insert(0, note)
    if shadow is not False and device == "meta" and data.get("status") in ("ok", "partial"):
        # the float64 shadow needs values: a CPU copy of the model, measured there
        size = shadow_pass.model_bytes(module)
        _, skip = shadow_pass.shadow_work((data.get("summary") or {}).get("elements") or 0, 0, 0, shadow is True)
        if skip:
            data["notes"].append(skip)
        elif size > shadow_pass.SHADOW_LIMIT_BYTES:
            data["notes"].append(f"precision was not measured: the model has {size / 1e9:.1f} GB of weights, too "
                                 "large for a float64 shadow on CPU")
        else:
            measured = _core_trace(_model_copy(module, "cpu")[0], example_inputs, "cpu", options)
            data["findings"], data["notes"] = shadow_pass.merge_measured(
                data.get("findings") or [], data["notes"], shadow_pass.measured_of(measured))
            from .tracing.report import summarize

            data["summary"] = dict(data.get("summary") or {}, **summarize(data.get("sinks") or [], data["findings"]))
            if data["summary"]["errors"] and data.get("exit_code") == 0:
                data["exit_code"] = 1
    error = data.get("error") or {}
    if data.get("status") == "failed" and error.get("kind") == "meta":
        from .tracing.runs.run import model_bytes

        size = model_bytes(module)
        if size > CPU_RETRY_LIMIT_BYTES:
            error["message"] = (f"{error.get('message')}; too large to retry on CPU ({size / 1e9:.1f} GB): trace "
                                "a smaller configuration of the model")
            return data
        copy, _ = _model_copy(module, "cpu")
        retried = _core_trace(copy, example_inputs, "cpu", options)
        retried.setdefault("notes", []).insert(0, f"{error.get('message')}; retried on a CPU copy of the model")
        return retried
    return data


def _core_trace(copy: "torch.nn.Module", example_inputs: Any, device: str, options: dict) -> dict:
    """trace.api.trace on the copy, leaving the process as it was: the flash_attn stand-in the
    tracer may put in sys.modules (so that a lazy `import flash_attn` in the forward takes the GPU
    path) is removed again, or the user's own later imports would get it."""
    import warnings

    from .tracing.standins import registry as standins
    from .tracing.runs.api import trace as core_trace

    had_standin = standins.standin_installed()
    try:
        with warnings.catch_warnings():
            # torch's notice on machines without numpy says nothing about the model
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            return core_trace(model=copy, inputs=example_inputs, device=device, retry_on_cpu=False, **options)
    finally:
        if standins.standin_installed() and not had_standin:
            standins.remove_standins()


def _unwrap(model: "torch.nn.Module") -> "torch.nn.Module":
    """The user's module inside DistributedDataParallel / DataParallel / torch.compile: the wrapper
    holds process groups and compiled code, which neither copy nor trace."""
    seen = set()
    while id(model) not in seen:
        seen.add(id(model))
        inner = getattr(model, "_orig_mod", None)  # torch.compile's OptimizedModule
        if inner is None and type(model).__name__ in ("DistributedDataParallel", "DataParallel"):
            inner = getattr(model, "module", None)
        if inner is None:
            break
        model = inner
    return model


def _model_copy(model: "torch.nn.Module", device: str) -> tuple["torch.nn.Module", str]:
    """A deep copy of `model` whose parameters and buffers are new tensors on `device` (meta: no
    memory), the tied ones still tied; the original's tensors are only read. Returns (copy, note)."""
    import copy as copy_mod

    import torch

    from .tracing.runs.run import CPU_RETRY_LIMIT_BYTES, model_bytes

    target = torch.device("cuda" if device == "cuda" else device)
    memo: dict[int, Any] = {}
    try:
        with torch.no_grad():
            for tensor in itertools.chain(model.parameters(), model.buffers()):
                if id(tensor) in memo:
                    continue
                moved = tensor.detach().to(target, copy=True)
                if isinstance(tensor, torch.nn.Parameter):
                    moved = torch.nn.Parameter(moved, requires_grad=tensor.requires_grad)
                memo[id(tensor)] = moved
            copied = copy_mod.deepcopy(model, memo)
    except Exception as exc:  # noqa: BLE001 - a module that cannot be deep-copied (held locks, handles)
        raise UsageError(f"trace() needs a copy of the model and {type(model).__name__} cannot be deep-copied "
                         f"({type(exc).__name__}: {str(exc)[:200]}); trace a factory instead: "
                         "attn-doctor trace MODULE:FACTORY") from exc
    if device == "meta":
        return copied, "traced a copy of the model on meta (its parameters untouched)"
    size = model_bytes(model)
    if device == "cpu" and size > CPU_RETRY_LIMIT_BYTES:
        raise UsageError(f"trace(device='cpu') copies the model ({size / 1e9:.1f} GB); use device='meta'")
    return copied, f"traced a copy of the model on {device} (its parameters untouched)"


def _message(report: TraceReport, default: str) -> str:
    return " ".join(str((report.error or {}).get("message") or default).split())


# -------------------------------------------------------------------------------------- preflight


def preflight(
    model: "Optional[torch.nn.Module]" = None,
    config: ConfigArg = None,
    *,
    example_inputs: Any = None,
    dtype: DtypeArg = None,
    autocast: DtypeArg = None,
    fail_on: FailOn = "error",
    on_failure: Literal["raise", "warn"] = "raise",
    quick: bool = False,
    sample: bool = True,
    smoke: bool = True,
    timeout: float = 120.0,
    distributed: Union[bool, Literal["auto"]] = "auto",
    numerics: bool = False,
) -> PreflightResult:
    """Check the running process before training: call it at the top of a training script.

    Checks the interpreter this process runs in (as ``attn-doctor check`` would: torch, CUDA, the
    attention libraries, their builds, a sample forward pass, the GPU smoke tests) and, given a
    model, traces a copy of it (see trace(): the model is not touched) for dtypes that would break
    an attention kernel. config: training config files to judge too (see check()).

    fail_on: "error" (default) fails on errors; "warning" on warnings too, and on checks that could
        not run. on_failure: "raise" (default) raises PreflightError carrying the findings; "warn"
        logs each finding on the "attn_doctor" logger (logging.WARNING) and returns.
    example_inputs, dtype, autocast: for the model's trace, as in trace(). A forward pass that raises
        (before attention or after it) is an error finding: AD621 where the trace names the line that
        raised and the operand that does not fit, else "trace:forward" (the exception and its
        file:line): training would raise the same at its first step.
    quick / sample / smoke / timeout: as in check(); quick=True judges package metadata, the OS and
        the GPUs only (under a second; the model, if given, is still traced). Findings below
        fail_on are logged as warnings.

    numerics: with a model, trace its copy on this process's GPU in training mode (forward and
        backward, on the example inputs: the first batch) and compare each attention call with
        float64 through the kernel SDPA picks for it, on the call's own inputs and with logits that
        break kernels (AD617 names a wrong call's line). It costs a copy of the model on the GPU.
        Without a CUDA device it is a warning finding: nothing was measured.

    Under an initialised torch.distributed process group (distributed="auto"), every rank checks
    itself and hands its report to rank 0 through the process group's store (no collective: a
    broken NCCL cannot hang it); rank 0 builds the fleet report (result.fleet), which names ranks
    that fail or differ from the majority, and tells the others the verdict, so every rank raises
    (or warns) together. distributed=False checks this process alone.

    Returns a PreflightResult when nothing fails (or with on_failure="warn"). Raises PreflightError
    (``.findings``, ``.result``), UsageError for bad arguments.
    """
    fail_on = _fail_on(fail_on)
    if on_failure not in ("raise", "warn"):
        raise UsageError(f"on_failure must be 'raise' or 'warn', not {on_failure!r}")
    group = _process_group(distributed)
    configs = _config_paths(config)
    traced: Optional[TraceReport] = None
    trace_findings: list[Finding] = []
    if model is not None:
        # Traced whatever the check's tier: the caller imported torch already to build the model.
        traced, trace_findings = _preflight_trace(model, example_inputs, dtype, autocast, numerics)

    from .options import API, CheckOptions

    # This process is the one that will train: its own interpreter, whatever environment is active.
    options = CheckOptions(python=sys.executable, quick=quick, configs=configs, fail_on=fail_on,
                           timeout=_timeout(timeout), sample=sample, smoke=smoke,
                           gpu_index=_local_rank() if group else 0, naming=API)
    report = _run_check(options)
    own = findings_mod.from_check(report)
    fleet = None
    rank = None
    if group:
        from .fleet.group import gather_in_process_group

        outcome = gather_in_process_group(report, fail_on=fail_on, quick=quick, timeout=options.timeout)
        rank, fleet = outcome.rank, outcome.fleet
        if fleet is not None:
            own = findings_mod.from_fleet(fleet)  # rank 0: the fleet's findings include its own, with ranks
        elif outcome.fleet_failed and not findings_mod.fails(own, fail_on):
            own = own + [Finding(source="fleet", rule="fleet", severity="error", title="the fleet fails",
                                 message=f"rank 0 reports that the fleet fails: {outcome.message}")]
        if outcome.note:
            logger.warning("attn-doctor preflight (rank %s): %s", rank, outcome.note)
    findings = own + trace_findings
    failed = [f for f in findings if findings_mod.at_or_above(f.severity, fail_on)]
    result = PreflightResult(ok=not failed, findings=tuple(findings), failed=tuple(failed), report=report,
                             trace=traced, fleet=fleet, rank=rank)
    quiet = rank not in (None, 0)  # rank 0 reports the fleet; the others would repeat it N times
    if failed and on_failure == "raise":
        if not quiet:
            for finding in findings:
                if finding not in failed:
                    logger.warning("attn-doctor preflight: %s", finding)
        raise PreflightError(_failure_message(failed, rank), failed, result)
    if not quiet:
        for finding in findings:
            if finding.severity != "info":
                logger.warning("attn-doctor preflight: %s", finding)
    return result


def _preflight_trace(model: Any, example_inputs: Any, dtype: DtypeArg, autocast: DtypeArg, numerics: bool = False
                     ) -> tuple[Optional[TraceReport], list[Finding]]:
    import torch

    extra: list[Finding] = []
    device, train = "meta", False
    if numerics and torch.cuda.is_available():
        device, train = "cuda", True
    elif numerics:
        extra.append(Finding(source="trace", rule="trace", severity="warning", title="numerics not measured",
                             message="preflight(numerics=True) needs a CUDA device to compare the model's attention calls "
                                     "with float64; this process has none"))
    try:
        traced = trace(model, example_inputs, dtype=dtype, autocast=autocast, device=device, train=train)
    except ProbeError as exc:
        crash = findings_mod.forward_crash(exc.report)
        if crash is not None:
            return exc.report, [crash]
        # The meta forward can fail where the real one does not: say it, do not stop training for it.
        return exc.report, [Finding(source="trace", rule="trace", severity="warning", title="the model could not be traced",
                                    message=str(exc))]
    findings = findings_mod.from_trace(traced) + extra
    if traced.status == "no_attention":
        findings.append(Finding(source="trace", rule="trace", severity="warning", title="no attention call reached",
                                message=_message(traced, "the model's forward reached no attention call")))
    if traced.status == "partial" and not any(f.severity == "error" for f in findings):
        crash = findings_mod.forward_crash(traced)  # raised after attention, for a cause no attention finding names
        if crash is not None:
            findings.append(crash)
    return traced, findings


def _failure_message(failed: list[Finding], rank: Optional[int]) -> str:
    who = f" on rank {rank}" if rank is not None else ""
    head = f"attn-doctor preflight failed{who}: {len(failed)} problem{'s' if len(failed) != 1 else ''}"
    return head + "\n" + "\n".join(f"  {f}" for f in failed)


def _process_group(distributed: Union[bool, str]) -> bool:
    """Whether this process is a rank of an initialised torch.distributed job. torch is only
    looked at where the script imported it already (check(quick=True) must not import it)."""
    if distributed not in (True, False, "auto"):
        raise UsageError(f"distributed must be True, False or 'auto', not {distributed!r}")
    if distributed is False:
        return False
    dist = sys.modules.get("torch.distributed")
    initialised = bool(dist is not None and dist.is_available() and dist.is_initialized())
    if distributed is True and not initialised:
        raise UsageError("preflight(distributed=True) needs an initialised process group "
                         "(torch.distributed.init_process_group) before it is called")
    return initialised


def _local_rank() -> int:
    try:
        return int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        return 0
