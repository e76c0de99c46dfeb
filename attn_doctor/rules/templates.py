"""Rule messages and remedies as templates, filled from a finding's evidence.

`{field}` is replaced by the evidence's value. A remedy must read well when a fact is unknown (a
log that never printed the torch version), so:

- `[?...?]` is an optional part, kept only when every field inside is known:
  "Reinstall flash-attn[? {flash_attn}?] built for torch[? {torch}?]";
- `[?A|B?]` keeps A when its fields are known, else B: "[?the wheel {wheel}|the wheel that fits?]";
- a field that is unknown anywhere else is left out (never said in words inside a sentence, which
  reads as if it were the value), and the remedy gets its own line saying how to find it
  (`find_lines`). Every shipped template keeps the fields a report or a log may lack inside
  optional parts; tests/test_templates.py renders them all against reports with no facts.
An empty string is a known value (a list with nothing more to say); None and "?" are unknown.
Pure: no I/O.
"""

from __future__ import annotations

import re
import shlex
import string
from typing import Any, Optional

_VERSION = 'import importlib.metadata as m; print(m.version("{}"))'
_TORCH = "import torch; print(torch.{})"
_SMI = ["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv"]

# field -> (what it is, the command that finds it: an argument list; "{python}" is the target interpreter)
HOW_TO_FIND: dict[str, tuple[str, list[str]]] = {
    "torch": ("the installed torch", ["{python}", "-c", _TORCH.format("__version__")]),
    "torch_cuda": ("torch's CUDA version", ["{python}", "-c", _TORCH.format("version.cuda")]),
    "torch_abi": ("torch's C++ ABI", ["{python}", "-c", _TORCH.format("_C._GLIBCXX_USE_CXX11_ABI")]),
    "fa4_extra": ("the flash-attn-4 extra for torch's CUDA ([cu13] on CUDA 13, none on CUDA 12)", ["{python}", "-c", _TORCH.format("version.cuda")]),
    "cuda_xy": ("torch's CUDA version (the wheel index's cuXY is it without the dot)", ["{python}", "-c", _TORCH.format("version.cuda")]),
    "flash_attn": ("the installed flash-attn", ["{python}", "-c", _VERSION.format("flash-attn")]),
    "xformers": ("the installed xformers", ["{python}", "-c", _VERSION.format("xformers")]),
    "triton": ("the installed triton", ["{python}", "-c", _VERSION.format("triton")]),
    "transformers": ("the installed transformers", ["{python}", "-c", _VERSION.format("transformers")]),
    "llamafactory": ("the installed LLaMA-Factory", ["{python}", "-c", _VERSION.format("llamafactory")]),
    "wheel": (
        "the release wheel named for your torch, CUDA, C++ ABI and Python",
        ["{python}", "-c", "import sys, torch; print(torch.__version__, torch.version.cuda, torch._C._GLIBCXX_USE_CXX11_ABI, sys.version_info[:2])"],
    ),
    "gpu": ("this GPU", _SMI),
    "gpus": ("the GPUs", _SMI),
    "sm": ("this GPU's architecture", _SMI),
    "capability": ("this GPU's compute capability", _SMI),
    "driver": ("the driver", ["nvidia-smi"]),
    "driver_cuda": ("the CUDA version the driver supports (top right: CUDA Version)", ["nvidia-smi"]),
    "driver_cuda_digits": ("the CUDA version the driver supports (top right: CUDA Version; cuXY is it without the dot)", ["nvidia-smi"]),
    "libc_version": ("this system's glibc", ["ldd", "--version"]),
    "nvcc": ("nvcc's CUDA version", ["nvcc", "--version"]),
}

_FORMATTER = string.Formatter()
_OPTIONAL = re.compile(r"\[\?(.*?)\?\]", re.S)


def _key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name.split(".")[0].split("[")[0])


def known(value: Any) -> bool:
    return value is not None and value != "?"


def fields(text: str) -> set[str]:
    """Every field a template names, optional parts included."""
    try:
        return {_key(name) for _, name, _, _ in _FORMATTER.parse(text.replace("[?", "").replace("?]", "")) if name}
    except ValueError:
        return set()


class _Fields(dict):
    def __init__(self, evidence: dict[str, Any], missing: set[str]):
        super().__init__({_key(k): v for k, v in evidence.items() if known(v)})
        self.missing = missing

    def __missing__(self, key: str) -> str:
        self.missing.add(key)
        return ""


def render(text: str, evidence: dict[str, Any]) -> tuple[str, set[str]]:
    """The filled text, and the fields it had to leave out (unknown)."""
    values = {_key(k): v for k, v in evidence.items() if known(v)}

    missing: set[str] = set()

    def optional(m: re.Match) -> str:
        branches = m.group(1).split("|")
        missing.update(fields(branches[0]) - set(values))  # the first branch says the most
        for branch in branches:
            if fields(branch) <= set(values):
                return branch
        return ""

    text = _OPTIONAL.sub(optional, text)
    try:
        return _FORMATTER.vformat(text, (), _Fields(evidence, missing)), missing
    except (ValueError, IndexError, KeyError, AttributeError):
        return text, set()


def fill(text: str, evidence: dict[str, Any]) -> str:
    return render(text, evidence)[0]


def required(text: str) -> set[str]:
    """The fields a template cannot do without (those outside optional parts)."""
    return fields(_OPTIONAL.sub("", text))


def complete(text: str, evidence: dict[str, Any]) -> bool:
    """Whether every field outside optional parts is known (a message worth showing as it is)."""
    values = {_key(k) for k, v in evidence.items() if known(v)}
    return required(text) <= values


def find_lines(missing: set[str], python: Optional[str] = None) -> list[str]:
    """One line per unknown fact a remedy left out: what it is and the command that finds it, for
    the target interpreter when it is known."""
    out = []
    for f in sorted(missing):
        if f not in HOW_TO_FIND:
            continue
        what, argv = HOW_TO_FIND[f]
        if "{python}" in argv and not python:
            continue  # no interpreter to name: a bare `python` could be another environment's
        line = f"find {what} with: {shlex.join([python if w == '{python}' else w for w in argv])}"
        if line not in out:
            out.append(line)
    return out
