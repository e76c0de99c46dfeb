"""Where in the model's code an op or an attention call happened: the frames of the model's code,
not torch's, not a helper's (einops, contextlib), not the tracer's, and never the doctor's own that
started the trace (its CLI, the trace's entry points) or anything above them."""

from __future__ import annotations

import os
import sys

import torch

from ..places import DOCTOR_DIR, RUNS_DIR, SAMPLES_FILE, TRACE_DIR, library_package

# the trace's own entry points: frames above the model's outermost call
# (mode.py is not one: its __torch_function__ is the innermost frame of every op, below the model's)
_ENTRY_FILES = frozenset(RUNS_DIR + name for name in ("run.py", "child.py", "api.py", "launch.py"))

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
# The tracer's own machinery (every module of this package) is skipped when naming a caller; the
# sample models are user code.
_STDLIB_HELPERS = ("contextlib.py", "functools.py")


def transparent_dirs():
    """Library code whose frames are skipped when naming an op's caller: torch itself, this
    tracer, and einops (``rearrange`` is a reshape done on the caller's behalf)."""
    dirs = [_TORCH_DIR]
    try:
        import importlib.util

        spec = importlib.util.find_spec("einops")
        if spec is not None and spec.origin:
            dirs.append(os.path.dirname(os.path.abspath(spec.origin)) + os.sep)
    except (ImportError, ValueError):
        pass
    return tuple(dirs)


class UserFrames(object):
    """The frame walk the tracer names callers with (a base of Tracer)."""

    def __init__(self):
        self._internal = {}
        self._transparent = transparent_dirs()

    def _is_internal(self, filename):
        """0: the model's code; 1: torch's, the tracer's, a helper's (skipped); 2: the doctor's driver
        (its CLI, the trace's entry): everything from there outwards called the model, not the model."""
        if filename.startswith(DOCTOR_DIR) and filename != SAMPLES_FILE:
            return 2 if (not filename.startswith(TRACE_DIR) or filename in _ENTRY_FILES) else 1
        if filename.startswith(self._transparent) or filename.endswith(_STDLIB_HELPERS):
            return 1
        return 1 if (filename.startswith("<") and filename != "<stdin>" and not filename.startswith("<ipython")) else 0

    def _frames(self, depth):
        """The frames of the model's code (not torch's, not the tracer's, not the doctor's that
        started the trace), innermost first, from ``depth`` frames above this call."""
        f = sys._getframe(depth + 1)
        cache = self._internal
        while f is not None:
            fn = f.f_code.co_filename
            internal = cache.get(fn)
            if internal is None:
                internal = cache[fn] = self._is_internal(fn)
            if not internal:
                yield f
            elif internal == 2:
                return
            f = f.f_back

    def caller(self):
        for f in self._frames(2):
            return f.f_code.co_filename, f.f_lineno
        return self._outer_forward(3)

    def _outer_forward(self, depth):
        """A model made of torch's own modules alone (an nn.MultiheadAttention) has no frame of its
        own: the outermost ``forward`` below the doctor's driver (torch's module that was called)."""
        f = sys._getframe(depth)
        found = (None, None)
        while f is not None:
            fn = f.f_code.co_filename
            internal = self._internal.get(fn)
            if internal is None:
                internal = self._internal[fn] = self._is_internal(fn)
            if internal == 2:
                break
            if f.f_code.co_name == "forward":
                found = (fn, f.f_lineno)
            f = f.f_back
        return found

    def user_frame(self):
        """Where the user's code called into the library that made this attention call: the
        innermost frame outside installed packages, with the library's frame it called, when the
        call itself is inside an installed package; else None."""
        library = None
        for f in self._frames(2):
            fn = f.f_code.co_filename
            package = library_package(fn)
            if package is None:
                if library is None:
                    return None  # the call is the user's own
                return {"file": fn, "line": f.f_lineno, "function": f.f_code.co_name, "library": library[0],
                        "library_file": library[1], "library_line": library[2]}
            library = (package, fn, f.f_lineno)  # the outermost library frame: the one the user called
        return None

    def callers(self, depth=3):
        """The user's frames above the op's own line: [(file, line)], innermost first."""
        found = []
        for f in self._frames(2):
            found.append((f.f_code.co_filename, f.f_lineno))
            if len(found) > depth:
                break
        return found[1:]
