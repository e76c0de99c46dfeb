"""Run the tracer in another interpreter (``check --python /other/venv/bin/python``).

The other interpreter need not have attn-doctor installed: a temporary folder holding a symlink to
this ``attn_doctor`` package is put first on its PYTHONPATH, and ``attn_doctor.trace.child`` is run
with ``-m``. Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_dir():
    """A new temporary folder whose only entry is this ``attn_doctor`` package (a symlink, or a
    copy where symlinks fail): put it on another interpreter's sys.path. The caller removes it."""
    tmp = tempfile.mkdtemp(prefix="attn-doctor-")
    link = os.path.join(tmp, "attn_doctor")
    try:
        os.symlink(PACKAGE_DIR, link)
    except OSError:
        shutil.copytree(PACKAGE_DIR, link)
    return tmp


def run_child(command, kwargs, python=None, timeout=600, cwd=None):
    """Run ``child.py COMMAND JSON`` under ``python``; return its JSON object, or a failure dict."""
    python = python or sys.executable
    tmp = package_dir()
    try:
        env = dict(os.environ)
        env["PYTHONPATH"] = tmp + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            proc = subprocess.run(
                [python, "-m", "attn_doctor.trace.child", command, json.dumps(kwargs)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=env, cwd=cwd)
        except subprocess.TimeoutExpired:
            return _fail("timeout", "the trace did not finish within %ss" % timeout)
        except OSError as exc:
            return _fail("environment", "could not run %s: %s" % (python, exc))
        try:
            return json.loads(proc.stdout.decode() or "null") or _fail(
                "crashed", "the trace child exited %s without a report" % proc.returncode,
                proc.stderr.decode(errors="replace"))
        except ValueError:
            return _fail("crashed", "the trace child exited %s with unreadable output" % proc.returncode,
                         proc.stderr.decode(errors="replace"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fail(kind, message, stderr=None):
    return {"status": "failed", "exit_code": 3, "findings": [], "sinks": [],
            "error": {"kind": kind, "message": message, "traceback": (stderr or "")[-8000:] or None}}
