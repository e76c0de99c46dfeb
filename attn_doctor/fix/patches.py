"""Code patches: the tracer's cast-before-the-call patch, and fla's states_in_fp32 workaround.

Both are computed as (file, new bytes, unified diff) and applied like any other journaled edit.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path
from typing import Optional

from ..facts import Facts
from ..report import Result
from .edits import unified_diff


class PatchError(Exception):
    pass


# ---------------------------------------------------------------- tracer patches


def trace_patch(result: Result, facts: Facts) -> Optional[tuple[str, bytes, str]]:
    """The tracer's patch for this finding (a unified diff in the finding's `patch` field)."""
    finding = next((f for f in facts.dtype_path.findings if f.get("id") == result.rule and f.get("patch")), None)
    if finding is None:
        return None
    diff = finding["patch"]
    target = _patch_target(diff)
    if target is None:
        raise PatchError("the tracer's patch names no file")
    path = Path(target)
    if not path.is_absolute():
        path = Path.cwd() / path
    try:
        old = path.read_bytes()
    except OSError as exc:
        raise PatchError(f"{path}: cannot read the file the patch is for: {exc.strerror or exc}") from None
    new = apply_unified_diff(old.decode("utf-8"), diff).encode("utf-8")
    return str(path), new, unified_diff(str(path), old, new)


def _patch_target(diff: str) -> Optional[str]:
    for line in diff.splitlines():
        if line.startswith("+++ "):
            name = line[4:].split("\t")[0].strip()
            return name[2:] if name.startswith("b/") else name
    return None


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_unified_diff(text: str, diff: str) -> str:
    """Apply a one-file unified diff strictly: every context and removed line must match."""
    lines = text.splitlines(True)
    out: list[str] = []
    pos = 0
    diff_lines = diff.splitlines(True)
    i = 0
    while i < len(diff_lines):
        match = _HUNK.match(diff_lines[i])
        i += 1
        if not match:
            continue
        start = int(match.group(1)) - 1 if match.group(2) != "0" else int(match.group(1))
        if start < pos:
            raise PatchError("overlapping hunks")
        out.extend(lines[pos:start])
        pos = start
        while i < len(diff_lines) and not diff_lines[i].startswith("@@"):
            line = diff_lines[i]
            i += 1
            tag, body = line[:1], line[1:]
            if tag in (" ", "-"):
                if pos >= len(lines) or lines[pos].rstrip("\r\n") != body.rstrip("\r\n"):
                    raise PatchError(f"the source changed since the trace: line {pos + 1} does not match the patch")
                if tag == " ":
                    out.append(lines[pos])
                pos += 1
            elif tag == "+":
                out.append(body if body.endswith("\n") else body + "\n")
            elif tag == "\\":
                continue
    out.extend(lines[pos:])
    return "".join(out)


def patch_file_name(rule: str, target: str) -> str:
    return f"attn-doctor-{rule}-{Path(target).stem}.patch"


# ---------------------------------------------------------------- fla states_in_fp32


def installed_package_dir(python: str, package: str) -> Optional[Path]:
    """Where `package` is installed for `python`, without importing it (find_spec of a top-level
    package does not run its code)."""
    code = (
        "import importlib.util, sys\n"
        f"s = importlib.util.find_spec({package!r})\n"
        "print(list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else '')\n"
    )
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = proc.stdout.strip()
    return Path(out) if proc.returncode == 0 and out else None


def fla_states_patch(facts: Facts) -> Optional[tuple[str, bytes, str]]:
    """fla/ops/gsa/chunk.py with states_in_fp32=True at its chunk_fwd_h calls (KNOWLEDGE 1.3)."""
    python = facts.platform.python_executable
    if not python or not os.path.exists(python):
        raise PatchError("the target interpreter is not on this machine: the installed fla cannot be edited from a report")
    root = installed_package_dir(python, "fla")
    if root is None:
        raise PatchError("fla is not importable by the target interpreter")
    path = root / "ops" / "gsa" / "chunk.py"
    try:
        old = path.read_bytes()
        tree = ast.parse(old)
    except (OSError, SyntaxError) as exc:
        raise PatchError(f"{path}: cannot read: {exc}") from None
    lines = old.decode("utf-8").splitlines(True)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "chunk_fwd_h":
            for kw in node.keywords:
                if kw.arg == "states_in_fp32" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
                    edits.append(kw.value)
    if not edits:
        return None  # this fla passes no states_in_fp32=False: nothing to patch
    for value in sorted(edits, key=lambda v: (v.lineno, v.col_offset), reverse=True):
        line = lines[value.lineno - 1]
        raw = line.encode("utf-8")
        raw = raw[: value.col_offset] + b"True" + raw[value.end_col_offset :]
        lines[value.lineno - 1] = raw.decode("utf-8")
    new = "".join(lines).encode("utf-8")
    return str(path), new, unified_diff(str(path), old, new)
