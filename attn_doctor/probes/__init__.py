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

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import Optional

import msgspec

from ..facts import (
    DtypePath,
    Facts,
    GpuInfo,
    ImportResult,
    Package,
    Platform,
    ProbeRun,
    SampleRun,
    SdpaChoice,
    Smoke,
    SmokeResult,
    Tool,
    TorchInfo,
)
from ..failures import classify
from .. import cache
from ..redact import safe_environment
from . import child
from .gpu import probe_gpus
from .runner import GPU_CHILD_SCRIPT, ChildProcess, ProbeFailed, start_child

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
    smoke: bool = True,
    use_cache: bool = True,
    sample_wait: float = 0.0,
    gpu_index: int = 0,
    shapes: Optional[list[dict]] = None,
) -> Facts:
    """Probe this machine and the target interpreter. Never raises for a broken environment.

    sample_wait > 0: do not run the sample forward pass; wait up to that many seconds for another
    process on this host (local rank 0 of a distributed check) to put its verdict in the cache.
    gpu_index: the GPU the smoke tests run on (a distributed rank tests its own: LOCAL_RANK).
    shapes: the user's attention inputs ({"head_dim", "dtype", "source"}, from --config): the smoke
    probe asks SDPA's dispatch which kernel each gets, and why it refuses the others.
    """
    python = python or sys.executable
    facts = Facts(quick=quick)
    probes: list[ProbeRun] = []
    note = progress or (lambda _msg: None)

    # The GPUs and the package set first (milliseconds): the sample forward pass is judged for
    # those GPUs, and reused from the cache while the package set is unchanged.
    gpu_run, gpu = _timed("gpu", probe_gpus)
    note("reading installed packages")
    env_run, env_data = _timed("environment", lambda: _environment(python))
    probes += [env_run, gpu_run]
    if env_data is not None:
        _apply_environment(facts, env_data)
    if gpu is not None:
        facts.gpu = gpu
    facts.env = safe_environment(os.environ)

    children: dict[str, ChildProcess] = {}
    sample_dir = sample_key = None
    wait_for_shared = False
    if not quick:
        note("importing torch in the target interpreter")
        args = ["torch"]
        if sample:
            config = _sample_config(gpu, "")
            # Modules can also come from PYTHONPATH or the working folder without any metadata.
            where = {"pythonpath": os.environ.get("PYTHONPATH", ""), "cwd": os.getcwd()}
            sample_key = cache.key("samples", python=python, packages=_package_set(facts), **where, **config) if env_data else None
            if sample_wait > 0 and sample_key:
                hit, wait_for_shared = None, True  # waited for below, while this rank's own probes run
            else:
                hit = cache.get("samples", sample_key) if (sample_key and use_cache) else None
                if hit is not None and (hit.get("status") != "ok" or hit.get("verdict") == "failed"):
                    hit = None  # a failed run is shared with waiting ranks, never reused later
            if hit is not None:
                facts.dtype_path = msgspec.convert(hit, DtypePath)
            elif not wait_for_shared:
                from ..trace.launch import package_dir

                sample_dir = package_dir()
                args += ["--sample", json.dumps({**config, "path": sample_dir})]
        if gpu is not None and gpu.devices:
            # CUDA facts and smoke tests: forks of the torch probe, each initialising CUDA itself.
            gpu_config = {"script": str(GPU_CHILD_SCRIPT), "smoke": smoke, "capability": _weakest_capability(gpu), "index": gpu_index, "shapes": shapes or []}
            args += ["--gpu", json.dumps(gpu_config)]
        _start(children, probes, "torch", python, args)

    if wait_for_shared:
        note("waiting for local rank 0's sample forward pass")
        started = time.time()
        hit = cache.wait("samples", sample_key, sample_wait, fresh_after=None if use_cache else started)
        facts.dtype_path = msgspec.convert(hit, DtypePath) if hit is not None else DtypePath(
            status="skipped", error=f"local rank 0 did not share its sample forward pass within {sample_wait:.0f} s"
        )

    deadline = time.monotonic() + timeout
    try:
        for name, child_process in children.items():
            note("waiting for torch, the import, CUDA and smoke probes and the sample forward pass")
            start = child_process.started
            try:
                data = child_process.result(max(1.0, deadline - time.monotonic()))
            except ProbeFailed as exc:
                probes.append(ProbeRun(name=name, status=exc.status, duration_s=round(time.monotonic() - start, 3), error=str(exc)))
                facts.torch = TorchInfo(status="timeout" if exc.status == "timeout" else "skipped")
                continue
            probes.append(ProbeRun(name=name, status="ok", duration_s=round(time.monotonic() - start, 3)))
            _apply_torch(facts, data)
            if "dtype_path" in data:
                facts.dtype_path = _dtype_path(data["dtype_path"], gpu)
                if sample_key:
                    cache.put("samples", sample_key, msgspec.to_builtins(_stamped(facts.dtype_path)))
            if "cuda" in data:
                _apply_cuda(facts, data["cuda"])
            if data.get("smoke"):
                facts.smoke = _smoke(data["smoke"])
    finally:
        if sample_dir:
            shutil.rmtree(sample_dir, ignore_errors=True)
    if sample and not quick and facts.dtype_path.status == "skipped" and facts.torch.status != "ok":
        facts.dtype_path = DtypePath(status="skipped", error=f"torch is {facts.torch.status} in the target environment")
    facts.probes = probes
    return facts


def _package_set(facts: Facts) -> list[str]:
    return sorted(f"{name}=={pkg.version}" for name, pkg in facts.packages.items())


def _stamped(dtype_path: DtypePath) -> DtypePath:
    import datetime as dt

    stamp = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    return msgspec.structs.replace(dtype_path, cached=stamp)


def _weakest_capability(gpu: Optional[GpuInfo]) -> Optional[str]:
    caps = [d.capability for d in (gpu.devices if gpu else []) if d.capability]
    return min(caps, key=lambda c: tuple(int(x) for x in c.split("."))) if caps else None


def _sample_config(gpu: Optional[GpuInfo], path: str) -> dict:
    """The sample forward pass runs on the CPU (tiny models: microseconds of compute, where meta
    would import torch._dynamo for its layer_norm decomposition, 1.3 s) with CUDA's autocast
    policy emulated, judged for this machine's weakest GPU, in bf16 where every GPU has it
    natively (or there is no GPU), else in fp16: the dtype a user here should train in."""
    weakest = _weakest_capability(gpu)
    dtype = "fp16" if weakest and int(weakest.split(".")[0]) < 8 else "bf16"
    config = {"path": path, "device": "cpu", "dtype": dtype, "autocast": None}
    if weakest:
        config["capability"] = [int(x) for x in weakest.split(".")]
    return config


def _dtype_path(raw: dict, gpu: Optional[GpuInfo]) -> DtypePath:
    samples = [
        SampleRun(name=str(e.get("name")), status=str(e.get("status")), reason=e.get("reason"), summary=e.get("summary") or {})
        for e in raw.get("samples", [])
    ]
    findings = list(raw.get("findings") or [])
    failed = [s for s in samples if s.status == "failed"]
    errors = [f for f in findings if f.get("severity") == "error"]
    warnings = [f for f in findings if f.get("severity") == "warning"]
    verdict = "error" if errors else "failed" if failed else "warning" if warnings else "pass"
    return DtypePath(
        status=raw.get("status", "ok"),
        device=raw.get("device", "cpu"),
        dtype=raw.get("dtype"),
        autocast=raw.get("autocast"),
        capability=_weakest_capability(gpu),
        verdict=verdict,
        samples=samples,
        findings=findings,
        error=raw.get("error"),
    )


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


def _smoke(groups: dict) -> Smoke:
    """Merge the smoke groups; a group whose process crashed or hung is reported as such."""
    choices, results, errors, seconds, index = [], [], [], {}, None
    for group, raw in groups.items():
        index = raw.get("device_index", index)
        if isinstance(raw.get("duration_s"), (int, float)):
            seconds[group] = round(float(raw["duration_s"]), 3)
        if raw.get("status") == "ok":
            choices += [msgspec.convert(c, SdpaChoice) for c in raw.get("choices", [])]
            results += [msgspec.convert(r, SmokeResult) for r in raw.get("results", [])]
            continue
        if raw.get("status") == "crashed":
            errors.append(f"smoke group {group} crashed (signal {raw.get('signal')})")
        elif raw.get("status") == "timeout":
            errors.append(f"smoke group {group} did not finish in {raw.get('duration_s', '?')} s")
        else:
            err = raw.get("error") or {}
            errors.append(f"smoke group {group} failed: {err.get('message') if isinstance(err, dict) else err}")
    order = {name: i for i, name in enumerate(("sdpa-flash", "sdpa-mem-efficient", "sdpa-cudnn", "sdpa-math"))}
    results.sort(key=lambda r: (r.dtype != "float16", order.get(r.backend, 9), r.backend))
    return Smoke(
        status="failed" if errors else "ok",
        choices=choices,
        results=results,
        error="; ".join(errors) or None,
        group_seconds=seconds,
        device_index=index,
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
