"""Interrupting a real `attn-doctor fix` at a spread of moments: shared by the unit suite's small
pip variant (tests/fix/test_fix_interrupt.py) and the CUDA-torch one (tests/realenv)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional


def children(pid: int) -> list[int]:
    """The direct children of `pid`, from /proc (Linux)."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def cmdline(pid: int) -> list[str]:
    try:
        return [a for a in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if a]
    except OSError:
        return []


def wait_for_installer(proc: subprocess.Popen, timeout: float = 180) -> Optional[int]:
    """The pid of the doctor's installer child (`-m pip install` or `uv pip install`) that changes
    the environment, once it runs (not the --dry-run that resolves the plan first); None when the
    doctor ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for child in children(proc.pid):
            argv = cmdline(child)
            joined = " ".join(argv)
            if " pip install" in joined and "--dry-run" not in argv and ("-m pip" in joined or Path(argv[0]).name == "uv" if argv else False):
                return child
        time.sleep(0.002)
    return None


def installer_seconds(argv: list[str], env: dict) -> float:
    """How long the installer child of one uninterrupted run lives: the span the interruptions are
    spread over (the caller undoes the run)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    child = wait_for_installer(proc)
    start = time.monotonic()
    while child is not None and Path(f"/proc/{child}").exists() and proc.poll() is None:
        try:
            if Path(f"/proc/{child}/stat").read_text().split(") ")[-1].startswith("Z"):
                break  # exited, not yet reaped
        except OSError:
            break
        time.sleep(0.005)
    seconds = time.monotonic() - start
    proc.wait(timeout=900)
    return seconds


def site_packages(venv: Path) -> list[Path]:
    return sorted(venv.glob("lib/python*/site-packages"))


def stash_folders(venv: Path) -> list[str]:
    """pip's `~` stash entries anywhere in site-packages (a package's own `~-pycache__` too).

    Read while pip moves and deletes folders: one that vanishes mid-walk is passed over (os.walk
    ignores it), where Path.rglob raised FileNotFoundError."""
    found = []
    for sp in site_packages(venv):
        for root, dirs, files in os.walk(sp):
            found += [str((Path(root) / name).relative_to(sp)) for name in dirs + files if name.startswith("~")]
    return sorted(found)


def freeze(python: str, env: Optional[dict] = None) -> str:
    return subprocess.run([python, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, timeout=120, env=env).stdout


@dataclass
class Outcome:
    signal: str
    delay: float
    when: str  # what the doctor was doing: "installer" (its child ran), "after" (it had ended)
    code: int
    last_line: str
    recovered_by: Optional[str] = None  # SIGKILL: the command that restored
    recovery_output: str = ""
    restored: bool = False
    leftovers: list[str] = field(default_factory=list)
    temp_left: list[str] = field(default_factory=list)  # what remains in the doctor's TMPDIR


def interrupt_once(argv: list[str], env: dict, sig: int, delay: float, python: str, venv: Path, before: str,
                   recover: Callable[[], subprocess.CompletedProcess], undo: Callable[[], subprocess.CompletedProcess],
                   wait_child: bool = True, frozen: Optional[Callable[[], str]] = None) -> Outcome:
    """Start the doctor in its own process group, wait for its installer child (wait_child) or for
    nothing, sleep `delay`, send `sig` to the whole group as a terminal or Slurm would; after a
    SIGKILL run `recover` (fix --undo or the next fix), after a fix that finished first `undo`.
    The outcome says whether `pip freeze` is the one before, which `~` folders remain, and what
    remains in the TMPDIR `env` names (the installers' unpacked wheels, where a killed pip leaves them)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, start_new_session=True)
    when = "start"
    if wait_child:
        when = "installer" if wait_for_installer(proc) is not None else "after"
    time.sleep(delay)
    if proc.poll() is not None:
        when = "after"
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        when = "after"
    out, err = proc.communicate(timeout=600)
    if proc.returncode == 0:
        when = "after"  # the fix was applied before the signal: stop signals are ignored from then on
    lines = [line for line in (err or "").strip().splitlines() if line.strip()]
    outcome = Outcome(signal.Signals(sig).name, delay, when, proc.returncode, lines[-1] if lines else "")
    if sig == signal.SIGKILL or proc.returncode == 0:
        # Killed: the next command finds the journal. Finished before the signal: undo it.
        done = undo() if proc.returncode == 0 else recover()
        outcome.recovered_by = " ".join(str(a) for a in done.args[3:])
        outcome.recovery_output = (done.stdout or "") + (done.stderr or "")
    outcome.leftovers = stash_folders(venv)
    outcome.temp_left = temp_entries(env)
    outcome.restored = (frozen() if frozen else freeze(python)) == before
    return outcome


def temp_entries(env: dict) -> list[str]:
    """The entries of the TMPDIR `env` names (none where it names none)."""
    folder = env.get("TMPDIR")
    return sorted(p.name for p in Path(folder).iterdir()) if folder and Path(folder).is_dir() else []


def table(outcomes: list[Outcome]) -> str:
    """tries / restored / leftovers per signal, for the report."""
    rows = ["signal   tries  restored  leftovers  temp left  moments (installer running / before / after)"]
    for name in ("SIGINT", "SIGTERM", "SIGKILL"):
        mine = [o for o in outcomes if o.signal == name]
        if not mine:
            continue
        moments = "/".join(str(sum(o.when == w for o in mine)) for w in ("installer", "start", "after"))
        rows.append(f"{name:<8} {len(mine):>5}  {sum(o.restored for o in mine):>8}  {sum(bool(o.leftovers) for o in mine):>9}  {sum(bool(o.temp_left) for o in mine):>9}  {moments}")
    return "\n".join(rows)


def counts(variable: str, default: str) -> dict[int, int]:
    """SIGINT=10,SIGTERM=5,SIGKILL=10 from an environment variable (the full run), else `default`."""
    text = os.environ.get(variable) or default
    out = {}
    for part in text.split(","):
        name, _, n = part.partition("=")
        out[int(getattr(signal, name.strip()))] = int(n)
    return out


def spread(n: int, longest: float) -> list[float]:
    """n delays from 0 to `longest`, evenly spread; a single one late in the span, where the
    installer has begun to change things (pip downloads and unpacks first)."""
    return [round(longest * 0.7, 3)] if n <= 1 else [round(longest * i / (n - 1), 3) for i in range(n)]


PYTHON = sys.executable
