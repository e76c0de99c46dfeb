"""Running the probe script in a child process of the target interpreter, with a timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from .target.library_bytecode import VARIABLE as LIBRARY_PYCACHE

PROBES_DIR = Path(__file__).parent / "target"  # the modules that run inside the target interpreter
CHILD_PACKAGE = "attn_doctor_child"  # what that folder is called inside the target
GPU_CHILD_SCRIPT = PROBES_DIR / "gpu_child.py"  # loaded by path inside the target
BUILDS_CHILD_SCRIPT = PROBES_DIR / "builds_child.py"  # likewise


def child_package_source(folder: Path = PROBES_DIR) -> str:
    """Python source that makes the child modules of `folder` (child.py and the standard-library
    modules it imports) importable in another interpreter as the package CHILD_PACKAGE. The folder
    does not go on that interpreter's sys.path, and probes/__init__.py, which needs the doctor's
    own dependencies, does not run there."""
    return (
        "import importlib.machinery, importlib.util, sys\n"
        "spec = importlib.machinery.ModuleSpec(%r, None, is_package=True)\n"
        "spec.submodule_search_locations = [%r]\n"
        "sys.modules[spec.name] = importlib.util.module_from_spec(spec)\n"
    ) % (CHILD_PACKAGE, str(folder))


# The oldest Python the probe child runs in: its modules (target/) start with `from __future__
# import annotations`, a SyntaxError before 3.7 (and Python 2 has no importlib.machinery).
TARGET_PYTHON_FLOOR = (3, 7)
TOO_OLD = "older than Python %d.%d, the oldest attn-doctor's probes run in" % TARGET_PYTHON_FLOOR

# Before anything else, in words any Python since 2.6 runs: an older interpreter says why it cannot
# be checked, as the probes' own JSON error, instead of failing on their syntax.
_FLOOR_GUARD = (
    "import sys\n"
    "if sys.version_info[:2] < %r:\n"
    "    sys.stdout.write('{\"error\": {\"kind\": \"python_too_old\", \"message\": \"Python %%d.%%d.%%d is %s\"}}'"
    " %% tuple(sys.version_info[:3]))\n"
    "    sys.exit(0)\n"
) % (TARGET_PYTHON_FLOOR, TOO_OLD.replace("'", "\\'"))

# The probe child: `python -c CHILD_BOOTSTRAP COMMAND ...` rather than a script path: the probes'
# folder must not land on the target's sys.path, and the target sees its usual PYTHONPATH and
# working directory, as the user does.
CHILD_BOOTSTRAP = (_FLOOR_GUARD + child_package_source()
                   + "importlib.import_module(%r).run(sys.argv[1:])\n" % (CHILD_PACKAGE + ".child"))


class ProbeFailed(Exception):
    """The child could not deliver facts: it timed out, crashed, or printed garbage."""

    def __init__(self, status: str, message: str, signal_number: Optional[int] = None):
        super().__init__(message)
        self.status = status  # "timeout" | "failed"
        self.signal = signal_number


class ChildProcess:
    def __init__(self, python: str, args: list[str], env: Optional[dict] = None):
        self.python = python
        self.args = args
        self.started = time.monotonic()
        # stderr goes to a file, not a pipe: a chatty import must never fill a pipe and block,
        # and what the probed libraries print (warnings at import) is evidence for the report
        # (`stderr`, with -v), never noise on the user's terminal. Warnings keep the target's own
        # filters: they are what the user's training process sees.
        self._stderr = tempfile.TemporaryFile()
        self.stderr: Optional[str] = None
        extra = env or {}
        # the library bytecode folder only as the doctor checked it (local.bytecode_env), never one
        # inherited from whoever started the check: the child runs the bytecode it finds there
        env = dict({k: v for k, v in os.environ.items() if k != LIBRARY_PYCACHE}, **extra)
        if "PYTHONPYCACHEPREFIX" in extra:
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode goes to the doctor's own cache folder
        else:
            env["PYTHONDONTWRITEBYTECODE"] = "1"  # never write into the target's site-packages
        try:
            self.proc = subprocess.Popen(
                [python, "-c", CHILD_BOOTSTRAP, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=env,
                start_new_session=True,  # so a timeout kills the forks too
            )
        except OSError as exc:
            self._stderr.close()
            raise ProbeFailed("failed", f"cannot run {python}: {exc.strerror or exc}") from exc

    def result(self, timeout: float) -> dict:
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ProbeFailed(
                "timeout", f"probe `{' '.join(self.args)}` gave no answer in {timeout:.0f} s and was stopped"
            ) from None
        finally:
            stderr = self._read_stderr()
        code = self.proc.returncode
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            raise ProbeFailed("failed", f"probe `{' '.join(self.args)}` was killed by {name}", -code)
        try:
            data = json.loads(out.decode("utf-8", "replace"))
        except ValueError:
            last = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {code}"
            raise ProbeFailed("failed", f"probe `{' '.join(self.args)}` failed: {last[:300]}") from None
        if not isinstance(data, dict):
            raise ProbeFailed("failed", "probe printed something other than a JSON object")
        if data.get("error"):
            err = data["error"]
            text = err.get("message") if isinstance(err, dict) else str(err)
            if isinstance(err, dict) and err.get("kind") == "python_too_old":
                raise ProbeFailed("failed", str(text))  # the whole reason: no probe of it ran
            raise ProbeFailed("failed", f"probe `{' '.join(self.args)}` failed: {text}")
        return data

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()

    def _read_stderr(self) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read()[-20000:].decode("utf-8", "replace")
        finally:
            self._stderr.close()
        self.stderr = printed(text)
        return text


OUTPUT_KEEP = 4000  # characters kept of what a probe process printed: its end, where errors are


def printed(text: Optional[str]) -> Optional[str]:
    """What a probe process printed, as kept in the report: its end, secrets redacted."""
    from ..boundary.redact import redact_value

    text = (text or "").strip()
    if not text:
        return None
    if len(text) > OUTPUT_KEEP:
        text = "...\n" + text[-OUTPUT_KEEP:]
    return redact_value(text)


def probe_output(name: str, child: ChildProcess, forks: Any = None) -> dict[str, str]:
    """What a probe's processes printed, by process: the probe itself under `name`, then each of
    its forked jobs (import:xformers, cuda, smoke:..., as the child reports them)."""
    out = {name: child.stderr} if child.stderr else {}
    if isinstance(forks, dict):
        for job, text in sorted(forks.items()):
            kept = printed(text) if isinstance(text, str) else None
            if kept:
                out[str(job)] = kept
    return out


def start_child(python: str, args: list[str], env: Optional[dict] = None) -> ChildProcess:
    """env: variables added to this process's environment for the child."""
    return ChildProcess(python, args, env)
