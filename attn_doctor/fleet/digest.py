"""The fleet view of a report (what must agree between nodes) and its digest.

Two nodes are "identical" when their fleet views are equal. The view is the report as JSON with
what legitimately differs per node or per run taken out:

- when and how the report was made: ``created``, ``command``, ``source``, ``summary``, ``exit_code``
  (the last two follow from the results);
- who the node is: ``facts.platform.hostname``, device ``index`` (and any ``uuid``, ``serial``,
  ``pci_bus_id`` a probe may add), launcher variables in ``facts.env`` (RANK, LOCAL_RANK, SLURM_*,
  TORCHELASTIC_*, CUDA_VISIBLE_DEVICES, ...);
- timings and measurements: every ``duration_s`` and ``*_ms`` (the smoke tests' ``kernel_ms``,
  ``total_ms``), what a probe process printed (``stderr``), and the smoke tests' ``rel_err`` / ``rel_err_grad`` (backward kernels accumulate
  in a nondeterministic order; the verdict, ``status`` against ``tolerance``, stays);
- a result's ``evidence``, ``remedies``, ``links`` and ``traceback`` (its ``status`` and ``message``
  stay: they carry the versions and GPUs the rule looked at).

Everything else must agree: tool version, driver, GPU models and capabilities, torch / triton /
flash-attn versions and builds, import statuses and errors, packages, the dtype path, rule results.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

# Keys dropped wherever they appear in the facts (and any key ending in _ms: a timing).
VOLATILE_KEYS = frozenset(
    # `cached`, `computed_by`, `waited_s`: when and by which process the sample verdict was
    # computed (one rank computes it, the others with its key reuse it); `device_index`: the GPU
    # a rank smoke-tested (its own, LOCAL_RANK); `stderr`: what a probe process printed, evidence
    # that can name a pid, a temporary path or a time; `capability_cached`, `key`: when the stack's
    # results were computed, and the hash of what they and a node's depend on (a boot id among it)
    {"duration_s", "hostname", "uuid", "serial", "pci_bus_id", "rel_err", "rel_err_grad", "cached", "computed_by", "waited_s",
     "device_index", "group_seconds", "group_phases", "capability_cached", "key", "stderr"}
)
# Environment variables that differ per rank or per node by design.
PER_RANK_ENV = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "GROUP_RANK",
        "ROLE_RANK",
        "NODE_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_WORLD_SIZE",
        "ROLE_WORLD_SIZE",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "HOSTNAME",
        "PMI_RANK",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
    }
)
PER_RANK_ENV_PREFIXES = ("SLURM_", "SLURMD_", "TORCHELASTIC_")


def fleet_view(doc: dict) -> dict:
    """The part of a report (as JSON builtins) that must be the same on every node."""
    facts = doc.get("facts") or {}
    view_facts = _strip(facts)
    env = view_facts.get("env")
    if isinstance(env, dict):
        view_facts["env"] = {k: v for k, v in env.items() if k not in PER_RANK_ENV and not k.startswith(PER_RANK_ENV_PREFIXES)}
    for path in (("gpu", "devices"), ("torch", "devices")):
        devices = view_facts.get(path[0], {}).get(path[1])
        if isinstance(devices, list):
            view_facts[path[0]][path[1]] = [{k: v for k, v in d.items() if k != "index"} if isinstance(d, dict) else d for d in devices]
    probes = view_facts.get("probes")
    if isinstance(probes, list):  # by name: the order the probes finished in is not a difference
        view_facts["probes"] = {p.get("name", str(i)): {k: v for k, v in p.items() if k != "name"} for i, p in enumerate(probes) if isinstance(p, dict)}
    results = {}
    for r in doc.get("results") or []:
        if isinstance(r, dict) and "rule" in r:
            results[r["rule"]] = {"status": r.get("status"), "message": r.get("message")}
    return {"tool": (doc.get("tool") or {}).get("version"), "facts": view_facts, "results": results}


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE_KEYS and not k.endswith("_ms")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def digest_of(view: dict) -> str:
    """A short, stable hash of a fleet view (sorted keys: the same view always hashes the same)."""
    return hashlib.sha256(msgspec.json.encode(view, order="sorted")).hexdigest()[:16]


def report_digest(doc: dict) -> str:
    return digest_of(fleet_view(doc))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted paths to leaves: dicts by key, lists of dicts by position ([0]), lists of scalars whole."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        if not value and prefix:
            out[prefix] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        if not value:
            out[prefix] = []
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


ABSENT = "(absent)"

# Differences are listed most telling first: hardware and driver, torch, kernels, rule results.
PRIORITY = (
    "facts.gpu.",
    "facts.torch.",
    "facts.imports.",
    "results.",
    "facts.packages.torch.",
    "facts.packages.triton.",
    "facts.packages.flash-attn.",
    "facts.packages.xformers.",
    "facts.packages.transformers.",
    "facts.dtype_path.",
    "tool",
    "facts.platform.",
    "facts.packages.",
    "facts.tools.",
    "facts.probes.",
    "facts.env.",
)


def _rank_of(path: str) -> tuple[int, str]:
    for i, prefix in enumerate(PRIORITY):
        if path.startswith(prefix):
            return i, path
    return len(PRIORITY), path


def differences(reference: dict, other: dict) -> list[tuple[str, Any, Any]]:
    """(path, reference value, other value) for every leaf of two fleet views that differs."""
    a, b = flatten(reference), flatten(other)
    out = []
    for path in sorted(set(a) | set(b), key=_rank_of):
        va, vb = a.get(path, ABSENT), b.get(path, ABSENT)
        if va != vb:
            out.append((path, va, vb))
    return out
