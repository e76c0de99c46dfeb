"""Remedies as commands: the one place that turns a Remedy into what a user would type.

`check` shows these; `fix` executes the same argument lists (never a shell string).
"""

from __future__ import annotations

import shlex
from typing import Optional

from .facts import Facts
from .rules.model import Remedy


def installer(facts: Facts) -> Optional[str]:
    """'pip' or 'uv' for the target environment, or None when neither is available."""
    pip = facts.tools.get("pip")
    if pip is None or pip.present:
        return "pip"
    uv = facts.tools.get("uv")
    if uv and uv.present:
        return "uv"
    return None


def pip_argv(remedy: Remedy, facts: Facts, tool: Optional[str] = None) -> Optional[list[str]]:
    """tool: 'pip' or 'uv' (fix's choice); default installer(facts)."""
    if remedy.kind != "pip" or not remedy.requirement:
        return None
    python = facts.platform.python_executable or "python"
    tool = tool or installer(facts)
    if tool == "uv":
        argv = [facts.tools["uv"].path or "uv", "pip", "install", "--python", python]
    else:
        argv = [python, "-m", "pip", "install"]
    if remedy.reinstall:
        argv += ["--force-reinstall"]
    else:
        argv += ["--upgrade"]
    if remedy.no_deps:
        argv += ["--no-deps"]
    if remedy.no_build_isolation:
        argv += ["--no-build-isolation"]
    argv.append(remedy.requirement)
    return argv


def command_line(remedy: Remedy, facts: Facts) -> Optional[str]:
    """The remedy as one copy-pasteable line, when it has one."""
    argv = pip_argv(remedy, facts)
    if argv:
        return shlex.join(argv)
    if remedy.kind == "config" and remedy.key is not None:
        value = remedy.value
        if isinstance(value, bool):
            value = "true" if value else "false"
        where = {
            "llamafactory": "in the LLaMA-Factory training YAML",
            "transformers": "in from_pretrained(...) or the model's config.json",
            "accelerate": "in the accelerate config",
            "deepspeed": "in the DeepSpeed config",
        }.get(remedy.config or "", "")
        if remedy.config == "transformers":
            return f'{remedy.key}="{value}"  ({where})'
        return f"{remedy.key}: {value}  ({where})" if where else f"{remedy.key}: {value}"
    if remedy.kind == "env" and remedy.variable:
        return f"export {remedy.variable}={shlex.quote(str(remedy.value or ''))}"
    return remedy.detail
