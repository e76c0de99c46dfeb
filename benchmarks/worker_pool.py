"""Long-lived worker processes for the open-world benchmarks: each imports torch and transformers
once and runs one architecture after another, so that N cores spend their time tracing rather than
importing (16 processes importing a CUDA torch at once took 35 s each). An architecture that hangs or
kills its process costs that architecture only (a "timeout" or "worker_died" row) and a fresh
process; each process is recycled after a number of architectures, so no state builds up for long.

A worker is ``python SCRIPT --serve ARGS...``: it reads one job name per line on stdin and answers
with JSON lines (each a row), then ``MARK + name``. Standard library only."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

MARK = "\x1eattn-doctor-job-done "


def serve(run_one):
    """The worker's side: ``run_one(name) -> rows`` for each name read from stdin."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except Exception:  # noqa: BLE001
        pass
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        try:
            rows = run_one(name)
        except BaseException as exc:  # noqa: BLE001 - one architecture's surprise is its own row
            rows = [{"model_type": name, "outcome": "crash", "reason": "%s: %s" % (type(exc).__name__, str(exc)[:300])}]
        for row in rows:
            sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.write(MARK + name + "\n")
        sys.stdout.flush()


class _Worker(object):
    def __init__(self, cmd, cwd, env):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, cwd=cwd, env=env, bufsize=1)
        self.lines = queue.Queue()
        self.jobs = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, name, timeout):
        """(rows, None) or (rows so far, "timeout" / "worker_died")."""
        self.jobs += 1
        try:
            self.proc.stdin.write(name + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return [], "worker_died"
        rows, deadline = [], time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                return rows, "timeout"
            if line is None:
                return rows, "worker_died"
            if line.startswith(MARK):
                return rows, None
            if line.startswith("{"):
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict) and row.get("model_type") == name:
                    rows.append(row)

    def stop(self):
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            pass


def run_jobs(cmd, names, workers, timeout, on_done=None, cwd=None, recycle=40):
    """Run every name through ``workers`` processes of ``cmd``; ``on_done(name, rows)`` as each ends.
    Returns all rows."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    todo = queue.Queue()
    for n in names:
        todo.put(n)
    out, lock = [], threading.Lock()

    def loop():
        worker = None
        while True:
            try:
                name = todo.get_nowait()
            except queue.Empty:
                break
            if worker is None or worker.jobs >= recycle:
                if worker is not None:
                    worker.stop()
                worker = _Worker(cmd, cwd, env)
            t0 = time.monotonic()
            rows, failure = worker.run(name, timeout)
            if failure is not None:
                worker.stop()
                worker = None
                if not rows:
                    rows = [{"model_type": name, "outcome": failure,
                             "reason": "over %d s" % timeout if failure == "timeout" else "the worker process died"}]
            for r in rows:
                r["worker_s"] = round(time.monotonic() - t0, 2)
            with lock:
                out.extend(rows)
                if on_done is not None:
                    on_done(name, rows)
        if worker is not None:
            worker.stop()

    threads = [threading.Thread(target=loop) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out
