"""Where attn-doctor's processes keep the bytecode they compile: a folder only this user can write.

Python runs a `.pyc` it finds under a pycache prefix without asking who wrote it: it compares only
the source's mtime and size, which anyone can read. A prefix another user can write is therefore
a way to run their code as everyone who imports from it. The folder is `pycache/` in the user's
own cache folder (never under a shared ATTN_DOCTOR_CACHE_DIR), created 0700 and checked before
every use: a folder (not a link), owned by this user, writable by nobody else, inside folders no
other user can rename or replace. Anything else: no prefix, and one line saying why.

Kept free of attn-doctor's other modules: `python -m attn_doctor` imports it before the doctor's
own bytecode has a place (attn_doctor/__main__.py).
"""

from __future__ import annotations

import collections
import os
import shutil
import stat
import time
from typing import Optional

# The bytecode of a source folder that is gone (a deleted venv, a CI job's temporary one) is
# never read again, and Python never removes it: looked for once a day.
PRUNE_STAMP = ".pruned"
PRUNE_EVERY_S = 24 * 3600.0
PRUNE_BUDGET_S = 1.0


def user_folder() -> str:
    """The user's own cache folder for attn-doctor (platformdirs; XDG_CACHE_HOME on Linux)."""
    import platformdirs

    return platformdirs.user_cache_dir("attn-doctor")


def why_not_private(path: str) -> Optional[str]:
    """None where `path` is (now) a folder only this user can write; else why not, one line."""
    uid = os.geteuid()
    path = os.path.abspath(path)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as exc:
        return f"{path} cannot be made ({exc.strerror or exc})"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    if st.st_uid != uid:
        return f"{path} belongs to uid {st.st_uid}, not to you (uid {uid})"
    if st.st_mode & 0o022:
        return f"{path} can be written by others (mode {stat.S_IMODE(st.st_mode):04o})"
    if st.st_mode & 0o077:
        try:
            os.chmod(path, 0o700)  # ours and written by nobody else: only made private, as it would be made
        except OSError:
            pass
    # Whoever may rename or replace a folder above it may swap in a folder of their own.
    parent = os.path.dirname(os.path.realpath(path))
    while True:
        try:
            up = os.stat(parent)
        except OSError as exc:
            return f"{parent} cannot be read ({exc.strerror or exc})"
        if up.st_uid not in (uid, 0):
            return f"{parent} belongs to uid {up.st_uid}, who could replace {path}"
        if up.st_mode & 0o022 and not up.st_mode & stat.S_ISVTX:
            return f"{parent} can be written by others (mode {stat.S_IMODE(up.st_mode):04o}), who could replace {path}"
        above = os.path.dirname(parent)
        if above == parent:
            return None
        parent = above


def private_folder(name: str, what: str) -> tuple[Optional[str], Optional[str]]:
    """(the folder `name` in the user's own cache folder, made private, None), or (None, the
    one-line note, starting with `what`, saying why there is none)."""
    try:
        path = os.path.join(user_folder(), name)
    except Exception as exc:  # noqa: BLE001 - no home folder to find: no folder, never a crash
        return None, f"{what}: no user cache folder ({exc})"
    why = why_not_private(path)
    if why:
        return None, f"{what}: {why}"
    return path, None


def private_pycache() -> tuple[Optional[str], Optional[str]]:
    """(the folder for bytecode, None), or (None, the one-line note saying why there is none)."""
    return private_folder("pycache", "bytecode is not kept")


def private_kernels() -> tuple[Optional[str], Optional[str]]:
    """(the folder for compiled GPU kernels: FlashAttention 4's, Inductor's, triton's, None), or
    (None, the note saying why there is none). Same rules as bytecode: a compiled kernel is code
    the smoke tests load and run."""
    return private_folder("kernels", "compiled kernels are not kept")


def mirror(prefix: str, folder: str) -> str:
    """Where Python keeps, under the pycache prefix `prefix`, the bytecode of the sources in `folder`."""
    return os.path.join(prefix, os.path.abspath(folder).lstrip(os.sep))


def prune_pycache(folder: str, every_s: float = PRUNE_EVERY_S, budget_s: float = PRUNE_BUDGET_S) -> Optional[int]:
    """Remove, from a pycache prefix, the folders that mirror a source folder which is gone: Python
    keeps FOLDER/a/b/c/x.cpython-311.pyc for /a/b/c/x.py and never deletes it, so a user who checks
    many short-lived environments (CI jobs, `uv venv` per experiment) would keep every one's torch
    bytecode (some 300 MB each) for ever. At most once per `every_s` (the mtime of FOLDER/.pruned,
    touched first, so that processes started together do not all walk), breadth first (a deleted
    venv is near the top), for at most `budget_s`; a folder whose source is on a file system not
    mounted now is compiled again when it is back. Returns how many folders were removed, None when
    it was not yet time. Call only with a folder why_not_private passed: nobody else writes in it."""
    stamp = os.path.join(folder, PRUNE_STAMP)
    try:
        if time.time() - os.stat(stamp).st_mtime < every_s:
            return None
    except OSError:
        pass
    try:
        with open(stamp, "a"):
            os.utime(stamp)
    except OSError:
        return None
    deadline = time.monotonic() + budget_s
    removed = 0
    queue = collections.deque([(folder, os.sep)])
    while queue and time.monotonic() < deadline:
        mirror, source = queue.popleft()
        try:
            entries = list(os.scandir(mirror))
        except OSError:
            continue
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue  # bytecode files, the stamp; links Python never makes are left alone
            origin = os.path.join(source, entry.name)
            if os.path.isdir(origin):
                queue.append((entry.path, origin))
            else:
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += 1
    return removed
