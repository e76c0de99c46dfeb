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

import os
import stat
from typing import Optional


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
