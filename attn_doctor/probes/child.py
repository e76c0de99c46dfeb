"""The probe that runs inside the *target* interpreter.

This file is executed as a script by whatever Python is being diagnosed (``--python``), which may
not have attn-doctor, msgspec or even a working torch. So: standard library only, Python 3.8+
syntax, never let an exception escape, and write exactly one JSON object to the original stdout.

    python child.py env [--fingerprint JSON]  # platform, tools, installed packages (no torch
                                     # import); where MODULEs would be imported from, and a
                                     # stamp of their files
    python child.py torch [--targets JSON] [--sample JSON] [--gpu JSON] [--builds JSON] [MODULE..]
                                     # torch build; then, in isolated forks, the import health
                                     # of each MODULE, each sample forward pass of the tracer,
                                     # the CUDA facts and smoke tests of gpu_child.py, and
                                     # whether each torch-linked extension loads (builds_child.py)
                                     # (this process makes no CUDA call: its forks must stay clean)

Anything the probed libraries print goes to stderr: fd 1 is pointed at fd 2 while they run. Each
forked job prints into a file of its own, whose end comes back with its result as ``"stderr"``
(a warning at import, such as xformers' "can't load C++/CUDA extensions", is evidence about that
import); this process's own stderr is kept by the doctor. Neither reaches the user's terminal.
"""

from __future__ import annotations

import json
import os
import platform
import re
import select
import signal
import sys
import time
import traceback

# Per-module import budget inside the torch probe. The doctor applies its own overall timeout.
IMPORT_TIMEOUT_S = float(os.environ.get("ATTN_DOCTOR_IMPORT_TIMEOUT", "60"))

# How long the samples wait for the prefetched distribution table before going without it.
DISTRIBUTIONS_TIMEOUT_S = 20.0

# What a job printed is kept up to this many bytes (its end: where the error is).
OUTPUT_KEEP = 4000

# The descriptor our JSON goes to (set in main). Forked jobs close it at once: a process an
# import leaves behind must not keep the doctor's pipe open.
OUT_FD = None

# Import probes: name (the facts key) -> distributions that provide it, given by the doctor with
# `--targets` (its table is attn_doctor.facts.MODULE_DISTRIBUTIONS). The name is the module,
# except flash_attn_4: FlashAttention 4 (CuTe DSL) is the subpackage flash_attn.cute.
IMPORT_TARGETS = {}

# What each import probe actually imports: the public entry point, so that a lazily loaded
# CUDA extension is loaded too.
IMPORT_STATEMENTS = {
    "flash_attn": ("flash_attn", "flash_attn.flash_attn_interface"),
    "flash_attn_interface": ("flash_attn_interface",),
    "flash_attn_4": ("flash_attn.cute",),
    "xformers": ("xformers", "xformers.ops"),
    "triton": ("triton", "triton.language"),
    "fla": ("fla",),
    "liger_kernel": ("liger_kernel", "liger_kernel.ops"),
}


# ---------------------------------------------------------------- environment (no torch)


def _read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def _strip_credentials(url):
    # https://user:token@host/... -> https://***@host/...
    if "://" in url and "@" in url.split("://", 1)[1].split("/", 1)[0]:
        scheme, rest = url.split("://", 1)
        return scheme + "://***@" + rest.split("@", 1)[1]
    return url


def _metadata_name_version(folder):
    """Name and Version from a METADATA / PKG-INFO file: the header lines only."""
    for filename in ("METADATA", "PKG-INFO"):
        text = _read(os.path.join(folder, filename))
        if text is None:
            continue
        name = version = None
        for line in text.splitlines():
            if not line.strip():
                break  # end of the headers
            if line.startswith("Name:"):
                name = line[5:].strip()
            elif line.startswith("Version:"):
                version = line[8:].strip()
        return name, version
    return None, None


# Requirements worth keeping, by distribution: torch's pin of the triton it was built with.
_KEPT_REQUIRES = {"torch": ("triton", "pytorch-triton")}


def _metadata_requires(folder, names):
    """Requires-Dist header lines whose project is one of names (markers kept)."""
    text = _read(os.path.join(folder, "METADATA"))
    out = []
    for line in (text or "").splitlines():
        if not line.strip():
            break  # end of the headers
        if line.startswith("Requires-Dist:"):
            req = line[len("Requires-Dist:"):].strip()
            project = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
            if project and _canonical(project.group(0)) in names:
                out.append(req)
    return out


def collect_packages():
    """Installed distributions, as importlib.metadata would find them on sys.path, and the
    requirements of _KEPT_REQUIRES: ({name: record}, {name: [Requires-Dist lines]}).

    Fast: a `.dist-info` folder is named `{name}-{version}.dist-info` (names escaped with `_`),
    so most distributions need no file read at all; `.egg-info` folders and odd names fall back
    to the METADATA headers. The first distribution on sys.path wins, as for imports.
    """
    packages, requires = {}, {}
    for entry in sys.path:
        folder = entry or os.getcwd()
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for filename in names:
            if filename.startswith("~"):
                continue  # pip's uninstall stash (~riton-3.1.0.dist-info): not an installed distribution
            if filename.endswith(".dist-info"):
                stem = filename[: -len(".dist-info")]
            elif filename.endswith(".egg-info"):
                stem = None
            else:
                continue
            path = os.path.join(folder, filename)
            name, _, version = stem.rpartition("-") if stem else ("", "", "")
            if not name or not version or not version[0].isdigit():
                name, version = _metadata_name_version(path)
                if not name or not version:
                    continue
            key = _canonical(name)
            if key in packages:
                continue
            record = {"version": version}
            installer = _read(os.path.join(path, "INSTALLER"))
            if installer and installer.strip():
                record["installer"] = installer.strip()
            direct = _read(os.path.join(path, "direct_url.json"))
            if direct:
                try:
                    url = json.loads(direct).get("url")
                except ValueError:
                    url = None
                if url and not url.startswith("file:"):
                    record["url"] = _strip_credentials(url)
            packages[key] = record
            if key in _KEPT_REQUIRES:
                kept = _metadata_requires(path, _KEPT_REQUIRES[key])
                if kept:
                    requires[key] = kept
    return packages, requires


# Distributions whose install is checked against its RECORD, and the module folder each provides:
# torch, triton and the attention libraries (attn_doctor.facts.MODULE_DISTRIBUTIONS, plus torch).
CHECKED_INSTALLS = {
    "torch": "torch", "triton": "triton", "pytorch-triton": "triton", "pytorch-triton-rocm": "triton",
    "flash-attn": "flash_attn", "xformers": "xformers", "flash-linear-attention": "fla", "fla-core": "fla",
}
# At most this many files of a RECORD are looked for (evenly spread, besides every top-level
# entry): torch lists about 15,000, and stat-ing them all would cost check 60 ms; 64 cost 2 ms.
RECORD_SAMPLE = 64


def _site_folders():
    seen = []
    for entry in sys.path:
        if entry and os.path.basename(entry) in ("site-packages", "dist-packages"):
            folder = os.path.realpath(entry)
            if folder not in seen and os.path.isdir(folder):
                seen.append(folder)
    return seen


def _record_paths(text):
    """The paths a RECORD names (CSV: a path with a comma in it is quoted), outside ../ and /."""
    out = []
    for line in text.splitlines():
        if line.startswith('"'):
            import csv

            path = next(csv.reader([line]), [""])[0]
        else:
            path = line.split(",", 1)[0]
        if path and not path.startswith(("..", "/")):
            out.append(path)
    return out


def collect_site():
    """For fix's snapshots and recovery: each site-packages folder's entries, and for every
    distribution the top-level entries its RECORD names (None: it has no RECORD) and how many of
    its files are gone (a stat per file: about 0.1 s for a CUDA torch; fix only)."""
    out = []
    for folder in _site_folders():
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        dists = {}
        for filename in names:
            if filename.endswith(".dist-info") and not filename.startswith("~"):
                name, _, version = filename[: -len(".dist-info")].rpartition("-")
                text = _read(os.path.join(folder, filename, "RECORD"))
                paths = _record_paths(text) if text is not None else []
                tops = None if text is None else sorted({p.split("/", 1)[0] for p in paths} | {filename})
                # Files RECORD names that are gone (bytecode aside: it may be cleaned away), every
                # one of them: pip's uninstall moves single files out of site-packages altogether.
                missing = sum(1 for p in paths if not p.endswith(".pyc") and not os.path.lexists(os.path.join(folder, p)))
                dists[_canonical(name)] = {"info": filename, "version": version, "tops": tops, "missing": missing}
        out.append({"path": folder, "names": names, "dists": dists})
    return out


def collect_leftovers():
    """What an install killed half-way leaves in site-packages: pip's uninstall stash (`~riton/`,
    `~riton-3.1.0.dist-info/`), a module folder of CHECKED_INSTALLS without its metadata, and for
    CHECKED_INSTALLS a dist-info without RECORD or whose RECORD names files that are gone.
    One directory listing per site-packages folder, one RECORD read per checked distribution."""
    found = []
    for folder in _site_folders():
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        dists = {}  # canonical name -> (dist-info folder name, version)
        for filename in names:
            if filename.endswith(".dist-info") and not filename.startswith("~"):
                name, _, version = filename[: -len(".dist-info")].rpartition("-")
                dists[_canonical(name)] = (filename, version)
        for filename in names:
            if filename.startswith("~"):
                found.append(_stash(folder, filename, names))
        for dist, module in CHECKED_INSTALLS.items():
            if dist in dists:
                problem = _record_problem(folder, *dists[dist])
                if problem:
                    found.append(dict(problem, package=dist, version=dists[dist][1]))
        for module in sorted(set(CHECKED_INSTALLS.values())):
            providers = [d for d, m in CHECKED_INSTALLS.items() if m == module]
            if (module in names and os.path.isdir(os.path.join(folder, module)) and not any(d in dists for d in providers)
                    and not _shipped_by_relative(folder, module, providers, dists)):
                found.append({"path": os.path.join(folder, module), "kind": "no-metadata", "package": providers[0],
                              "version": None, "detail": "a module folder that no installed distribution owns"})
    return found


def _shipped_by_relative(folder, module, providers, dists):
    """Whether a distribution of the providers' family (flash-attn-4 ships flash_attn/cute into
    flash-attn's folder) names `module` in its RECORD: only those few RECORDs are read."""
    for dist, (info, _version) in dists.items():
        if any(dist.startswith(p + "-") for p in providers):
            text = _read(os.path.join(folder, info, "RECORD"))
            if text is not None and any(p.split("/", 1)[0] == module for p in _record_paths(text)):
                return True
    return False


# pip's AdjacentTempDirectory: `~` then up to len(name)-1 of these replace the name's first characters.
_STASH_CHARS = "-~.=%0123456789"


def _stash(folder, filename, names):
    path = os.path.join(folder, filename)
    package = version = None
    if filename.endswith(".dist-info"):
        package, version = _metadata_name_version(path)  # the stash keeps the real METADATA
        package = _canonical(package) if package else None
    if package is None:
        tail = filename[1:].lstrip(_STASH_CHARS)
        tail = tail.split("-")[0] if filename.endswith(".dist-info") else tail
        candidates = [n for n in names if not n.startswith("~") and n.endswith(tail) and len(n) > len(tail) and "." not in n]
        candidates += [m for m in CHECKED_INSTALLS.values() if m.endswith(tail) and len(m) > len(tail)]
        if candidates:
            module = candidates[0]
            package = next((d for d, m in CHECKED_INSTALLS.items() if m == module), _canonical(module))
    return {"path": path, "kind": "stash", "package": package, "version": version,
            "detail": "pip's uninstall stash, left by an install or uninstall that was killed"}


def _record_problem(folder, info, version):
    path = os.path.join(folder, info)
    installer = (_read(os.path.join(path, "INSTALLER")) or "").strip()
    try:
        with open(os.path.join(path, "RECORD"), "rb") as fh:
            data = fh.read()
    except OSError:
        data = None
    if data is None:
        if installer == "conda":
            return None  # conda's own packages may carry no RECORD
        if not os.path.exists(os.path.join(path, "METADATA")):
            return {"path": path, "kind": "no-metadata", "detail": "a dist-info folder without METADATA"}
        return {"path": path, "kind": "no-record", "detail": "a dist-info without RECORD: the install stopped before its end"}
    # Only the lines at RECORD_SAMPLE evenly spread offsets are cut out and decoded: torch's RECORD
    # is 1.4 MB of 15,000 lines, which splitting whole costs more than the rest of the probe.
    lines = set()
    for i in range(RECORD_SAMPLE + 1):
        at = min(len(data) - 1, len(data) * i // RECORD_SAMPLE)
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        lines.add(data[start:] if end < 0 else data[start:end])
    files = _record_paths(b"\n".join(sorted(lines)).decode("utf-8", "replace"))
    looked = sorted({f.split("/", 1)[0] for f in files}) + files
    missing = sorted({f for f in looked if not os.path.lexists(os.path.join(folder, f))})
    if not missing:
        return None
    return {"path": path, "kind": "missing-files",
            "detail": "RECORD lists files that are gone (%d of %d looked for), e.g. %s" % (len(missing), len(looked), missing[0])}


def _canonical(name):
    out, prev = [], False
    for ch in name.lower():
        if ch in "-_.":
            if not prev:
                out.append("-")
            prev = True
        else:
            out.append(ch)
            prev = False
    return "".join(out)


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


# ---------------------------------------------------------------- failures


def describe_exception(exc):
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:4000],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:],
    }


# ---------------------------------------------------------------- isolated work in forks


def write_all(fd, data):
    """All of data to fd: a pipe takes a large answer in parts."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def run_isolated(jobs, timeout):
    """Run each (name, fn) in its own forked process; fn returns a JSON-able dict.

    A job that raises, crashes (segfault in a CUDA extension) or hangs becomes a result, not a
    failure of this process. Jobs run in parallel.
    """
    if not hasattr(os, "fork"):
        return {name: _run_inline(fn) for name, fn in jobs}
    running = {}
    for name, fn in jobs:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            os.close(read_fd)
            if OUT_FD is not None:
                os.close(OUT_FD)
            code = 0
            try:
                output = _capture_output()
                payload = _run_inline(fn)
                printed = _captured(output)
                if printed and isinstance(payload, dict):
                    payload["stderr"] = printed
                data = json.dumps(payload, default=str).encode()
            except BaseException as exc:  # noqa: BLE001 - nothing may escape a fork
                data = json.dumps({"status": "error", "error": describe_exception(exc)}).encode()
                code = 1
            try:
                write_all(write_fd, data)
            finally:
                os._exit(code)
        os.close(write_fd)
        running[read_fd] = {"name": name, "pid": pid, "chunks": [], "start": time.monotonic()}

    results = {}
    deadline = time.monotonic() + timeout
    while running:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select(list(running), [], [], min(remaining, 0.1))
        for fd in ready:
            chunk = os.read(fd, 65536)
            if chunk:
                running[fd]["chunks"].append(chunk)
            else:
                _finish(running.pop(fd), fd, results, None)
        # A job can exit while something it started still holds the pipe open: decide on its exit.
        for fd in list(running):
            pid, status = os.waitpid(running[fd]["pid"], os.WNOHANG)
            if pid:
                job = running.pop(fd)
                job["chunks"].append(_drain(fd))
                _finish(job, fd, results, status)
    for fd, job in running.items():  # hung: kill and report
        try:
            os.kill(job["pid"], signal.SIGKILL)
            os.waitpid(job["pid"], 0)
        except OSError:
            pass
        os.close(fd)
        results[job["name"]] = {"status": "timeout", "duration_s": round(timeout, 3)}
    return results


def _capture_output():
    """Point fds 1 and 2 of this (forked) process at a file of its own."""
    import tempfile

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    output = tempfile.TemporaryFile()
    os.dup2(output.fileno(), 1)
    os.dup2(output.fileno(), 2)
    return output


def _captured(output):
    """The end of what the job printed (decoded, at most OUTPUT_KEEP bytes), or None."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    try:
        size = os.fstat(output.fileno()).st_size
        output.seek(max(0, size - OUTPUT_KEEP))
        text = output.read(OUTPUT_KEEP).decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return None
    if size > OUTPUT_KEEP:
        text = "...\n" + text
    return text or None


def _drain(fd):
    import fcntl

    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _finish(job, fd, results, status):
    os.close(fd)
    if status is None:
        _, status = os.waitpid(job["pid"], 0)
    elapsed = round(time.monotonic() - job["start"], 3)
    if os.WIFSIGNALED(status):
        results[job["name"]] = {"status": "crashed", "signal": os.WTERMSIG(status), "duration_s": elapsed}
        return
    try:
        payload = json.loads(b"".join(job["chunks"]).decode())
    except ValueError:
        payload = {"status": "crashed", "signal": None}
    payload.setdefault("duration_s", elapsed)
    results[job["name"]] = payload


def _run_inline(fn):
    start = time.monotonic()
    try:
        payload = fn()
    except BaseException as exc:  # noqa: BLE001
        payload = {"status": "error", "error": describe_exception(exc)}
    payload.setdefault("duration_s", round(time.monotonic() - start, 3))
    return payload


# ---------------------------------------------------------------- torch tier


def torch_build(torch):
    # Plain attributes only: nothing here may touch the CUDA runtime (see collect_cuda).
    return {
        "status": "ok",
        "version": getattr(torch, "__version__", None),
        "cuda": getattr(torch.version, "cuda", None),
        "hip": getattr(torch.version, "hip", None),
        "cxx11_abi": bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False)),
    }


def import_probe(module):
    def job():
        import importlib

        statements = IMPORT_STATEMENTS.get(module, (module,))
        for statement in statements:
            importlib.import_module(statement)
        mod = sys.modules[statements[0]]
        version = str(getattr(mod, "__version__", "") or "")
        if version in ("", "0.0.0"):  # flash_attn.cute says 0.0.0: it asks for a distribution "fa4"
            version = _distribution_version(IMPORT_TARGETS.get(module, ()))
        result = {"status": "ok", "version": version or None}
        if module == "flash_attn":
            ext = [name for name in ("flash_attn_2_cuda", "flash_attn_cuda") if name in sys.modules]
            if ext:
                result["detail"] = {"extension": ext[0], "extension_file": getattr(sys.modules[ext[0]], "__file__", "")}
        return result

    def guarded():
        try:
            return job()
        except BaseException as exc:  # noqa: BLE001
            return {"status": "error", "error": describe_exception(exc)}

    return guarded


def _distribution_version(names):
    import importlib.metadata

    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def installed(module):
    """Whether the import probe `module` has something to import, found without importing it
    (an import can crash; this runs in the process that forks the probes).

    A bare namespace package does not count: flash-attn-4 installs flash_attn/cute/ only, which
    makes `flash_attn` a namespace without FlashAttention 2 in it."""
    import importlib.util

    top, _, sub = IMPORT_STATEMENTS.get(module, (module,))[0].partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    folders = list(spec.submodule_search_locations or [])
    if sub:
        return any(os.path.isfile(os.path.join(folder, *sub.split("."), "__init__.py")) for folder in folders)
    return spec.origin not in (None, "namespace") or not folders


def collect_torch(modules, sample=None, gpu=None, builds=None):
    """torch's build, then, each in its own fork and all in parallel: the import health of each
    module, (with `sample`) each of the tracer's sample forward passes, and (with `gpu`) the CUDA
    facts and the smoke test groups of gpu_child.py. This process never touches CUDA itself."""
    start = time.monotonic()
    if not installed("torch"):
        return {"torch": {"status": "missing"}, "imports": {m: {"status": "skipped"} for m in modules}}
    if sample is not None and sample.get("path") and sample["path"] not in sys.path:
        sys.path.insert(0, sample["path"])  # before the prefetch's fork: its sys.path is the samples'
    # Only transformers asks for the table: without it the samples would wait for nothing.
    prefetch = start_distributions_prefetch() if sample is not None and installed("transformers") else None
    try:
        import torch
    except BaseException as exc:  # noqa: BLE001
        finish_distributions_prefetch(prefetch, 0)
        return {
            "torch": {"status": "error", "error": describe_exception(exc)},
            "imports": {m: {"status": "skipped"} for m in modules},
        }
    info = torch_build(torch)
    info["duration_s"] = round(time.monotonic() - start, 3)
    jobs = []
    imports = {}
    for module in modules:
        if installed(module):
            jobs.append(("import:" + module, import_probe(module)))
        else:
            imports[module] = {"status": "missing"}
    builds_module, found, builds_error = None, {}, None
    if builds is not None:
        try:
            builds_module = _load_file_module("attn_doctor_builds_child", builds["script"])
            found = builds_module.extension_distributions()
            jobs += builds_module.jobs(found)
        except BaseException as exc:  # noqa: BLE001
            builds_error = describe_exception(exc)
    names, sample_error = [], None
    if sample is not None:
        names, sample_error = _sample_names(sample)
        distributions = finish_distributions_prefetch(prefetch)
        jobs += [("sample:" + name, sample_probe(name, sample, distributions)) for name in names]
    groups, gpu_error = [], None
    if gpu is not None:
        try:
            gpu_module = _load_file_module("attn_doctor_gpu_child", gpu["script"])
            gpu_module.BF16_NATIVE_FROM = tuple(gpu["bf16_native_from"])  # before the forks: they inherit it
            jobs.append(("cuda", gpu_module.cuda_facts))
            if gpu.get("smoke"):
                libraries = [name for name, probe in gpu_module.LIBRARIES.items() if installed(probe)]
                groups = gpu.get("groups") or gpu_module.smoke_groups(gpu.get("capability"), libraries)
                index = int(gpu.get("index") or 0)
                shapes = gpu.get("shapes") or []
                jobs += [("smoke:" + g, _bind(gpu_module.run_smoke_group, g, index, groups, shapes)) for g in groups]
        except BaseException as exc:  # noqa: BLE001
            gpu_error = describe_exception(exc)
    results = run_isolated(jobs, IMPORT_TIMEOUT_S)
    for module in modules:
        if "import:" + module in results:
            imports[module] = results["import:" + module]
    out = {"torch": info, "imports": imports}
    printed = dict((name, r["stderr"]) for name, r in results.items() if isinstance(r, dict) and r.get("stderr"))
    if printed:
        out["stderr"] = printed  # what each forked job printed: evidence, kept apart from its result
    if builds_module is not None:
        try:
            out["builds"] = builds_module.assemble(found, results)
        except BaseException as exc:  # noqa: BLE001
            builds_error = describe_exception(exc)
    if builds_error:
        out["builds_error"] = builds_error
    if sample is not None:
        out["dtype_path"] = _merge_samples(names, results, sample, sample_error)
    if gpu is not None:
        out["cuda"] = results.get("cuda") or {"status": "error", "error": gpu_error or {"message": "the CUDA probe did not run"}}
        out["smoke"] = {g: results.get("smoke:" + g, {"status": "timeout"}) for g in groups}
    return out


def _bind(fn, *args):
    return lambda: fn(*args)


def _load_file_module(name, path):
    """A standalone module from a file path (the doctor's gpu_child.py), without its package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sample_names(sample):
    """The tracer's samples (attn_doctor.trace.samples, put on sys.path by the doctor)."""
    try:
        if sample.get("path") and sample["path"] not in sys.path:
            sys.path.insert(0, sample["path"])
        from attn_doctor.trace.samples import sample_table

        return [name for name, _needs, _builder in sample_table()], None
    except BaseException as exc:  # noqa: BLE001
        return [], "the tracer could not be loaded: %s: %s" % (type(exc).__name__, str(exc)[:300])


def sample_probe(name, sample, distributions=None):
    def job():
        from attn_doctor.trace.samples import run_sample_forward

        capability = tuple(sample["capability"]) if sample.get("capability") else None
        return run_sample_forward(
            device=sample.get("device", "cpu"),
            dtype=sample.get("dtype", "bf16"),
            autocast=sample.get("autocast"),
            capability=capability,
            samples=[name],
            distributions=distributions,
        )

    return job


def start_distributions_prefetch():
    """importlib.metadata.packages_distributions() in a fork, started before torch's import so that
    the two overlap on another core: transformers 5 computes it at import, reading every installed
    distribution's RECORD. Returns (the pipe's read end, the fork's pid), or None where there is no
    fork."""
    if not hasattr(os, "fork"):
        return None
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read_fd)
            if OUT_FD is not None:
                os.close(OUT_FD)  # the doctor's pipe: only the probe itself holds it
            import importlib.metadata

            write_all(write_fd, json.dumps(importlib.metadata.packages_distributions()).encode())
        except BaseException:  # noqa: BLE001 - the sample then lets transformers compute it itself
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    return read_fd, pid


def finish_distributions_prefetch(prefetch, timeout=DISTRIBUTIONS_TIMEOUT_S):
    """The prefetched mapping, or None (no fork, it failed, or it took longer than timeout)."""
    if prefetch is None:
        return None
    fd, pid = prefetch
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                os.kill(pid, signal.SIGKILL)
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        data = json.loads(b"".join(chunks).decode() or "null")
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
        try:
            os.waitpid(pid, 0)
        except OSError:
            pass


def _merge_samples(names, results, sample, error):
    merged = {
        "status": "failed" if error else "ok",
        "device": sample.get("device", "cpu"),
        "dtype": sample.get("dtype"),
        "autocast": sample.get("autocast"),
        "samples": [],
        "findings": [],
        "error": error,
    }
    for name in names:
        result = results.get("sample:" + name) or {"status": "timeout"}
        if result.get("samples"):
            merged["samples"].extend(result["samples"])
            merged["findings"].extend(result.get("findings") or [])
            continue
        if result.get("status") == "timeout":
            reason = "did not finish within %d s (an import that hangs?)" % IMPORT_TIMEOUT_S
        elif result.get("status") == "crashed":
            reason = "crashed (signal %s)" % result.get("signal")
        else:
            err = result.get("error") or {}
            reason = err.get("message") if isinstance(err, dict) else str(err)
        merged["samples"].append({"name": name, "status": "failed", "reason": reason or "no result"})
    return merged


# ---------------------------------------------------------------- main


def main(argv):
    # Keep the real stdout for our JSON; anything else written to fd 1 goes to stderr.
    global OUT_FD
    out_fd = OUT_FD = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    result = {"protocol": 1}
    try:
        command = argv[0] if argv else "env"
        if command == "env":
            fingerprint = json.loads(argv[2]) if argv[1:2] == ["--fingerprint"] and len(argv) > 2 else None
            result.update(collect_env(fingerprint))
        elif command == "site":
            result["site"] = collect_site()
        elif command == "torch":
            args = argv[1:]
            options = {}
            while args[:1] in (["--sample"], ["--gpu"], ["--builds"], ["--targets"]):
                options[args[0][2:]] = json.loads(args[1])
                args = args[2:]
            IMPORT_TARGETS.update({k: tuple(v) for k, v in (options.get("targets") or {}).items()})
            result.update(collect_torch(args or list(IMPORT_TARGETS), options.get("sample"), options.get("gpu"), options.get("builds")))
        else:
            result["error"] = "unknown probe command %r" % command
    except BaseException as exc:  # noqa: BLE001
        result["error"] = describe_exception(exc)
    write_all(out_fd, json.dumps(result, default=str).encode())
    os.close(out_fd)
    return 0


def run(argv):
    """main, then out without the interpreter's teardown (with torch loaded, 0.4 s or more that the
    doctor would wait for). Nothing here needs it: forks are reaped, temporary files unlinked."""
    exit_code = main(argv)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(exit_code)
