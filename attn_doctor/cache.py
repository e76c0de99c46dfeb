"""A cache for results that are a pure function of the installed code, computed once per key.

The sample forward pass judges tiny models of the installed attention libraries: its verdict
depends only on the code it imports, the Python, the dtype and the GPU capability it is judged
for. Computing it cold means importing those libraries (transformers alone took 10 s on an H200
node), so every process that needs the verdict of one key gets it from one computation:

- single-flight by content: the first process that needs a key claims it (a lease file beside the
  entry, `filelock.SoftFileLease`: exclusive creation, no fcntl, so it works on NFS and Lustre) and
  computes; any other process with the same key waits for the entry; a process with another key
  is never in the way. No roles: whoever comes first computes.
- a holder that died is replaced: on its own host at once (its PID is gone), from another host
  once its lease has gone unrefreshed for LEASE_S (the holder refreshes it from a thread).
- a computation that fails releases its waiters with its error (a failure record with a nonce the
  waiters did not see when they started), and is never reused by a later process.
- entries and failure records are written to a temporary file and renamed over the name, so a
  reader on any host sees the whole old or the whole new file; every computation appends one
  line to `<kind>/log` (the cache's own record of who computed what, and how long it took).

ATTN_DOCTOR_CACHE_DIR (or `check --cache-dir`) points it at a shared file system for a cluster.

Whoever can write the folder decides what a check says, so an entry is believed only when it is
whole and was written by someone trusted (README, "Security"): a regular file of at most
MAX_ENTRY_BYTES, its key recomputed from the inputs it records (an entry renamed onto another
key is not that key's), its value of the expected schema, and its file owned by this user, root
or the cache folder's owner; with trust "group" (ATTN_DOCTOR_CACHE_TRUST, `check --cache-trust`)
also by a member of the group of a setgid cache folder. Anything else is ignored, with a note
the caller shows under -v, and computed again. Entries record their writer (uid, host). Only data
is kept here: the bytecode the probes compile goes to a folder private to the user
(attn_doctor/bytecode.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

from . import __version__

CACHE_DIR_ENV = "ATTN_DOCTOR_CACHE_DIR"
# Every process sharing a cache folder must agree on the lease (filelock refuses a marker written
# under another one); the environment variable exists for tests that kill a holder on purpose.
LEASE_ENV = "ATTN_DOCTOR_CACHE_LEASE"
LEASE_S = 30.0
POLL_S = 0.1
TRUST_ENV = "ATTN_DOCTOR_CACHE_TRUST"
TRUST_LEVELS = ("owner", "group")
# A verdict with its inputs is a few tens of KiB; anything far larger is not one of ours.
MAX_ENTRY_BYTES = 1 << 20
MAX_TEXT = 200  # "by", "computed", a holder's name: short strings, printed


def cache_dir(override: Optional[os.PathLike] = None) -> Path:
    if override:
        return Path(override).expanduser()
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("attn-doctor"))


def key(kind: str, **parts: Any) -> str:
    blob = json.dumps({"kind": kind, "attn_doctor": __version__, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def inputs_of(**parts: Any) -> dict:
    """What a key is computed from, as an entry records it (JSON: the key recomputes from it)."""
    return json.loads(json.dumps(parts, default=str))


def trust_level(setting: Optional[str] = None) -> str:
    """The trust setting: the one given, else ATTN_DOCTOR_CACHE_TRUST, else "owner"."""
    value = (setting or os.environ.get(TRUST_ENV) or "owner").strip().lower()
    if value not in TRUST_LEVELS:
        raise ValueError(f"cache trust must be one of {', '.join(TRUST_LEVELS)}, not {value!r}")
    return value


def _member(uid: int, gid: int) -> bool:
    import grp
    import pwd

    try:
        user = pwd.getpwuid(uid)
        return user.pw_gid == gid or user.pw_name in grp.getgrgid(gid).gr_mem
    except KeyError:
        return False


def distrust(owner: int, folder: Optional[os.stat_result], trust: str) -> Optional[str]:
    """None where a file owned by uid `owner` in the cache folder (stat `folder`) is trusted;
    else whose it is, for the note."""
    me = os.geteuid()
    if owner in (me, 0) or (folder is not None and owner == folder.st_uid):
        return None
    if (trust == "group" and folder is not None and folder.st_mode & stat.S_ISGID
            and _member(owner, folder.st_gid)):
        return None
    if trust == "owner":
        return f"written by uid {owner}: not you, root or the cache folder's owner"
    return f"written by uid {owner}: not you, root, the cache folder's owner or a member of its setgid group"


def _lease_s() -> float:
    try:
        return max(1.0, float(os.environ.get(LEASE_ENV, LEASE_S)))
    except ValueError:
        return LEASE_S


def _read(path: Path) -> Optional[dict]:
    doc, _owner, _why = _read_bounded(path)
    return doc


def _read_bounded(path: Path) -> tuple[Optional[dict], Optional[int], Optional[str]]:
    """(the JSON object, its file's owner uid, None), or (None, owner, why not) for a file that is
    there but no entry (a link, a special file, too large, corrupt), or (None, None, None) when
    absent. Read through one descriptor, so the owner is that of the bytes read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, None, None
    except OSError as exc:
        return None, None, f"cannot be read ({exc.strerror or exc})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, st.st_uid, "not a regular file"
        if st.st_size > MAX_ENTRY_BYTES:
            return None, st.st_uid, f"{st.st_size} bytes, over the {MAX_ENTRY_BYTES} an entry may have"
        with os.fdopen(os.dup(fd), "rb") as fh:
            raw = fh.read(MAX_ENTRY_BYTES + 1)
    except OSError as exc:
        return None, None, f"cannot be read ({exc.strerror or exc})"
    finally:
        os.close(fd)
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None, st.st_uid, "not JSON"  # corrupt: as if absent
    except RecursionError:  # nested thousands of levels deep: no entry of ours, a hostile one
        return None, st.st_uid, "nested too deep to be an entry"
    return (data, st.st_uid, None) if isinstance(data, dict) else (None, st.st_uid, "not a JSON object")


def _write(path: Path, doc: dict) -> bool:
    # mkstemp's 0600 would hide a shared cache's entries from other users
    return write_atomic(path, json.dumps(doc).encode("utf-8"), 0o644)


def write_atomic(path: Path, data: bytes, mode: int) -> bool:
    """`data` into `path` with `mode`, atomically on any POSIX file system, NFS and Lustre included
    (written aside, renamed over); False where it cannot be written (a cache that cannot be written
    is not an error: the result is still used)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return True
    except OSError:
        return False


def _stamp() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def _host() -> str:
    return socket.gethostname().split('.')[0] or 'host'


def _me() -> str:
    return f"{_host()}:{os.getpid()}"


def _short(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_TEXT


@dataclass(frozen=True)
class Outcome:
    """How a wait ended: "hit" (entry holds the value), "failed" (entry is the failure record of
    the computation this process waited for), "claimed" (this process now computes: the holder
    released without a result, or died), "timeout"."""

    status: str
    entry: Optional[dict] = None
    waited_s: float = 0.0
    holder: Optional[str] = None  # who computed (or was computing) it: "host:pid"


class Flight:
    """Single-flight for one cache entry, across processes and hosts.

        flight = Flight("samples", digest)
        entry = flight.cached()                  # a stored entry, or None
        if entry is None and flight.claim():     # this process computes
            flight.store(value) / flight.fail(value, why)
        elif entry is None:
            outcome = flight.wait(timeout)       # another one computes
    """

    def __init__(self, kind: str, digest: str, root: Optional[os.PathLike] = None, inputs: Optional[dict] = None,
                 schema: Any = None, trust: Optional[str] = None):
        """inputs: what `digest` was computed from (key(kind, **inputs)), recorded in the entries
        this process writes; schema: the msgspec type a value must convert to; trust: the trust
        setting (trust_level)."""
        self.kind, self.digest = kind, digest
        self.inputs, self.schema, self.trust = inputs, schema, trust_level(trust)
        self.root = cache_dir(root)
        self.folder = self.root / kind
        self.ignored: list[str] = []  # one note per entry not believed (shown with -v)
        self._root_stat: Optional[os.stat_result] = None
        self.path = self.folder / f"{digest}.json"
        self.failure_path = self.folder / f"{digest}.failed.json"
        self._lock = None
        self._claimed_at: Optional[float] = None
        self._seen: tuple[Optional[str], Optional[str]] = (None, None)
        self.unlocked = False  # the cache folder is not writable: computing without a claim

    # -- reading
    def cached(self) -> Optional[dict]:
        """The stored entry, if it is whole and its writer trusted; else None (and a note)."""
        return self._believed(self.path)

    def _failure(self) -> Optional[dict]:
        return self._believed(self.failure_path)

    def _believed(self, path: Path) -> Optional[dict]:
        entry, owner, why = _read_bounded(path)
        if entry is not None:
            why = self._invalid(entry) or (distrust(owner, self._folder_stat(), self.trust) if owner is not None else None)
        if why is None:
            return entry
        note = f"ignored {self.kind} entry {path.name}: {why}; computed here instead"
        if note not in self.ignored:
            self.ignored.append(note)
        return None

    def _folder_stat(self) -> Optional[os.stat_result]:
        if self._root_stat is None:
            try:
                self._root_stat = os.stat(self.root)
            except OSError:
                return None
        return self._root_stat

    def _invalid(self, entry: dict) -> Optional[str]:
        """Why `entry` is not a whole entry of this key (None: it is)."""
        if entry.get("key") != self.digest:
            return "its key is not its name"
        inputs = entry.get("inputs")
        if not isinstance(inputs, dict) or key(self.kind, **inputs) != self.digest:
            return "its inputs do not give its key"
        if not isinstance(entry.get("value"), dict):
            return "no value"
        if not all(_short(entry.get(name)) for name in ("nonce", "by", "computed")):
            return "malformed"
        if self.schema is not None:
            import msgspec

            try:
                msgspec.convert(entry["value"], self.schema)
            except (msgspec.ValidationError, TypeError, ValueError) as exc:
                return f"its value is not a {getattr(self.schema, '__name__', 'verdict')} ({str(exc)[:120]})"
        return None

    def _nonces(self) -> tuple[Optional[str], Optional[str]]:
        entry, failure = self.cached(), self._failure()
        return (entry or {}).get("nonce"), (failure or {}).get("nonce")

    def holder(self) -> Optional[str]:
        """Who holds the claim now ("host:pid"), from the record it writes beside its lease (a
        name only, shown while waiting: bounded, never believed beyond that)."""
        record = _read(self.folder / f"{self.digest}.holder.json")
        holder = record.get("holder") if record else None
        return holder if _short(holder) else None

    # -- claiming
    def _lease(self):
        if self._lock is None:
            from filelock import SoftFileLease

            self._lock = SoftFileLease(str(self.folder / f"{self.digest}.lock"), lease_duration=_lease_s(), thread_local=False)
        return self._lock

    def claim(self, fresh: bool = False) -> bool:
        """Try to become the process that computes this key, without waiting. Remembers the entry
        and failure this process has seen, so that a later wait() takes only newer ones (`fresh`:
        an entry already stored does not count either: `--no-cache`)."""
        self._seen = self._nonces() if fresh else (None, self._nonces()[1])
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            acquired = self._try(0)
        except OSError:
            self.unlocked = True  # read-only or missing cache: compute alone, as without a cache
            self._claimed_at = time.monotonic()
            return True
        if acquired:
            self._on_claimed()
        return acquired

    def _try(self, timeout: float) -> bool:
        from filelock import Timeout

        try:
            self._lease().acquire(timeout=timeout, poll_interval=min(POLL_S / 2, max(timeout, 0.01)))
            return True
        except Timeout:
            return False

    def _on_claimed(self) -> None:
        self._claimed_at = time.monotonic()
        _write(self.folder / f"{self.digest}.holder.json", {"holder": _me(), "since": _stamp()})

    def wait(self, timeout: float, progress: Optional[Callable[[str], None]] = None) -> Outcome:
        """Another process holds the claim: wait until it stores the entry, fails, or goes away
        (then this process holds the claim, and computes). Call claim() first."""
        start = time.monotonic()
        deadline = start + timeout
        seen_entry, seen_failure = self._seen
        holder = self.holder()
        while True:
            waited = round(time.monotonic() - start, 3)
            entry = self.cached()
            if entry is not None and entry.get("nonce") != seen_entry:
                return Outcome("hit", entry, waited, entry.get("by"))
            failure = self._failure()
            if failure is not None and failure.get("nonce") != seen_failure:
                return Outcome("failed", failure, waited, failure.get("by"))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Outcome("timeout", None, waited, holder)
            if progress:
                progress(f"waiting for {holder or 'another process'} computing the {self.kind} verdict ({waited:.0f} s)")
            try:
                acquired = self._try(min(POLL_S * 2.5, remaining))
            except OSError:
                acquired = False
            if not acquired:
                holder = self.holder() or holder
                continue
            # The holder let go: with a result (taken above on the next pass), or without one
            # (it died, or was interrupted): then this process computes.
            entry, failure = self.cached(), self._failure()
            if entry is not None and entry.get("nonce") != seen_entry:
                self._release()
                return Outcome("hit", entry, round(time.monotonic() - start, 3), entry.get("by"))
            if failure is not None and failure.get("nonce") != seen_failure:
                self._release()
                return Outcome("failed", failure, round(time.monotonic() - start, 3), failure.get("by"))
            self._on_claimed()
            return Outcome("claimed", None, round(time.monotonic() - start, 3), holder)

    # -- finishing (the holder)
    def store(self, value: dict, **extra: Any) -> dict:
        """Publish the computed value and let the waiters go. Returns the entry as stored."""
        entry = dict(self._entry(value), **extra)
        _write(self.path, entry)
        self._log("computed", entry["seconds"])
        self._release()
        return entry

    def fail(self, value: dict, error: str, **extra: Any) -> dict:
        """The computation failed: its waiters get this record; later processes compute again."""
        entry = dict(self._entry(value), error=error, **extra)
        _write(self.failure_path, entry)
        self._log("failed", entry["seconds"])
        self._release()
        return entry

    def _entry(self, value: dict) -> dict:
        seconds = round(time.monotonic() - self._claimed_at, 3) if self._claimed_at else None
        return _entry(self.digest, value, self.inputs, seconds=seconds)

    def _log(self, what: str, seconds: Optional[float]) -> None:
        line = f"{_stamp()}\t{self.digest}\t{what}\t{_me()}\t{seconds}\n"
        try:
            # One short O_APPEND write per line: whole lines on a local file system; on NFS lines
            # from two hosts may interleave, which only this record (not the cache) suffers.
            fd = os.open(self.folder / "log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    def _release(self) -> None:
        if self._lock is not None and self._lock.is_locked:
            try:
                os.unlink(self.folder / f"{self.digest}.holder.json")
            except OSError:
                pass
            try:
                self._lock.release(force=True)
            except OSError:
                pass

    def abandon(self) -> None:
        """Let go of a claim without a result (the caller is shutting down)."""
        self._release()


@dataclass
class Done:
    """What one computation gave (a Job's finish): `value` to share; `keep`: later processes may
    reuse it (else it is a failure record, for the processes that waited on this one only, and
    `error` says why); `extra`: fields stored beside the value (JSON); `local`: what only this
    process sees (its probe's own run, what its child printed)."""

    value: Optional[dict]
    keep: bool = True
    error: Optional[str] = None
    extra: dict = field(default_factory=dict)
    local: Any = None


class Job(Protocol):
    def finish(self, timeout: float) -> Done: ...

    def close(self) -> None: ...


@dataclass
class Got:
    """A cached computation's answer. source: "cache" (stored earlier), "computed" (by this
    process), "shared" (computed by another process while this one waited), "failed" (that other
    process's computation failed: `error`), "none" (no answer: `error` says why)."""

    value: Optional[dict]
    source: str
    computed: Optional[str] = None  # when the value was computed (UTC, ISO 8601)
    by: Optional[str] = None  # who computed it: "host:pid"
    waited_s: float = 0.0
    error: Optional[str] = None
    local: Any = None
    entry: dict = field(default_factory=dict)  # the stored entry (its extra fields: "probe"...)


class Once:
    """One cached computation: its key (a kind and the inputs the result depends on) and the
    function that computes it, in one call. Every result a check caches goes through here.

        once = Once("stack", inputs, start, schema=Value).begin()   # cached, claimed, or waited for
        ...                                                        # the check's other probes run
        got = once.result(timeout)   # the stored value, another process's, or this one's
        once.close()                 # no claim and no child left behind, whatever happened

    start() begins the computation and returns a Job. It runs at once when this process claims
    the key, or later, in the waiting thread, when the process holding the key goes away without
    an answer. A value is stored when its Done says keep, else published as a failure record for
    the waiters alone. use_cache=False computes afresh (and stores); wait_s bounds the wait for
    another process (its own computation is bounded by its job's timeout)."""

    def __init__(self, kind: str, inputs: dict, start: Callable[[], Job], *, root: Optional[os.PathLike] = None,
                 trust: Optional[str] = None, schema: Any = None, use_cache: bool = True, wait_s: float = 150.0,
                 progress: Optional[Callable[[str], None]] = None):
        self.kind, self.inputs, self._start = kind, inputs, start
        self.key = key(kind, **inputs)
        self.flight = Flight(kind, self.key, root, inputs=inputs, schema=schema, trust=trust)
        self.use_cache, self.wait_s, self._progress = use_cache, wait_s, progress
        self._entry: Optional[dict] = None
        self._failure: Optional[dict] = None
        self._job: Optional[Job] = None
        self._error: Optional[str] = None
        self._thread: Optional[threading.Thread] = None
        self._computing = False
        self._closed = False
        self._lock = threading.Lock()  # a late claim in the waiting thread never starts after close()
        self.waited_s = 0.0

    @property
    def ignored(self) -> list[str]:
        """One note per cache entry not believed (shown with -v)."""
        return self.flight.ignored

    @property
    def hit(self) -> bool:
        """Answered from the cache without waiting or computing (known once begin() returned)."""
        return self._entry is not None and self._thread is None

    def begin(self) -> "Once":
        if self.use_cache:
            self._entry = self.flight.cached()
            if self._entry is not None:
                return self
        if self.flight.claim(fresh=not self.use_cache):
            self._run()
        else:
            self._thread = threading.Thread(target=self._wait, name=f"attn-doctor-{self.kind}-wait", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._computing = True
            try:
                self._job = self._start()
            except Exception as exc:  # noqa: BLE001 - a computation that cannot start is an answer too
                self._error = str(exc) or type(exc).__name__

    def _wait(self) -> None:
        outcome = self.flight.wait(self.wait_s, self._progress)
        self.waited_s = outcome.waited_s
        if outcome.status == "hit":
            self._entry = outcome.entry
        elif outcome.status == "failed":
            self._failure = outcome.entry
        elif outcome.status == "claimed":
            self._run()  # the holder went away without an answer: this process computes
        else:
            self._error = f"{outcome.holder or 'another process'} was still computing this {self.kind} result after {outcome.waited_s:.0f} s"

    def result(self, timeout: float) -> Got:
        """The answer, within `timeout` seconds of this call (a computation cut short is a failure)."""
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(max(0.0, timeout))
            if self._thread.is_alive():
                return Got(None, "none", waited_s=round(time.monotonic() - deadline + timeout, 3),
                           error=f"still waiting for another process computing this {self.kind} result")
        if self._entry is not None:
            return self._got(self._entry, "shared" if self._thread is not None else "cache")
        if self._failure is not None:
            got = self._got(self._failure, "failed")
            got.error = str(self._failure.get("error") or "failed")[:2000]
            return got
        if self._job is None:
            error = self._error or f"the {self.kind} computation did not start"
            if self._computing:
                self.flight.fail({}, error)
            return Got(None, "none", waited_s=self.waited_s, error=error)
        done = self._job.finish(max(1.0, deadline - time.monotonic()))
        if done.value is not None and done.keep:
            entry = self.flight.store(done.value, **done.extra)
        else:
            entry = self.flight.fail(done.value or {}, done.error or f"the {self.kind} computation failed", **done.extra)
        return Got(done.value, "computed", computed=entry.get("computed"), by=entry.get("by"), waited_s=self.waited_s,
                   error=done.error, local=done.local, entry=entry)

    def _got(self, entry: dict, source: str) -> Got:
        return Got(entry.get("value"), source, computed=entry.get("computed"), by=entry.get("by"), waited_s=self.waited_s, entry=entry)

    def close(self) -> None:
        """Never leave a claim or a computation behind (an interrupted check): the waiters go on."""
        with self._lock:
            self._closed = True
            job = self._job
        if job is not None:
            job.close()
        self.flight.abandon()


def _entry(digest: str, value: dict, inputs: Optional[dict], **extra: Any) -> dict:
    return {"nonce": secrets.token_hex(8), "key": digest, "by": _me(), "writer": {"uid": os.geteuid(), "host": _host()},
            "computed": _stamp(), **extra, "inputs": inputs, "value": value}


def computations(kind: str, digest: Optional[str] = None, root: Optional[os.PathLike] = None) -> list[dict]:
    """The cache's record of computations (each: time, key, what, by, seconds), oldest first."""
    try:
        text = (cache_dir(root) / kind / "log").read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 5 and (digest is None or parts[1] == digest):
            out.append({"time": parts[0], "key": parts[1], "what": parts[2], "by": parts[3], "seconds": parts[4]})
    return out
