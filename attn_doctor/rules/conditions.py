"""Evaluating a rule's `when` table against Facts. Pure: no I/O.

Each test answers True, False, or Unknown (the fact was not probed). A rule fires when every test
is True; it passes when any is False; otherwise it is skipped, with the reason.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..facts import Facts, ImportResult, canonical_name, distribution_of
from ..failures import fa4_extra
from .model import Condition


class Unknown:
    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Unknown({self.reason!r})"


Verdict = Any  # True | False | Unknown
CheckFn = Callable[[Facts, dict], Optional[dict]]


class SkipRule(Exception):
    """Raised by a named check when the facts it needs are missing."""


def version_matches(version: str, spec: str) -> bool:
    try:
        # prereleases=True: a user on 2.8.0.dev or 2.7.0rc1 is still on that line.
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except (InvalidVersion, InvalidSpecifier):
        return False


def _mapping(value) -> dict:
    # the tracer's findings are loose JSON in a report from elsewhere: a `sink` may be anything
    return value if isinstance(value, dict) else {}


def capability_matches(capability: str, spec: str) -> bool:
    return version_matches(capability, spec)


def marker_environment(facts: Facts) -> dict[str, str]:
    p = facts.platform
    system = p.system or ""
    return {
        "sys_platform": {"Linux": "linux", "Windows": "win32", "Darwin": "darwin"}.get(system, system.lower()),
        "platform_system": system,
        "platform_machine": p.machine,
        "platform_release": p.release,
        "python_version": ".".join(p.python_version.split(".")[:2]),
        "python_full_version": p.python_version,
        "implementation_name": p.python_implementation.lower(),
        "platform_python_implementation": p.python_implementation,
        "os_name": "nt" if system == "Windows" else "posix",
    }


_MISSING = object()


def lookup(obj: Any, path: str) -> Any:
    """Follow a dotted path through structs and dicts; _MISSING when a step is absent."""
    for part in path.split("."):
        if isinstance(obj, dict):
            if part not in obj:
                return _MISSING
            obj = obj[part]
        elif hasattr(obj, "__struct_fields__") and part in obj.__struct_fields__:
            obj = getattr(obj, part)
        else:
            return _MISSING
    return obj


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def base_evidence(facts: Facts) -> dict[str, Any]:
    """Fields every message and remedy may use: the environment it speaks of."""
    base = {
        "python": facts.platform.python_executable or "?",
        "torch": facts.torch.version or facts.version_of("torch") or "?",
        "torch_cuda": facts.torch.cuda or "?",
        "libc_version": facts.platform.libc_version or "?",
    }
    cuda = facts.torch.cuda
    base["cuda_xy"] = cuda.replace(".", "") if cuda else "?"  # the PyTorch wheel index's cuXY
    base["fa4_extra"] = fa4_extra(cuda) or "?"
    devices = facts.torch.devices or facts.gpu.devices
    base["gpus"] = ", ".join(sorted({f"{d.name} (sm{d.capability.replace('.', '')})" if d.capability else d.name for d in devices})) or "?"
    for name in ("flash-attn", "triton", "transformers", "xformers"):
        base[name] = facts.version_of(name) or "?"
    return base


def build_of_label(version: Optional[str]) -> Optional[str]:
    """"cpu", "cuda" or "rocm" from a torch wheel's local version label (PyTorch's own indexes:
    2.8.0+cpu, 2.8.0+cu128, 2.8.0+rocm6.4); None without one (PyPI's Linux wheels carry none and
    are CUDA builds, its macOS ones none and are not: the label alone cannot tell)."""
    label = (version or "").partition("+")[2].lower()
    if label.startswith("cpu"):
        return "cpu"
    if re.match(r"cu\d", label):
        return "cuda"
    if label.startswith("rocm"):
        return "rocm"
    return None


class Evaluator:
    def __init__(self, facts: Facts, checks: dict[str, CheckFn], data: dict):
        self.facts = facts
        self.checks = checks
        self.data = data
        self.evidence: dict[str, Any] = {}
        self.severity: Optional[str] = None  # set when the facts themselves carry a severity
        self.base = base_evidence(facts)

    # -- the combinator

    def evaluate(self, cond: Condition) -> Verdict:
        if cond.torch_cuda is not None and self.facts.torch.status in ("missing", "error", "crashed", "timeout"):
            # a rule about how torch was built cannot pass where there is no torch to look at
            return Unknown("torch is not installed in the target environment" if self.facts.torch.status == "missing"
                           else "torch did not import")
        verdicts = []
        for key in cond.__struct_fields__:
            value = getattr(cond, key)
            if value in (None, [], {}):
                continue
            verdict = getattr(self, f"_{key.rstrip('_')}")(value)
            if verdict is False:
                return False  # short-circuit: later tests may need facts this one excludes
            verdicts.append(verdict)
        unknown = [v for v in verdicts if isinstance(v, Unknown)]
        return unknown[0] if unknown else True

    # -- the tests

    def _packages_known(self) -> Optional[Unknown]:
        if not self.facts.packages and not self.facts.platform.python_executable:
            return Unknown("the installed packages were not probed")
        return None

    def _installed(self, names: list[str]) -> Verdict:
        unknown = self._packages_known()
        if unknown:
            return unknown
        for name in names:
            version = self.facts.version_of(name)
            if version is None:
                return False
            self.evidence[canonical_name(name)] = version
        return True

    def _installed_any(self, names: list[str]) -> Verdict:
        unknown = self._packages_known()
        if unknown:
            return unknown
        found = {canonical_name(n): self.facts.version_of(n) for n in names if self.facts.version_of(n)}
        self.evidence.update(found)
        return bool(found)

    def _not_installed(self, names: list[str]) -> Verdict:
        unknown = self._packages_known()
        if unknown:
            return unknown
        return all(self.facts.version_of(n) is None for n in names)

    def _version(self, specs: dict[str, str]) -> Verdict:
        unknown = self._packages_known()
        if unknown:
            return unknown
        for name, spec in specs.items():
            version = self.facts.version_of(name)
            if version is None or not version_matches(version, spec or ">=0"):
                return False
            self.evidence[canonical_name(name)] = version
        return True

    def _gpu(self, want: str) -> Verdict:
        assumed = self.facts.assumed_gpu
        if assumed is not None and want == "present_or_assumed":
            # the job's GPU, named with --gpu: what the environment must run on, whatever this machine has
            self.evidence["gpu"] = self._gpu_names()
            self.evidence["assumed_gpu"] = self.evidence["gpu"]
            return True
        if assumed is not None:  # check --gpu: what is judged is that GPU, not whether this machine has one
            return Unknown("the GPU is assumed (--gpu), not this machine's")
        caps = self.facts.gpu_capabilities()
        if caps is None:
            return Unknown("the GPUs were not probed")
        present = bool(caps) or bool(self.facts.gpu.devices)
        if present:
            self.evidence["gpu"] = self._gpu_names()
        return not present if want == "absent" else present

    def _capability(self, spec: str) -> Verdict:
        caps = self.facts.gpu_capabilities()
        if caps is None:
            return Unknown("the GPUs were not probed")
        matching = [c for c in caps if capability_matches(c, spec)]
        if not matching:
            return False
        self.evidence["capability"] = matching[0]
        self.evidence["sm"] = "sm" + matching[0].replace(".", "")
        self.evidence["gpu"] = self._gpu_names(matching[0])
        return True

    def _gpu_names(self, capability: Optional[str] = None) -> str:
        devices = self.facts.torch.devices or self.facts.gpu.devices
        names = sorted({d.name for d in devices if capability is None or d.capability == capability})
        return ", ".join(names)

    def _torch(self, statuses: list[str]) -> Verdict:
        status = self.facts.torch.status
        if status == "skipped":
            return Unknown("torch was not probed (--quick)" if self.facts.quick else "the torch probe did not run")
        if status == "missing" and "missing" not in statuses:
            # torch is not installed: whether it imports, or how it was built, cannot be known (a rule
            # about a torch that is there is skipped, not passed)
            return Unknown("torch is not installed in the target environment")
        if status in statuses:
            t = self.facts.torch
            if t.version:
                self.evidence["torch"] = t.version
            if t.error:
                self.evidence["torch_error"] = _last_line(t.error.message) or t.error.type
            elif status in ("crashed", "timeout"):
                self.evidence["torch_error"] = f"the import {status}"
            return True
        return False

    def _fact(self, wanted: dict[str, Any]) -> Verdict:
        for path, value in wanted.items():
            found = lookup(self.facts, path)
            if found is _MISSING:
                return Unknown(f"{path} was not probed")
            if found != value:
                return False
            self.evidence[path.split(".")[-1]] = found
        return True

    def _torch_cuda(self, want: str) -> Verdict:
        t = self.facts.torch
        if t.status == "skipped":
            # not imported (--quick): the wheel's local version label still names its build
            version = self.facts.version_of("torch")
            build = build_of_label(version)
            if build is None:
                return Unknown("torch was not probed (--quick)" if self.facts.quick else "the torch probe did not run")
            self.evidence["torch"] = version
            return build == want
        if t.status != "ok":
            return Unknown("torch did not import")
        build = "rocm" if t.hip else "cuda" if t.cuda else "cpu"
        self.evidence["torch"] = t.version
        if t.cuda:
            self.evidence["torch_cuda"] = t.cuda
        return build == want

    def _import_result(self, module: str):
        result = self.facts.imports.get(module)
        if (result is None or result.status == "skipped") and self.facts.module_installed(module) is False:
            return ImportResult(status="missing"), None
        if result is None or result.status == "skipped":
            reason = "the import probes did not run (--quick)" if self.facts.quick else f"{module} was not probed"
            return None, Unknown(reason)
        return result, None

    def _imports(self, wanted: dict[str, list[str]]) -> Verdict:
        for module, statuses in wanted.items():
            result, unknown = self._import_result(module)
            if unknown:
                return unknown
            if result.status not in statuses:
                return False
            self.evidence[f"{module}_status"] = result.status
            if result.error:
                self.evidence[f"{module}_error"] = _last_line(result.error.message) or result.error.type
            elif result.status == "crashed":
                self.evidence[f"{module}_error"] = f"the import was killed by signal {result.signal}"
            elif result.status == "timeout":
                self.evidence[f"{module}_error"] = f"the import hung for {result.duration_s} s"
        return True

    def _import_error(self, wanted: dict[str, list[str]]) -> Verdict:
        for module, kinds in wanted.items():
            result, unknown = self._import_result(module)
            if unknown:
                return unknown
            if result.error is None or result.error.kind not in kinds:
                return False
            err = result.error
            self.evidence[f"{module}_error"] = _last_line(err.message) or err.type
            for key in ("symbol", "demangled", "library"):
                if getattr(err, key):
                    self.evidence[key] = getattr(err, key)
        return True

    def _dtype_path_known(self) -> Optional[Unknown]:
        dp = self.facts.dtype_path
        if dp.status == "skipped":
            # the reason the report recorded, if any; none is guessed
            cause = f": {dp.error}" if dp.error else " (--quick)" if self.facts.quick else ""
            return Unknown("the sample forward pass did not run" + cause)
        if dp.status != "ok":
            return Unknown(f"the sample forward pass failed: {dp.error}")
        return None

    def _trace_measured(self, ids: list[str]) -> Verdict:
        unknown = self._dtype_path_known()
        if unknown:
            return unknown
        if not self.facts.dtype_path.measured:
            return Unknown("the check's sample forward passes are not measured against float64: `attn-doctor "
                           "trace` measures your model")
        return self._trace_finding(ids)

    def _trace_finding(self, ids: list[str]) -> Verdict:
        unknown = self._dtype_path_known()
        if unknown:
            return unknown
        found = [f for f in self.facts.dtype_path.findings if f.get("id") in ids]
        if not found:
            return False
        found.sort(key=lambda f: f.get("severity") != "error")
        first = found[0]
        # A tracer finding carries its own severity: the same dtype problem is an error at
        # flash-attn and a warning (a silent slow fallback) at SDPA.
        if first.get("severity") in ("error", "warning", "info"):
            self.severity = first["severity"]
        sink = _mapping(first.get("sink"))
        self.evidence.update(
            trace_message=first.get("message", ""),
            kernel_message=first.get("kernel_message") or "",
            site=f"{sink.get('file', '?')}:{sink.get('line', '?')}",
            sample=first.get("sample", "?"),
            count=len(found),
            dtype=self.facts.dtype_path.dtype,
            more="",
        )
        # a promotion inside an installed library (the sample's x_transformers, fla) is that
        # library's: a rule on its release that supersedes this one covers it
        libraries = {_mapping(_mapping(f.get("sink")).get("called_from")).get("library") for f in found}
        if libraries and None not in libraries:
            self.evidence["packages"] = self.evidence["library_code"] = " ".join(
                sorted(distribution_of(str(m)) for m in libraries))
        if len(found) > 1:
            others = [f"{_mapping(f.get('sink')).get('file', '?')}:{_mapping(f.get('sink')).get('line', '?')}" for f in found[1:4]]
            self.evidence["more"] = f" (and {len(found) - 1} more: {', '.join(others)}{', ...' if len(found) > 4 else ''})"
        return True

    def _sample_failed(self, want: bool) -> Verdict:
        unknown = self._dtype_path_known()
        if unknown:
            return unknown
        failed = [s for s in self.facts.dtype_path.samples if s.status == "failed"]
        if failed:
            self.evidence.update(sample=failed[0].name, sample_reason=failed[0].reason or "no reason given")
        return bool(failed) == want

    def _tool_missing(self, names: list[str]) -> Verdict:
        if not self.facts.tools:
            return Unknown("tools were not probed")
        return all(not self.facts.tools.get(n) or not self.facts.tools[n].present for n in names)

    def _marker(self, text: str) -> Verdict:
        if not self.facts.platform.system:
            return Unknown("the platform was not probed")
        from packaging.markers import InvalidMarker, Marker

        try:
            return Marker(text).evaluate(marker_environment(self.facts))
        except InvalidMarker:
            return False

    def _check(self, name: str) -> Verdict:
        try:
            evidence = self.checks[name](self.facts, self.data)
        except SkipRule as skip:
            return Unknown(str(skip))
        if evidence is None:
            return False
        evidence = dict(evidence)
        if evidence.get("severity") in ("error", "warning", "info"):
            self.severity = evidence.pop("severity")  # a check may grade what it found
        self.evidence.update(evidence)
        return True

    def _any(self, options: list[Condition]) -> Verdict:
        unknown = None
        for option in options:
            verdict = self.evaluate(option)
            if verdict is True:
                return True
            if isinstance(verdict, Unknown):
                unknown = unknown or verdict
        return unknown or False

    def _not(self, cond: Condition) -> Verdict:
        verdict = Evaluator(self.facts, self.checks, self.data).evaluate(cond)
        if isinstance(verdict, Unknown):
            return verdict
        return not verdict
