"""Where the probe children keep what they compile: torch's bytecode and the smoke tests' kernels,
in folders private to this user (attn_doctor/bytecode.py), never in the target's site-packages or
in a shared cache folder, whose compiled code another user could forge."""

from __future__ import annotations

import os
import threading
from typing import Optional

from ..facts import ProbeRun
from .target.library_bytecode import VARIABLE as LIBRARY_PYCACHE


def bytecode_env(env_data: Optional[dict], libraries: tuple[str, ...] = ()) -> tuple[dict, Optional[ProbeRun]]:
    """Where the target's torch or transformers cannot be imported from the bytecode beside them
    (uv installs without it; PIP_NO_COMPILE; a read-only site-packages; an image whose build touched
    the sources after compiling them), every probe child would compile them from source, every
    check (on a 2-core CPU: 2 s of torch's 4 s import, 5 s of the transformers sample's 8.5 s). The
    children then keep their bytecode in a folder only this user can write (PYTHONPYCACHEPREFIX,
    attn_doctor/bytecode.py): never in the target's site-packages, never in a shared cache folder,
    whose bytecode another user could forge. Where there is no such folder: compiled every time,
    and a note (a skipped "bytecode" probe) says why."""
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        return {}, None
    modules = (env_data or {}).get("modules") or {}
    bytecode = (env_data or {}).get("bytecode") or {}
    states = [bytecode.get(name, "unknown") for name in ("torch", "transformers") if modules.get(name)]
    # torch's own bytecode is fine, an attention library has none (installed by uv beside a pip torch):
    # only that library's modules keep theirs in the folder (target/library_bytecode.py)
    libraries = [name for name in libraries if modules.get(name) and bytecode.get(name) == "missing"]  # a stale one is compiled again whatever
    torch_fresh = all(state in ("fresh", None) for state in states)  # None: no Python sources to compile
    if torch_fresh and not libraries:
        return {}, None
    from ..bytecode import private_pycache, prune_pycache

    folder, why = private_pycache()
    whose = ", ".join(libraries) if torch_fresh else "torch"
    if folder is None:
        return {}, ProbeRun(name="bytecode", status="skipped", error=f"{why}: the probes compile {whose} on every check")
    # Once a day, beside the probes: the bytecode of environments deleted since (a daemon thread:
    # what it has not removed when the check ends is removed next time).
    threading.Thread(target=_quietly, args=(prune_pycache, folder), daemon=True, name="attn-doctor-prune-pycache").start()
    if torch_fresh:
        return {LIBRARY_PYCACHE: folder}, None
    return {"PYTHONPYCACHEPREFIX": folder}, None


def _quietly(function, *args) -> None:
    try:
        function(*args)
    except Exception:  # noqa: BLE001 - tidying a cache never fails a check
        pass


def kernel_cache() -> tuple[Optional[str], Optional[ProbeRun]]:
    """The folder the smoke tests' kernel compilers cache into (gpu_child.kernel_caches): private
    to this user, like the bytecode folder. Without one they compile every time (FlashAttention 4:
    about 10 s), and a note says why."""
    from ..bytecode import private_kernels

    folder, why = private_kernels()
    if folder is None:
        return None, ProbeRun(name="kernels", status="skipped", error=f"{why}: the smoke tests compile their kernels on every check")
    return folder, None

