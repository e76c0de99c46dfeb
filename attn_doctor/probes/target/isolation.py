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

    A job may also be a family, (name, fn, members): `fn` (an import, say) runs once in a fork
    of its own, reported under `name`, and each (name, fn) of `members` then runs in a fork of
    that one, so that what `fn` loaded is paid once rather than once per member. Where `fn` left
    the fork unsafe to fork again (CUDA's driver initialised, a thread started: family_unsafe),
    the members run in forks of this process instead, as plain jobs.
    """
    if not hasattr(os, "fork"):
        out = {}
        for job in jobs:
            out[job[0]] = _run_inline(job[1])
            for name, fn in (job[2] if len(job) > 2 else ()):
                out[name] = _run_inline(fn)
        return out
    deadline = time.monotonic() + timeout
    running = {}
    results = {}
    for job in jobs:
        results.update(_start(job, running, deadline))

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
                _finish(running.pop(fd), fd, results, None, running, deadline)
        # A job can exit while something it started still holds the pipe open: decide on its exit.
        for fd in list(running):
            pid, status = os.waitpid(running[fd]["pid"], os.WNOHANG)
            if pid:
                job = running.pop(fd)
                job["chunks"].append(_drain(fd))
                _finish(job, fd, results, status, running, deadline)
    for fd, job in running.items():  # hung: kill and report (a family's members die with it)
        try:
            os.kill(job["pid"], signal.SIGKILL)
            os.waitpid(job["pid"], 0)
        except OSError:
            pass
        os.close(fd)
        for name in [job["name"]] + [m[0] for m in job["members"]]:
            results.setdefault(name, {"status": "timeout", "duration_s": round(timeout, 3)})
    return results


# Seconds a family's fork keeps for itself before the common deadline: its members' results must
# reach this process before it is killed.
FAMILY_MARGIN_S = 0.5

# Set in a family's fork before it forks its members: each then dies with it (a family killed at the
# deadline leaves no member running on the GPU). The doctor's own timeout kills the whole session.
DIE_WITH_PARENT = False


def _die_with_parent():
    """SIGKILL this process when its parent dies (Linux prctl PR_SET_PDEATHSIG); elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before the call
            os._exit(1)
    except (OSError, AttributeError):
        pass


def _start(job, running, deadline):
    """Fork one job (or one family: see run_isolated) and register its pipe in `running`."""
    name, fn = job[0], job[1]
    members = list(job[2]) if len(job) > 2 else []
    read_fd = write_fd = None
    try:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
    except OSError as exc:  # out of descriptors, processes or memory: said for the job, the others go on
        for fd in (read_fd, write_fd):
            if fd is not None:
                os.close(fd)
        return {n: {"status": "error", "error": describe_exception(exc)} for n in [name] + [m[0] for m in members]}
    if pid == 0:  # child
        global OUT_FD
        os.close(read_fd)
        if OUT_FD is not None:
            os.close(OUT_FD)
            OUT_FD = None
        code = 0
        try:
            if DIE_WITH_PARENT:
                _die_with_parent()
            before = _threads()
            output = _capture_output()
            payload = _run_inline(fn)
            printed = _captured(output)
            if printed and isinstance(payload, dict):
                payload["stderr"] = printed
            if members:
                payload = {"family": _run_members(payload, name, members, before, deadline)}
            data = json.dumps(payload, default=str).encode()
        except BaseException as exc:  # noqa: BLE001 - nothing may escape a fork
            data = json.dumps({"status": "error", "error": describe_exception(exc)}).encode()
            code = 1
        try:
            write_all(write_fd, data)
        finally:
            os._exit(code)
    os.close(write_fd)
    running[read_fd] = {"name": name, "pid": pid, "chunks": [], "start": time.monotonic(), "members": members}
    return {}


def _run_members(payload, name, members, threads_before, deadline):
    """Inside a family's fork, after its own job: its members' results, each run in a fork of this
    process; or, where forking here is unsafe, a request that the parent run them."""
    try:
        unsafe = family_unsafe(threads_before, deadline - FAMILY_MARGIN_S)
        if unsafe:
            return {name: payload, "refork": unsafe}
        global DIE_WITH_PARENT
        DIE_WITH_PARENT = True
        out = run_isolated(members, max(0.1, deadline - time.monotonic() - FAMILY_MARGIN_S))
    except BaseException as exc:  # noqa: BLE001 - the import's result stands; the parent runs the members
        return {name: payload, "refork": "the family failed: %s: %s" % (type(exc).__name__, exc)}
    out[name] = payload
    return out


def family_unsafe(threads_before, deadline=None):
    """Why a fork of this process could not run CUDA work safely, or None: CUDA's driver
    initialised here (a fork cannot use it: every driver call before cuInit answers
    CUDA_ERROR_NOT_INITIALIZED, 3), torch's CUDA state initialised, or threads started since
    `threads_before` (_threads(): a fork keeps the locks they held, not the threads). Threads of
    CUDA's own (named "cuda...", as the driver and NVML name theirs) are tried instead: a fork
    must start CUDA's driver within CANARY_S."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return "torch initialised CUDA"
    except Exception:  # noqa: BLE001 - a broken torch is the jobs' to report
        pass
    try:
        import ctypes

        driver = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except (OSError, AttributeError):
        driver = None  # not loaded: never initialised here
    if driver is not None:
        count = ctypes.c_int()
        if driver.cuDeviceGetCount(ctypes.byref(count)) != 3:
            return "the CUDA driver was initialised"
    now = _threads()
    if threads_before is None or now is None:
        return None
    started = list(now)
    for name in threads_before:
        if name in started:
            started.remove(name)
    if not started:
        return None
    if all(name.startswith("cuda") for name in started) and _driver_starts_in_a_fork(deadline):
        return None
    return "%d thread(s) started (%s)" % (len(started), ", ".join(sorted(started))[:120])


# Seconds a fork may take to start CUDA's driver (cuInit) before forking is judged unsafe.
CANARY_S = 15.0


def _driver_starts_in_a_fork(deadline=None):
    """Whether a fork of this process starts CUDA's driver (cuInit, then the device count): what
    each group forked from here does first, within CANARY_S (and before `deadline`). No driver
    installed: nothing for a fork to start."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import ctypes

            try:
                driver = ctypes.CDLL("libcuda.so.1")
            except OSError:
                code = 0
            else:
                count = ctypes.c_int()
                code = 0 if driver.cuInit(0) == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0 else 1
        finally:
            os._exit(code)
    until = time.monotonic() + CANARY_S
    if deadline is not None:
        until = min(until, deadline)
    while time.monotonic() < until:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        time.sleep(0.01)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass
    return False


def _threads():
    """The names of this process's OS threads (Linux), or None where they cannot be read."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    names = []
    for task in tasks:
        try:
            with open("/proc/self/task/%s/comm" % task) as handle:
                names.append(handle.read().strip())
        except OSError:
            names.append("?")  # ended meanwhile, or unreadable
    return names


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


def _finish(job, fd, results, status, running, deadline):
    os.close(fd)
    if status is None:
        _, status = os.waitpid(job["pid"], 0)
    elapsed = round(time.monotonic() - job["start"], 3)
    names = [job["name"]] + [m[0] for m in job["members"]]
    if os.WIFSIGNALED(status):
        for name in names:
            results[name] = {"status": "crashed", "signal": os.WTERMSIG(status), "duration_s": elapsed}
        return
    try:
        payload = json.loads(b"".join(job["chunks"]).decode())
    except ValueError:
        payload = {"status": "crashed", "signal": None}
    family = payload.get("family") if job["members"] and isinstance(payload, dict) else None
    if not isinstance(family, dict):
        for name in names:
            results[name] = dict(payload)
            results[name].setdefault("duration_s", elapsed)
        return
    own = family.get(job["name"])
    results[job["name"]] = own if isinstance(own, dict) else {"status": "crashed", "signal": None, "duration_s": elapsed}
    if family.get("refork"):
        results[job["name"]]["family_refork"] = str(family["refork"])[:200]
        for member in job["members"]:
            results.update(_start(member, running, deadline))
        return
    for name, _ in job["members"]:
        got = family.get(name)
        results[name] = got if isinstance(got, dict) else {"status": "crashed", "signal": None, "duration_s": elapsed}


def _run_inline(fn):
    start = time.monotonic()
    try:
        payload = fn()
    except BaseException as exc:  # noqa: BLE001
        payload = {"status": "error", "error": describe_exception(exc)}
    payload.setdefault("duration_s", round(time.monotonic() - start, 3))
    return payload
