"""The `env` probe (no torch import): the platform, the package tools, the installed packages and
leftovers (inventory.py), and where chosen modules would be imported from, with a stamp of their
files and whether their bytecode is fresh.

Runs where attn-doctor may not be installed (child.py): standard library only, Python 3.8+.
"""

from __future__ import annotations

import os
import platform
import sys

from .inventory import collect_leftovers, collect_packages


def collect_platform():
    import sysconfig

    libc, libc_version = None, None
    try:
        # os.confstr is what glibc itself reports; platform.libc_ver() parses the binary.
        value = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
        if value:
            libc, libc_version = value.split(" ", 1)
    except (AttributeError, ValueError, OSError):
        libc, libc_version = platform.libc_ver()[0] or None, platform.libc_ver()[1] or None
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    marker = os.path.join(sysconfig.get_path("stdlib") or "", "EXTERNALLY-MANAGED")
    return {
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
        "libc": libc,
        "libc_version": libc_version,
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable,
        "in_virtualenv": in_venv,
        "externally_managed": (not in_venv) and os.path.exists(marker),
        "hostname": platform.node(),
    }


def collect_tools(packages):
    import shutil
    import importlib.util

    tools = {}
    pip_spec = importlib.util.find_spec("pip")
    tools["pip"] = {
        "present": pip_spec is not None,
        "version": packages.get("pip", {}).get("version") if pip_spec else None,
        "path": None,
    }
    # uv works on any interpreter with `uv pip --python`; look beside the interpreter first.
    candidates = [os.path.join(os.path.dirname(sys.executable), "uv"), shutil.which("uv")]
    uv = next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)
    tools["uv"] = {"present": uv is not None, "version": None, "path": uv}
    return tools


def collect_env(fingerprint=None, first=None):
    packages, requires = collect_packages()
    out = {
        "platform": collect_platform(),
        "packages": packages,
        "requires": requires,
        "tools": collect_tools(packages),
        "leftovers": collect_leftovers(),
    }
    if fingerprint:
        out["bytecode"] = {}
        out["modules"] = fingerprint_modules(fingerprint, first, out["bytecode"])
    return out


def fingerprint_modules(names, first=None, bytecode=None):
    """Where each top-level module would be imported from, and a stamp of its code files (path,
    size, mtime), found without importing it: the sample forward pass's verdict changes with the
    code it imports, whether it comes from a distribution, PYTHONPATH or the working folder.
    `first` replaces sys.path[0] (the doctor asking for its own interpreter: the probe child
    sees the working folder there). name ending in "/": the top folder's files only (torch).
    bytecode: a dict that receives each module's bytecode_state (apart: it changes how fast the
    code imports, never what it does)."""
    import hashlib
    import importlib.machinery

    path = list(sys.path)
    if first is not None and path:
        path[0] = first
    out = {}
    for name in names:
        shallow = name.endswith("/")
        name = name.rstrip("/")
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        except Exception:  # noqa: BLE001 - a broken finder on the path: treat as unknown
            spec = None
        if spec is None:
            out[name] = None
            continue
        folders = [f for f in (spec.submodule_search_locations or []) if os.path.isdir(f)]
        digest, count = hashlib.sha256(), 0
        stack = list(folders) if folders else []
        files = [] if folders else [spec.origin]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if not shallow and entry.name != "__pycache__":
                            stack.append(entry.path)
                    elif entry.name.endswith((".py", ".so", ".pyd")):
                        files.append(entry.path)
                except OSError:
                    continue
        for file in sorted(f for f in files if f):
            try:
                st = os.stat(file)
            except OSError:
                continue
            digest.update(("%s\0%d\0%d\n" % (file, st.st_size, st.st_mtime_ns)).encode("utf-8", "surrogateescape"))
            count += 1
        out[name] = {"origin": folders[0] if folders else spec.origin, "files": count, "stamp": digest.hexdigest()[:20]}
        if bytecode is not None:
            bytecode[name] = bytecode_state([f for f in files if f and f.endswith(".py")])
    return out


def bytecode_state(sources, sample=5):
    """Whether this interpreter would import `sources` from bytecode or compile them: "fresh"
    (each sampled file has a valid .pyc), "stale" (one is out of date: the sources were touched
    after compiling, as some image builds do) or "missing" (uv's installs, PIP_NO_COMPILE, a
    read-only site-packages); None for no sources. Judged on the package's __init__.py and its
    largest modules (what compiling costs), the way importlib validates a .pyc."""
    import importlib.util

    def size(path):
        try:
            return os.stat(path).st_size
        except OSError:
            return -1

    inits = [f for f in sources if os.path.basename(f) == "__init__.py"]
    picked = sorted(inits, key=len)[:1] + sorted(sources, key=size, reverse=True)[:sample]
    state = None
    # Beside the source, where the target's own imports look: this process may have a pycache
    # prefix of its own (the doctor's read-only install keeps its bytecode in the cache folder).
    prefix, sys.pycache_prefix = sys.pycache_prefix, None
    try:
        pycs = [importlib.util.cache_from_source(source) for source in dict.fromkeys(picked)]
    except (ValueError, NotImplementedError):
        return "missing"
    finally:
        sys.pycache_prefix = prefix
    for source, pyc in zip(dict.fromkeys(picked), pycs):
        try:
            st = os.stat(source)
            with open(pyc, "rb") as fh:
                header = fh.read(16)
        except OSError:
            return "missing"
        if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
            return "missing"  # another interpreter's, or truncated: compiled again all the same
        flags = int.from_bytes(header[4:8], "little")
        if flags & 0b1:  # hash-based: checked against the source only where asked to
            fresh = not flags & 0b10 or _source_hash_matches(source, header[8:16])
        else:
            fresh = (int.from_bytes(header[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                     and int.from_bytes(header[12:16], "little") == st.st_size & 0xFFFFFFFF)
        if not fresh:
            return "stale"
        state = "fresh"
    return state


def _source_hash_matches(source, expected):
    import importlib.util

    try:
        with open(source, "rb") as fh:
            return importlib.util.source_hash(fh.read()) == expected
    except OSError:
        return False
