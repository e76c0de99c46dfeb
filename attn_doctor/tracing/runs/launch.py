"""Run the tracer in another interpreter (``check --python /other/venv/bin/python``).

The other interpreter need not have attn-doctor installed: a temporary folder holding a symlink to
this ``attn_doctor`` package is put first on its PYTHONPATH, and ``attn_doctor.tracing.runs.child`` is run
with ``-m``. Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from ... import support
from ...bytecode import mirror
from ..places import DOCTOR_DIR
from ..state import PROGRESS_PREFIX

PACKAGE_DIR = DOCTOR_DIR.rstrip(os.sep)  # the attn_doctor package


def package_dir():
    """A new temporary folder whose only entry is this ``attn_doctor`` package (a symlink, or a
    copy where symlinks fail): put it on another interpreter's sys.path. The caller removes it
    (remove_package_dir)."""
    tmp = tempfile.mkdtemp(prefix="attn-doctor-")
    link = os.path.join(tmp, "attn_doctor")
    try:
        os.symlink(PACKAGE_DIR, link)
    except OSError:
        shutil.copytree(PACKAGE_DIR, link)
    # the support matrix as JSON beside it: the other interpreter may have no TOML parser (Python 3.10
    # without tomli), and a copied package has no recipes folder beside it
    support.write_json(os.path.join(tmp, support.JSON_NAME))
    return tmp


def remove_package_dir(tmp, env=None):
    """Remove a package_dir() folder, and the bytecode of the package under its name where the
    child kept bytecode under a pycache prefix (PYTHONPYCACHEPREFIX in `env`): mirrored under the
    folder's random name, it would never be read again."""
    shutil.rmtree(tmp, ignore_errors=True)
    prefix = (env or {}).get("PYTHONPYCACHEPREFIX")
    if prefix:
        shutil.rmtree(mirror(prefix, tmp), ignore_errors=True)


def run_child(command, kwargs, python=None, timeout=600, cwd=None, env=None, progress=None):
    """Run ``child.py COMMAND JSON`` under ``python``; return its JSON object, or a failure dict.
    env: variables to add (PYTHONPYCACHEPREFIX: the children's bytecode in the doctor's cache);
    progress: called with each step the child reports (attn_doctor/tracing/state.py)."""
    python = python or sys.executable
    tmp = package_dir()
    try:
        env = dict(os.environ, **(env or {}))
        env["PYTHONPATH"] = tmp + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        if env.get("PYTHONPYCACHEPREFIX"):
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode goes to that folder, never beside the sources
        if progress is not None:
            env["ATTN_DOCTOR_TRACE_PROGRESS"] = "1"
        try:
            proc = subprocess.Popen(
                [python, "-m", "attn_doctor.tracing.runs.child", command, json.dumps(kwargs)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
        except OSError as exc:
            return _fail("environment", "could not run %s: %s" % (python, exc))
        stderr, stdout = [], []
        readers = [threading.Thread(target=_read_stderr, args=(proc.stderr, stderr, progress), daemon=True),
                   threading.Thread(target=lambda: stdout.append(proc.stdout.read()), daemon=True)]
        for reader in readers:
            reader.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return _fail("timeout", "the trace did not finish within %ss" % timeout)
        except BaseException:  # Ctrl-C: the child goes too
            proc.kill()
            proc.wait()
            raise
        for reader in readers:
            reader.join()
        text = b"".join(stderr).decode(errors="replace")
        out = b"".join(stdout)
        try:
            return json.loads(out.decode() or "null") or _fail(
                "crashed", "the trace child exited %s without a report" % proc.returncode, text)
        except ValueError:
            return _fail("crashed", "the trace child exited %s with unreadable output" % proc.returncode, text)
    finally:
        remove_package_dir(tmp, env)


def _read_stderr(stream, kept, progress):
    """The child's stderr: its progress lines to `progress`, the rest kept (the failure's evidence)."""
    marker = PROGRESS_PREFIX.encode()
    for line in iter(stream.readline, b""):
        if line.startswith(marker):
            if progress is not None:
                progress(line[len(marker):].decode(errors="replace").strip())
        else:
            kept.append(line)
    stream.close()


def _fail(kind, message, stderr=None):
    return {"status": "failed", "exit_code": 3, "findings": [], "sinks": [],
            "error": {"kind": kind, "message": message, "traceback": (stderr or "")[-8000:] or None}}
