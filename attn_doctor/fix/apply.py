"""Applying a plan: snapshot -> apply -> verify -> roll back; and undo. Every change is journaled.

The only module that mutates the user's environment or files (through edits.atomic_write and the
target's pip, always as argument lists).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from ..facts import Facts
from ..report import Report
from .edits import EditError, apply_settings, atomic_write
from .journal import Journal, JournalError, Lock, interrupted_runs, state_dir
from .patches import patch_file_name, verify_fla_states_edit
from .plan import FIRED, Action, Plan

PIP_TIMEOUT_S = 3600.0
Progress = Optional[Callable[[str], None]]


class FixError(Exception):
    """A fix or an undo that could not complete: one line saying why."""


# ---------------------------------------------------------------- packages


def read_packages(python: str) -> dict[str, str]:
    """name -> version of everything installed for `python` (the env probe, in a child)."""
    from ..probes.runner import ProbeFailed, start_child

    try:
        data = start_child(python, ["env"]).result(120)
    except ProbeFailed as exc:
        raise FixError(f"cannot read the installed packages of {python}: {exc}") from None
    return {name: entry["version"] for name, entry in (data.get("packages") or {}).items()}


def _installer_argv(facts: Facts, verb: str) -> list[str]:
    from ..remedies import installer

    python = facts.platform.python_executable
    if installer(facts) == "uv":
        base = [facts.tools["uv"].path or "uv", "pip", verb, "--python", python]
        return base
    return [python, "-m", "pip", verb] + (["-y"] if verb == "uninstall" else [])


def run_command(argv: list[str], timeout: float = PIP_TIMEOUT_S) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:.0f} s"
    return proc.returncode, (proc.stdout or "") + (proc.stderr or "")


def restore_packages(facts: Facts, before: dict[str, str], only: Optional[set[str]] = None) -> list[str]:
    """Put the package set back to `before` (restricted to `only`); returns what was changed."""
    python = facts.platform.python_executable
    now = read_packages(python)
    names = set(before) | set(now)
    if only is not None:
        names &= only
    install = sorted(f"{n}=={before[n]}" for n in names if n in before and now.get(n) != before[n])
    remove = sorted(n for n in names if n not in before and n in now)
    done = []
    if remove:
        code, out = run_command(_installer_argv(facts, "uninstall") + remove)
        if code != 0:
            raise FixError(f"could not remove {', '.join(remove)}: {_tail(out)}")
        done += [f"removed {n}" for n in remove]
    if install:
        code, out = run_command(_installer_argv(facts, "install") + ["--no-deps"] + install)
        if code != 0:
            raise FixError(f"could not reinstall {', '.join(install)}: {_tail(out)}")
        done += install
    return done


def _tail(output: str, lines: int = 3) -> str:
    meaningful = [line.strip() for line in output.strip().splitlines() if line.strip() and not line.startswith("  ")]
    errors = [line for line in meaningful if line.startswith("ERROR") or "error" in line.lower()]
    chosen = (errors or meaningful)[-lines:]
    return " | ".join(chosen)[:600] or "no output"


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


def restore_run(journal: Journal) -> list[str]:
    """Undo one run: files back byte for byte (mode too), packages back to the recorded set."""
    changed = []
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
        changed += restore_packages(facts, before)
    journal.set_status("undone")
    return changed


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
    try:
        recover_interrupted(root, progress)
        journal = Journal.create(root, facts.platform.python_executable, plan.source, command)
        journal.data["tools"] = {k: {"present": v.present, "path": v.path} for k, v in facts.tools.items()}
        pip_actions = [a for a in actions if a.kind == "pip"]
        if pip_actions:
            note("recording the installed packages")
            journal.data["packages_before"] = read_packages(facts.platform.python_executable)
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
        if any(a.kind in ("pip", "config") for a in applied):
            note("re-running the checks")
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
        journal.set_status("applied" if kept or patch_files else "rolled-back")
        return journal
    finally:
        lock.release()


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
        code, output = run_command(action.argv)
        after = read_packages(facts.platform.python_executable)
        action.settings = {"packages_before": before}
        if code != 0:
            action.settings = {}
            action.status = "failed"
            action.reason = f"pip exited {code}: {_tail(output)}"
            action.output = output[-4000:]
            if after != before:  # pip died half-way: put back what it changed
                try:
                    restore_packages(facts, before)
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


def _still_concerns(action: Action, result) -> bool:
    if action.kind != "config":
        return True
    files = set(result.evidence.get("config_files") or [])
    return not files or bool(files & set(action.files))


def _roll_back(action: Action, facts: Facts, journal: Journal, plan: Plan) -> None:
    if action.kind == "pip":
        before = action.settings.get("packages_before") or {}
        changed = set(action.settings.get("changed") or [])
        restore_packages(facts, before, only=changed)
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
