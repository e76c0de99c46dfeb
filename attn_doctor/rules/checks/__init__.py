"""Named checks: rule conditions that need real logic. Pure functions of Facts (and recipe data).

Each returns None when the problem is absent, a dict of evidence when present, and raises
SkipRule when the facts it needs were not gathered. Recipes refer to them by name
(`when = { check = "name" }`).

One module per recipes/ file whose rules name checks (pytorch.py is torch.toml's; config.toml's
LLaMA-Factory checks are llamafactory.py's, numerics.toml's known library bugs known_bugs.py's); what they
share is in common.py. CHECKS below is the registry: the loader refuses a recipe that names a
check missing from it, and the engine calls the checks through it.
"""

from __future__ import annotations

from ..conditions import CheckFn
from . import config, config_conflicts, fa4, gpu, install, kernels, known_bugs, libraries, llamafactory, numerics, pytorch, smoke

AREAS = (config, config_conflicts, fa4, gpu, install, kernels, known_bugs, libraries, llamafactory, numerics, pytorch, smoke)

CHECKS: dict[str, CheckFn] = {fn.__name__: fn for area in AREAS for fn in area.CHECKS}
