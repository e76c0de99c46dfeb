"""recipes/fa4.toml's check: flash-attn-4 beside a torch whose CUDA major the CuTe DSL's native
libraries installed do not match.
"""

from __future__ import annotations

from typing import Optional

from ...facts import Facts
from ...failures import CUTE_DSL_LIBS, cuda_major, fa4_extra
from ..conditions import SkipRule


def fa4_dsl_libs_mismatch(facts: Facts, data: dict) -> Optional[dict]:
    """flash-attn-4 is installed, torch is a CUDA 12 or 13 build, and the CuTe DSL's native
    libraries for that CUDA major are not (a plain `pip install flash-attn-4` beside a CUDA 13 torch)."""
    if not facts.version_of("flash-attn-4"):
        return None
    if not facts.torch.cuda:
        if facts.torch.status == "skipped":
            raise SkipRule("torch was not probed (--quick)")
        return None
    major = cuda_major(facts.torch.cuda)
    needed = CUTE_DSL_LIBS.get(major)
    if needed is None or facts.version_of(needed):
        return None
    present = [name for name in CUTE_DSL_LIBS.values() if facts.version_of(name)]
    return {
        "torch_cuda": facts.torch.cuda,
        "dsl_libs": needed,
        "dsl_libs_present": ", ".join(present) or "none",
        "fa4_extra": fa4_extra(facts.torch.cuda) or "?",
    }


# The checks recipes name (the registry in __init__.py collects them).
CHECKS = (fa4_dsl_libs_mismatch,)
