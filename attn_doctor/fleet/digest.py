"""The fleet view of a report (what must agree between nodes) and its digest.

Two nodes are "identical" when their fleet views are equal. The view is the report as JSON with
what legitimately differs per node or per run taken out:

- when and how the report was made: ``schema``, ``created``, ``command``, ``source``, ``summary``,
  ``exit_code`` (the last two follow from the results);
- who the node is: ``facts.platform.hostname``, device ``index`` (and any ``uuid``, ``serial``,
  ``pci_bus_id`` a probe may add), launcher variables in ``facts.env`` (RANK, LOCAL_RANK, SLURM_*,
  TORCHELASTIC_*, CUDA_VISIBLE_DEVICES, ...);
- timings and measurements: every ``duration_s`` and ``*_ms`` (the smoke tests' ``kernel_ms``,
  ``total_ms``), what a probe process printed (``stderr``), and the smoke tests' ``rel_err`` / ``rel_err_grad`` (backward kernels accumulate
  in a nondeterministic order; the verdict, ``status`` against ``tolerance``, stays);
- which process computed a shared result and when: ``cached``, ``computed_by``, ``waited_s``,
  ``capability_cached``, the cache ``key`` (a hash with the node's boot id among its inputs), the
  smoke groups' ``group_seconds`` and ``group_phases``, and ``device_index`` (each rank tests its own GPU);
- a result's ``evidence``, ``remedies``, ``links`` and ``traceback`` (its ``status`` and ``message``
  stay: they carry the versions and GPUs the rule looked at).

Everything else must agree: tool version, driver, GPU models and capabilities, torch / triton /
flash-attn versions and builds, import statuses and errors, packages, the dtype path, rule results.

The view is decoded from the report's bytes as typed structs (view.py): the fields above are left
out of the view's types (wherever they appear, and every field ending in ``_ms``), and the digest is
a hash of the view encoded with sorted keys, so that telling thousands of identical nodes apart
costs a typed decode each; only a group's representative is made builtins and compared in full.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .view import PER_RANK_ENV, PER_RANK_ENV_PREFIXES, VOLATILE_KEYS, view_digest
from .view import fleet_view as _fleet_view

__all__ = ["PER_RANK_ENV", "PER_RANK_ENV_PREFIXES", "VOLATILE_KEYS", "differences", "fleet_view", "flatten", "report_digest"]


def fleet_view(doc: Any) -> dict:
    """The part of a valid report (JSON builtins or a Report) that must be the same on every node."""
    return _fleet_view(msgspec.json.encode(doc))


def report_digest(doc: Any) -> str:
    """The fleet digest of a valid report (JSON builtins or a Report); view.read_report gives it
    for a report's bytes in the same pass that validates them."""
    return view_digest(msgspec.json.encode(doc))


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

# Differences are listed most telling first: torch's presence, hardware and driver, torch, kernels,
# rule results.
PRIORITY = (
    # whether torch is there at all: what makes a node useless before any detail
    "facts.torch.status",
    "facts.torch.error",
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
    """(path, reference value, other value) for every leaf of two fleet views that differs, most
    telling first. Equal subtrees are passed over whole (compared in C), so that an odd group costs
    by what differs, not by the size of the report: flatten's leaves, only where they differ."""
    out: list[tuple[str, Any, Any]] = []
    _differ(reference, other, "", out)
    return sorted(out, key=lambda d: _rank_of(d[0]))


def _differ(a: Any, b: Any, prefix: str, out: list) -> None:
    if a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict) and (a and b or not prefix):
        for key in {**a, **b}:  # both orders' keys, once each
            va, vb = a.get(key, ABSENT), b.get(key, ABSENT)
            if va != vb:
                _differ(va, vb, f"{prefix}.{key}" if prefix else str(key), out)
        return
    # a leaf, a list, or a side that is absent or empty: flatten both here and compare their leaves
    fa = flatten(a, prefix) if a is not ABSENT else {}
    fb = flatten(b, prefix) if b is not ABSENT else {}
    for path in {**fa, **fb}:
        va, vb = fa.get(path, ABSENT), fb.get(path, ABSENT)
        if va != vb:
            out.append((path, va, vb))
