"""The human output of `attn-doctor fix`: the plan, the outcome, the history, an undo."""

from __future__ import annotations

import shlex
from typing import Optional

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from .console import diff_renderable, whole_lines
from .human import target_line

MARKS = {
    "planned": ("→", "cyan"),
    "blocked": ("-", "yellow"),
    "verified": ("✓", "green"),
    "unverified": ("?", "cyan"),
    "applied": ("✓", "green"),
    "failed": ("✗", "red"),
    "rolled-back": ("↺", "red"),
}


# Prose wraps at the terminal's width; a command (`$ pip ...`, `fix --undo ID`) and a history
# record are printed unwrapped, so that they copy whole (a log has no width: nothing wraps there).


def render_plan(plan, console: Console, dry_run: bool, verbose: bool = False, title: Optional[str] = None) -> None:
    if not plan.actions and not plan.manual:
        console.print("[green]Nothing to fix:[/] no finding has a remedy to apply.")
        return
    title = title or ("Plan (dry run: nothing will change)" if dry_run else "Plan")
    console.print(f"[bold]{title}[/]")
    if plan.target is not None:
        # which environment and why, in check's words: a pipx-installed doctor fixes the active venv
        console.print(target_line(plan.target, "fixing"))
    elif plan.recorded_on is not None:
        console.print(Text(f"judged with a report recorded on {plan.recorded_on}: only config files are changed here, "
                           "not its packages", style="dim"))
    elif plan.python:
        console.print(Text(plan.python, style="dim"))
    if plan.installer:
        console.print(Text(f"installer: {plan.installer}" + (" (uv pip --python TARGET: files linked from its cache, the shortest window)"
                                                            if plan.installer == "uv" else ""), style="dim"))
    for action in plan.actions:
        _action_line(action, console)
        if action.argv:
            console.print(f"      $ {escape(shlex.join(action.argv))}", soft_wrap=True)
        if action.would_install:
            console.print(f"      would install: {escape(would_install_words(action.would_install))}", soft_wrap=True)
        elif action.resolve_error and action.status == "planned":
            console.print(f"      [dim]could not resolve in advance what it installs: {escape(action.resolve_error)}[/]", soft_wrap=True)
        if action.note:
            console.print(f"      [dim]note: {escape(action.note)}[/]")
        if action.status == "blocked":
            console.print(f"      [yellow]not applied: {escape(action.reason or '')}[/]")
        if action.diff and (dry_run or verbose or action.kind != "pip"):
            console.print(diff_renderable(action.diff, whole_lines(console), indent=0))
    if plan.manual:
        console.print("[bold]By hand[/] (no automatic remedy)")
        for item in plan.manual:
            console.print(f"  [dim]·[/] {item.rule}: {escape(item.summary)}")
            if item.command:
                console.print(f"      $ {escape(shlex.join(item.command))}", soft_wrap=True)
            if item.detail and verbose:
                console.print(f"      {escape(item.detail)}")


def would_install_words(items: list[dict]) -> str:
    """'x-transformers 1.30.2 (now 1.30.1), einx 0.3.0 (new)': every package, none left out."""
    words = []
    for item in items:
        now = item.get("installed")
        state = "new" if not now else "already there" if now == item.get("version") else f"now {now}"
        words.append(f"{item.get('name')} {item.get('version')} ({state})")
    new = sum(1 for item in items if not item.get("installed"))
    return ", ".join(words) + (f"; {new} new package{'s' if new != 1 else ''}" if new else "")


def render_unapplied(plan, console: Console, dry_run: bool, verbose: bool = False) -> None:
    """A plan that is not applied: a dry run, or nothing in it can run here."""
    # the header says a dry run only where one was asked for: here nothing can be applied
    render_plan(plan, console, dry_run=True, verbose=verbose,
                title=None if dry_run else "Plan (nothing here can be applied: nothing changed)")


def _action_line(action, console: Console) -> None:
    mark, style = MARKS.get(action.status, ("·", "dim"))
    unsafe = " [red](unsafe)[/]" if action.safety == "unsafe" else ""
    console.print(f"  [{style}]{mark}[/] {action.rule} [dim]{action.kind}[/]{unsafe}: {escape(action.summary)}")
    if action.safety == "unsafe" and action.why_unsafe:
        console.print(f"      [dim]why unsafe: {escape(action.why_unsafe)}[/]")


def render_outcome(plan, journal, console: Console) -> None:
    console.print("[bold]Result[/]")
    for action in plan.actions:
        mark, style = MARKS.get(action.status, ("·", "dim"))
        console.print(f"  [{style}]{mark} {action.status}[/] {action.rule}: {escape(action.summary)}")
        if action.reason and action.status != "verified":
            console.print(f"      {escape(action.reason)}")
        if action.patch_file:
            console.print(f"      patch written: {escape(action.patch_file)}")
    if journal is not None:
        console.print(f"Journal {journal.id}: undo with [bold]attn-doctor fix --undo {journal.id}[/]", soft_wrap=True)


def render_summary(plan, journal, console: Console) -> None:
    """fix -q: one line, the actions by status and how to undo."""
    counts: dict[str, int] = {}
    for action in plan.actions:
        counts[action.status] = counts.get(action.status, 0) + 1
    line = ", ".join(f"{n} {status}" for status, n in counts.items()) or "nothing to do"
    if journal is not None:
        line += f"; undo with attn-doctor fix --undo {journal.id}"
    console.print(line, markup=False, soft_wrap=True)


def render_history(runs, console: Console) -> None:
    if not runs:
        console.print("No fix runs recorded.")
        return
    for run in runs:
        data = run.data
        actions = data.get("actions") or []
        kept = sum(1 for a in actions if a.get("status") in ("verified", "unverified"))
        console.print(
            f"{run.id}  {data['status']:<11} {data['created']}  {kept}/{len(actions)} kept  "
            f"{len(data['files'])} file(s){'  packages' if data.get('packages_before') is not None else ''}  [dim]{escape(data.get('python') or '')}[/]",
            soft_wrap=True,
        )
        for a in actions:
            console.print(f"    {a.get('status', '?'):<11} {a.get('rule')}: {escape(a.get('summary', ''))}")


def render_undo(run_id: str, changed: list[str], console: Console, note: Optional[str] = None) -> None:
    if note:
        console.print(note)
    if not changed:
        console.print(f"Run {run_id}: already as it was before; marked undone.")
        return
    console.print(f"[bold]Undid {run_id}[/]:")
    for item in changed:
        console.print(f"  ↺ {escape(item)}")


def interrupted_line(run_id: Optional[str], restored: list[str], error: Optional[str]) -> str:
    """The one line a fix stopped by a signal ends with: what happened, and the state left."""
    if error:
        return f"interrupted: restoring failed ({error}): run attn-doctor fix --undo{' ' + run_id if run_id else ''}"
    put_back = [item for item in restored if not item.startswith("cleared ")]
    cleared = [item[len("cleared "):] for item in restored if item.startswith("cleared ")]
    done = ([f"restored {', '.join(put_back)}"] if put_back else []) + ([f"cleared pip's leftovers ({', '.join(cleared)})"] if cleared else [])
    return f"interrupted: {' and '.join(done) + '; ' if done else ''}nothing changed"
