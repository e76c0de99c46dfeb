"""Probes: the only code that touches the machine; `collect_facts` runs them into Facts.

Tier 2 (not with --quick): one child process of the *target* interpreter imports torch once, then
forks an isolated process per risky step (CUDA init, each flash_attn / xformers / triton / fla
import), so a segfault or a hang in one becomes a fact, not a crash. Tier 1: the target's platform
and package metadata (in-process when it is this interpreter), the GPUs through NVML or nvidia-smi,
and the allow-listed environment. Independent probes run in parallel; results are cached (cache).

May import (the layering contract, pyproject.toml): trace (the sample probe runs the tracer) and
the bottom layer (facts, errors, failures, redact, bytecode, inputs, cache, schemas). Never rules,
the pipeline, the API, render or the CLI: they call the probes, never the other way round.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Optional

import msgspec

from ..facts import (
    BF16_NATIVE_FROM,
    BuiltFor,
    DtypePath,
    ExtensionBuild,
    ExtensionLibrary,
    Facts,
    GpuInfo,
    MODULE_DISTRIBUTIONS,
    ImportResult,
    Leftover,
    Package,
    Platform,
    ProbeRun,
    SampleRun,
    SdpaChoice,
    Smoke,
    SmokeResult,
    Tool,
    TorchInfo,
    bf16_native,
)
from ..failures import classify
from .. import cache
from ..redact import safe_environment
from .env_probe import collect_env, fingerprint_modules
from .gpu import probe_gpus
from .runner import BUILDS_CHILD_SCRIPT, GPU_CHILD_SCRIPT, ChildProcess, ProbeFailed, probe_output, start_child

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
    gpu_index: int = 0,
    shapes: Optional[list[dict]] = None,
    cache_root: Optional[str] = None,
    known: Optional[Facts] = None,
    cache_trust: Optional[str] = None,
) -> Facts:
    """Probe this machine and the target interpreter. Never raises for a broken environment.

    known: facts of an earlier check in this session (fix's plan, for its verification): its
    smoke results and sample verdict, whatever their outcome, stand where their key still matches
    (nothing they depend on changed), even with use_cache=False; they are never run twice.

    gpu_index: the GPU the smoke tests run on (a distributed rank tests its own: LOCAL_RANK).
    shapes: the user's attention inputs ({"head_dim", "dtype", "source"}, from --config): the smoke
    probe asks SDPA's dispatch which kernel each gets, and why it refuses the others.
    use_cache=False: compute the sample verdict afresh (and store it); cache_root: the cache
    folder (default: ATTN_DOCTOR_CACHE_DIR or the user's cache folder); cache_trust: whose entries
    in it are believed (attn_doctor.cache.trust_level: "owner", "group"; default
    ATTN_DOCTOR_CACHE_TRUST, else "owner").
    """
    python = python or sys.executable
    facts = Facts(quick=quick)
    probes: list[ProbeRun] = []
    note = progress or (lambda _msg: None)

    # The GPUs and the package set first (milliseconds): the sample verdict's key needs both, and
    # its child starts before the torch probe's, which it overlaps.
    gpu_run, gpu = _timed("gpu", probe_gpus)
    note("reading installed packages")
    fingerprint = None if quick else list(SAMPLE_MODULES) if sample else ["torch/"]
    env_run, env_data = _timed("environment", lambda: _environment(python, fingerprint))
    probes += [env_run, gpu_run]
    if env_data is not None:
        _apply_environment(facts, env_data)
    if gpu is not None:
        facts.gpu = gpu
    facts.env = safe_environment(os.environ)

    children: dict[str, ChildProcess] = {}
    samples: Optional[SampleVerdict] = None
    smoke_key: Optional[str] = None
    smoke_hit: Optional[dict] = None
    ignored: list[str] = []  # cache entries not believed (attn_doctor.cache): notes for -v
    if not quick:
        child_env, bytecode_note = _bytecode_env(env_data)
        if bytecode_note is not None:
            probes.append(bytecode_note)
        no_torch = env_data is not None and "torch" in (env_data.get("modules") or {}) and env_data["modules"]["torch"] is None
        if sample and not no_torch:  # without torch there is no forward pass to judge (said below)
            samples = SampleVerdict(python, _sample_config(_weakest_capability(gpu)), timeout, use_cache, cache_root, note, child_env,
                                    cache_trust)
            inputs = sample_inputs(python, facts, env_data, samples.config) if env_data else None
            key = cache.key("samples", **inputs) if inputs is not None else None
            if key is not None and known is not None and known.dtype_path.key == key:
                facts.dtype_path, samples = known.dtype_path, None
            else:
                samples.start(key, inputs)
        note("importing torch in the target interpreter")
        args = ["torch", "--targets", json.dumps(MODULE_DISTRIBUTIONS), "--builds", json.dumps({"script": str(BUILDS_CHILD_SCRIPT)})]
        if smoke and gpu is not None and gpu.devices and env_data is not None:
            smoke_inputs = _smoke_inputs(python, facts, gpu, gpu_index, shapes)
            smoke_key = cache.key("smoke", **smoke_inputs)
            if known is not None and known.smoke.key == smoke_key and known.smoke.status != "skipped":
                smoke_hit = {"value": msgspec.to_builtins(known.smoke), "computed": known.smoke.cached}
            elif use_cache:
                smoke_hit = cache.load("smoke", smoke_key, cache_root, schema=Smoke, trust=cache_trust, ignored=ignored)
        if gpu is not None and gpu.devices:
            # CUDA facts and smoke tests: forks of the torch probe, each initialising CUDA itself.
            gpu_config = {"script": str(GPU_CHILD_SCRIPT), "smoke": smoke and smoke_hit is None, "capability": _weakest_capability(gpu),
                          "index": gpu_index, "shapes": shapes or [], "bf16_native_from": list(BF16_NATIVE_FROM)}
            if gpu_config["smoke"]:
                gpu_config["kernel_cache"], kernels_note = _kernel_cache()
                if kernels_note is not None:
                    probes.append(kernels_note)
            args += ["--gpu", json.dumps(gpu_config)]
        _start(children, probes, "torch", python, args, child_env)

    deadline = time.monotonic() + timeout
    try:
        for name, child_process in children.items():
            note("waiting for torch, the import, CUDA and smoke probes")
            start = child_process.started
            try:
                data = child_process.result(max(1.0, deadline - time.monotonic()))
            except ProbeFailed as exc:
                probes.append(ProbeRun(name=name, status=exc.status, duration_s=round(time.monotonic() - start, 3), error=str(exc),
                                       stderr=probe_output(name, child_process)))
                facts.torch = TorchInfo(status="timeout" if exc.status == "timeout" else "skipped")
                continue
            probes.append(ProbeRun(name=name, status="ok", duration_s=round(time.monotonic() - start, 3),
                                   stderr=probe_output(name, child_process, data.get("stderr"))))
            _apply_torch(facts, data)
            if data.get("builds_error"):
                err = data["builds_error"]
                probes.append(ProbeRun(name="builds", status="failed", error=f"{err.get('type')}: {err.get('message')}"[:500]))
            if "cuda" in data:
                _apply_cuda(facts, data["cuda"])
            if data.get("smoke"):
                facts.smoke = _smoke(data["smoke"])
                if smoke_key and facts.smoke.status == "ok":
                    cache.save("smoke", smoke_key, msgspec.to_builtins(facts.smoke), cache_root, inputs=smoke_inputs)
                facts.smoke.key = smoke_key
            elif smoke_hit is not None:
                facts.smoke = msgspec.convert(smoke_hit["value"], Smoke)
                facts.smoke.cached, facts.smoke.key = smoke_hit.get("computed"), smoke_key
        if samples is not None:
            note("waiting for the sample forward pass")
            facts.dtype_path, run = samples.finish()
            if run is not None:
                probes.append(run)
    finally:
        if samples is not None:
            samples.close()
    if samples is not None and samples.flight is not None:
        ignored += samples.flight.ignored
    probes += [ProbeRun(name="cache", status="skipped", error=why) for why in ignored]
    if sample and not quick and facts.dtype_path.status == "skipped" and facts.torch.status != "ok" and not facts.dtype_path.error:
        facts.dtype_path = DtypePath(status="skipped", error=f"torch is {facts.torch.status} in the target environment")
    facts.probes = probes
    return facts


# What the sample forward pass imports, fingerprinted for its cache key where the target would
# import it from (a trailing "/": the top folder only; torch's 2,000 files change with its version).
SAMPLE_MODULES = ("torch/", "transformers", "x_transformers", "einops", "flash_attn", "flash_attn_interface", "fla", "triton/")


def sample_key(python: str, facts: Facts, env_data: dict, config: dict) -> str:
    return cache.key("samples", **sample_inputs(python, facts, env_data, config))


def sample_inputs(python: str, facts: Facts, env_data: dict, config: dict) -> dict:
    """Everything the sample verdict depends on (its key's inputs, recorded in its entry): the
    package set, where each imported library comes from and its files (a distribution,
    PYTHONPATH or the working folder: the working folder counts through what it shadows, so a
    container image's prepared verdicts serve any folder), the interpreter and its version,
    PYTHONPATH, the GPU capability and dtype it is judged for, and attn-doctor's own code."""
    return cache.inputs_of(
        # Resolved: `python` and `python3` of one image are one interpreter; a venv's symlink to
        # its base interpreter still differs by its packages and where they are imported from.
        python=os.path.realpath(python),
        python_version=facts.platform.python_version,
        packages=_package_set(facts),
        modules=env_data.get("modules"),
        pythonpath=os.environ.get("PYTHONPATH", ""),
        doctor=_doctor_stamp(),
        **config,
    )


def _smoke_inputs(python: str, facts: Facts, gpu: GpuInfo, index: int, shapes: Optional[list]) -> dict:
    """What a GPU's smoke results depend on: that GPU and its driver, the installed code, the
    shapes asked about, and this boot of the machine (a GPU that went bad is tested again after
    the reboot that usually follows; `--no-cache` tests it at once)."""
    return cache.inputs_of(
        python=os.path.realpath(python),
        packages=_package_set(facts),
        pythonpath=os.environ.get("PYTHONPATH", ""),
        gpus=[(d.index, d.name, d.capability, d.memory_mib) for d in gpu.devices],
        driver=gpu.driver_version,
        index=index,
        visible=os.environ.get("CUDA_VISIBLE_DEVICES"),
        shapes=shapes or [],
        boot=_boot_id(),
        doctor=_doctor_stamp(),
    )


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _bytecode_env(env_data: Optional[dict]) -> tuple[dict, Optional[ProbeRun]]:
    """Where the target's torch or transformers cannot be imported from the bytecode beside them
    (uv installs without it; PIP_NO_COMPILE; a read-only site-packages; an image whose build touched
    the sources after compiling them), every probe child would compile them from source, every
    check (on a 2-core CPU: 2 s of torch's 4 s import, 5 s of the transformers sample's 8.5 s). The
    children then keep their bytecode in a folder only this user can write (PYTHONPYCACHEPREFIX,
    attn_doctor/bytecode.py): never in the target's site-packages, never in a shared cache folder,
    whose bytecode another user could forge. Where there is no such folder: compiled every time,
    and a note (a skipped "bytecode" probe) says why."""
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        return {}, None
    modules = (env_data or {}).get("modules") or {}
    bytecode = (env_data or {}).get("bytecode") or {}
    states = [bytecode.get(name, "unknown") for name in ("torch", "transformers") if modules.get(name)]
    if all(state in ("fresh", None) for state in states):  # None: no Python sources to compile
        return {}, None
    from ..bytecode import private_pycache, prune_pycache

    folder, why = private_pycache()
    if folder is None:
        return {}, ProbeRun(name="bytecode", status="skipped", error=f"{why}: the probes compile torch on every check")
    # Once a day, beside the probes: the bytecode of environments deleted since (a daemon thread:
    # what it has not removed when the check ends is removed next time).
    threading.Thread(target=_quietly, args=(prune_pycache, folder), daemon=True, name="attn-doctor-prune-pycache").start()
    return {"PYTHONPYCACHEPREFIX": folder}, None


def _quietly(function, *args) -> None:
    try:
        function(*args)
    except Exception:  # noqa: BLE001 - tidying a cache never fails a check
        pass


def _kernel_cache() -> tuple[Optional[str], Optional[ProbeRun]]:
    """The folder the smoke tests' kernel compilers cache into (gpu_child.kernel_caches): private
    to this user, like the bytecode folder. Without one they compile every time (FlashAttention 4:
    about 10 s), and a note says why."""
    from ..bytecode import private_kernels

    folder, why = private_kernels()
    if folder is None:
        return None, ProbeRun(name="kernels", status="skipped", error=f"{why}: the smoke tests compile their kernels on every check")
    return folder, None


def trace_bytecode_env(python: str) -> dict:
    """`trace`'s imports of torch and transformers keep their bytecode where check's probe children
    keep it (_bytecode_env, a folder private to this user): {"PYTHONPYCACHEPREFIX": folder} where
    the target has none beside them, else {}. Never fails: without the answer, the trace runs as
    before (compiling)."""
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
        env_data = _environment(python, list(SAMPLE_MODULES))
    except ProbeFailed:
        return None
    facts = Facts()
    _apply_environment(facts, env_data)
    return sample_key(python, facts, env_data, _sample_config(capability))


def _doctor_stamp() -> Optional[dict]:
    # attn-doctor's own tracer judges the samples: a changed tracer is a changed verdict.
    return fingerprint_modules(["attn_doctor"], os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))).get("attn_doctor")


class SampleVerdict:
    """The sample forward pass of one check, single-flight by its key (attn_doctor.cache): a stored
    verdict is reused; else the first process to claim the key computes it in a child of its own,
    started before the torch probe and overlapping it; any other process with the key waits for
    that one (in a thread, while its own probes run), and computes itself if the holder dies."""

    def __init__(self, python: str, config: dict, timeout: float, use_cache: bool, cache_root: Optional[str], note,
                 child_env: Optional[dict] = None, cache_trust: Optional[str] = None):
        self.python, self.config, self.timeout, self.child_env = python, config, timeout, child_env
        self.cache_trust = cache_trust
        self.capability = ".".join(str(x) for x in config["capability"]) if config.get("capability") else None
        self.use_cache, self.cache_root, self.note = use_cache, cache_root, note
        self.flight: Optional[cache.Flight] = None
        self.key: Optional[str] = None
        self.entry: Optional[dict] = None  # a stored or shared verdict
        self.failure: Optional[dict] = None  # the failure record of a computation this process waited for
        self.waited: Optional[float] = None
        self.child: Optional[ChildProcess] = None
        self.child_error: Optional[str] = None
        self.folder: Optional[str] = None
        self.thread = None
        self.computing = False

    def start(self, key: Optional[str], inputs: Optional[dict] = None) -> None:
        self.key = key
        if key is None:  # no package set: nothing to share, compute here
            self._compute()
            return
        self.flight = cache.Flight("samples", key, self.cache_root, inputs=inputs, schema=DtypePath, trust=self.cache_trust)
        self.entry = self.flight.cached() if self.use_cache else None
        if self.entry is not None:
            return
        if self.flight.claim(fresh=not self.use_cache):
            self._compute()
            return
        import threading

        self.thread = threading.Thread(target=self._wait, name="attn-doctor-sample-wait", daemon=True)
        self.thread.start()

    def _wait(self) -> None:
        # The holder's own sample child is bounded by its timeout; a margin for its start.
        outcome = self.flight.wait(self.timeout + 15.0, self.note)
        self.waited = outcome.waited_s
        if outcome.status == "hit":
            self.entry = outcome.entry
        elif outcome.status == "failed":
            self.failure = outcome.entry
        elif outcome.status == "claimed":
            self._compute()  # the holder went away without a verdict: this process computes it
        else:
            self.child_error = f"{outcome.holder or 'another process'} was still computing this sample forward pass after {outcome.waited_s:.0f} s"

    def _compute(self) -> None:
        from ..trace.launch import package_dir

        self.computing = True
        self.folder = package_dir()
        args = ["torch", "--sample", json.dumps({**self.config, "path": self.folder})]
        try:
            self.child = start_child(self.python, args, self.child_env)
        except ProbeFailed as exc:
            self.child_error = str(exc)

    def finish(self) -> tuple[DtypePath, Optional[ProbeRun]]:
        if self.thread is not None:
            self.thread.join(self.timeout + 20.0)
        if self.entry is not None:
            return self._from_entry(self.entry, cached=True), self._run(self.entry)
        if self.failure is not None:
            return self._from_entry(self.failure, cached=False), self._run(self.failure)
        if self.child is None:
            dtype_path = DtypePath(status="skipped", error=self.child_error, key=self.key, waited_s=self.waited)
            if self.computing and self.flight is not None:
                self.flight.fail(msgspec.to_builtins(dtype_path), self.child_error or "the sample child did not start")
            return dtype_path, None
        start = self.child.started
        try:
            data = self.child.result(max(1.0, self.timeout - (time.monotonic() - start)))
        except ProbeFailed as exc:
            run = ProbeRun(name="sample", status=exc.status, duration_s=round(time.monotonic() - start, 3), error=str(exc),
                           stderr=probe_output("sample", self.child))
            dtype_path = DtypePath(status="failed", error=f"the sample forward pass did not finish: {exc}", key=self.key, waited_s=self.waited)
            if self.flight is not None:
                self.flight.fail(msgspec.to_builtins(dtype_path), str(exc), probe={"status": run.status, "error": run.error})
            return dtype_path, run
        run = ProbeRun(name="sample", status="ok", duration_s=round(time.monotonic() - start, 3),
                       stderr=probe_output("sample", self.child, data.get("stderr")))
        raw = data.get("dtype_path")
        if raw is None:
            torch_status = (data.get("torch") or {}).get("status", "failed")
            raw = {"status": "skipped", "error": f"torch is {torch_status} in the target environment"}
        dtype_path = _dtype_path(raw, self.capability)
        dtype_path.key, dtype_path.waited_s = self.key, self.waited
        if self.flight is not None:
            value = msgspec.to_builtins(dtype_path)
            # A failed run is shared with the processes waiting for it, never reused later.
            probe = {"status": run.status, "error": run.error}
            if dtype_path.status != "ok" or dtype_path.verdict == "failed":
                entry = self.flight.fail(value, dtype_path.error or "a sample failed", probe=probe)
            else:
                entry = self.flight.store(value, probe=probe)
            dtype_path.computed_by = entry.get("by")
        return dtype_path, run

    def _run(self, entry: dict) -> ProbeRun:
        # The computing process's probe, as it ran (the same in every report sharing the verdict;
        # its duration here: the wait).
        probe = entry.get("probe") if isinstance(entry.get("probe"), dict) else {}
        status = probe.get("status") if probe.get("status") in ("ok", "failed", "timeout", "skipped") else "ok"
        error = probe.get("error") if isinstance(probe.get("error"), str) else None
        return ProbeRun(name="sample", status=status, duration_s=self.waited or 0.0, error=error[:2000] if error else None)

    def _from_entry(self, entry: dict, cached: bool) -> DtypePath:
        dtype_path = msgspec.convert(entry["value"], DtypePath)
        dtype_path.cached = entry.get("computed") if cached else None
        dtype_path.computed_by, dtype_path.key, dtype_path.waited_s = entry.get("by"), self.key, self.waited
        return dtype_path

    def close(self) -> None:
        """Never leave a claim or a child behind (an interrupted check): the waiters go on."""
        if self.child is not None and self.child.proc.poll() is None:
            self.child.kill()
        if self.flight is not None:
            self.flight.abandon()
        if self.folder:
            from ..trace.launch import remove_package_dir

            remove_package_dir(self.folder, dict(os.environ, **(self.child_env or {})))


def prepare_samples(python: Optional[str], capabilities: list[Optional[str]], timeout: float = DEFAULT_TIMEOUT_S,
                    use_cache: bool = True, cache_root: Optional[str] = None, progress: Progress = None,
                    cache_trust: Optional[str] = None) -> list[DtypePath]:
    """Compute and store the sample verdict for each GPU capability (None: no GPU), all at once,
    as a check on a node with that GPU would look it up: a container image's build step."""
    python = python or sys.executable
    note = progress or (lambda _msg: None)
    note("reading installed packages")
    env_data = _environment(python, list(SAMPLE_MODULES))
    facts = Facts()
    _apply_environment(facts, env_data)
    verdicts = []
    child_env, bytecode_note = _bytecode_env(env_data)
    if bytecode_note is not None:
        note(bytecode_note.error)
    for capability in capabilities:
        verdict = SampleVerdict(python, _sample_config(capability), timeout, use_cache, cache_root, note, child_env, cache_trust)
        inputs = sample_inputs(python, facts, env_data, verdict.config)
        verdict.start(cache.key("samples", **inputs), inputs)
        verdicts.append(verdict)
    out = []
    try:
        for verdict in verdicts:
            note(f"sample forward pass judged for {verdict.capability or 'no GPU'}")
            out.append(verdict.finish()[0])
    finally:
        for verdict in verdicts:
            verdict.close()
    return out


def _package_set(facts: Facts) -> list[str]:
    return sorted(f"{name}=={pkg.version}" for name, pkg in facts.packages.items())


def _weakest_capability(gpu: Optional[GpuInfo]) -> Optional[str]:
    caps = [d.capability for d in (gpu.devices if gpu else []) if d.capability]
    return min(caps, key=lambda c: tuple(int(x) for x in c.split("."))) if caps else None


def _sample_config(weakest: Optional[str]) -> dict:
    """The sample forward pass runs on the CPU (tiny models: microseconds of compute, where meta
    would import torch._dynamo for its layer_norm decomposition, 1.3 s) with CUDA's autocast
    policy emulated, judged for this machine's weakest GPU, in bf16 where every GPU has it
    natively (or there is no GPU), else in fp16: the dtype a user here should train in."""
    dtype = "fp16" if weakest and not bf16_native(weakest) else "bf16"
    config = {"device": "cpu", "dtype": dtype, "autocast": None}
    if weakest:
        config["capability"] = [int(x) for x in weakest.split(".")]
    return config


def _dtype_path(raw: dict, capability: Optional[str]) -> DtypePath:
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
        capability=capability,
        verdict=verdict,
        samples=samples,
        findings=findings,
        error=raw.get("error"),
    )


def _start(children: dict, probes: list, name: str, python: str, args: list[str], env: Optional[dict] = None) -> None:
    try:
        children[name] = start_child(python, args, env)
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
    if "builds" in data:
        facts.builds_probed = True
        builds = {}
        for name, raw_build in (data.get("builds") or {}).items():
            libraries = []
            for ext in raw_build.get("extensions") or []:
                ext = dict(ext)
                error = _import_error(ext.pop("error", None))
                lib = msgspec.convert({k: v for k, v in ext.items() if k in ExtensionLibrary.__struct_fields__}, ExtensionLibrary)
                lib.error = error
                libraries.append(lib)
            builds[name] = ExtensionBuild(
                version=str(raw_build.get("version") or ""),
                built_for=msgspec.convert(raw_build.get("built_for") or {}, BuiltFor),
                extensions=libraries,
            )
        facts.builds = builds
