"""The target environment's packages during a fix: reading what is installed (through the
target's own Python), running its installer (pip or uv, argument lists, shielded from the signals
that stop a fix), and putting the packages back as they were, leftovers of a half-finished install
included. apply.py runs a plan with these; nothing here edits a file of the user's."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Optional

from ..facts import Facts, canonical_name
from .journal import Journal
from .plan import fix_installer

PIP_TIMEOUT_S = 3600.0


class FixError(Exception):
    """A fix or an undo that could not complete: one line saying why."""


def read_packages(python: str) -> dict[str, str]:
    """name -> version of everything installed for `python` (the env probe, in a child)."""
    return {name: entry["version"] for name, entry in (_probe(python, "env").get("packages") or {}).items()}


def read_site(python: str) -> list[dict]:
    """Each site-packages folder of `python`: its entries and what each distribution's RECORD owns."""
    return _probe(python, "site").get("site") or []


def _probe(python: str, command: str) -> dict:
    from ..probes.runner import ProbeFailed, start_child

    try:
        return start_child(python, [command]).result(120)
    except ProbeFailed as exc:
        raise FixError(f"cannot read the installed packages of {python}: {exc}") from None


PREVIEW_TIMEOUT_S = 180.0
_UV_LINE = re.compile(r"^\s*(?P<op>[+-])\s+(?P<name>[A-Za-z0-9][\w.-]*)==(?P<version>\S+)")


def preview_install(argv: list[str], installed: dict[str, str], timeout: float = PREVIEW_TIMEOUT_S) -> tuple[list[dict], Optional[str]]:
    """What `argv` (a pip or uv install) would install, resolved by the installer itself without
    installing anything (pip's --dry-run --report, uv's --dry-run): [{name, version, installed}],
    `installed` being the version there now (None: a package new to the environment); or an error line."""
    if "install" not in argv:
        return [], "not an install"
    at = argv.index("install") + 1
    uv = Path(argv[0]).name.startswith("uv")
    extra = ["--dry-run"] if uv else ["--dry-run", "--quiet", "--report", "-"]
    try:
        proc = subprocess.run(argv[:at] + extra + argv[at:], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return [], f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return [], f"the installer did not resolve it within {timeout:.0f} s"
    if proc.returncode != 0:
        return [], _tail(proc.stderr or proc.stdout, 1)
    wanted: list[tuple[str, str]] = []
    if uv:
        for line in (proc.stderr + "\n" + proc.stdout).splitlines():
            m = _UV_LINE.match(line)
            if m and m.group("op") == "+":
                wanted.append((m.group("name"), m.group("version")))
    else:
        try:
            report = json.loads(proc.stdout)
            wanted = [(str(item["metadata"]["name"]), str(item["metadata"]["version"])) for item in report.get("install", [])]
        except (ValueError, KeyError, TypeError):
            return [], "pip gave no install report (pip 22.2 or newer resolves without installing)"
    now = {canonical_name(k): v for k, v in installed.items()}
    return [{"name": name, "version": version, "installed": now.get(canonical_name(name))} for name, version in wanted], None


def preview_plan(plan, facts: Facts, progress=None) -> None:
    """Each planned pip action of `plan`, resolved in advance: what it would install (its new
    packages among them), said before the plan is confirmed. Changes nothing in the environment."""
    installed = {name: p.version for name, p in (facts.packages or {}).items() if getattr(p, "version", None)}
    for action in plan.runnable:
        if action.kind != "pip" or not action.argv:
            continue
        if progress:
            progress(f"resolving what {action.requirement or 'the install'} would install")
        action.would_install, action.resolve_error = preview_install(action.argv, installed)


def _installer_argv(facts: Facts, verb: str, tool: Optional[str] = None) -> list[str]:
    python = facts.platform.python_executable
    if (tool or fix_installer(facts)) == "uv":
        return [facts.tools["uv"].path or "uv", "pip", verb, "--python", python]
    return [python, "-m", "pip", verb] + (["-y"] if verb == "uninstall" else [])


# The signals a fix turns into a transaction: stop, restore, say so, exit 128 + the signal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """A stop signal arrived while the fix was changing things (raised by the handler)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class FixInterrupted(Exception):
    """The fix was stopped by a signal; `restored` says what was put back, `error` what could not be."""

    def __init__(self, signum: int, run_id: Optional[str], restored: list[str], error: Optional[str]):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.run_id, self.restored, self.error = signum, run_id, restored, error


def _shield() -> None:
    # In a restoring child: the terminal's Ctrl-C and a SIGTERM to the process group must not stop
    # the restore half-way (SIGKILL still does; the next fix finishes the job).
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def run_command(argv: list[str], timeout: float = PIP_TIMEOUT_S, shielded: bool = False,
                scratch: Optional[str] = None) -> tuple[int, str]:
    """Run an installer, with its temporary files in `scratch` (Journal.scratch) where there is
    one; on an interruption (or a timeout) stop it before going on: SIGINT (pip cleans up what it
    can), then SIGTERM, then SIGKILL."""
    env = dict(os.environ, TMPDIR=scratch) if scratch else None
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env, preexec_fn=_shield if shielded else None)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        return 124, f"timed out after {timeout:.0f} s"
    except BaseException:
        _stop(proc)
        raise
    return proc.returncode, out or ""


def _stop(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGINT, 10), (signal.SIGTERM, 10), (signal.SIGKILL, 30)):
        if proc.poll() is not None:
            break
        try:
            proc.send_signal(sig)
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        except OSError:
            break
    if proc.stdout:
        proc.stdout.close()


def restore_packages(facts: Facts, before: dict[str, str], only: Optional[set[str]] = None,
                     site_before: Optional[list[dict]] = None, tool: Optional[str] = None,
                     scratch: Optional[str] = None) -> list[str]:
    """Put the package set back to `before` (restricted to `only`), whatever an installer killed
    half-way left: its `~` stash folders, module folders no distribution owns, dist-infos without
    RECORD, files RECORD names that are gone. Returns what was changed. site_before (read_site
    before the run) tells which top-level entries were there and whose they were; scratch is the
    installers' TMPDIR (Journal.scratch)."""
    python = facts.platform.python_executable
    site = read_site(python)
    now = read_packages(python)
    names = set(before) | set(now)
    if only is not None:
        names &= only
    owned_before = _owners(site_before) if site_before is not None else {}
    # Only what had a RECORD before the run can have lost it to the run (a conda package may
    # have none at all: it is left alone).
    had_record = {n for f in site_before or [] for n, d in f["dists"].items() if d["tops"] is not None}
    missing_before = {n: d.get("missing", 0) for f in site_before or [] for n, d in f["dists"].items()}
    present = {(f["path"], n) for f in site for n in f["names"]}
    broken = {n for n in names if n in before and n in now and now[n] == before[n] and n in had_record
              and not _complete(n, site, owned_before, missing_before.get(n, 0))}
    install = sorted(n for n in names if n in before and (now.get(n) != before[n] or n in broken))
    remove = sorted(n for n in names if n not in before and n in now)
    done: list[str] = []
    # A distribution without RECORD cannot be uninstalled by pip: take its files away by hand.
    for folder in site:
        for name, dist in folder["dists"].items():
            if (name in install or name in remove) and dist["tops"] is None:
                _remove_entries(folder, [dist["info"]] + _sole_tops(name, owned_before, folder["path"]))
                if name in remove:
                    remove.remove(name)
                    done.append(f"removed {name}")
    # A module folder of a package that is to be reinstalled but has no metadata now: pip would
    # copy the old release over the new one's files; clear it first.
    for name in install:
        if not any(name in f["dists"] for f in site):
            for folder in site:
                _remove_entries(folder, [t for t in _sole_tops(name, owned_before, folder["path"]) if (folder["path"], t) in present])
    if remove:
        code, out = run_command(_installer_argv(facts, "uninstall", tool) + remove, shielded=True, scratch=scratch)
        if code != 0:
            raise FixError(f"could not remove {', '.join(remove)}: {_tail(out)}")
        done += [f"removed {n}" for n in remove]
    if install:
        argv = _installer_argv(facts, "install", tool) + ["--no-deps", "--force-reinstall"] + [f"{n}=={before[n]}" for n in install]
        code, out = run_command(argv, shielded=True, scratch=scratch)
        if code != 0:
            raise FixError(f"could not reinstall {', '.join(f'{n}=={before[n]}' for n in install)}: {_tail(out)}")
        done += [f"{n} {before[n]}" for n in install]
    done += _clear_leftovers(python, site_before, set(install) | set(remove))
    return done


def _owners(site: list[dict]) -> dict[tuple[str, str], list[str]]:
    """(folder, top-level entry) -> the distributions whose RECORD names it."""
    out: dict[tuple[str, str], list[str]] = {}
    for folder in site or []:
        for name, dist in folder["dists"].items():
            for top in dist["tops"] or []:
                out.setdefault((folder["path"], top), []).append(name)
    return out


def _sole_tops(name: str, owned: dict, folder: str) -> list[str]:
    """The top-level entries of `folder` that only `name` owned before the run (never a shared
    namespace folder such as nvidia/), dist-infos aside."""
    return sorted(top for (where, top), owners in owned.items()
                  if where == folder and owners == [name] and not top.endswith(".dist-info"))


def _complete(name: str, site: list[dict], owned_before: dict, missing_before: int) -> bool:
    """The distribution has its RECORD, every top-level entry it owned before the run, and no
    more missing files than then (pip's uninstall, killed, leaves the metadata and some files)."""
    for folder in site:
        if name in folder["dists"]:
            dist = folder["dists"][name]
            if dist["tops"] is None or dist.get("missing", 0) > missing_before:
                return False
            names = set(folder["names"])
            return all(top in names for (where, top), owners in owned_before.items() if where == folder["path"] and name in owners)
    return False


def _remove_entries(folder: dict, entries: list[str]) -> None:
    for entry in entries:
        _remove(Path(folder["path"]) / entry)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def _clear_leftovers(python: str, site_before: Optional[list[dict]], changed: set[str]) -> list[str]:
    """After the package set is back: pip's `~` stash folders (at the top, and inside the folders
    of the packages that changed: pip stashes a `__pycache__` it cannot map to RECORD on its own,
    as `~-pycache__`), and top-level entries that were not there before the run and that no
    installed distribution owns (a half-copied new package)."""
    cleared = []
    site = read_site(python)
    before_names = {(f["path"], n) for f in site_before or [] for n in f["names"]}
    owned_now = _owners(site)
    for folder in site:
        for entry in folder["names"]:
            key = (folder["path"], entry)
            stash = entry.startswith("~")
            orphan = site_before is not None and key not in before_names and key not in owned_now and not entry.startswith(".")
            if (stash or orphan) and key not in before_names:
                _remove(Path(folder["path"]) / entry)
                cleared.append(f"cleared {entry}")
        tops = {top for (where, top), owners in owned_now.items() if where == folder["path"] and set(owners) & changed}
        for top in sorted(tops):
            base = Path(folder["path"]) / top
            if not base.is_dir() or base.is_symlink() or top.endswith(".dist-info"):
                continue
            for root, dirs, files in os.walk(base):
                for name in [n for n in dirs + files if n.startswith("~")]:
                    _remove(Path(root) / name)
                    cleared.append(f"cleared {Path(root, name).relative_to(folder['path'])}")
                dirs[:] = [d for d in dirs if not d.startswith("~")]
    return cleared


def _tail(output: str, lines: int = 3) -> str:
    meaningful = [line.strip() for line in output.strip().splitlines() if line.strip() and not line.startswith("  ")]
    errors = [line for line in meaningful if line.startswith("ERROR") or "error" in line.lower()]
    chosen = (errors or meaningful)[-lines:]
    return " | ".join(chosen)[:600] or "no output"
