"""A Lightning ``Callback`` that runs attn_doctor.preflight() in ``on_fit_start``::

    from attn_doctor.integrations.lightning import AttnDoctorCallback

    trainer = lightning.Trainer(precision="bf16-mixed", callbacks=[AttnDoctorCallback()])
    trainer.fit(model)  # raises attn_doctor.PreflightError before the first step if the doctor finds errors

Install with ``pip install 'attn-doctor[lightning]'`` (Lightning 2.x, ``import lightning``).
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

try:
    from lightning.pytorch.callbacks import Callback
except ImportError as exc:  # said in the words a user acts on
    raise ImportError("attn_doctor.integrations.lightning needs Lightning 2.x: pip install 'attn-doctor[lightning]'") from exc

from ..api import ConfigArg, DtypeArg
from ..results import PreflightResult
from . import run_preflight

__all__ = ["AttnDoctorCallback"]

# Lightning's precision setting -> (dtype of the weights, autocast of the forward)
_PRECISION = {
    "bf16-mixed": (None, "bf16"), "16-mixed": (None, "fp16"),
    "bf16-true": ("bf16", None), "16-true": ("fp16", None),
}


class AttnDoctorCallback(Callback):
    """Run attn_doctor.preflight() on the LightningModule when ``fit`` starts, on every process
    (after the strategy has set up torch.distributed: rank 0 reports the fleet).

    The module is traced (on a meta copy: its weights are untouched) in the Trainer's precision
    ("bf16-mixed" -> bf16 autocast, "16-true" -> fp16 weights, ...), with ``example_inputs`` or
    else the module's own ``example_input_array``. The environment is checked as preflight() does.

    The keyword arguments are preflight()'s: ``fail_on``, ``on_failure`` ("raise": PreflightError
    propagates out of ``trainer.fit()`` before the first step; "warn": logged, and training goes
    on), ``config``, ``quick``, ``sample``, ``smoke``, ``timeout``, ``dtype`` / ``autocast``
    (override the Trainer's precision). After it ran, ``callback.result`` holds the PreflightResult.
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
        self.example_inputs = example_inputs
        self.options: dict[str, Any] = dict(config=config, fail_on=fail_on, on_failure=on_failure, quick=quick,
                                            sample=sample, smoke=smoke, timeout=timeout, distributed=distributed,
                                            dtype=dtype, autocast=autocast)
        self.result: Optional[PreflightResult] = None

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        dtype, autocast = _PRECISION.get(str(getattr(trainer, "precision", "")), (None, None))
        inputs = self.example_inputs if self.example_inputs is not None else getattr(pl_module, "example_input_array", None)
        options = dict(self.options, example_inputs=inputs)
        self.result = run_preflight(pl_module, options, dtype=dtype, autocast=autocast)
