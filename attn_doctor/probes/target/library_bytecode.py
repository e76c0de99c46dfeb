"""Bytecode for an attention library installed without it (uv's default, `pip --no-compile`), kept
in the doctor's private folder (ATTN_DOCTOR_LIBRARY_PYCACHE) while torch keeps reading its own
beside its sources.

The probe children never write into the target's site-packages, so a library without bytecode is
compiled from source in every check (FlashAttention 4 and its CuTe DSL: 6 s of import instead of
2 s, on the cold check's longest path). PYTHONPYCACHEPREFIX would keep it, but for every module:
torch's own, which has bytecode beside it, would be compiled again into the folder. Here an import
reads and writes the folder only for a source with no bytecode beside it (redirect), and on the
check that finds none there yet the libraries' folders are compiled into it side by side while
the child imports torch (start_precompile).

Standard library only, Python 3.8+ syntax: loaded inside the target interpreter.
"""

from __future__ import annotations

import os
import re
import sys

VARIABLE = "ATTN_DOCTOR_LIBRARY_PYCACHE"
# Distributions whose folders are never compiled here: their bytecode is theirs (or they are torch's)
SKIP = {"torch", "numpy", "triton", "pytorch-triton", "setuptools", "pip", "typing-extensions", "packaging", "sympy",
        "networkx", "jinja2", "fsspec", "filelock", "mpmath", "markupsafe"}
MAX_FILES = 5000  # a library is hundreds of modules; more is not what this is for


def folder():
    """The private folder the doctor gave (an absolute path to a folder), or None."""
    path = os.environ.get(VARIABLE) or ""
    return path if os.path.isabs(path) and os.path.isdir(path) else None


def redirect(prefix):
    """From now on, in this process: a module whose source has no bytecode beside it reads and writes
    its bytecode under `prefix` (as PYTHONPYCACHEPREFIX would lay it out); every other module reads
    its own, and nothing is ever written beside a source."""
    import importlib._bootstrap_external as external  # where the import system looks the path up, at each import

    if getattr(external.cache_from_source, "attn_doctor_prefix", None):
        return
    original = external.cache_from_source
    root = os.path.join(os.path.abspath(prefix), "")

    def cache_from_source(path, debug_override=None, *, optimization=None):
        beside = original(path, debug_override, optimization=optimization)
        if sys.pycache_prefix is not None or os.path.exists(beside):
            return beside
        sys.pycache_prefix = prefix
        try:
            return original(path, debug_override, optimization=optimization)
        finally:
            sys.pycache_prefix = None

    cache_from_source.attn_doctor_prefix = prefix
    external.cache_from_source = cache_from_source
    write = external.SourceFileLoader._cache_bytecode

    def _cache_bytecode(self, source_path, bytecode_path, data):
        if os.path.abspath(bytecode_path).startswith(root):
            return write(self, source_path, bytecode_path, data)
        return None  # beside a source (a stale .pyc of the target's): never written by the doctor

    external.SourceFileLoader._cache_bytecode = _cache_bytecode
    sys.dont_write_bytecode = False


def _has_bytecode(top):
    """Whether the package folder `top` has bytecode beside its sources (judged on a few of them)."""
    import importlib.util

    seen = 0
    for base, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                if not os.path.exists(importlib.util.cache_from_source(os.path.join(base, name))):
                    return False
                seen += 1
                if seen >= 3:
                    return True
    return True


def _requirement_names(dist):
    names = []
    for line in dist.requires or ():
        if ";" in line and "extra" in line.split(";", 1)[1]:
            continue  # an extra's requirement: not installed for the library to work
        name = re.split(r"[\s;<>=!~\[(]", line.strip(), maxsplit=1)[0]
        if name:
            names.append(name)
    return names


def _top_folders(dist):
    """The top-level package folders of distribution `dist`, from its RECORD."""
    out = []
    for path in dist.files or ():
        parts = path.parts
        if len(parts) > 1 and path.suffix == ".py" and not parts[0].endswith((".dist-info", ".egg-info", ".data")) \
                and parts[0] not in ("..", "bin") and parts[0] not in out:
            out.append(parts[0])
    return [os.path.join(str(dist.locate_file("")), top) for top in out]


def library_folders(distributions, depth=3):
    """The package folders, without bytecode beside them, of `distributions` and of what they
    require (to `depth` levels): what importing them compiles."""
    import importlib.metadata

    folders, seen, level = [], set(), list(distributions)
    for _ in range(depth):
        following = []
        for name in level:
            key = re.sub(r"[-_.]+", "-", name).lower()
            if key in seen or key in SKIP:
                continue
            seen.add(key)
            try:
                dist = importlib.metadata.distribution(name)
            except Exception:  # noqa: BLE001 - not installed, or unreadable metadata: nothing to compile
                continue
            for top in _top_folders(dist):
                if os.path.isdir(top) and top not in folders and not _has_bytecode(top):
                    folders.append(top)
            following += _requirement_names(dist)
        level = following
    return folders


def _sources(folders):
    out = []
    for top in folders:
        for base, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            out += [os.path.join(base, name) for name in sorted(files) if name.endswith(".py")]
            if len(out) >= MAX_FILES:
                return out[:MAX_FILES]
    return out


def start_precompile(prefix, distributions, workers=None):
    """A forked process that compiles into `prefix` the folders library_folders finds (what is there
    and current is skipped), in `workers` processes of its own, at low priority: its pid, or None.
    Call it before this process imports torch (a fork is then cheap and safe); stop() it after."""
    if not hasattr(os, "fork"):
        return None
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid:
        return pid
    code = 0
    try:
        os.setpgid(0, 0)  # its workers with it: stop() ends them all
        try:
            os.nice(5)
        except OSError:
            pass
        sources = _sources(library_folders(distributions))
        count = max(1, min(int(workers or os.cpu_count() or 1), 16, len(sources) // 20 + 1))
        children = []
        for index in range(count):
            child = os.fork() if count > 1 else 0
            if child:
                children.append(child)
                continue
            _compile(prefix, sources[index::count])
            if count > 1:
                os._exit(0)
        for child in children:
            os.waitpid(child, 0)
    except BaseException:  # noqa: BLE001 - an optimisation: the import compiles what is not here
        code = 1
    finally:
        os._exit(code)


def _compile(prefix, sources):
    import compileall

    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # compileall prints a source's syntax error: never into the probe's answer
    os.dup2(devnull, 2)
    for source in sources:
        try:
            compileall.compile_file(source, quiet=2)
        except Exception:  # noqa: BLE001 - one file that does not compile is compiled (and fails) at import
            pass


def stop(pid):
    """End the precompile if it still runs, and reap it."""
    if not pid:
        return
    import signal

    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if not done:  # what it has not compiled yet is compiled by the next check's
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except OSError:
        pass
