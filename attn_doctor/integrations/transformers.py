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
from ..results import PreflightResult
from . import run_preflight

__all__ = ["AttnDoctorCallback"]


class AttnDoctorCallback(TrainerCallback):
    """Run attn_doctor.preflight() on the Trainer's model when training begins, on every process.

    The model is traced (on a meta copy: its weights are untouched) under the autocast the Trainer
    will use (``args.bf16`` / ``args.fp16``), with ``example_inputs`` or, by default, token ids (a
    language model's ``input_ids``). The environment is checked as preflight() does.

    The keyword arguments are preflight()'s: ``fail_on`` ("error" / "warning"), ``on_failure``
    ("raise": PreflightError propagates out of ``trainer.train()`` before the first step; "warn":
    logged on the "attn_doctor" logger and training goes on), ``config``, ``quick``, ``sample``,
    ``smoke``, ``timeout``, ``dtype`` / ``autocast`` (override what the Trainer's arguments say).
    After it ran, ``callback.result`` holds the PreflightResult.
    """

    def __init__(
        self,
        *,
        example_inputs: Any = None,
        config: ConfigArg = None,
        fail_on: Literal["error", "warning"] = "error",
        on_failure: Literal["raise", "warn"] = "raise",
        quick: bool = False,
        sample: bool = True,
        smoke: bool = True,
        timeout: float = 120.0,
        dtype: DtypeArg = None,
        autocast: DtypeArg = None,
        distributed: Union[bool, Literal["auto"]] = "auto",
    ):
        self.options: dict[str, Any] = dict(example_inputs=example_inputs, config=config, fail_on=fail_on,
                                            on_failure=on_failure, quick=quick, sample=sample, smoke=smoke,
                                            timeout=timeout, distributed=distributed, dtype=dtype, autocast=autocast)
        self.result: Optional[PreflightResult] = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        autocast = "bf16" if getattr(args, "bf16", False) else ("fp16" if getattr(args, "fp16", False) else None)
        self.result = run_preflight(model, self.options, dtype=None, autocast=autocast)
