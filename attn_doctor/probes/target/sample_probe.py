"""The sample forward passes of the tracer (attn_doctor.tracing.runs.samples, put on sys.path by the
doctor), each one an isolated job of the torch probe, and their results merged into one dtype
path; the prefetch of importlib.metadata's distribution table that overlaps torch's import.

Runs where attn-doctor may not be installed (child.py): standard library only, Python 3.8+.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time

from . import isolation
from .isolation import IMPORT_TIMEOUT_S, write_all

# How long the samples wait for the prefetched distribution table before going without it.
DISTRIBUTIONS_TIMEOUT_S = 20.0


def _sample_names(sample):
    """The tracer's samples (attn_doctor.tracing.runs.samples, put on sys.path by the doctor)."""
    try:
        if sample.get("path") and sample["path"] not in sys.path:
            sys.path.insert(0, sample["path"])
        from attn_doctor.tracing.runs.samples import sample_table

        return [name for name, _needs, _builder in sample_table()], None
    except BaseException as exc:  # noqa: BLE001
        return [], "the tracer could not be loaded: %s: %s" % (type(exc).__name__, str(exc)[:300])


def sample_probe(name, sample, distributions=None):
    def job():
        import torch

        from attn_doctor.tracing.runs.samples import run_sample_forward

        # Tiny models: one thread computes them as fast, and a check's other processes (the
        # compile test, the GPU tests) keep the cores that torch's default thread pools would take.
        torch.set_num_threads(1)

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
            if isolation.OUT_FD is not None:
                os.close(isolation.OUT_FD)  # the doctor's pipe: only the probe itself holds it
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
