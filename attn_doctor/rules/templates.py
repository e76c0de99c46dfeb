"""Rule messages and remedies as templates, filled from a finding's evidence.

`{field}` is replaced by the evidence's value. A remedy must read well when a fact is unknown (a
log that never printed the torch version), so:

- `[?...?]` is an optional part, kept only when every field inside is known:
  "Reinstall flash-attn[? {flash_attn}?] built for torch[? {torch}?]";
- `[?A|B?]` keeps A when its fields are known, else B: "[?the wheel {wheel}|the wheel that fits?]";
- a field that is unknown anywhere else is said in words ("the installed torch"), and the remedy
  gets the command that finds it (`how_to_find`): never a `<torch>` or `?` shown to a user.
Pure: no I/O.
"""

from __future__ import annotations

import re
import string
from typing import Any

# field -> (what to say when it is unknown, the command that finds it)
HOW_TO_FIND: dict[str, tuple[str, str]] = {
    "torch": ("the installed torch", 'python -c "import torch; print(torch.__version__)"'),
    "torch_cuda": ("torch's CUDA version", 'python -c "import torch; print(torch.version.cuda)"'),
    "torch_abi": ("torch's C++ ABI", 'python -c "import torch; print(torch._C._GLIBCXX_USE_CXX11_ABI)"'),
    "fa4_extra": ("the flash-attn-4 extra for torch's CUDA ([cu13] on CUDA 13, none on CUDA 12)", 'python -c "import torch; print(torch.version.cuda)"'),
    "cuda_xy": ("torch's CUDA version, without the dot", 'python -c "import torch; print(torch.version.cuda)"'),
    "flash_attn": ("the installed flash-attn", "pip show flash-attn"),
    "xformers": ("the installed xformers", "pip show xformers"),
    "triton": ("the installed triton", "pip show triton"),
    "transformers": ("the installed transformers", "pip show transformers"),
    "llamafactory": ("the installed LLaMA-Factory", "pip show llamafactory"),
    "wheel": (
        "the release wheel named for your torch, CUDA, C++ ABI and Python",
        'python -c "import sys, torch; print(torch.__version__, torch.version.cuda, torch._C._GLIBCXX_USE_CXX11_ABI, sys.version_info[:2])"',
    ),
    "gpu": ("this GPU", "nvidia-smi --query-gpu=name,compute_cap --format=csv"),
    "sm": ("this GPU's architecture", "nvidia-smi --query-gpu=name,compute_cap --format=csv"),
    "capability": ("this GPU's compute capability", "nvidia-smi --query-gpu=name,compute_cap --format=csv"),
    "driver": ("the driver", "nvidia-smi"),
    "driver_cuda": ("the CUDA version the driver supports", "nvidia-smi  (top right: CUDA Version)"),
    "driver_cuda_digits": ("the driver's CUDA version, without the dot (e.g. 124)", "nvidia-smi  (top right: CUDA Version)"),
    "libc_version": ("this system's glibc", "ldd --version"),
    "nvcc": ("nvcc's CUDA version", "nvcc --version"),
    "python": ("the training environment's Python", "which python"),
    "packages": ("the package whose compiled extension fails", "attn-doctor check  (names every compiled extension built for another torch)"),
}

_FORMATTER = string.Formatter()
_OPTIONAL = re.compile(r"\[\?(.*?)\?\]", re.S)


def _key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name.split(".")[0].split("[")[0])


def known(value: Any) -> bool:
    return value not in (None, "", "?")


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
        return HOW_TO_FIND.get(key, (key.replace("_", " "), ""))[0]


def render(text: str, evidence: dict[str, Any]) -> tuple[str, set[str]]:
    """The filled text, and the fields that were unknown where they had to be said in words."""
    values = {_key(k): v for k, v in evidence.items() if known(v)}

    def optional(m: re.Match) -> str:
        for branch in m.group(1).split("|"):
            if fields(branch) <= set(values):
                return branch
        return ""

    text = _OPTIONAL.sub(optional, text)
    missing: set[str] = set()
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


def how_to_find(missing: set[str]) -> str:
    """One line: how to look up the facts a remedy had to leave in words."""
    parts = [f"{HOW_TO_FIND[f][0]}: {HOW_TO_FIND[f][1]}" for f in sorted(missing) if f in HOW_TO_FIND and HOW_TO_FIND[f][1]]
    return ("Find " + "; ".join(parts)) if parts else ""
