"""Applying a plan: snapshot -> apply -> verify -> roll back; and undo. Every change is journaled.

The only module that mutates the user's environment or files (through edits.atomic_write and the
target's pip, always as argument lists).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

from ..facts import Facts
from ..report import Report
from .edits import EditError, apply_settings, atomic_write
from .journal import Journal, JournalError, Lock, interrupted_runs, sha256, state_dir
from .patches import patch_file_name, verify_fla_states_edit
from .packages import (STOP_SIGNALS, FixError, FixInterrupted, Interrupted, _tail, read_packages, read_site,
                       restore_packages, run_command)
from .plan import FIRED, Action, Plan

Progress = Optional[Callable[[str], None]]


# ---------------------------------------------------------------- recovery


def recover_interrupted(root: Optional[Path] = None, progress: Progress = None) -> list[str]:
    """Restore the state before every fix that was killed mid-way. Call with the lock held."""
    restored = []
    for journal in interrupted_runs(root):
        if progress:
            progress(f"restoring the state before the interrupted fix {journal.id}")
        restore_run(journal)
        restored.append(journal.id)
    return restored


class EditedSince(JournalError):
    """A file the run wrote was changed afterwards: undoing would drop those changes."""


def edited_since(journal: Journal) -> list[str]:
    """The files the run wrote that are no longer what it left (the user kept editing them)."""
    edited = []
    for entry in journal.data["files"]:
        if "sha256_after" not in entry:
            continue  # a run killed before it finished: nobody edited what it half wrote
        try:
            current = sha256(Path(entry["path"]).read_bytes())
        except FileNotFoundError:
            current = None
        except OSError:
            current = "unreadable"
        if current != entry["sha256_after"]:
            edited.append(entry["path"])
    return edited


def record_written(journal: Journal) -> None:
    """What the run left in each file it touched, so that an undo can tell the user's later edits."""
    for entry in journal.data["files"]:
        try:
            entry["sha256_after"] = sha256(Path(entry["path"]).read_bytes())
        except FileNotFoundError:
            entry["sha256_after"] = None
        except OSError:
            continue


def kept_name(path: Path, run_id: str) -> Path:
    """Where --keep-edits keeps the user's version: beside the file, never over another file."""
    candidate = path.with_name(f"{path.name}.edited-{run_id}")
    n = 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.edited-{run_id}-{n}")
    return candidate


def restore_run(journal: Journal, status: str = "undone", keep_edits: bool = False) -> list[str]:
    """Undo one run: files back byte for byte (mode too), packages back to the recorded set. A file
    the user changed after the run wrote it is never overwritten silently: EditedSince, before
    anything changes; with keep_edits, the user's version is kept beside it first."""
    edited = edited_since(journal)
    if edited and not keep_edits:
        shown = ", ".join(edited)
        raise EditedSince(f"nothing undone: {shown} changed after fix {journal.id} wrote {'it' if len(edited) == 1 else 'them'}, and "
                          f"undoing would lose those edits. `attn-doctor fix --undo {journal.id} --keep-edits` restores the file as it "
                          "was before the fix and keeps your edited version beside it")
    changed = []
    for file in edited:
        path = Path(file)
        if path.exists():
            side = kept_name(path, journal.id)
            atomic_write(side, path.read_bytes(), mode=path.stat().st_mode & 0o7777)
            changed.append(f"kept your edited {path} as {side}")
    for entry in reversed(journal.data["files"]):
        path = Path(entry["path"])
        if entry["existed"]:
            original = (journal.dir / "files" / entry["backup"]).read_bytes()
            try:
                current = path.read_bytes()
            except FileNotFoundError:
                current = None
            if current != original or (path.stat().st_mode & 0o7777) != entry["mode"]:
                atomic_write(path, original, mode=entry["mode"])
                changed.append(str(path))
        elif path.exists():
            path.unlink()
            changed.append(f"removed {path}")
    before = journal.data.get("packages_before")
    if before is not None:
        facts = _facts_for(journal)
        try:
            changed += restore_packages(facts, before, site_before=journal.data.get("site_before"),
                                        tool=journal.data.get("installer"), scratch=journal.scratch())
        finally:
            journal.clear_scratch()
    journal.data["undone_at"] = _now()
    journal.set_status(status)
    return changed


def _now() -> str:
    import datetime as _dt

    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _facts_for(journal: Journal) -> Facts:
    import msgspec

    from ..facts import Tool

    facts = Facts()
    facts.platform.python_executable = journal.data["python"]
    facts.tools = msgspec.convert(journal.data.get("tools") or {}, dict[str, Tool])
    return facts


# ---------------------------------------------------------------- apply


def apply_plan(
    plan: Plan,
    facts: Facts,
    verify: Callable[[], Report],
    command: list[str],
    patch_dir: Path,
    progress: Progress = None,
    root: Optional[Path] = None,
    check_edit: Callable[[str, str], Optional[str]] = verify_fla_states_edit,
    refused: Progress = None,
    ignore_after: bool = False,
) -> Optional[Journal]:
    """Run the plan's runnable actions, journaled; verify; roll back what did not help.
    check_edit(python, fla_dir) runs fla's edited op: None when it cannot be run here (no GPU),
    "" when it works, else why it does not (then the edit is rolled back)."""
    note = progress or (lambda _m: None)
    root = root or state_dir()
    actions = plan.runnable
    if not actions and not any(a.kind == "patch" and a.diff for a in plan.actions):
        return None
    try:
        lock = Lock(root)
        lock.acquire()
    except (JournalError, OSError) as exc:
        raise FixError(str(exc)) from None
    journal: Optional[Journal] = None
    refuse, stop = _stop_handlers(refused)
    previous = _set_handlers(refuse)  # an earlier killed fix is restored first, not stopped half-way
    try:
        recover_interrupted(root, progress)
        _set_handlers(stop)
        journal = Journal.create(root, facts.platform.python_executable, plan.source, command)
        return _apply(plan, facts, verify, patch_dir, note, journal, check_edit)
    except Interrupted as exc:
        # The handler has already made further stop signals refused: the restore runs to its end.
        raise _transaction_stopped(exc.signum, journal) from None
    finally:
        # ignore_after (a process about to exit, the CLI): once anything changed, stop signals stay
        # ignored while the outcome is reported; otherwise the caller's handlers come back.
        if ignore_after and journal is not None:
            _set_handlers(signal.SIG_IGN)
        else:
            _put_back_handlers(previous)
        if journal is not None:
            journal.clear_scratch()
        lock.release()


def _stop_handlers(refused: Progress):
    """(refuse, stop): while the fix changes things, `stop` turns a stop signal into Interrupted
    once; while it then restores, `refuse` refuses further ones (said through `refused`), since a
    restore stopped half-way is the state the transaction exists to avoid. SIGKILL cannot be
    refused: the next fix or fix --undo finishes the restore from the journal."""

    def refuse(signum, _frame):
        if refused:
            refused(f"{signal.Signals(signum).name} ignored: restoring the state before the fix, which must not stop "
                    "half-way (it takes seconds; kill -9 leaves the rest to `attn-doctor fix --undo`)")

    def stop(signum, _frame):
        _set_handlers(refuse)
        raise Interrupted(signum)

    return refuse, stop


def _set_handlers(handler) -> dict:
    """Install `handler` for the stop signals (main thread only); returns the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}


def _put_back_handlers(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@contextmanager
def stop_signals_refused(refused: Progress = None):
    """A restore (fix --undo, the recovery of a killed fix) runs to its end: stop signals are refused."""
    previous = _set_handlers(_stop_handlers(refused)[0])
    try:
        yield
    finally:
        _put_back_handlers(previous)


def _transaction_stopped(signum: int, journal: Optional[Journal]) -> "FixInterrupted":
    if journal is None:
        return FixInterrupted(signum, None, [], None)
    try:
        return FixInterrupted(signum, journal.id, restore_run(journal, status="interrupted"), None)
    except (FixError, EditError, JournalError, OSError) as exc:
        return FixInterrupted(signum, journal.id, [], str(exc))


def _apply(plan: Plan, facts: Facts, verify, patch_dir: Path, note, journal: Journal, check_edit) -> Journal:
    actions = plan.runnable
    journal.data["tools"] = {k: {"present": v.present, "path": v.path} for k, v in facts.tools.items()}
    pip_actions = [a for a in actions if a.kind == "pip"]
    if pip_actions:
        note("recording the installed packages")
        journal.data["installer"] = "uv" if pip_actions[0].argv and Path(pip_actions[0].argv[0]).name == "uv" else "pip"
        journal.data["packages_before"] = read_packages(facts.platform.python_executable)
        journal.data["site_before"] = read_site(facts.platform.python_executable)
    patch_files = _patch_files(plan, patch_dir)
    for path in [f for a in actions for f in a.files] + list(patch_files):
        journal.snapshot_file(Path(path))
    journal.data["actions"] = [a.to_dict() for a in plan.actions]
    journal.set_status("applying")  # from here on, a kill leaves a journal to restore from

    for path, text in patch_files.items():
        atomic_write(Path(path), text.encode("utf-8"))
    for action in actions:
        note(f"applying {action.rule}: {action.summary}")
        _apply_one(action, facts, journal)
        _save_actions(journal, plan)

    applied = [a for a in actions if a.status == "applied"]
    for action in applied:
        if action.rule == "AD402":  # an unsafe source edit proves itself where it can run
            _verify_source_edit(action, facts, journal, note, check_edit)
    traced = plan.traced and any(a.kind == "patch" and a.rule != "AD402" for a in applied)
    if traced or any(a.kind in ("pip", "config") for a in applied):
        note("re-running the checks" + (" and tracing the model again" if traced else ""))
        _verify(applied, verify(), facts, journal, plan, note)
    for action in applied:
        if action.status == "applied":
            action.status = "unverified"
            action.reason = action.reason or (
                "the tracer judged this on its sample models: run `attn-doctor trace` on your model to confirm"
                if action.kind == "patch" and action.rule != "AD402"
                else "the rule judges versions, which a source patch does not change: re-run your training to confirm"
                if action.rule == "AD402"
                else None
            )
    kept = [a for a in actions if a.status in ("verified", "unverified")]
    journal.data["actions"] = [a.to_dict() for a in plan.actions]
    record_written(journal)
    journal.set_status("applied" if kept or patch_files else "rolled-back")
    return journal


def _save_actions(journal: Journal, plan: Plan) -> None:
    journal.data["actions"] = [a.to_dict() for a in plan.actions]
    journal.save()


def _patch_files(plan: Plan, patch_dir: Path) -> dict[str, str]:
    """The .patch files to write for source patches (written even without --apply-patch)."""
    out = {}
    for action in plan.actions:
        if action.kind == "patch" and action.rule != "AD402" and action.diff and action.status in ("planned", "blocked"):
            path = Path(patch_dir) / patch_file_name(action.rule, action.files[0])
            action.patch_file = str(path.absolute())
            out[action.patch_file] = action.diff
    return out


def _apply_one(action: Action, facts: Facts, journal: Journal) -> None:
    if action.kind == "pip":
        before = read_packages(facts.platform.python_executable)
        code, output = run_command(action.argv, scratch=journal.scratch())
        after = read_packages(facts.platform.python_executable)
        action.settings = {"packages_before": before}
        if code != 0:
            action.settings = {}
            action.status = "failed"
            action.reason = f"pip exited {code}: {_tail(output)}"
            action.output = output[-4000:]
            if after != before:  # pip died half-way: put back what it changed
                try:
                    restore_packages(facts, before, site_before=journal.data.get("site_before"),
                                     tool=journal.data.get("installer"), scratch=journal.scratch())
                    action.reason += " (the packages it had changed were put back)"
                except FixError as exc:
                    action.reason += f"; restoring failed too: {exc} (`attn-doctor fix --undo {journal.id}` retries)"
            return
        changed = {n for n in set(before) | set(after) if before.get(n) != after.get(n)}
        action.settings = {"packages_before": {n: before[n] for n in changed if n in before}, "changed": sorted(changed)}
        action.status = "applied"
        return
    for file, new in action.new_bytes.items():
        try:
            atomic_write(Path(file), new)
        except OSError as exc:
            action.status = "failed"
            action.reason = f"{file}: cannot write: {exc.strerror or exc}"
            return
    action.status = "applied"


def _verify_source_edit(action: Action, facts: Facts, journal: Journal, note, check_edit) -> None:
    """fla's states_in_fp32 edit: run the edited op on the GPU; roll the file back if it fails."""
    file = Path(action.files[0])
    fla_dir = str(file.parents[2])  # .../fla/ops/gsa/chunk.py -> .../fla
    note(f"running fla's edited GSA op on the GPU ({action.rule}; fla autotunes its kernels: minutes)")
    why = check_edit(facts.platform.python_executable, fla_dir)
    if why is None:
        action.reason = ("no GPU here to run the edited kernel: run your training once to confirm (with fla 0.2.2 and "
                         "Triton 3.6 the edit made GSA's bf16 forward fail to compile: fp32 states at a tl.dot with bf16 q)")
        return
    if why == "":
        action.status = "verified"
        action.reason = "GSA's forward and backward ran in bf16 on this GPU after the edit"
        return
    note(f"rolling back {action.rule}")
    original = journal.original_bytes(str(file))
    try:
        if original is None:
            raise OSError("no copy of the original in the journal")
        atomic_write(file, original)
        action.status = "rolled-back"
        action.reason = f"the edited op fails on this GPU, so the edit was undone: {why}"
    except OSError as exc:
        action.status = "failed"
        action.reason = f"the edited op fails ({why}) and restoring {file} failed: {exc} (`attn-doctor fix --undo {journal.id}`)"


def _verify(applied: list[Action], report: Report, facts: Facts, journal: Journal, plan: Plan, note) -> None:
    by_rule = {r.rule: r for r in report.results}
    failed = []
    for action in applied:
        if action.kind == "patch":
            if plan.traced and action.rule != "AD402":
                left = _still_traced(action, report)
                if left:
                    failed.append((action, SimpleNamespace(message=left)))
                else:
                    action.status = "verified"
                    action.reason = "traced again: no %s at the patched lines" % action.rule
            continue
        result = by_rule.get(action.rule)
        if result is None or result.status == "skipped":
            action.status = "unverified"
            action.reason = f"the re-check could not judge {action.rule}" + (f": {result.reason}" if result and result.reason else "")
        elif result.status in FIRED and _still_concerns(action, result):
            failed.append((action, result))
        else:
            action.status = "verified"
    for action, result in failed:
        note(f"rolling back {action.rule}")
        try:
            _roll_back(action, facts, journal, plan)
            action.status = "rolled-back"
            action.reason = f"{action.rule} still fires after the change: {result.message}"
        except (FixError, EditError, OSError) as exc:
            action.status = "failed"
            action.reason = f"{action.rule} still fires, and rolling back failed: {exc} (`attn-doctor fix --undo {journal.id}`)"


def _still_traced(action: Action, report: Report) -> Optional[str]:
    """The message of a finding of the patch's rule that the new trace still makes in a patched
    file (the call the patch was for, or one its cast did not reach), else None."""
    files = {str(Path(f).resolve()) for f in action.files}
    for finding in report.facts.dtype_path.findings:
        sink = finding.get("sink") or {}
        where = sink.get("file")
        if finding.get("id") == action.rule and where and str(Path(where).resolve()) in files:
            return str(finding.get("message") or action.rule)
    if report.facts.dtype_path.status != "ok":
        return "the model could not be traced again: %s" % (report.facts.dtype_path.error or report.facts.dtype_path.status)
    return None


def _still_concerns(action: Action, result) -> bool:
    if action.kind != "config":
        return True
    files = set(result.evidence.get("config_files") or [])
    return not files or bool(files & set(action.files))


def _roll_back(action: Action, facts: Facts, journal: Journal, plan: Plan) -> None:
    if action.kind == "pip":
        before = action.settings.get("packages_before") or {}
        changed = set(action.settings.get("changed") or [])
        restore_packages(facts, before, only=changed, site_before=journal.data.get("site_before"),
                         tool=journal.data.get("installer"), scratch=journal.scratch())
        return
    for file in action.files:
        # The file as the *other* kept actions leave it: the original with their settings re-applied.
        text = journal.original_bytes(file)
        if text is None:
            continue
        for other in plan.actions:
            if other is action or other.kind != "config" or file not in other.files:
                continue
            if other.status in ("applied", "verified", "unverified"):
                text = apply_settings(Path(file), text, {k: v for k, v in other.settings.items()})
        atomic_write(Path(file), text)
