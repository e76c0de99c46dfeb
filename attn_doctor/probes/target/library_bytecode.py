"""Bytecode for an attention library installed without it (uv's default, `pip --no-compile`), kept
in the doctor's private folder (ATTN_DOCTOR_LIBRARY_PYCACHE) while torch keeps reading its own
beside its sources.

The probe children never write into the target's site-packages, so a library without bytecode is
compiled from source in every check (FlashAttention 4 and its CuTe DSL: 6 s of import instead of
2 s, on the cold check's longest path). PYTHONPYCACHEPREFIX would keep it, but for every module:
torch's own, which has bytecode beside it, would be compiled again into the folder. Here an import
reads and writes the folder only for a source with no bytecode beside it (redirect), and on the
check that finds none there yet the libraries' files are compiled into it side by side while the
child imports torch (start_precompile).

Standard library only, Python 3.8+ syntax: loaded inside the target interpreter.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import sys

from . import isolation

VARIABLE = "ATTN_DOCTOR_LIBRARY_PYCACHE"
# Distributions whose folders are never compiled here: their bytecode is theirs (or they are torch's)
SKIP = {"torch", "numpy", "triton", "pytorch-triton", "setuptools", "pip", "typing-extensions", "packaging", "sympy",
        "networkx", "jinja2", "fsspec", "filelock", "mpmath", "markupsafe"}
MAX_FILES = 5000  # a library is hundreds of modules; more is not what this is for


def folder():
    """The private folder the doctor gave, or None: an absolute path to a folder (not a link) this
    user owns and nobody else may write (the doctor checked more: attn_doctor/bytecode.py; the
    variable could also have come from the environment of whoever started the check)."""
    path = os.environ.get(VARIABLE) or ""
    if not os.path.isabs(path):
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return None
    return path


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
        return in_folder(prefix, path, beside)

    cache_from_source.attn_doctor_prefix = prefix
    external.cache_from_source = cache_from_source
    write = external.SourceFileLoader._cache_bytecode

    def _cache_bytecode(self, source_path, bytecode_path, data):
        if os.path.abspath(bytecode_path).startswith(root):
            return write(self, source_path, bytecode_path, data)
        return None  # beside a source (a stale .pyc of the target's): never written by the doctor

    external.SourceFileLoader._cache_bytecode = _cache_bytecode
    sys.dont_write_bytecode = False


def in_folder(prefix, source, beside):
    """Where PYTHONPYCACHEPREFIX=`prefix` keeps the bytecode of `source` (named as `beside`, the path
    beside it, names it): built here, so that no thread ever sees sys.pycache_prefix changed."""
    drive, head = os.path.splitdrive(os.path.dirname(os.path.abspath(source)))
    return os.path.join(prefix, head.lstrip(os.sep + (os.altsep or "")), os.path.basename(beside))


def _requirement_names(dist):
    names = []
    for line in dist.requires or ():
        if ";" in line and "extra" in line.split(";", 1)[1]:
            continue  # an extra's requirement: not installed for the library to work
        name = re.split(r"[\s;<>=!~\[(]", line.strip(), maxsplit=1)[0]
        if name:
            names.append(name)
    return names


def library_sources(distributions, depth=3, limit=MAX_FILES):
    """The Python files, without bytecode beside them, of `distributions` and of what they require
    (to `depth` levels), from their RECORDs: what importing them compiles. File by file: FlashAttention
    2 (with bytecode) and 4 (without) share the folder flash_attn/."""
    import importlib.metadata
    import importlib.util

    out, seen, level = [], set(), list(distributions)
    for _ in range(depth):
        following = []
        for name in level:
            key = re.sub(r"[-_.]+", "-", name).lower()
            if key in seen or key in SKIP:
                continue
            seen.add(key)
            try:
                dist = importlib.metadata.distribution(name)
                files = list(dist.files or ())
            except Exception:  # noqa: BLE001 - not installed, or unreadable metadata: nothing to compile
                continue
            for path in files:
                if path.suffix != ".py" or path.parts[0] in ("..", "bin") or path.parts[0].endswith((".data", ".dist-info")):
                    continue
                source = str(dist.locate_file(path))
                try:
                    if os.path.exists(importlib.util.cache_from_source(source)) or not os.path.isfile(source):
                        continue
                except (ValueError, NotImplementedError):
                    continue
                out.append(source)
                if len(out) >= limit:
                    return out
            following += _requirement_names(dist)
        level = following
    return out


def _cpus():
    try:
        return len(os.sched_getaffinity(0))  # the CPUs this process may use (a Slurm job's, a container's)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def start_precompile(prefix, distributions, workers=None):
    """A forked process that compiles into `prefix` the files library_sources finds (what is there
    and current is skipped), in `workers` processes of its own, at low priority: its pid, or None.
    Call it before this process imports torch (a fork is then cheap and safe); stop() it after."""
    if not hasattr(os, "fork") or not distributions:
        return None
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid:
        return pid
    code = 0
    try:
        _detach()
        try:
            os.nice(5)
        except OSError:
            pass
        sources = library_sources(distributions)
        count = max(1, min(int(workers or _cpus()), 16, len(sources) // 20 + 1))
        children = []
        for index in range(count):
            child = os.fork() if count > 1 else 0
            if child:
                children.append(child)
                continue
            if count > 1:
                _detach()
            _compile(prefix, sources[index::count])
            if count > 1:
                os._exit(0)
        for child in children:
            os.waitpid(child, 0)
    except BaseException:  # noqa: BLE001 - an optimisation: the import compiles what is not here
        code = 1
    finally:
        os._exit(code)


def _detach():
    """This fork holds none of its parent's pipes (the probe's answer to the doctor: a process left
    running with it would keep the doctor waiting) and is killed when its parent dies."""
    if isolation.OUT_FD is not None:
        try:
            os.close(isolation.OUT_FD)
        except OSError:
            pass
        isolation.OUT_FD = None
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # compileall prints a source's syntax error: never into the probe's answer
        os.dup2(devnull, fd)
    os.close(devnull)
    isolation._die_with_parent()


def _compile(prefix, sources):
    import compileall

    sys.pycache_prefix = prefix  # this process only compiles: no import here looks for bytecode
    sys.dont_write_bytecode = False
    for source in sources:
        try:
            compileall.compile_file(source, quiet=2)
        except Exception:  # noqa: BLE001 - one file that does not compile is compiled (and fails) at import
            pass


def stop(pid):
    """End the precompile if it still runs, and reap it."""
    if not pid:
        return
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if not done:  # what it has not compiled yet is compiled by the next check's; its workers die with it
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except OSError:
        pass
