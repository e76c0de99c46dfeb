"""Ready callbacks that run attn_doctor.preflight() when training starts, one module per framework
(each imports its framework, installed with the matching extra): the transformers TrainerCallback
``attn_doctor.integrations.transformers.AttnDoctorCallback`` (``attn-doctor[transformers]``, run in
``on_train_begin``) and the Lightning Callback ``attn_doctor.integrations.lightning.AttnDoctorCallback``
(``attn-doctor[lightning]``, run in ``on_fit_start``).

Both judge the model the framework is about to train, in the precision the trainer will use, and
raise attn_doctor.PreflightError out of ``trainer.train()`` / ``trainer.fit()`` (or log, with
``on_failure="warn"``). Under torch.distributed every rank checks itself and rank 0 reports the fleet.

May import (the layering contract, pyproject.toml): the API (attn_doctor.api, results) and what is
below it. Never render or the CLI.
"""

from __future__ import annotations

from typing import Any, Optional

from ..api import preflight
from ..results import PreflightResult

__all__ = ["run_preflight"]


def run_preflight(model: Any, options: dict[str, Any], dtype: Optional[str], autocast: Optional[str]) -> PreflightResult:
    """preflight() for a callback: the precision the trainer uses, unless the callback was given one."""
    kwargs = dict(options)
    for key, trainers in (("dtype", dtype), ("autocast", autocast)):
        if kwargs.get(key) is None:  # not given to the callback: what the trainer uses
            kwargs[key] = trainers
    return preflight(model, **kwargs)
