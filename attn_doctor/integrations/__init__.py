"""Ready callbacks that run attn_doctor.preflight() when training starts, one module per framework
(each imports its framework, installed with the matching extra): the transformers TrainerCallback
``attn_doctor.integrations.transformers.AttnDoctorCallback`` (``attn-doctor[transformers]``, run in
``on_train_begin``) and the Lightning Callback ``attn_doctor.integrations.lightning.AttnDoctorCallback``
(``attn-doctor[lightning]``, run in ``on_fit_start``).

Both judge the model the framework is about to train, in the precision the trainer will use, on
one batch of the trainer's own training data unless given ``example_inputs``, and raise
attn_doctor.PreflightError out of ``trainer.train()`` / ``trainer.fit()`` when it finds problems (or
log them, with ``on_failure="warn"``). A problem of the doctor itself (a model it cannot trace, bad
arguments) is logged and training goes on, unless ``on_error="raise"``. Under torch.distributed
every rank checks itself and rank 0 reports the fleet.

May import (the layering contract, pyproject.toml): the API (attn_doctor.api, results) and what is
below it. Never render or the CLI.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, Optional, Union

from ..api import ConfigArg, DtypeArg, preflight
from ..errors import UsageError
from ..results import PreflightError, PreflightResult

__all__ = ["run_preflight", "first_batch", "CallbackRun", "PreflightCallback"]

log = logging.getLogger("attn_doctor")


class CallbackRun:
    """What a callback's preflight() came to, kept on the callback either way: ``result`` (the
    PreflightResult, also when it raised PreflightError), ``error`` (a problem of the doctor itself:
    bad arguments, a model it could not trace, an internal error; None when it ran)."""

    def __init__(self) -> None:
        self.result: Optional[PreflightResult] = None
        self.error: Optional[BaseException] = None


def run_preflight(model: Any, options: dict[str, Any], dtype: Optional[str], autocast: Optional[str],
                  run: Optional[CallbackRun] = None, on_error: str = "warn") -> Optional[PreflightResult]:
    """preflight() for a callback: the precision the trainer uses, unless the callback was given one.

    Findings at or above fail_on raise PreflightError as preflight() does (on_failure="raise"); a
    problem of the doctor itself never stops training unless on_error="raise": it is logged on the
    "attn_doctor" logger, and training goes on. ``run`` keeps the outcome either way."""
    run = run if run is not None else CallbackRun()
    kwargs = dict(options)
    for key, trainers in (("dtype", dtype), ("autocast", autocast)):
        if kwargs.get(key) is None:  # not given to the callback: what the trainer uses
            kwargs[key] = trainers
    try:
        run.result = preflight(model, **kwargs)
    except PreflightError as exc:
        run.result = exc.result
        raise
    except Exception as exc:  # noqa: BLE001 - the doctor's own problem: training is not stopped for it
        run.error = exc
        if on_error == "raise":
            raise
        log.warning("attn-doctor preflight did not run (training goes on; on_error='raise' stops it instead): %s: %s",
                    type(exc).__name__, exc)
        return None
    return run.result


def first_batch(loader: Any) -> Any:
    """One batch of the trainer's own training data, as the model's forward takes it (a dict of its
    keyword arguments, as transformers' Trainer passes them), or None where there is none. A fresh
    iterator of the loader: the trainer's own epoch iterator is not touched."""
    if loader is None:
        return None
    try:
        return next(iter(loader))
    except Exception as exc:  # noqa: BLE001 - no batch: preflight says which argument to pass
        log.warning("attn-doctor could not take a batch from the training dataloader (%s: %s)", type(exc).__name__, exc)
        return None


class PreflightCallback:
    """What both framework callbacks share: preflight()'s keywords, ``on_error``, and the outcome
    kept on the callback (``result``, ``error``). A framework's callback class derives from this and
    from its framework's base class, and calls ``_preflight`` from the hook where training starts."""

    def __init__(
        self,
        *,
        example_inputs: Any = None,
        config: ConfigArg = None,
        fail_on: Literal["error", "warning"] = "error",
        on_failure: Literal["raise", "warn"] = "raise",
        on_error: Literal["warn", "raise"] = "warn",
        quick: bool = False,
        sample: bool = True,
        smoke: bool = True,
        timeout: float = 120.0,
        dtype: DtypeArg = None,
        autocast: DtypeArg = None,
        distributed: Union[bool, Literal["auto"]] = "auto",
        numerics: bool = False,
    ):
        if on_error not in ("warn", "raise"):
            raise UsageError(f"on_error must be 'warn' or 'raise', not {on_error!r}")
        super().__init__()
        self.example_inputs = example_inputs
        self.on_error = on_error
        self.options: dict[str, Any] = dict(config=config, fail_on=fail_on, on_failure=on_failure, quick=quick,
                                            sample=sample, smoke=smoke, timeout=timeout, distributed=distributed,
                                            dtype=dtype, autocast=autocast, numerics=numerics)
        self._run = CallbackRun()

    @property
    def result(self) -> Optional[PreflightResult]:
        """The PreflightResult of the last run (also when it raised PreflightError), or None."""
        return self._run.result

    @property
    def error(self) -> Optional[BaseException]:
        """The doctor's own problem in the last run (bad arguments, a model it could not trace), or None."""
        return self._run.error

    def _preflight(self, model: Any, inputs: Any, dtype: Optional[str], autocast: Optional[str]) -> None:
        options = dict(self.options, example_inputs=inputs)
        run_preflight(model, options, dtype=dtype, autocast=autocast, run=self._run, on_error=self.on_error)
