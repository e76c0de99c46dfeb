"""A transformers ``TrainerCallback`` that runs attn_doctor.preflight() in ``on_train_begin``::

    from attn_doctor.integrations.transformers import AttnDoctorCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[AttnDoctorCallback()])
    trainer.train()  # raises attn_doctor.PreflightError before the first step if the doctor finds errors

Install with ``pip install 'attn-doctor[transformers]'``.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

try:
    from transformers import TrainerCallback
except ImportError as exc:  # said in the words a user acts on
    raise ImportError("attn_doctor.integrations.transformers needs transformers: "
                      "pip install 'attn-doctor[transformers]'") from exc

from ..api import ConfigArg, DtypeArg
from ..errors import UsageError
from ..results import PreflightResult
from . import CallbackRun, first_batch, run_preflight

__all__ = ["AttnDoctorCallback"]


class AttnDoctorCallback(TrainerCallback):
    """Run attn_doctor.preflight() on the Trainer's model when training begins, on every process.

    The model is traced (on a meta copy: its weights are untouched) under the autocast the Trainer
    will use (``args.bf16`` / ``args.fp16``), with ``example_inputs`` or, by default, one batch of the
    Trainer's own training dataloader (passed to the forward as the Trainer does: its keyword
    arguments). The environment is checked as preflight() does.

    The keyword arguments are preflight()'s: ``fail_on`` ("error" / "warning"), ``on_failure``
    ("raise": PreflightError propagates out of ``trainer.train()`` before the first step; "warn":
    logged on the "attn_doctor" logger and training goes on), ``config``, ``quick``, ``sample``,
    ``smoke``, ``timeout``, ``dtype`` / ``autocast`` (override what the Trainer's arguments say); and
    ``on_error``: a problem of the doctor itself (a model it cannot trace, bad arguments) is logged
    and training goes on ("warn", the default), or raised ("raise").

    After it ran, ``callback.result`` holds the PreflightResult (also when PreflightError was raised)
    and ``callback.error`` the doctor's own problem, if any.
    """

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
    ):
        if on_error not in ("warn", "raise"):
            raise UsageError(f"on_error must be 'warn' or 'raise', not {on_error!r}")
        self.example_inputs = example_inputs
        self.on_error = on_error
        self.options: dict[str, Any] = dict(config=config, fail_on=fail_on, on_failure=on_failure, quick=quick,
                                            sample=sample, smoke=smoke, timeout=timeout, distributed=distributed,
                                            dtype=dtype, autocast=autocast)
        self._run = CallbackRun()

    @property
    def result(self) -> Optional[PreflightResult]:
        return self._run.result

    @property
    def error(self) -> Optional[BaseException]:
        return self._run.error

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        autocast = "bf16" if getattr(args, "bf16", False) else ("fp16" if getattr(args, "fp16", False) else None)
        inputs = self.example_inputs
        if inputs is None and not _takes_token_ids(model):
            inputs = first_batch(kwargs.get("train_dataloader"))
        options = dict(self.options, example_inputs=inputs)
        run_preflight(model, options, dtype=None, autocast=autocast, run=self._run, on_error=self.on_error)


def _takes_token_ids(model: Any) -> bool:
    """A transformers model, whose token ids the trace makes itself (no data needed)."""
    return hasattr(model, "config") and hasattr(model, "get_input_embeddings")
