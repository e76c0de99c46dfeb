"""Guards read from torch's own kernel tables (support/dispatch.py: the dtypes and devices each of
torch's kernels is compiled for, read from its sources): whether a later torch has the kernel that
refused a dtype, and whether the kernel is torch's CPU one. They read that table (loaded once) and
the lines around; nothing of the machine."""

from __future__ import annotations

import re
from typing import Optional

# a torch release the lines around a message state ("torch 2.6.0+cpu", "torch==2.1.0+cu121", "PyTorch version: 2.0.1")
# (not collect_env's "CUDA used to build PyTorch: 12.1", which is CUDA's)
TORCH_STATED = re.compile(r"(?i)(?<!used to build )\b(?:py)?torch(?: version)?\s*(?:==|:|=|\s)\s*v?(?P<v>\d+\.\d+(?:\.\d+)?)(?P<local>\+\w+)?")


def op_dtype_in_later_torch(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """torch's own CUDA kernel `op` refusing `dtype` where a later torch dispatches it (read from
    torch's sources): the release in use predates it. {"since": the oldest release read that has it}.
    None where the lines around it show a torch at or past that release, or a CPU-only torch (its
    CPU kernel is the one that refused)."""
    from packaging.version import Version

    from ..support.dispatch import first_release_with, releases_read

    since = first_release_with(groups.get("op") or "", groups.get("dtype") or "")
    if not since:
        return None
    for line in [*before[-20:], *after[:20]]:
        for m in TORCH_STATED.finditer(line):
            if (m.group("local") or "").lower() == "+cpu":
                return None
            if Version(m.group("v")) >= Version(since):
                return None
    return {"since": since, "releases_read": ", ".join(releases_read())}


def op_dtype_not_in_later_torch(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """The op is not torch's, or no torch release read dispatches the dtype for it."""
    return None if op_dtype_in_later_torch(groups, before, after) else {}


def op_is_torch_cpu_kernel(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """`op` names a kernel torch's sources have for the CPU alone (upsampling's
    compute_indices_weights_*): the op that refused the dtype ran on the CPU."""
    from ..support.dispatch import devices_of

    return {} if devices_of(groups.get("op") or "") == {"cpu"} else None
