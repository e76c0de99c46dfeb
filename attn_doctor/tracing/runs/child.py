"""Entry point run inside the *target* interpreter: ``python -m attn_doctor.tracing.runs.child CMD JSON``.

    python -m attn_doctor.tracing.runs.child trace  '{"target": "pkg.mod:build", "autocast": "bf16"}'
    python -m attn_doctor.tracing.runs.child sample '{"device": "auto", "dtype": "bf16"}'

The JSON argument holds keyword arguments for ``api.trace`` / ``samples.run_sample_forward``.
Exactly one JSON object is written to the original stdout; while the user's code runs, fd 1
points at stderr (as in attn_doctor/probes/target/child.py), so prints in a model cannot corrupt it.
Standard library and torch only, Python 3.8+.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback


@contextlib.contextmanager
def stdout_to_stderr():
    """Point fd 1 (and sys.stdout) at stderr; yields a function that writes to the real stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    old = sys.stdout
    sys.stdout = sys.stderr

    def write_real(data):
        view = memoryview(data.encode() if isinstance(data, str) else data)
        while view:
            view = view[os.write(saved, view):]

    try:
        yield write_real
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        sys.stdout = old


def run(command, kwargs):
    if kwargs.get("capability") is not None:  # JSON has no tuples
        kwargs["capability"] = tuple(kwargs["capability"])
    if command == "trace":
        from .api import trace

        return trace(**kwargs)
    if command == "sample":
        from .samples import run_sample_forward

        return run_sample_forward(**kwargs)
    return {"status": "usage_error", "exit_code": 2, "error": {"kind": "usage", "message": "unknown command %r" % command}}


def _progress_to_stderr():
    """With ATTN_DOCTOR_TRACE_PROGRESS set (the doctor shows a spinner), each step of the trace is
    one marked line on stderr, which attn_doctor/tracing/runs/launch.py reads as it comes."""
    from .. import state

    def say(message):
        sys.stderr.write(state.PROGRESS_PREFIX + message + "\n")
        sys.stderr.flush()

    state.PROGRESS[0] = say


def main(argv):
    if os.environ.get("ATTN_DOCTOR_TRACE_PROGRESS"):
        _progress_to_stderr()
    with stdout_to_stderr() as write_real:
        try:
            command = argv[0] if argv else "sample"
            kwargs = json.loads(argv[1]) if len(argv) > 1 else {}
            result = run(command, kwargs)
        except BaseException as exc:  # noqa: BLE001 - nothing may escape: the caller wants JSON
            result = {
                "status": "failed",
                "exit_code": 3,
                "error": {"kind": "internal", "message": "%s: %s" % (type(exc).__name__, str(exc)[:400]),
                          "traceback": traceback.format_exc()[-8000:]},
            }
        write_real(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
