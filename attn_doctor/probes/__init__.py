"""Probes: the only code that touches the machine; `collect_facts` runs them into Facts.

Tier 1 (milliseconds, and all of --quick): the target's platform and package metadata
(in-process when it is this interpreter), the GPUs through NVML or nvidia-smi, the allow-listed
environment. Tier 2: three results, each a cached computation (attn_doctor.cache.Once, keyed by
what it depends on: keys.py) in a child process of the *target* interpreter, which forks an
isolated process per risky step so that a segfault or a hang becomes a fact, not a crash:

- the stack (torch_run.py): torch's build, each attention library's import, each extension's
  load, the kernel tests of the package set (compiled flex_attention, FA2/3/4, xformers): per
  package set, GPU architecture and driver, shared through the cache folder;
- the node (torch_run.py): CUDA's facts and SDPA's kernel tests on this GPU: per node and boot;
- the sample verdict (sample_run.py): per package set and GPU capability, shared.

All three start at once and overlap; a cached one costs a file read, a shared one being computed
elsewhere is waited for. This module only orchestrates: it starts them, waits for each, and folds
each answer into Facts as it comes (`ready` sees the facts grow).

Two rooms: this folder runs in the doctor's process (the runner, the three results' keys and
parsing, the GPUs, the environments beside); target/ runs inside the target interpreter,
standard library only (and torch there), loaded by runner.CHILD_BOOTSTRAP or by path.

May import (the layering contract, pyproject.toml): trace (the sample probe runs the tracer) and
the bottom layer (facts, errors, failures, redact, bytecode, inputs, cache, schemas). Never rules,
the pipeline, the API, render or the CLI: they call the probes, never the other way round.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Optional

import msgspec

from .. import cache
from ..facts import (
    BF16_NATIVE_FROM,
    DtypePath,
    Facts,
    GpuInfo,
    Leftover,
    MODULE_DISTRIBUTIONS,
    Package,
    Platform,
    ProbeRun,
    Tool,
)
from ..boundary.redact import safe_environment
from .target.env_probe import collect_env
from .gpu import probe_gpus
from .keys import FINGERPRINTED, LIBRARY_MODULES, SAMPLE_MODULES, node_inputs, sample_inputs, stack_inputs
from .local import bytecode_env as _bytecode_env
from .local import kernel_cache as _kernel_cache
from .runner import BUILDS_CHILD_SCRIPT, GPU_CHILD_SCRIPT, ProbeFailed, start_child
from .sample_run import SampleJob, sample_config as _sample_config, stored_run, verdict_of
from .torch_run import NodeValue, StackValue, TorchJob, apply_node, apply_stack, node_value, split_known, stack_value

DEFAULT_TIMEOUT_S = 120.0
ENV_TIMEOUT_S = 30.0

Progress = Optional[Callable[[str], None]]
# ready(parts, facts): the parts whose answers are in the facts so far ("environment", "node",
# "stack", "sample"), called as each comes in; the facts are complete after the last call.
Ready = Optional[Callable[[frozenset, Facts], None]]
PARTS = ("environment", "node", "stack", "sample")


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
    gpu_index: int = 0,
    shapes: Optional[list[dict]] = None,
    cache_root: Optional[str] = None,
    known: Optional[Facts] = None,
    cache_trust: Optional[str] = None,
    ready: Ready = None,
    assume: Optional[GpuInfo] = None,
) -> Facts:
    """Probe this machine and the target interpreter. Never raises for a broken environment.

    known: facts of an earlier check in this session (fix's plan, for its verification): its
    stack and node results and its sample verdict, whatever their outcome, stand where their key
    still matches (nothing they depend on changed), even with use_cache=False; they are never run
    twice.

    gpu_index: the GPU the node's tests run on (a distributed rank tests its own: LOCAL_RANK).
    shapes: the user's attention inputs ({"head_dim", "dtype", "source"}, from --config): the node
    probe asks SDPA's dispatch which kernel each gets, and why it refuses the others.
    use_cache=False: compute every result afresh (and store it); cache_root: the cache folder
    (default: ATTN_DOCTOR_CACHE_DIR or the user's cache folder); cache_trust: whose entries in it
    are believed (attn_doctor.cache.trust_level: "owner", "group"; default ATTN_DOCTOR_CACHE_TRUST,
    else "owner"). ready: called with the facts so far as each part comes in (PARTS).
    assume: the GPUs to judge for instead of this machine's (check --gpu): none is probed or
    tested, and the sample forward pass is judged for their capability.
    """
    python = python or sys.executable
    facts = Facts(quick=quick)
    note = progress or (lambda _msg: None)
    done: set[str] = set()

    def arrived(part: str) -> None:
        done.add(part)
        if ready is not None:
            ready(frozenset(done), facts)

    if assume is not None:
        gpu_run, gpu = ProbeRun(name="gpu", status="skipped", error="the GPU was assumed (--gpu), not probed"), assume
    else:
        gpu_run, gpu = _timed("gpu", probe_gpus)
    note("reading installed packages")
    # --quick imports nothing, but still looks where torch would be imported from (its top folder only)
    env_run, env_data = _timed("environment", lambda: _environment(python, ["torch/"] if quick else list(FINGERPRINTED)))
    probes: list[ProbeRun] = [env_run, gpu_run]
    if env_data is not None:
        _apply_environment(facts, env_data)
    if gpu is not None:
        facts.gpu = gpu
    facts.env = safe_environment(os.environ)
    no_torch = env_data is not None and (env_data.get("modules") or {}).get("torch", False) is None
    if quick:
        if no_torch and facts.version_of("torch") is None:
            # neither installed nor importable from anywhere on its path: what the full check's
            # probe would find without importing anything, so --quick judges it as that check does
            facts.torch = msgspec.structs.replace(facts.torch, status="missing")
        facts.probes = probes
        arrived("environment")
        return facts

    child_env, bytecode_note = _bytecode_env(env_data, LIBRARY_MODULES)
    probes += [bytecode_note] if bytecode_note is not None else []
    on_gpu = gpu is not None and bool(gpu.devices) and assume is None  # an assumed GPU is not here to test
    settings = dict(root=cache_root, trust=cache_trust, use_cache=use_cache, progress=note)
    kernels_dir, kernels_note = _kernel_cache() if smoke and on_gpu else (None, None)
    probes += [kernels_note] if kernels_note is not None else []
    gpu_config = {"script": str(GPU_CHILD_SCRIPT), "smoke": smoke, "capability": _weakest_capability(gpu), "index": gpu_index,
                  "device_capability": _capability_of(gpu),
                  "shapes": shapes or [], "bf16_native_from": list(BF16_NATIVE_FROM), "kernel_cache": kernels_dir}
    known_node, known_stack = split_known(known) if known is not None else (None, None)
    parts: dict[str, object] = {}  # part -> cache.Once (or a known answer)
    try:
        # The node's tests first: the shortest, and what the GPU section waits for.
        if on_gpu and env_data is not None:
            inputs = node_inputs(python, facts, gpu, gpu_index, shapes, smoke)
            args = ["torch", "--targets", "{}", "--gpu", json.dumps(dict(gpu_config, part="node"))]
            parts["node"] = _once("node", inputs, lambda: TorchJob("node", python, args, child_env, node_value), NodeValue,
                                  known_node, timeout, settings)
        if env_data is not None:
            args = ["torch", "--targets", json.dumps(MODULE_DISTRIBUTIONS), "--builds", json.dumps({"script": str(BUILDS_CHILD_SCRIPT)})]
            if smoke and on_gpu:
                args += ["--gpu", json.dumps(dict(gpu_config, part="stack"))]
            inputs = stack_inputs(python, facts, env_data, gpu, kernels=smoke and on_gpu)
            parts["stack"] = _once("stack", inputs, lambda: TorchJob("torch", python, args, child_env, stack_value), StackValue,
                                   known_stack, timeout, settings)
        else:
            parts["stack"] = _Direct(lambda: TorchJob("torch", python, ["torch", "--targets", json.dumps(MODULE_DISTRIBUTIONS)], child_env,
                                                      stack_value))
        if sample and not no_torch and env_data is not None:  # without torch there is no forward pass to judge (said below)
            config = _sample_config(_weakest_capability(gpu))
            inputs = sample_inputs(python, facts, env_data, config)
            if known is not None and known.dtype_path.key == cache.key("samples", **inputs):
                facts.dtype_path = known.dtype_path
            else:
                parts["sample"] = cache.Once("samples", inputs, lambda: SampleJob(python, config, child_env), schema=DtypePath,
                                             wait_s=timeout + 15.0, **settings).begin()
        arrived("environment")
        deadline = time.monotonic() + timeout
        for part in ("node", "stack", "sample"):
            once = parts.get(part)
            if once is not None:
                note({"node": f"testing GPU {gpu_index}", "stack": "importing torch and the attention libraries",
                      "sample": "waiting for the sample forward pass"}[part])
                probes += _fold(part, once.result(max(1.0, deadline - time.monotonic())), once, facts)
            arrived(part)
    finally:
        for once in parts.values():
            once.close()
    for once in parts.values():
        probes += [ProbeRun(name="cache", status="skipped", error=why) for why in getattr(once, "ignored", [])]
    if sample and facts.dtype_path.status == "skipped" and facts.torch.status != "ok" and not facts.dtype_path.error:
        facts.dtype_path = DtypePath(status="skipped", error=f"torch is {facts.torch.status} in the target environment")
    facts.probes = probes
    return facts


def _once(kind: str, inputs: dict, start, schema, known_value, timeout: float, settings: dict):
    key = cache.key(kind, **inputs)
    if known_value is not None and known_value[0] == key:
        return _Known(known_value[1], known_value[2], key)
    return cache.Once(kind, inputs, start, schema=schema, wait_s=timeout + 15.0, **settings).begin()


class _Known:
    """An earlier check's answer for the same key (fix's verification): reused as it was."""

    ignored: tuple = ()

    def __init__(self, value, cached: Optional[str], key: str):
        self.value, self.cached, self.key = value, cached, key

    def result(self, _timeout: float) -> cache.Got:
        return cache.Got(msgspec.to_builtins(self.value), "known", computed=self.cached)

    def close(self) -> None:
        pass


class _Direct:
    """A computation with no key to cache it under (the target's environment could not be read)."""

    ignored: tuple = ()

    def __init__(self, start):
        try:
            self.job, self.error = start(), None
        except ProbeFailed as exc:
            self.job, self.error = None, str(exc)

    def result(self, timeout: float) -> cache.Got:
        if self.job is None:
            return cache.Got(None, "none", error=self.error, local=ProbeRun(name="torch", status="failed", error=self.error))
        done = self.job.finish(timeout)
        return cache.Got(done.value, "computed", error=done.error, local=done.local)

    def close(self) -> None:
        if self.job is not None:
            self.job.close()


def _fold(part: str, got: cache.Got, once, facts: Facts) -> list[ProbeRun]:
    """Fold one part's answer into facts; the probe runs to report for it."""
    key = getattr(once, "key", None)
    reused = got.computed if got.source in ("cache", "shared", "known") else None
    name = {"node": "node", "stack": "torch", "sample": "sample"}[part]
    if part == "sample":
        facts.dtype_path, run = verdict_of(got, key)
        return [run] if run is not None else []
    run = stored_run(name, got) if got.source in ("cache", "shared", "failed") else got.local
    if got.value is None and got.source in ("computed", "none"):
        if part == "stack":
            status = run.status if run is not None else "failed"
            facts.torch = msgspec.structs.replace(facts.torch, status="timeout" if status == "timeout" else "skipped")
        else:
            apply_node(facts, NodeValue(), None)
            facts.torch.cuda_error = got.error
        return [run] if run is not None else [ProbeRun(name=name, status="failed", error=got.error)]
    if part == "stack":
        value = msgspec.convert(got.value, StackValue)
        apply_stack(facts, value, reused)
        facts.torch.key = key
        return ([run] if run is not None else []) + list(value.notes)
    apply_node(facts, msgspec.convert(got.value, NodeValue), reused)
    facts.smoke.key = key
    return [run] if run is not None else []


def prepare_samples(python: Optional[str], capabilities: list[Optional[str]], timeout: float = DEFAULT_TIMEOUT_S,
                    use_cache: bool = True, cache_root: Optional[str] = None, progress: Progress = None,
                    cache_trust: Optional[str] = None) -> list[DtypePath]:
    """Compute and store the sample verdict for each GPU capability (None: no GPU), all at once,
    as a check on a node with that GPU would look it up: a container image's build step."""
    python = python or sys.executable
    note = progress or (lambda _msg: None)
    note("reading installed packages")
    env_data = _environment(python, list(FINGERPRINTED))
    facts = Facts()
    _apply_environment(facts, env_data)
    child_env, bytecode_note = _bytecode_env(env_data)
    if bytecode_note is not None:
        note(bytecode_note.error)
    verdicts = []
    for capability in capabilities:
        config = _sample_config(capability)
        inputs = sample_inputs(python, facts, env_data, config)
        once = cache.Once("samples", inputs, lambda config=config: SampleJob(python, config, child_env), root=cache_root,
                          trust=cache_trust, schema=DtypePath, use_cache=use_cache, wait_s=timeout + 15.0, progress=note)
        verdicts.append((capability, once.begin()))
    out = []
    try:
        for capability, once in verdicts:
            note(f"sample forward pass judged for {capability or 'no GPU'}")
            out.append(verdict_of(once.result(timeout), once.key)[0])
    finally:
        for _capability, once in verdicts:
            once.close()
    return out


def trace_bytecode_env(python: str) -> dict:
    """`trace`'s imports of torch and transformers keep their bytecode where check's probe children
    keep it (local.bytecode_env, a folder private to this user): {"PYTHONPYCACHEPREFIX": folder}
    where the target has none beside them, else {}. Never fails: without the answer, the trace
    runs as before (compiling)."""
    try:
        env_data = _environment(python, ["torch/", "transformers/"])
    except (ProbeFailed, OSError):
        return {}
    return _bytecode_env(env_data)[0]


def sample_cache_key(python: Optional[str] = None, capability: Optional[str] = None) -> Optional[str]:
    """The key a check of `python` here, judged for `capability` (None: no GPU), looks its sample
    verdict up under; None when the target's environment cannot be read."""
    python = python or sys.executable
    try:
        env_data = _environment(python, list(FINGERPRINTED))
    except ProbeFailed:
        return None
    facts = Facts()
    _apply_environment(facts, env_data)
    return cache.key("samples", **sample_inputs(python, facts, env_data, _sample_config(capability)))


def _capability_of(gpu: Optional[GpuInfo]) -> Optional[str]:
    """The compute capability every GPU here shares, or None: the smoke tests' GPU is a CUDA ordinal
    (CUDA_VISIBLE_DEVICES may reorder), the devices listed are NVML's, so only a capability they all
    share is surely the tested GPU's."""
    caps = {d.capability for d in (gpu.devices if gpu else [])}
    return caps.pop() if len(caps) == 1 else None


def _weakest_capability(gpu: Optional[GpuInfo]) -> Optional[str]:
    caps = [d.capability for d in (gpu.devices if gpu else []) if d.capability]
    return min(caps, key=lambda c: tuple(int(x) for x in c.split("."))) if caps else None


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


def _environment(python: str, fingerprint: Optional[list[str]] = None) -> dict:
    if same_interpreter(python):
        # The probe children run with `-c`: the working folder is first on their sys.path.
        return collect_env(fingerprint, os.getcwd())
    return start_child(python, ["env", "--fingerprint", json.dumps(fingerprint)] if fingerprint else ["env"]).result(ENV_TIMEOUT_S)


def _apply_environment(facts: Facts, data: dict) -> None:
    facts.platform = msgspec.convert(data.get("platform", {}), Platform)
    facts.tools = msgspec.convert(data.get("tools", {}), dict[str, Tool])
    facts.packages = msgspec.convert(data.get("packages", {}), dict[str, Package])
    facts.requires = msgspec.convert(data.get("requires", {}), dict[str, list[str]])
    facts.leftovers = msgspec.convert(data.get("leftovers", []), list[Leftover])


__all__ = ["DEFAULT_TIMEOUT_S", "PARTS", "SAMPLE_MODULES", "collect_facts", "prepare_samples", "probe_gpus", "same_interpreter",
           "sample_cache_key", "trace_bytecode_env"]
