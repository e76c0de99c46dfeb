"""Where a source file lives: the user's own code, or an installed package."""

from __future__ import annotations

import os

_PACKAGE_DIRS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
TRACE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# the whole doctor (its CLI's frames sit above every traced call): never a caller in a user's report
DOCTOR_DIR = os.path.dirname(TRACE_DIR.rstrip(os.sep)) + os.sep
# check's sample models: the tracer treats them as user code, the report says they are the doctor's
RUNS_DIR = TRACE_DIR + "runs" + os.sep
SAMPLES_FILE = RUNS_DIR + "samples.py"


def library_package(filename):
    """The installed package a source file belongs to ("keras" for .../site-packages/keras/src/...),
    or None for the user's own code."""
    for marker in _PACKAGE_DIRS:
        at = (filename or "").find(marker)
        if at >= 0:
            rest = filename[at + len(marker):]
            return rest.split(os.sep, 1)[0].rsplit(".py", 1)[0] or None
    return None
