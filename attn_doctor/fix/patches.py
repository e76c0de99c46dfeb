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


def trace_patch(result: Result, facts: Facts) -> Optional[list[tuple[str, bytes, str]]]:
    """The tracer's patches for this rule's findings (a unified diff in each finding's `patch`
    field), one (file, new bytes, diff) per file: the findings at several lines of one file are
    applied bottom up, so that each hunk's line numbers still hold."""
    by_file: dict[Path, list[tuple[int, str]]] = {}
    for finding in facts.dtype_path.findings:
        diff = finding.get("patch") if finding.get("id") == result.rule else None
        if not diff:
            continue
        target = _patch_target(diff)
        if target is None:
            raise PatchError("the tracer's patch names no file")
        path = Path(target)
        if not path.is_absolute():
            path = Path.cwd() / path
        hunk = next((_HUNK.match(line) for line in diff.splitlines() if _HUNK.match(line)), None)
        by_file.setdefault(path, []).append((int(hunk.group(1)) if hunk else 0, diff))
    out = []
    for path, diffs in by_file.items():
        try:
            old = path.read_bytes()
        except OSError as exc:
            raise PatchError(f"{path}: cannot read the file the patch is for: {exc.strerror or exc}") from None
        text = old.decode("utf-8")
        seen = set()
        for _, diff in sorted(diffs, key=lambda d: -d[0]):
            if diff not in seen:  # one call site reached by several layers has one patch
                seen.add(diff)
                text = apply_unified_diff(text, diff)
        new = text.encode("utf-8")
        out.append((str(path), new, unified_diff(str(path), old, new)))
    return out or None


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


# GSA's chunk kernel run once, forward and backward, in bf16 on the GPU, in the target interpreter
# (minutes: fla autotunes every kernel on its first call):
# the states_in_fp32 edit changes the dtype of the states its kernels load, and a kernel that
# multiplies them with half-precision q (`tl.dot(b_q, b_h)`) no longer compiles ("Both operands
# must be same dtype"). fla/__init__ imports its models (transformers of fla's time); the ops do
# not need it, so `fla` is a bare namespace here.
_GSA_RUN = """
import sys, types
try:
    import torch
except BaseException:
    print("NO-GPU"); raise SystemExit(0)
if not torch.cuda.is_available():
    print("NO-GPU"); raise SystemExit(0)
pkg = types.ModuleType("fla"); pkg.__path__ = [sys.argv[1]]; sys.modules["fla"] = pkg
from fla.ops.gsa.chunk import chunk_gsa
B, T, H, K, V, M = 1, 64, 2, 64, 64, 16
q, k, v = (torch.randn(B, T, H, d, device="cuda", dtype=torch.bfloat16).requires_grad_() for d in (K, K, V))
s = torch.randn(B, T, H, M, device="cuda", dtype=torch.bfloat16).requires_grad_()
g = torch.nn.functional.logsigmoid(torch.randn(B, T, H, M, device="cuda")).to(torch.bfloat16).requires_grad_()
o, _ = chunk_gsa(q, k, v, s, g)
o.float().sum().backward()
torch.cuda.synchronize()
print("OK" if bool(torch.isfinite(o).all()) else "NONFINITE")
"""


def verify_fla_states_edit(python: str, fla_dir: str, timeout: float = 900) -> Optional[str]:
    """Run the edited GSA op where it will run: None when there is no GPU to run it on (the edit
    stays unverified), "" when it runs with finite results, else why it does not (the last line
    of Triton's or torch's error)."""
    try:
        proc = subprocess.run([python, "-c", _GSA_RUN, fla_dir], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"GSA's bf16 forward did not finish within {timeout:.0f} s"
    except OSError as exc:
        return f"could not run {python}: {exc}"
    out = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and out and out[-1] == "NO-GPU":
        return None
    if proc.returncode == 0 and out and out[-1] == "OK":
        return ""
    if proc.returncode == 0:
        return "GSA's bf16 forward gave non-finite results"
    lines = [line.strip() for line in proc.stderr.strip().splitlines() if line.strip()]
    return lines[-1][:400] if lines else f"GSA's bf16 forward exited {proc.returncode}"

