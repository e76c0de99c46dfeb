"""Remedies as commands: the one place that turns a Remedy into what a user would type.

A command is an argument list for the *target* environment (`/abs/python -m pip install ...`, or
`uv pip install --python /abs/python ...` where the target has no pip), never a bare `pip` that
would install into whatever is first on PATH. `check` and `explain` show these; `fix` executes
the same argument lists (never a shell string).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass, replace
from typing import Any, Optional

from .facts import Facts
from .rules import templates
from .rules.model import Remedy


@dataclass(frozen=True)
class Target:
    """The environment a command acts on: its interpreter and how packages get into it."""

    python: Optional[str]  # absolute path; None: unknown (no command that needs it is shown)
    installer: Optional[str] = "pip"  # "pip", "uv", or None: neither is available
    uv: str = "uv"  # the uv executable, where the installer is uv
    # why nothing should be installed into it (Remedy.for_target): "" where something may, None
    # where the facts cannot tell
    refuses: Optional[str] = None

    @classmethod
    def of(cls, facts: Facts) -> "Target":
        uv = facts.tools.get("uv")
        return cls(facts.platform.python_executable or None, installer(facts), (uv.path if uv else None) or "uv",
                   refuses(facts))

    @classmethod
    def interpreter(cls, python: str) -> "Target":
        """An interpreter nothing was probed for (explain without --check): pip where its
        environment has one (a venv's bin/pip), else uv where uv is on PATH (uv venvs have no pip)."""
        python = os.path.abspath(python)
        folder = os.path.dirname(python)
        if any(os.path.exists(os.path.join(folder, name)) for name in ("pip", "pip3", "pip.exe")):
            return cls(python, "pip")
        uv = shutil.which("uv")
        return cls(python, "uv", uv) if uv else cls(python, "pip")


def refuses(facts: Facts) -> Optional[str]:
    """Why the environment checked is not one to install into, "" where it is, None where the
    facts do not say which interpreter was checked."""
    if not facts.platform.python_executable:
        return None
    if facts.target is not None and facts.target.source == "self" and facts.torch.status == "missing":
        # the doctor's own venv, checked because nothing else was named: the README keeps it without
        # torch, and a torch installed there would not be the training environment's
        return "attn-doctor's own environment, checked because nothing was activated or named with --python; it stays without torch"
    if facts.platform.externally_managed:
        return "a system Python managed by the OS; pip refuses to install into it"
    return ""


def installer(facts: Facts) -> Optional[str]:
    """'pip' or 'uv' for the target environment, or None when neither is available."""
    pip = facts.tools.get("pip")
    if pip is None or pip.present:
        return "pip"
    uv = facts.tools.get("uv")
    if uv and uv.present:
        return "uv"
    return None


def _with_target(argv: list[str], target: Target) -> Optional[list[str]]:
    """A recipe's argument list with its first word made the target's: python, pip, or as is."""
    head, rest = argv[0], argv[1:]
    if head == "pip":
        if not target.python or target.installer is None:
            return None
        if target.installer == "uv":
            if not rest or rest[0] not in ("install", "uninstall", "show", "list", "freeze", "check"):
                return None
            return [target.uv, "pip", rest[0], "--python", target.python, *_uv_scoped(rest[1:])]
        return [target.python, "-m", "pip", *rest]
    if head == "python":
        return [target.python, *rest] if target.python else None
    return list(argv)


# pip's --upgrade / --force-reinstall act on the packages named; uv's --upgrade / --reinstall on
# every package of the resolution (torch too): uv's per-package forms keep pip's meaning.
_UV_PER_PACKAGE = {"--upgrade": "--upgrade-package", "-U": "--upgrade-package", "--force-reinstall": "--reinstall-package"}


def _uv_scoped(args: list[str]) -> list[str]:
    from packaging.requirements import InvalidRequirement, Requirement

    names = []
    for arg in args:
        try:
            names += [] if arg.startswith("-") else [Requirement(arg).name]
        except InvalidRequirement:
            pass  # the value of an option before it (--index-url URL)
    out = []
    for arg in args:
        if arg in _UV_PER_PACKAGE:
            for name in names:
                out += [_UV_PER_PACKAGE[arg], name]
        else:
            out.append(arg)
    return out


def pip_command(remedy: Remedy) -> Optional[list[str]]:
    """A pip remedy as a recipe-level argument list (`pip install ...`)."""
    if remedy.kind != "pip" or not remedy.requirement:
        return None
    argv = ["pip", "install", "--force-reinstall" if remedy.reinstall else "--upgrade"]
    if remedy.no_deps:
        argv.append("--no-deps")
    if remedy.no_build_isolation:
        argv.append("--no-build-isolation")
    return [*argv, remedy.requirement]


def resolve(argv: Optional[list[str]], evidence: dict[str, Any], target: Target) -> tuple[Optional[list[str]], set[str]]:
    """A recipe's command filled from the evidence and made the target's. None (with the fields
    that were missing) where a word needs a fact nobody knows: a command must run as it is."""
    if not argv:
        return None, set()
    words, missing = [], set()
    for word in argv:
        text, unknown = templates.render(word, evidence)
        if templates.required(word) & unknown:
            return None, missing | unknown
        missing |= unknown
        if _LIST_FIELD.fullmatch(word):
            words += [w for w in re.split(r"[,\s]+", text) if w]  # "{packages}": each its own word
        elif text:
            words.append(text)
    return (_with_target(words, target) if words else None), missing


_LIST_FIELD = re.compile(r"\{packages\}")


def pip_argv(remedy: Remedy, facts: Facts, tool: Optional[str] = None) -> Optional[list[str]]:
    """The argument list `fix` runs for a pip remedy on these facts. tool: 'pip' or 'uv' (fix's
    choice of installer); default the target's own (installer(facts))."""
    argv = pip_command(remedy)
    if not argv:
        return None
    target = Target.of(facts)
    if tool is not None:
        target = replace(target, installer=tool)
    return _with_target(argv, target)


def command_line(remedy: Remedy, facts: Optional[Facts] = None) -> Optional[str]:
    """The remedy's command as one copy-pasteable line, when it has one."""
    if remedy.command:
        return shlex.join(remedy.command)
    argv = pip_argv(remedy, facts) if facts is not None else None
    return shlex.join(argv) if argv else None


CONFIG_FILES = {
    "llamafactory": "the LLaMA-Factory training YAML",
    "transformers": "from_pretrained(...) or the model's config.json",
    "accelerate": "the accelerate config",
    "deepspeed": "the DeepSpeed config",
}


def edit_line(remedy: Remedy) -> Optional[str]:
    """A config or environment remedy as the setting it asks for (not a command)."""
    if remedy.kind == "env" and remedy.variable:
        return f"set the environment variable {remedy.variable}={shlex.quote(str(remedy.value or ''))}"
    if remedy.kind != "config" or remedy.key is None or remedy.config == "plan":
        return None  # a plan remedy's summary already says it in the file's own keys
    value = remedy.value
    if isinstance(value, bool):
        value = "true" if value else "false"
    setting = f'{remedy.key}="{value}"' if remedy.config == "transformers" else f"{remedy.key}: {value}"
    where = CONFIG_FILES.get(remedy.config or "")
    return f"set {setting} in {where}" if where else f"set {setting}"
