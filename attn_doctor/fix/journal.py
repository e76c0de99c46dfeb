"""The fix journal: what the environment and the files were before a fix, kept until undone.

    STATE/lock                    held (flock) by the fix or undo that is running
    STATE/runs/ID/journal.json    the run: status, target, package set before, files, actions
    STATE/runs/ID/files/N         byte copies of the files the run edits
    TMPDIR/attn-doctor-fix-ID-*   the installers' temporary files while the run installs (see scratch)

STATE is ``$ATTN_DOCTOR_STATE_DIR`` or the user's state directory (platformdirs). The backups hold
copies of training configs, which can hold tokens: the folders are 0700, the lock and the journal
0600, and a backup has its source's mode, never more (a 0600 config stays 0600). The backups are
written and fsynced, then the journal (atomically) with status ``applying``, and only then does
anything change. A journal still ``applying`` while nobody holds the lock belongs to a fix that
was killed: the next ``fix`` (or ``fix --undo``) restores from it.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Optional

from .edits import atomic_write, fsync_dir

STATE_ENV = "ATTN_DOCTOR_STATE_DIR"

# planning: backups being written, nothing changed yet; applying: changes under way;
# applied: done (some actions may have been rolled back); rolled-back: every action failed and
# was rolled back; undone: restored by --undo, or by the recovery of a killed fix; interrupted:
# stopped by a signal and restored there and then.
OPEN_STATUSES = ("planning", "applying")
DONE_STATUSES = ("undone", "interrupted")


class JournalError(Exception):
    pass


class UnknownRun(JournalError):
    """An ID that names no run (or several): the user's input is wrong, a usage error."""


def state_dir() -> Path:
    env = os.environ.get(STATE_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_state_dir("attn-doctor", appauthor=False))


PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(path: Path, narrow: bool = False) -> Path:
    """`path` as a folder only its owner can enter, created 0700 with any missing parents (as the
    XDG base directory spec asks). narrow: also take group and other bits off a folder of ours
    that exists (runs/: an older attn-doctor made it 0755, and the copies below must not stay
    reachable through it); the state folder itself may be one the user named, so it is left as is."""
    path = Path(path)
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            pass
    if narrow:
        _narrow(path, PRIVATE_DIR)
    return path


def _narrow(path: Path, mode: int) -> None:
    try:
        st = path.lstat()
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & ~mode:
            os.chmod(path, stat.S_IMODE(st.st_mode) & mode)
    except OSError:
        pass  # not ours to change; what we create inside is private all the same


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Lock:
    """An exclusive flock on STATE/lock; released by the kernel if the holder dies."""

    def __init__(self, root: Path):
        private_dir(root)
        private_dir(root / "runs", narrow=True)
        self.path = root / "lock"
        self.fd: Optional[int] = None

    def acquire(self) -> None:
        self.fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE)
        _narrow(self.path, PRIVATE_FILE)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            raise JournalError(f"another attn-doctor fix is running (lock {self.path})") from None

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


class Journal:
    def __init__(self, directory: Path, data: dict):
        self.dir = directory
        self.data = data

    # -- creation and persistence

    @classmethod
    def create(cls, root: Path, python: str, source: str, command: list[str]) -> "Journal":
        now = _dt.datetime.now(_dt.timezone.utc)
        run_id = now.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
        directory = root / "runs" / run_id
        private_dir(root)
        private_dir(root / "runs", narrow=True)
        directory.mkdir(mode=PRIVATE_DIR)
        (directory / "files").mkdir(mode=PRIVATE_DIR)
        journal = cls(
            directory,
            {
                "id": run_id,
                "created": now.replace(microsecond=0).isoformat(),
                "status": "planning",
                "pid": os.getpid(),
                "python": python,
                "source": source,
                "command": command,
                "packages_before": None,
                "files": [],
                "actions": [],
            },
        )
        journal.save()
        return journal

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def status(self) -> str:
        return self.data["status"]

    def save(self) -> None:
        atomic_write(self.dir / "journal.json", json.dumps(self.data, indent=2).encode() + b"\n", mode=PRIVATE_FILE)

    def set_status(self, status: str) -> None:
        self.data["status"] = status
        self.save()

    # -- snapshots

    def snapshot_file(self, path: Path) -> dict:
        """A byte copy of `path` (fsynced) before it is edited; once per file per run."""
        path = Path(path).absolute()
        for entry in self.data["files"]:
            if entry["path"] == str(path):
                return entry
        index = len(self.data["files"])
        entry: dict[str, Any] = {"path": str(path), "backup": None, "existed": path.exists(), "mode": None}
        if entry["existed"]:
            with open(path, "rb") as src:
                mode = stat.S_IMODE(os.fstat(src.fileno()).st_mode)
                data = src.read()
            backup = self.dir / "files" / str(index)
            # Created owner-only, then given the source's permission bits at most: a copy is never
            # readable by anyone the original was not.
            fd = os.open(str(backup), os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE)
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), mode & 0o755)
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            fsync_dir(backup.parent)
            entry.update(backup=backup.name, mode=mode, sha256_before=sha256(data))
        self.data["files"].append(entry)
        return entry

    # -- the installers' temporary folder

    def scratch(self) -> Optional[str]:
        """The TMPDIR of this run's installers: a folder of its own in the user's temporary folder
        (where the user has chosen to have room), named in the journal before an installer runs.
        pip killed by SIGTERM or SIGKILL leaves the wheels it was unpacking in its TMPDIR (a CUDA
        torch's: gigabytes); whoever ends or restores this run removes the folder (clear_scratch).
        None where no folder can be made there: the installers use the usual one."""
        path = self.data.get("scratch")
        if path and self._scratch_is_ours(path):
            return path
        try:
            path = tempfile.mkdtemp(prefix=f"attn-doctor-fix-{self.id}-")
        except OSError:
            return None
        self.data["scratch"] = path
        self.save()
        return path

    def clear_scratch(self) -> None:
        path = self.data.get("scratch")
        if path and self._scratch_is_ours(path):
            shutil.rmtree(path, ignore_errors=True)

    def _scratch_is_ours(self, path: str) -> bool:
        """The journal names the folder; only one this run made is ever removed: its name, a real
        folder (no link), this user's."""
        if not isinstance(path, str) or not os.path.basename(path).startswith(f"attn-doctor-fix-{self.id}-"):
            return False
        try:
            st = os.lstat(path)
        except OSError:
            return False
        return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()

    def original_bytes(self, path: str) -> Optional[bytes]:
        for entry in self.data["files"]:
            if entry["path"] == str(Path(path).absolute()) and entry["backup"]:
                return (self.dir / "files" / entry["backup"]).read_bytes()
        return None


def list_runs(root: Optional[Path] = None) -> list[Journal]:
    root = root or state_dir()
    runs = []
    for path in sorted((root / "runs").glob("*/journal.json")) if (root / "runs").is_dir() else []:
        try:
            runs.append(Journal(path.parent, json.loads(path.read_text())))
        except (OSError, ValueError):
            continue  # a run killed before its first journal write: nothing was changed
    return runs


def find_run(run_id: Optional[str], root: Optional[Path] = None) -> Journal:
    runs = list_runs(root)
    if run_id:
        matches = [r for r in runs if r.id == run_id or r.id.startswith(run_id)]
        if len(matches) != 1:
            raise UnknownRun(
                f"no fix run {run_id!r} (`attn-doctor fix --history` lists them)" if not matches else f"{run_id!r} matches {len(matches)} runs; give more of the id"
            )
        return matches[0]
    changed = [r for r in runs if r.data["files"] or r.data.get("packages_before")]
    undoable = [r for r in changed if r.status not in DONE_STATUSES]
    if not undoable:
        last = changed[-1] if changed else None
        if last is not None:
            raise JournalError(f"nothing left to undo (run {last.id} was {_undone_words(last)})")
        raise JournalError("nothing to undo: no fix run has changed anything (`attn-doctor fix --history` lists them)")
    return undoable[-1]


def _undone_words(run: "Journal") -> str:
    when = run.data.get("undone_at")
    how = "restored after an interruption" if run.status == "interrupted" else "undone"
    return f"{how} at {when}" if when else how


def interrupted_runs(root: Optional[Path] = None) -> list[Journal]:
    """Runs killed mid-way (call with the lock held: nobody else is running)."""
    return [r for r in list_runs(root) if r.status in OPEN_STATUSES]
