"""The GPUs a check can judge for without having them (`check --gpu NAME` / `--capability X.Y`):
the catalogue shipped in gpus.toml beside this file, and what follows from a compute capability.

A login node without the GPU the job will get asks "will this config and this environment work on
the T4 partition?"; the answer needs only the capability (native bf16 and TF32 from 8.0, fp8 matrix
multiplies from 8.9) and, for the report, a name and the memory. Standard library only.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional

from .errors import UsageError
from .facts import AssumedGpu

CATALOGUE = Path(__file__).with_name("gpus.toml")
TF32_FROM = (8, 0)
FP8_FROM = (8, 9)


def capability_tuple(capability: str) -> tuple[int, int]:
    major, _, minor = capability.partition(".")
    return int(major), int(minor or 0)


def has_fp8(capability: str) -> bool:
    """fp8 matrix multiplies (torch._scaled_mm, Transformer Engine, torchao float8): Ada, Hopper and later."""
    try:
        return capability_tuple(capability) >= FP8_FROM
    except ValueError:
        return False


def has_tf32(capability: str) -> bool:
    try:
        return capability_tuple(capability) >= TF32_FROM
    except ValueError:
        return False


def _norm(name: str) -> str:
    text = name.lower()
    for word in ("nvidia", "tesla", "geforce", "quadro"):
        text = text.replace(word, "")
    return re.sub(r"[\s_\-]+", "", text)


# What nvidia-smi and the driver add to a model's name (Tesla V100-SXM2-16GB, NVIDIA H100 80GB
# HBM3, NVIDIA A100-SXM4-40GB MIG 1g.5gb): its memory, memory type, form factor and MIG slice,
# none of which changes the compute capability.
_VARIANT = re.compile(r"(?<![a-z0-9])(?:\d+\s?gb|hbm\d*e?|g?ddr\d+x?|sxm\d*|pcie|nvl\d*|mig|\d+g\.\d+gb)(?![a-z0-9])")
_MEMORY = re.compile(r"(?<![A-Za-z0-9.])(\d{1,3})\s?GB(?![A-Za-z0-9])", re.IGNORECASE)


def _model(name: str) -> str:
    """The model in a name as the driver prints it, without what _VARIANT strips."""
    return _norm(_VARIANT.sub(" ", name.lower()))


def memory_in_name(name: str) -> Optional[int]:
    """The memory a name states ("Tesla V100-SXM2-16GB": 16), in GB; None where it states none
    (a MIG slice's 5gb is the slice's, not the GPU's)."""
    found = _MEMORY.search(re.sub(r"\bmig\b.*", "", name, flags=re.IGNORECASE))
    return int(found.group(1)) if found else None


@lru_cache(maxsize=1)
def catalogue() -> tuple[dict, ...]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    with CATALOGUE.open("rb") as fh:
        return tuple(tomllib.load(fh)["gpu"])


@lru_cache(maxsize=1)
def amd_catalogue() -> tuple[dict, ...]:
    """The AMD GPUs of the catalogue: name, aliases, LLVM target (gfx)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    with CATALOGUE.open("rb") as fh:
        return tuple(tomllib.load(fh).get("amd_gpu", ()))


@lru_cache(maxsize=1)
def _amd_pattern() -> re.Pattern:
    aliases = sorted({a for e in amd_catalogue() for a in (e["name"], *e.get("aliases", ()))}, key=len, reverse=True)
    # "RX 7900 XTX", "rx7900xtx", "Radeon RX 7900 XTX", "MI300X": spaces optional, any case
    words = "|".join(r"[\s-]?".join(map(re.escape, a.split())) for a in aliases)
    return re.compile(r"(?<![A-Za-z0-9])(?:amd\s+)?(?:instinct\s+|radeon\s+)?(?P<name>%s)(?![A-Za-z0-9])" % words, re.IGNORECASE)


def amd_gpus_in(text: str) -> list[tuple[str, str]]:
    """The AMD GPUs a text names, as (name as written, gfx target): model names of the catalogue and
    bare LLVM targets ("gfx1100", "gfx942:sramecc+:xnack-")."""
    out: list[tuple[str, str]] = []
    by_alias = {_norm(a): e["gfx"] for e in amd_catalogue() for a in (e["name"], *e.get("aliases", ()))}
    for m in _amd_pattern().finditer(text):
        gfx = by_alias.get(_norm(m.group("name")))
        if gfx and (m.group("name"), gfx) not in out:
            out.append((m.group("name"), gfx))
    for m in re.finditer(r"(?<![A-Za-z0-9_])(gfx[0-9]{2,4}[a-f]?)(?![0-9a-z])", text, re.IGNORECASE):
        gfx = m.group(1).lower()
        if all(g != gfx for _n, g in out):
            out.append((gfx, gfx))
    return out


def _assumed(entry: dict, given: str) -> AssumedGpu:
    named = memory_in_name(given)  # the variant the job gets, where its name says which
    memory_gib = named or entry.get("memory_gib")
    return AssumedGpu(name=entry["name"], capability=entry["capability"], given=given,
                      memory_mib=int(memory_gib * 1024) if memory_gib else None,
                      fp8=has_fp8(entry["capability"]),
                      source=entry.get("source", "") + (f"; memory as the name gives it ({named} GB)" if named else ""))


def _flag(option: str) -> str:
    return "--" + option


def lookup(name: Optional[str] = None, capability: Optional[str] = None, spell: Callable[[str], str] = _flag) -> AssumedGpu:
    """The GPU named (a catalogue name or alias, any case, with or without NVIDIA/Tesla/GeForce, or
    as nvidia-smi and the driver print it, memory and form factor included) or of a compute
    capability ("7.5"). Raises UsageError with the closest names for an unknown one,
    naming the option as the caller spells it (spell("gpu"): "--gpu" on the command line)."""
    if capability is not None:
        if not re.fullmatch(r"\d{1,2}\.\d", capability.strip()):
            raise UsageError(f"{_given(spell, 'capability', capability)}: expected a compute capability such as 7.5 or 9.0")
        capability = capability.strip()
        same = [e for e in catalogue() if e["capability"] == capability]
        label = f"a GPU of compute capability {capability}"
        if same:
            label += f" (such as {', '.join(e['name'] for e in same[:3])})"
        return AssumedGpu(name=label, capability=capability, given=capability, fp8=has_fp8(capability),
                          source="the compute capability given")
    wanted = _norm(name or "")
    if not wanted:
        raise UsageError(f"{spell('gpu')}: give a GPU name such as t4, a100 or h100 (attn-doctor check --gpu list shows them all)")
    names: dict[str, dict] = {}
    for entry in catalogue():
        for alias in (entry["name"], *entry.get("aliases", ())):
            names.setdefault(_norm(alias), entry)
    model = _model(name or "")
    for key in (wanted, model):
        if key in names:
            return _assumed(names[key], name)
    # one suggestion per GPU, whichever of its names came close
    close = dict.fromkeys(names[c]["name"] for c in difflib.get_close_matches(model or wanted, list(names), n=12, cutoff=0.5))
    hint = f"; did you mean {', '.join(list(close)[:3])}?" if close else ""
    raise UsageError(f"{_given(spell, 'gpu', name)}: not a GPU attn-doctor knows{hint} (`attn-doctor check --gpu list` shows them; "
                     f"{spell('capability')} X.Y judges for any compute capability)")


def _given(spell: Callable[[str], str], option: str, value) -> str:
    flag = spell(option)
    return f"{flag} {value}" if flag.startswith("-") else f"{flag}={value}"


def listing() -> list[str]:
    """One line per catalogued GPU, for `check --gpu list`."""
    lines = []
    for e in catalogue():
        cap = e["capability"]
        traits = ["bf16 native" if has_tf32(cap) else "no native bf16", "tf32" if has_tf32(cap) else "no tf32",
                  "fp8" if has_fp8(cap) else "no fp8"]
        lines.append(f"{e['name']:<26} sm{cap.replace('.', ''):<4} {e['memory_gib']:>4} GB  {', '.join(traits)}"
                     f"   (--gpu {e['aliases'][0] if e.get('aliases') else e['name']})")
    return lines
