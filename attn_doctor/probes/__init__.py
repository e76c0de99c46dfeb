"""Probes: the only code that touches the machine.

`collect_facts` runs them, in parallel where they are independent:

- tier 2 (not with --quick): one child process of the *target* interpreter imports torch once,
  then forks an isolated process per risky step (CUDA init, each flash_attn / xformers / triton /
  fla import), so a segfault or a hang in one becomes a fact, not a crash;
- tier 1: platform and package metadata of the target (in-process when the target is this
  interpreter, else a cheap child), GPUs through NVML or nvidia-smi, and the allow-listed
  environment.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import msgspec

from ..facts import DtypePath, Facts, GpuInfo, ImportResult, Package, Platform, ProbeRun, SampleRun, Tool, TorchInfo
from ..failures import classify
from ..redact import safe_environment
from . import child
from .gpu import probe_gpus
from .runner import ChildProcess, ProbeFailed, start_child

DEFAULT_TIMEOUT_S = 120.0
ENV_TIMEOUT_S = 30.0

Progress = Optional[Callable[[str], None]]


def same_interpreter(python: Optional[str]) -> bool:
    # Compare paths without resolving symlinks: a venv's bin/python is a symlink to the base
    # interpreter, yet it is another environment (another sys.prefix, other packages).
    if not python:
        return True
    return os.path.abspath(python) == os.path.abspath(sys.executable)


def collect_facts(
    python: Optional[str] = None,
    quick: bool = False,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: Progress = None,
    sample: bool = True,
) -> Facts:
    """Probe this machine and the target interpreter. Never raises for a broken environment."""
    python = python or sys.executable
    facts = Facts(quick=quick)
    probes: list[ProbeRun] = []
    note = progress or (lambda _msg: None)

    children: dict[str, ChildProcess] = {}
    if not quick:
        note("importing torch in the target interpreter")
        _start(children, probes, "torch", python, ["torch"])

    with ThreadPoolExecutor(max_workers=2) as pool:
        env_future = pool.submit(_timed, "environment", lambda: _environment(python))
        gpu_run, gpu = _timed("gpu", probe_gpus)
        if not quick and gpu is not None and gpu.devices:
            # CUDA is initialised in a process of its own, in parallel with the imports: once a
            # process has touched the CUDA runtime, its forks cannot use CUDA any more.
            note("initialising CUDA in the target interpreter")
            _start(children, probes, "cuda", python, ["cuda"])
        sample_future = None
        if not quick and sample:
            sample_future = pool.submit(_timed, "sample", lambda: _sample_forward(python, gpu, timeout))
        note("reading installed packages")
        env_run, env_data = env_future.result()
    probes += [env_run, gpu_run]
    if env_data is not None:
        _apply_environment(facts, env_data)
    if gpu is not None:
        facts.gpu = gpu
    facts.env = safe_environment(os.environ)

    deadline = time.monotonic() + timeout
    for name, child_process in children.items():
        note("waiting for torch and the import probes" if name == "torch" else "waiting for CUDA")
        start = child_process.started
        try:
            data = child_process.result(max(1.0, deadline - time.monotonic()))
        except ProbeFailed as exc:
            probes.append(ProbeRun(name=name, status=exc.status, duration_s=round(time.monotonic() - start, 3), error=str(exc)))
            if name == "torch":
                facts.torch = TorchInfo(status="timeout" if exc.status == "timeout" else "skipped")
            continue
        probes.append(ProbeRun(name=name, status="ok", duration_s=round(time.monotonic() - start, 3)))
        if name == "torch":
            _apply_torch(facts, data)
        else:
            _apply_cuda(facts, data.get("cuda") or {})
    if sample_future is not None:
        note("running the sample forward pass")
        sample_run, dtype_path = sample_future.result()
        if dtype_path is not None:
            facts.dtype_path = dtype_path
            if dtype_path.status in ("failed", "skipped"):
                sample_run.status, sample_run.error = dtype_path.status, dtype_path.error
        probes.append(sample_run)
    facts.probes = probes
    return facts


def _start(children: dict, probes: list, name: str, python: str, args: list[str]) -> None:
    try:
        children[name] = start_child(python, args)
    except ProbeFailed as exc:
        probes.append(ProbeRun(name=name, status=exc.status, error=str(exc)))


def _timed(name: str, fn):
    start = time.monotonic()
    try:
        value = fn()
    except ProbeFailed as exc:
        return ProbeRun(name=name, status=exc.status, duration_s=round(time.monotonic() - start, 3), error=str(exc)), None
    except Exception as exc:  # noqa: BLE001 - a probe bug must not kill the run
        return (
            ProbeRun(name=name, status="failed", duration_s=round(time.monotonic() - start, 3), error=f"{type(exc).__name__}: {exc}"),
            None,
        )
    run = ProbeRun(name=name, status="ok", duration_s=round(time.monotonic() - start, 3))
    if isinstance(value, GpuInfo) and value.source == "none":
        run.error = value.error
    return run, value


def _sample_forward(python: str, gpu: Optional[GpuInfo], timeout: float) -> DtypePath:
    """The tracer's built-in samples, on meta, judged for this machine's weakest GPU.

    bf16 where every GPU has it natively (or there is no GPU), else fp16: the dtype a user of
    this machine should train in.
    """
    from ..trace.launch import run_child

    caps = sorted(d.capability for d in (gpu.devices if gpu else []) if d.capability)
    weakest = min(caps, key=lambda c: tuple(int(x) for x in c.split("."))) if caps else None
    dtype = "fp16" if weakest and int(weakest.split(".")[0]) < 8 else "bf16"
    kwargs = {"device": "meta", "dtype": dtype, "autocast": None}
    if weakest:
        kwargs["capability"] = [int(x) for x in weakest.split(".")]
    raw = run_child("sample", kwargs, python=python, timeout=timeout)
    error = raw.get("error") or {}
    samples = []
    for entry in raw.get("samples", []):
        samples.append(
            SampleRun(name=str(entry.get("name")), status=str(entry.get("status")), reason=entry.get("reason"), summary=entry.get("summary") or {})
        )
    failed = raw.get("status") == "failed"
    if failed and isinstance(error, dict) and error.get("kind") == "environment":
        # torch missing or broken: the torch rules say so; there is no forward pass to judge.
        return DtypePath(status="skipped", dtype=dtype, error=error.get("message"))
    return DtypePath(
        status="failed" if failed else "ok",
        device=raw.get("device", "meta"),
        dtype=dtype,
        autocast=None,
        capability=weakest,
        verdict=raw.get("verdict"),
        samples=samples,
        findings=list(raw.get("findings") or []),
        error=(error.get("message") if isinstance(error, dict) else str(error)) if failed else None,
    )


def _environment(python: str) -> dict:
    if same_interpreter(python):
        return child.collect_env()
    return start_child(python, ["env"]).result(ENV_TIMEOUT_S)


def _apply_environment(facts: Facts, data: dict) -> None:
    facts.platform = msgspec.convert(data.get("platform", {}), Platform)
    facts.tools = msgspec.convert(data.get("tools", {}), dict[str, Tool])
    facts.packages = msgspec.convert(data.get("packages", {}), dict[str, Package])


def _import_error(raw: Optional[dict]):
    if not raw:
        return None
    return classify(raw.get("type", ""), raw.get("message", ""))


_CUDA_FIELDS = (
    "cudnn",
    "cuda_available",
    "cuda_error",
    "arch_list",
    "device_count",
    "devices",
    "sdpa",
    "sdpa_probe_dtype",
    "sdpa_reasons",
    "sdpa_error",
)


def _apply_cuda(facts: Facts, cuda: dict) -> None:
    """Fold the CUDA probe into TorchInfo (the torch probe may have failed on its own)."""
    if cuda.get("status") != "ok":
        error = cuda.get("error") or {}
        facts.torch.cuda_available = False
        reason = error.get("message") if isinstance(error, dict) else None
        if cuda.get("status") == "crashed":
            reason = f"the CUDA probe was killed by signal {cuda.get('signal')}"
        facts.torch.cuda_error = (reason or f"the CUDA probe ended with status {cuda.get('status')}")[:1000]
        return
    merged = msgspec.to_builtins(facts.torch)
    merged.update({k: cuda[k] for k in _CUDA_FIELDS if k in cuda})
    error = facts.torch.error
    merged.pop("error", None)
    facts.torch = msgspec.convert(merged, TorchInfo)
    facts.torch.error = error


def _apply_torch(facts: Facts, data: dict) -> None:
    raw = dict(data.get("torch") or {})
    error = _import_error(raw.pop("error", None))
    fields = set(TorchInfo.__struct_fields__)
    torch_info = msgspec.convert({k: v for k, v in raw.items() if k in fields}, TorchInfo)
    torch_info.error = error
    facts.torch = torch_info
    imports = {}
    for module, result in (data.get("imports") or {}).items():
        result = dict(result)
        error = _import_error(result.pop("error", None))
        item = msgspec.convert({k: v for k, v in result.items() if k in ImportResult.__struct_fields__}, ImportResult)
        item.error = error
        imports[module] = item
    facts.imports = imports
