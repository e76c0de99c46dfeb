"""The torch probe's two cached parts, each computed by a child of the target interpreter
(torch_probe.collect_torch) and kept as plain data (attn_doctor.cache.Once, keys.py):

- the stack (`StackValue`): torch's build, each attention library's import, each torch-linked
  extension's load, and the kernel tests that depend on the package set, the GPU architecture and
  the driver (compiled flex_attention, FlashAttention 2/3/4, xformers): shared by a cluster.
- the node (`NodeValue`): what CUDA and torch see of this machine's GPUs, and SDPA's kernels run on
  the GPU the check is for: per node and boot.

Each part's value is validated against its type when read back from the cache, then folded into
Facts here (apply_stack, apply_node): the orchestrator (probes/__init__.py) only starts, waits and
applies.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import msgspec
from msgspec import Struct, field

from ..cache import Done
from ..facts import (BuiltFor, ExtensionBuild, ExtensionLibrary, Facts, ImportResult, NumericsCase, NumericsResult, ProbeRun, SdpaChoice, Smoke,
                     SmokeResult, TorchDevice, TorchInfo)
from ..failures import classify
from .runner import ProbeFailed, probe_output, start_child


class CudaFacts(Struct):
    """CUDA and SDPA as torch sees them on this node (gpu_child.cuda_facts), kept per boot."""

    status: str = "skipped"  # ok | error | crashed | timeout | skipped
    error: Optional[str] = None
    cudnn: Optional[str] = None
    cuda_available: Optional[bool] = None
    cuda_error: Optional[str] = None
    arch_list: list[str] = []
    device_count: int = 0
    devices: list[TorchDevice] = []
    sdpa: dict[str, bool] = {}
    sdpa_probe_dtype: Optional[str] = None
    sdpa_reasons: dict[str, list[str]] = {}
    sdpa_error: Optional[str] = None


class StackValue(Struct):
    torch: TorchInfo = field(default_factory=TorchInfo)
    imports: dict[str, ImportResult] = {}
    builds: dict[str, ExtensionBuild] = {}
    builds_probed: bool = False
    smoke: Smoke = field(default_factory=Smoke)  # the kernel tests of the package set (lib:*, compile:*)
    notes: list[ProbeRun] = []  # what the probe could not do (builds)


class NodeValue(Struct):
    cuda: CudaFacts = field(default_factory=CudaFacts)
    smoke: Smoke = field(default_factory=Smoke)  # SDPA's kernels on this GPU (main, cudnn:<dtype>)


class TorchJob:
    """One torch probe child, started at once; finish() turns its answer into a part's value
    (`convert`: the child's JSON -> (value, keep, error)) within the time given."""

    def __init__(self, name: str, python: str, args: list[str], env: Optional[dict],
                 convert: Callable[[dict], tuple[Struct, bool, Optional[str]]]):
        self.name, self.convert = name, convert
        self.child = start_child(python, args, env)

    def finish(self, timeout: float) -> Done:
        start = self.child.started
        try:
            data = self.child.result(timeout)
        except ProbeFailed as exc:
            run = ProbeRun(name=self.name, status=exc.status, duration_s=round(time.monotonic() - start, 3), error=str(exc),
                           stderr=probe_output(self.name, self.child))
            return Done(None, keep=False, error=str(exc), extra={"probe": {"status": run.status, "error": run.error}}, local=run)
        run = ProbeRun(name=self.name, status="ok", duration_s=round(time.monotonic() - start, 3),
                       stderr=probe_output(self.name, self.child, data.get("stderr")))
        value, keep, error = self.convert(data)
        # What the processes printed is evidence (-v shows it): kept with the result it came with.
        probe = {"status": "ok", "seconds": run.duration_s, "stderr": run.stderr}
        return Done(msgspec.to_builtins(value), keep=keep, error=error, extra={"probe": probe}, local=run)

    def close(self) -> None:
        if self.child.proc.poll() is None:
            self.child.kill()


def stack_value(data: dict) -> tuple[StackValue, bool, Optional[str]]:
    """The stack part of a torch probe's answer; kept unless a kernel test was cut short (a crash
    or a timeout may be this node's, not the stack's: the next check tests again), or the numerics
    sweep did not reach every case in its time."""
    value = StackValue(torch=_torch_info(data.get("torch") or {}), imports=_imports(data.get("imports") or {}))
    if "builds" in data:
        value.builds_probed, value.builds = True, _builds(data.get("builds") or {})
    if data.get("builds_error"):
        err = data["builds_error"]
        value.notes.append(ProbeRun(name="builds", status="failed", error=f"{err.get('type')}: {err.get('message')}"[:500]))
    if data.get("smoke"):
        value.smoke = merge_groups(data["smoke"])
    # a sweep cut short by its time (kernels compiling on a first check) is measured again next time
    keep = (value.torch.status != "timeout" and value.smoke.status != "failed"
            and not any(r.status == "timeout" for r in value.smoke.numerics))
    return value, keep, value.smoke.error if value.smoke.status == "failed" else None


def node_value(data: dict) -> tuple[NodeValue, bool, Optional[str]]:
    """The node part: the CUDA facts and SDPA's tests; kept when both came through."""
    cuda = data.get("cuda") or {"status": "error", "error": {"message": "the CUDA probe did not run"}}
    value = NodeValue(cuda=_cuda_facts(cuda, (data.get("torch") or {}).get("status")))
    if data.get("smoke"):
        value.smoke = merge_groups(data["smoke"])
    keep = value.cuda.status == "ok" and value.smoke.status != "failed"
    return value, keep, value.cuda.error or value.smoke.error


def apply_stack(facts: Facts, value: StackValue, cached: Optional[str]) -> None:
    cuda = {k: getattr(facts.torch, k) for k in _CUDA_FIELDS}  # the node's part, if it came first
    if not cuda["arch_list"]:  # no CUDA probe here (no GPU): the architectures the stack read from the build
        cuda["arch_list"] = value.torch.arch_list
    facts.torch = msgspec.structs.replace(value.torch, cached=cached, **cuda)
    facts.imports, facts.builds, facts.builds_probed = value.imports, value.builds, value.builds_probed
    facts.smoke = combine(facts.smoke, value.smoke, capability_cached=cached)


def apply_node(facts: Facts, value: NodeValue, cached: Optional[str]) -> None:
    cuda = value.cuda
    if cuda.status != "ok":
        facts.torch.cuda_available = False
        facts.torch.cuda_error = (cuda.error or f"the CUDA probe ended with status {cuda.status}")[:1000]
    else:
        for name in _CUDA_FIELDS:
            setattr(facts.torch, name, getattr(cuda, name))
    facts.smoke = combine(value.smoke, facts.smoke, cached=cached)


# TorchInfo's fields that the CUDA fork reports (the rest is torch's build, from the stack).
_CUDA_FIELDS = ("cudnn", "cuda_available", "cuda_error", "arch_list", "device_count", "devices", "sdpa", "sdpa_probe_dtype",
                "sdpa_reasons", "sdpa_error")


def _cuda_facts(cuda: dict, torch_status: Optional[str]) -> CudaFacts:
    if cuda.get("status") != "ok":
        error = cuda.get("error") or {}
        reason = error.get("message") if isinstance(error, dict) else str(error)
        if cuda.get("status") == "crashed":
            reason = f"the CUDA probe was killed by signal {cuda.get('signal')}"
        if torch_status not in (None, "ok"):
            reason = reason or f"torch is {torch_status}"
        return CudaFacts(status=str(cuda.get("status") or "error"), error=(reason or None) and reason[:1000])
    fields = set(CudaFacts.__struct_fields__)
    return msgspec.convert({"status": "ok", **{k: v for k, v in cuda.items() if k in fields and k != "status"}}, CudaFacts)


def combine(node: Smoke, stack: Smoke, cached: Optional[str] = None, capability_cached: Optional[str] = None) -> Smoke:
    """One Smoke from the node's tests and the stack's (either may be absent: skipped)."""
    parts = [s for s in (node, stack) if s.status != "skipped" or s.results or s.choices]
    if not parts:
        return msgspec.structs.replace(node, cached=cached or node.cached, capability_cached=capability_cached or node.capability_cached)
    errors = [s.error for s in parts if s.status == "failed" and s.error]
    results = sorted([r for s in parts for r in s.results], key=_result_order)
    return Smoke(
        status="failed" if any(s.status == "failed" for s in parts) else "ok",
        choices=[c for s in parts for c in s.choices],
        results=results,
        numerics=[r for s in parts for r in s.numerics],
        numerics_cases={k: v for s in parts for k, v in s.numerics_cases.items()},
        error="; ".join(errors) or None,
        group_seconds={k: v for s in parts for k, v in s.group_seconds.items()},
        group_phases={k: v for s in parts for k, v in s.group_phases.items()},
        device_index=next((s.device_index for s in parts if s.device_index is not None), None),
        cached=cached or node.cached,
        capability_cached=capability_cached or stack.capability_cached or node.capability_cached,
        key=node.key or stack.key,
    )


_ORDER = {name: i for i, name in enumerate(("sdpa-flash", "sdpa-mem-efficient", "sdpa-cudnn", "sdpa-math"))}
# The smoke groups whose results belong to the stack (gpu_child.stack_group): libraries, compilers, the numerics sweep.
STACK_GROUPS = ("lib:", "compile:", "num:")


def _result_order(r: SmokeResult) -> tuple:
    return (r.dtype != "float16", _ORDER.get(r.backend, 9), r.backend)


def merge_groups(groups: dict) -> Smoke:
    """Merge the smoke groups' answers; a group whose process crashed or hung is reported as such."""
    choices, results, errors, seconds, phases, index = [], [], [], {}, {}, None
    numerics, cases = [], {}
    for group, raw in groups.items():
        index = raw.get("device_index", index)
        if isinstance(raw.get("duration_s"), (int, float)):
            seconds[group] = round(float(raw["duration_s"]), 3)
        if isinstance(raw.get("phases"), dict):
            phases[group] = {str(k)[:40]: round(float(v), 3) for k, v in list(raw["phases"].items())[:32]
                             if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if raw.get("status") == "ok":
            choices += [msgspec.convert(c, SdpaChoice) for c in raw.get("choices", [])]
            results += [msgspec.convert(r, SmokeResult) for r in raw.get("results", [])]
            numerics += [msgspec.convert(r, NumericsResult) for r in raw.get("numerics", [])]
            cases.update({str(k): msgspec.convert(v, NumericsCase) for k, v in (raw.get("cases") or {}).items()})
            # a group that runs several tests in one process says the ones it lost (jit_library.py)
            errors += [str(e)[:300] for e in (raw.get("errors") or [])[:8]]
            continue
        if raw.get("status") == "crashed":
            errors.append(f"smoke group {group} crashed (signal {raw.get('signal')})")
        elif raw.get("status") == "timeout":
            errors.append(f"smoke group {group} did not finish in {raw.get('duration_s', '?')} s")
        else:
            err = raw.get("error") or {}
            errors.append(f"smoke group {group} failed: {err.get('message') if isinstance(err, dict) else err}")
    return Smoke(status="failed" if errors else "ok", choices=choices, results=sorted(results, key=_result_order),
                 numerics=numerics, numerics_cases=cases,
                 error="; ".join(errors) or None, group_seconds=seconds, group_phases=phases, device_index=index)


def split_known(known: Facts) -> tuple[Optional[tuple], Optional[tuple]]:
    """An earlier check's node and stack answers, as (key, value, when computed), each None where
    that check recorded no key for it (attn_doctor.probes: fix's verification reuses them)."""
    node, stack = values_of(known)
    return ((known.smoke.key, node, known.smoke.cached) if known.smoke.key else None,
            (known.torch.key, stack, known.torch.cached) if known.torch.key else None)


def values_of(facts: Facts) -> tuple[NodeValue, StackValue]:
    """The node's and the stack's answers that facts were assembled from (apply_node, apply_stack)."""
    node_smoke, stack_smoke = _split(facts.smoke)
    torch = facts.torch
    cuda = CudaFacts(status="ok", **{name: getattr(torch, name) for name in _CUDA_FIELDS})  # folds back to the same fields
    build = msgspec.structs.replace(torch, **{name: getattr(TorchInfo(), name) for name in _CUDA_FIELDS}, key=None, cached=None)
    return (NodeValue(cuda=cuda, smoke=node_smoke),
            StackValue(torch=build, imports=facts.imports, builds=facts.builds, builds_probed=facts.builds_probed, smoke=stack_smoke))


def _split(smoke: Smoke) -> tuple[Smoke, Smoke]:
    """A combined Smoke's node part (SDPA's tests, the choices) and stack part (the rest)."""
    def part(stack: bool) -> Smoke:
        results = [r for r in smoke.results if (not r.backend.startswith("sdpa-")) == stack]
        seconds = {g: v for g, v in smoke.group_seconds.items() if g.startswith(STACK_GROUPS) == stack}
        phases = {g: v for g, v in smoke.group_phases.items() if g.startswith(STACK_GROUPS) == stack}
        errors = [e for e in (smoke.error or "").split("; ") if e and any(" " + p in e for p in STACK_GROUPS) == stack]
        numerics = smoke.numerics if stack else []  # the sweep is the stack's, SDPA's kernels included
        if not results and not seconds and not errors and not numerics and (stack or not smoke.choices):
            return Smoke(status="skipped")
        return Smoke(status="failed" if errors else "ok", choices=[] if stack else smoke.choices, results=results,
                     numerics=numerics, numerics_cases=smoke.numerics_cases if stack else {},
                     error="; ".join(errors) or None, group_seconds=seconds, group_phases=phases, device_index=smoke.device_index)

    return part(False), part(True)


def _import_error(raw: Optional[dict]):
    if not raw:
        return None
    return classify(raw.get("type", ""), raw.get("message", ""))


def _known_fields(raw: dict, struct: Any) -> dict:
    fields = set(struct.__struct_fields__)
    return {k: v for k, v in raw.items() if k in fields}


def _torch_info(raw: dict) -> TorchInfo:
    raw = dict(raw)
    error = _import_error(raw.pop("error", None))
    info = msgspec.convert(_known_fields(raw, TorchInfo), TorchInfo)
    info.error = error
    return info


def _imports(raw: dict) -> dict[str, ImportResult]:
    out = {}
    for module, result in raw.items():
        result = dict(result)
        error = _import_error(result.pop("error", None))
        item = msgspec.convert(_known_fields(result, ImportResult), ImportResult)
        item.error = error
        out[module] = item
    return out


def _builds(raw: dict) -> dict[str, ExtensionBuild]:
    builds = {}
    for name, raw_build in raw.items():
        libraries = []
        for ext in raw_build.get("extensions") or []:
            ext = dict(ext)
            error = _import_error(ext.pop("error", None))
            lib = msgspec.convert(_known_fields(ext, ExtensionLibrary), ExtensionLibrary)
            lib.error = error
            libraries.append(lib)
        builds[name] = ExtensionBuild(version=str(raw_build.get("version") or ""),
                                      built_for=msgspec.convert(raw_build.get("built_for") or {}, BuiltFor), extensions=libraries)
    return builds
