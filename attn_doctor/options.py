"""One check's options, shared by every entry point that runs a check: `check`, each rank of
`check --distributed`, and `fix` (its check and its verification). Standard library only: the CLI
imports it at start-up.

The pipeline they share is `attn_doctor.core.run_check(options, progress)`: validate the options
(here), gather the facts (probed, or recorded in a report), diagnose, write `--output`; the caller
renders.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

# Bad input (command line or Python API): one line, exit code 2; one class for both (errors.py).
from .errors import UsageError  # noqa: F401


# Why a check diagnoses the interpreter it does, as the report and the header say it.
TARGET_WHY = {
    "option": "--python",
    "venv": "active venv ($VIRTUAL_ENV)",
    "conda": "active conda env ($CONDA_PREFIX)",
    "self": "the interpreter attn-doctor runs in",
}
_ACTIVE = (("VIRTUAL_ENV", "venv"), ("CONDA_PREFIX", "conda"))


@dataclass(frozen=True)
class Naming:
    """How a message names an option the caller set: a command-line user reads `--python X`, a
    Python caller `python=X`, and each must recognise what to correct. Every entry point passes its
    own (CLI or API) into the options; nothing below guesses who called."""

    flags: bool  # True: the command line's flags; False: the Python API's parameters

    def option(self, name: str) -> str:
        """The option alone: `--from-report` / `from_report`."""
        return "--" + name.replace("_", "-") if self.flags else name

    def given(self, name: str, value: object) -> str:
        """The option with the value given: `--python /x` / `python=/x`."""
        return f"{self.option(name)} {value}" if self.flags else f"{name}={value}"

    def off(self, name: str) -> str:
        """The option that turned a step off: `--no-sample` / `sample=False`."""
        return "--no-" + name.replace("_", "-") if self.flags else f"{name}=False"


CLI = Naming(flags=True)
API = Naming(flags=False)


@dataclass(frozen=True)
class Target:
    """The interpreter a check diagnoses, and why that one (resolve_target)."""

    python: str  # as found, not resolved: a venv's bin/python is a symlink, yet its own environment
    source: str  # a key of TARGET_WHY
    ignored: Optional[str] = None  # an active-environment variable that named no environment: the warning
    own: bool = False  # the doctor's own environment: probed as before, in-process where it can be
    naming: Naming = CLI  # how its messages name the option that chose it

    @property
    def why(self) -> str:
        return TARGET_WHY[self.source]

    def named(self) -> str:
        """How a message names it: the option or variable the user set."""
        if self.source == "option":
            return self.naming.given("python", self.python)
        if self.source == "self":
            return self.python
        return f"{self.python} (the {TARGET_WHY[self.source]})"


def environment_python(prefix: str) -> Optional[str]:
    """The interpreter of an environment folder (a venv, a conda env), or None: not one."""
    root = Path(prefix).expanduser()
    for candidate in (root / "bin" / "python", root / "bin" / "python3", root / "Scripts" / "python.exe", root / "python.exe"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate.absolute())
    return None


def resolve_target(python: Optional[str] = None, environ: Optional[Mapping[str, str]] = None, naming: Naming = CLI) -> Target:
    """The interpreter to diagnose, as uv and pipdeptree's --python auto pick it: --python, else
    the active venv ($VIRTUAL_ENV), else the active conda env ($CONDA_PREFIX), else this one. One
    function for check, fix, trace, each rank of a distributed check and the Python API. Raises
    UsageError for a bad --python; an active-environment variable naming no environment is not an
    error (a stale shell): the result says so in `ignored`, and this interpreter is checked.
    naming: how error messages name the option (the CLI's `--python`, the API's `python=`)."""
    if python is not None:
        path = validate_python(python, naming)
        return Target(path, "option", own=os.path.abspath(path) == os.path.abspath(sys.executable), naming=naming)
    environ = os.environ if environ is None else environ
    for variable, source in _ACTIVE:
        prefix = environ.get(variable)
        if not prefix:
            continue
        found = environment_python(prefix)
        if found is None:
            return Target(sys.executable, "self", own=True,
                          ignored=f"{variable}={prefix} is not a Python environment (no bin/python)")
        # The doctor run from inside the active environment (installed there, `python -m`):
        # nothing changes, whichever of its names (python, python3) started it.
        own = _same_path(prefix, sys.prefix) or os.path.abspath(found) == os.path.abspath(sys.executable)
        return Target(sys.executable if own else found, source, own=own)
    return Target(sys.executable, "self", own=True)


def _same_path(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


@dataclass(frozen=True)
class CheckOptions:
    python: Optional[str] = None  # --python: an interpreter path, venv folder or name on PATH; None: the active environment
    quick: bool = False
    facts_file: Optional[Path] = None  # --from-report: diagnose recorded facts instead of probing
    configs: tuple[str, ...] = ()
    recipes_dir: Optional[Path] = None
    fail_on: str = "error"
    timeout: float = 120.0
    sample: bool = True
    smoke: bool = True
    use_cache: bool = True  # False: compute the sample verdict afresh (it is stored all the same)
    cache_dir: Optional[Path] = None  # None: ATTN_DOCTOR_CACHE_DIR, else the user's cache folder
    # whose entries in the cache folder are believed: "owner" (you, root, the folder's owner) or
    # "group" (also the members of a setgid folder's group); None: ATTN_DOCTOR_CACHE_TRUST, else "owner"
    cache_trust: Optional[str] = None
    gpu_index: int = 0  # the GPU the smoke tests run on (a rank of a distributed check: its own)
    # --gpu NAME / --capability X.Y: judge for that GPU instead of this machine's (attn_doctor/gpus.py)
    gpu: Optional[str] = None
    capability: Optional[str] = None
    output: Optional[str] = None  # also write the JSON report here ({host} is the host name)
    only: tuple[str, ...] = ()  # judge only these rules (ids or names); empty: all
    skip: tuple[str, ...] = ()  # leave these rules out
    target: Optional[Target] = None  # set by validate(): what is diagnosed and why (None with --from-report)
    naming: Naming = CLI  # how messages name these options: the entry point that took them says (CLI, API)


def host_name() -> str:
    return socket.gethostname().split(".")[0] or "host"


def expand(template: str, rank: Optional[int] = None, local_rank: Optional[int] = None) -> str:
    """{host}, and for a rank of a distributed check {rank} and {local_rank}, in a path template."""
    value = template.replace("{host}", host_name())
    if rank is not None:
        value = value.replace("{rank}", str(rank))
    if local_rank is not None:
        value = value.replace("{local_rank}", str(local_rank))
    return value


def validate_python(python: Optional[str], naming: Naming = CLI) -> Optional[str]:
    """The interpreter's path, or UsageError naming the option as the caller spells it."""
    if python is None:
        return None
    given = naming.given("python", python)
    path = Path(python).expanduser()
    if os.sep not in python and not path.exists():
        # A bare name (`--python python3.11`), as a shell would find it on PATH. The PATH entry is
        # kept as found, not resolved: a venv's bin/python is a symlink, yet its own environment.
        found = shutil.which(python)
        if found is None:
            raise UsageError(f"{given}: no such file, and no {python} on PATH")
        path = Path(found)
    if path.is_dir():
        # Accept a venv folder: /path/to/venv -> /path/to/venv/bin/python
        for candidate in (path / "bin" / "python", path / "Scripts" / "python.exe"):
            if candidate.exists():
                path = candidate
                break
        else:
            raise UsageError(f"{given}: a folder without bin/python; give the interpreter's path")
    if not path.exists():
        raise UsageError(f"{given}: no such file")
    if not os.access(path, os.X_OK):
        raise UsageError(f"{given}: not executable")
    return str(path.absolute())


def _not_there(path: str) -> bool:
    """Only a path that does not exist: '-' (stdin), a name too long, a parent that is a file are the
    config reader's to say, as a finding beside the rest of the report."""
    if path == "-":
        return False
    try:
        os.lstat(Path(path).expanduser())
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    return False


def validate(options: CheckOptions) -> CheckOptions:
    """The options as run_check uses them (the target resolved: python is its path, None where it
    is the doctor's own interpreter; {host} expanded in output), or UsageError. Validated options
    pass through unchanged."""
    from dataclasses import replace

    target = options.target
    name = options.naming
    if options.facts_file is not None and (options.python or options.quick):
        raise UsageError(f"{name.option('from_report')} diagnoses a recorded report; it cannot be combined with "
                         f"{name.option('python')} or {name.option('quick')}")
    if target is None and options.facts_file is None:
        target = resolve_target(options.python, naming=name)
    # A --config file that is not there is a usage error: a typo must not pass a pre-flight gate. One
    # that is there but cannot be read is a finding of the check (its reason, and the rest of the
    # report): one bad config must not cost the user the whole report.
    for path in options.configs:
        if _not_there(path):
            raise UsageError(f"{name.given('config', path)}: no such file")
    if options.gpu is not None or options.capability is not None:
        if options.facts_file is not None:
            raise UsageError(f"{name.option('gpu')} judges this environment for a GPU it does not have; a recorded report "
                             f"({name.option('from_report')}) keeps the GPU it was recorded on")
        if options.gpu is not None and options.capability is not None:
            raise UsageError(f"give {name.option('gpu')} or {name.option('capability')}, not both")
        from .gpus import lookup

        lookup(options.gpu, options.capability, name.option)  # UsageError for a GPU the catalogue does not know
    if options.cache_dir is not None and Path(options.cache_dir).expanduser().exists() and not Path(options.cache_dir).expanduser().is_dir():
        raise UsageError(f"{name.given('cache_dir', options.cache_dir)}: not a folder")
    from .cache import TRUST_ENV, trust_level

    try:
        trust_level(options.cache_trust)
    except ValueError as exc:
        given = name.given("cache_trust", options.cache_trust) if options.cache_trust else f"${TRUST_ENV}"
        raise UsageError(f"{given}: {exc}") from None
    python = None if target is None or (target.own and target.source != "option") else target.python
    output = expand(options.output) if options.output else options.output  # {host}: where the report goes
    return replace(options, python=python, target=target, output=output)


# ---------------------------------------------------------------- the API's arguments, checked
# (one line naming the argument for a value of the wrong kind: a UsageError, never a traceback)

_DTYPE_NAMES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
                "fp32": "fp32", "float32": "fp32", "float": "fp32"}


def _as_path(value: Any) -> Optional[Path]:
    return None if value is None else Path(os.fspath(value)).expanduser()


def _path_or_none(value: Any, name: str) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise UsageError(f"{name} must be a path, not {type(value).__name__}")
    return os.fspath(value)


def _config_paths(config: Any) -> tuple[str, ...]:
    if config is None:
        return ()
    items = [config] if isinstance(config, (str, os.PathLike)) else list(config)
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise UsageError(f"config takes paths to config files, not {type(item).__name__}")
    return tuple(os.fspath(item) for item in items)


def _fail_on(value: str) -> str:
    if value not in ("error", "warning"):
        raise UsageError(f"fail_on must be 'error' or 'warning', not {value!r}")
    return value


def _timeout(value: float) -> float:
    if not isinstance(value, (int, float)) or value <= 0:
        raise UsageError(f"timeout must be a positive number of seconds, not {value!r}")
    return float(value)


def _dtype_name(value: Any, name: str) -> Optional[str]:
    if value is None:
        return None
    text = str(value).replace("torch.", "")
    if text not in _DTYPE_NAMES:
        raise UsageError(f"{name} must be one of bf16, fp16, fp32 (or torch.bfloat16, ...), not {value!r}")
    return _DTYPE_NAMES[text]


def _capability(value: Union[None, str, tuple[int, int]]) -> Optional[tuple[int, int]]:
    if value is None:
        return None
    try:
        if isinstance(value, str):
            major, _, minor = value.partition(".")
            return int(major), int(minor or 0)
        major, minor = value
        return int(major), int(minor)
    except (TypeError, ValueError):
        raise UsageError(f"capability takes (major, minor) or 'MAJOR.MINOR', e.g. (8, 0) or '7.5', not {value!r}") from None
