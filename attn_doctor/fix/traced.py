"""fix --trace MODULE:FACTORY: the check's dtype path is the user's model instead of the built-in
sample. The model is traced in a fresh process of the target interpreter (so that tracing again
after a patch reads the patched file), its findings take the place of the sample's, and the rules
judge them: the tracer's patches become the plan's patch steps, verified by tracing again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import msgspec

from ..facts import DtypePath
from ..report import Report


class TraceFailed(Exception):
    """The model could not be traced: its one-line reason (a usage error or a failed build)."""

    def __init__(self, message: str, usage: bool):
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class TraceRequest:
    target: str
    options: dict[str, Any] = field(default_factory=dict)  # trace's own: dtype, autocast, device, train, ...


def traced_report(report: Report, request: TraceRequest, recipes, fail_on: str, progress=None,
                  timeout: float = 1800) -> Report:
    """``report`` judged again with the dtype path of the user's model."""
    from ..core import diagnose
    from ..tracing.runs.launch import run_child

    python = report.facts.platform.python_executable or None
    traced = run_child("trace", dict(request.options, target=request.target, routes=False), python=python,
                       timeout=timeout, progress=progress)
    status = traced.get("status")
    error = traced.get("error") or {}
    if status in ("usage_error", "failed") or (status != "ok" and not traced.get("findings")):
        message = " ".join(str(error.get("message") or status or "the trace did not run").split())
        raise TraceFailed("--trace %s: %s" % (request.target, message), usage=status == "usage_error")
    dtype_path = DtypePath(status="ok", device=traced.get("device"), dtype=traced.get("dtype"),
                           autocast=traced.get("autocast"), verdict=_verdict(traced),
                           findings=list(traced.get("findings") or []))
    facts = msgspec.structs.replace(report.facts, dtype_path=dtype_path)
    return diagnose(facts, recipes, fail_on, report.source)


def _verdict(traced: dict) -> Optional[str]:
    severities = {f.get("severity") for f in traced.get("findings") or ()}
    return "error" if "error" in severities else "warning" if "warning" in severities else "pass"
