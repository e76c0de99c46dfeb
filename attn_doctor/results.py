"""The Python API's result types: TraceReport (trace), Finding and PreflightResult (preflight), and
PreflightError, which carries them. attn_doctor/api.py returns and raises them, the framework
callbacks (attn_doctor/integrations/) pass them on; the documented names `attn_doctor.X` and
`attn_doctor.api.X` both reach them. A module of their own so that nothing that names them has to
import the API (the exceptions module once did, for PreflightError's annotations, and closed a
circle through the whole pipeline). The classes their annotations name are imported at run time
(msgspec structs, no torch): typing.get_type_hints() resolves them in this module's namespace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from .errors import AttnDoctorError
from .fleet.aggregate import FleetReport
from .report import Report

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class TraceReport:
    """The result of attn_doctor.trace(): what ``attn-doctor trace --json`` prints, typed.

    status: "ok"; "partial" (the forward stopped after reaching attention: what ran is judged);
        "no_attention" (the forward ran but reached no attention call: nothing was judged).
        (A trace that could not run raises ProbeError; bad arguments raise UsageError.)
    exit_code: as the CLI's: 0 clean (warnings allowed), 1 errors found, 3 nothing was judged.
    findings: one dict per problem: ``id`` (AD6xx), ``severity``, ``message``, ``sink`` (the
        attention call: ``file``, ``line``, ``source``, the dtypes of q/k/v), ``chain`` (the ops
        that promoted the tensor, each with its file and line), ``patch`` (a unified diff, or None).
    sinks: every attention call reached, with the dtypes it got and ``ok``.
    summary: counts (``sinks``, ``bad_sinks``, ``errors``, ``warnings``, ``ops``).
    notes: what the tracer did on the way (a copy on meta, a CPU retry, a stand-in).
    data: the whole JSON document (``to_dict()``), including fields not lifted out here.
    """

    status: str
    exit_code: int
    findings: list[dict[str, Any]]
    sinks: list[dict[str, Any]]
    summary: dict[str, int]
    notes: list[str]
    error: Optional[dict[str, Any]]
    routes: list[dict[str, Any]]
    data: dict[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TraceReport":
        return cls(status=str(data.get("status")), exit_code=int(data.get("exit_code", 3)),
                   findings=list(data.get("findings") or []), sinks=list(data.get("sinks") or []),
                   summary=dict(data.get("summary") or {}), notes=list(data.get("notes") or []),
                   error=data.get("error"), routes=list(data.get("routes") or []), data=data)

    @property
    def ok(self) -> bool:
        """True when the trace judged at least one attention call and found no error."""
        return self.exit_code == 0

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [f for f in self.findings if f.get("severity") == "error"]

    def to_dict(self) -> dict[str, Any]:
        """The JSON document, as ``attn-doctor trace --json`` prints it."""
        return self.data

    def to_json(self) -> str:
        return json.dumps(self.data, indent=2, default=str)


@dataclass(frozen=True)
class Finding:
    """One problem preflight() found, whichever part found it.

    source: "check" (a rule on this environment), "trace" (the model's attention dtypes) or "fleet"
        (a distributed job: ranks that fail or differ). rule: the rule id (AD301, AD601, ...).
    ranks: the ranks it concerns (fleet findings on rank 0); where: file:line (trace findings).
    """

    source: Literal["check", "trace", "fleet"]
    rule: str
    severity: Severity
    title: str
    message: str
    remedies: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    where: Optional[str] = None

    def __str__(self) -> str:
        ranks = f" [rank{'s' if len(self.ranks) > 1 else ''} {', '.join(map(str, self.ranks))}]" if self.ranks else ""
        message = self.message or self.title
        where = f" at {self.where}" if self.where and self.where not in message else ""
        text = f"{self.severity} {self.rule}{ranks}: {message}{where}"
        if self.remedies:
            text += "\n    fix: " + "\n    fix: ".join(self.remedies)
        return text


@dataclass(frozen=True)
class PreflightResult:
    """What preflight() found. ``ok``: nothing at or above ``fail_on``.

    findings: every problem (errors, warnings, and checks that could not run); failed: those at or
    above fail_on (what PreflightError carries). report: this process's check Report (the object
    ``check --json`` serialises). trace: the model's TraceReport (None without a model). fleet: on
    rank 0 of an initialised torch.distributed job, the fleet report of every rank (None elsewhere).
    rank: this process's rank in the job, None outside one.
    """

    ok: bool
    findings: tuple[Finding, ...]
    failed: tuple[Finding, ...]
    report: "Report"
    trace: Optional[TraceReport] = None
    fleet: Optional["FleetReport"] = None
    rank: Optional[int] = None


class PreflightError(AttnDoctorError):
    """preflight() found problems at or above its ``fail_on`` severity: stop before training.

    ``findings`` lists the ones that made it fail (each an attn_doctor.api.Finding: rule, severity,
    title, message, remedies); ``result`` is the whole PreflightResult (the check Report, the trace
    and, on rank 0 of a distributed job, the fleet report). str() of the error is a readable summary,
    one finding per line, so an uncaught PreflightError explains itself in the training log."""

    def __init__(self, message: str, findings: "list[Finding]", result: "Optional[PreflightResult]" = None):
        super().__init__(message)
        self.findings = findings
        self.result = result
