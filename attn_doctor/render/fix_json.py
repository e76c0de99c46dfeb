"""The JSON output of `attn-doctor fix` (schema attn-doctor/fix v1, attn_doctor/schemas/fix.schema.json):
the plan and its outcome, the history, an undo. One document per command run, in the envelope every
command's JSON has, built here and written by the CLI's one seam."""

from __future__ import annotations

from typing import Optional

from ..schemas import envelope
from .json import plain_json



def _encode(payload: dict) -> bytes:
    return plain_json(envelope("fix", payload))


def plan_json(plan, journal, dry_run: bool, exit_code: int) -> bytes:
    """The plan, and after a run its outcome: every action with its status, the journal to undo."""
    target = plan.target
    return _encode({
        "run": journal.id if journal else None,
        "dry_run": dry_run,
        "source": plan.source,
        "python": plan.python,
        # which interpreter and why, as the human plan's header says it (None: a recorded report)
        "target": None if target is None else {"python": target.python, "source": target.source, "why": target.why,
                                               "ignored": target.ignored},
        "actions": [a.to_dict() for a in plan.actions],
        "manual": [vars(m) for m in plan.manual],
        "exit_code": exit_code,
    })


def history_json(runs) -> bytes:
    return _encode({"history": [r.data for r in runs]})


def undo_json(run_id: str, changed: Optional[list[str]]) -> bytes:
    return _encode({"undone": run_id, "changed": changed})


def interrupted_json(signal_name: str, run_id: Optional[str], restored: list[str], error: Optional[str], exit_code: int) -> bytes:
    """A fix stopped by a signal: what was put back, or why it could not be (then undo the run)."""
    return _encode({"run": run_id, "interrupted": signal_name, "restored": restored,
                    "restore_error": error, "exit_code": exit_code})
