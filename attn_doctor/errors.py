"""The exceptions attn-doctor raises to Python callers (the API in attn_doctor/api.py, the framework
callbacks in attn_doctor/integrations/). Standard library only, and importing nothing of
attn-doctor: options.py, which the CLI imports at start-up, takes its UsageError from here, so the
CLI and the API share one class.

    AttnDoctorError            catch this to catch anything attn-doctor raises on purpose
    +-- UsageError             bad arguments or input files (the CLI's exit code 2)
    +-- ProbeError             a probe or a trace could not run, so nothing was judged (exit code 3)
    +-- PreflightError         preflight() found problems at or above its fail_on severity
                               (attn_doctor/results.py, beside the findings it carries)

A broken environment is never an exception: it is what the report describes.
"""

from __future__ import annotations

from typing import Any


class AttnDoctorError(Exception):
    """The base of every exception attn-doctor raises on purpose."""


class UsageError(AttnDoctorError):
    """Bad arguments or input: a `--python` that is not an interpreter, an unreadable config or
    report file, an invalid recipe, a model given without example inputs. The message is one line
    that names the argument; the CLI prints it and exits 2."""


class ProbeError(AttnDoctorError):
    """A probe or trace could not run, so nothing was judged: the model's forward pass raised before
    reaching an attention call, the distributed gather could not reach rank 0. ``report`` holds what
    was produced (a TraceReport for a trace), or None."""

    def __init__(self, message: str, report: Any = None):
        super().__init__(message)
        self.report = report
