"""Isolated work in forks, inside the target interpreter: each job in a forked process of its own,
so that one which raises, crashes (a segfault in a CUDA extension) or hangs becomes a result, and
what it prints is captured as evidence. Used by the torch probe (torch_probe.py).

Runs where attn-doctor may not be installed (child.py): standard library only, Python 3.8+.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
import traceback

# How long each forked job of the torch probe (an import, a sample, a smoke group) may run.
# The doctor applies its own overall timeout.
IMPORT_TIMEOUT_S = float(os.environ.get("ATTN_DOCTOR_IMPORT_TIMEOUT", "60"))

# What a job printed is kept up to this many bytes (its end: where the error is).
OUTPUT_KEEP = 4000

# The descriptor our JSON goes to (set in child.main). Forked jobs close it at once: a process an
# import leaves behind must not keep the doctor's pipe open.
OUT_FD = None


def describe_exception(exc):
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:4000],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:],
    }


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
