"""The Ray task of `fleet --ray`: one `check --json` in the node's own Python. Standard library only.

This module is shipped to the workers by value (cloudpickle), not imported there: a node whose
Python lacks attn-doctor still runs it, and can say so and which interpreter it was, instead of
failing to unpickle the task.
"""

from __future__ import annotations


def node_check(argv: list, timeout: float, max_bytes: int, gpu: object = None) -> dict:
    """Run `python -m attn_doctor check --json ARGV` with the task's interpreter (sys.executable: the
    Python the cluster's workers, or the runtime_env given, run in), as a rank of `check --distributed`
    runs in its job's Python. `gpu`: with --per-gpu, the position among the node's visible GPUs that
    this check sees alone (CUDA_VISIBLE_DEVICES), as a one-GPU worker of the job would.

    Returns what came out, bounded here (stdout at most max_bytes + 1 bytes, stderr's tail): the
    caller validates it as untrusted data."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    started = time.monotonic()
    env = dict(os.environ)
    visible = None
    if gpu is not None:
        listed = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        position = int(gpu)
        visible = listed[position] if position < len(listed) else str(position)
        env["CUDA_VISIBLE_DEVICES"] = visible
    out = {"python": sys.executable, "hostname": socket.gethostname(), "pid": os.getpid(), "gpu": gpu, "visible": visible}
    cmd = [sys.executable, "-m", "attn_doctor", "check", "--json", *[str(a) for a in argv]]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                start_new_session=True)  # its own process group: a timeout ends its probes too
    except OSError as exc:
        out.update(error=f"cannot start {sys.executable}: {exc}", seconds=time.monotonic() - started)
        return out
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        stdout, stderr = proc.communicate()
        out.update(error=f"its check did not finish within {timeout:g} s (stopped)", seconds=time.monotonic() - started,
                   stderr=stderr[-2000:].decode(errors="replace"))
        return out
    out.update(returncode=proc.returncode, stdout=stdout[: max_bytes + 1], stdout_bytes=len(stdout),
               stderr=stderr[-2000:].decode(errors="replace"), seconds=time.monotonic() - started)
    return out
