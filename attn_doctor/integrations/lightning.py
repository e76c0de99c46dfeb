"""A Lightning ``Callback`` that runs attn_doctor.preflight() in ``on_fit_start``::

    from attn_doctor.integrations.lightning import AttnDoctorCallback

    trainer = lightning.Trainer(precision="bf16-mixed", callbacks=[AttnDoctorCallback()])
    trainer.fit(model)  # raises attn_doctor.PreflightError before the first step if the doctor finds errors

Install with ``pip install 'attn-doctor[lightning]'`` (Lightning 2.x, ``import lightning``).
"""

from __future__ import annotations

from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError as exc:  # said in the words a user acts on
    raise ImportError("attn_doctor.integrations.lightning needs Lightning 2.x: pip install 'attn-doctor[lightning]'") from exc

from . import PreflightCallback, first_batch

__all__ = ["AttnDoctorCallback"]

# Lightning's precision setting -> (dtype of the weights, autocast of the forward)
_PRECISION = {
    "bf16-mixed": (None, "bf16"), "16-mixed": (None, "fp16"),
    "bf16-true": ("bf16", None), "16-true": ("fp16", None),
}


class AttnDoctorCallback(PreflightCallback, Callback):
    """Run attn_doctor.preflight() on the LightningModule when ``fit`` starts, on every process
    (after the strategy has set up torch.distributed: rank 0 reports the fleet).

    The module is traced (on a meta copy: its weights are untouched) in the Trainer's precision
    ("bf16-mixed" -> bf16 autocast, "16-true" -> fp16 weights, ...), with ``example_inputs``, else
    the module's own ``example_input_array``, else the first element of one batch of its training
    dataloader (a batch ``(x, y)`` gives ``x``; a dict gives the forward's keyword arguments). The
    environment is checked as preflight() does.

    The keyword arguments are preflight()'s: ``fail_on``, ``on_failure`` ("raise": PreflightError
    propagates out of ``trainer.fit()`` before the first step; "warn": logged, and training goes
    on), ``config``, ``quick``, ``sample``, ``smoke``, ``timeout``, ``dtype`` / ``autocast``
    (override the Trainer's precision); and ``on_error``: a problem of the doctor itself (a batch
    the forward does not take, bad arguments) is logged and training goes on ("warn", the default),
    or raised ("raise"). After it ran, ``callback.result`` holds the PreflightResult (also when
    PreflightError was raised) and ``callback.error`` the doctor's own problem, if any.
    """

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        dtype, autocast = _PRECISION.get(str(getattr(trainer, "precision", "")), (None, None))
        inputs = self.example_inputs if self.example_inputs is not None else getattr(pl_module, "example_input_array", None)
        if inputs is None:
            inputs = _forward_input(first_batch(_train_dataloader(trainer, pl_module)))
        self._preflight(pl_module, inputs, dtype=dtype, autocast=autocast)


def _train_dataloader(trainer: Any, pl_module: Any) -> Any:
    """The training dataloader as Lightning will use it: the one given to ``fit`` (the fit loop's data
    source: Lightning loads it only after on_fit_start), else the datamodule's, else the module's."""
    loader = getattr(trainer, "train_dataloader", None)
    if loader is not None and not callable(loader):
        return loader
    source = getattr(getattr(trainer, "fit_loop", None), "_data_source", None)
    try:
        if source is not None and source.is_defined():
            return source.dataloader()
    except Exception:  # noqa: BLE001 - Lightning's internals moved: the public hooks below
        pass
    for owner in (getattr(trainer, "datamodule", None), pl_module):
        make = getattr(owner, "train_dataloader", None)
        if callable(make):
            try:
                return make()
            except Exception:  # noqa: BLE001 - not defined here (Lightning raises): the next owner
                continue
    return None


def _forward_input(batch: Any) -> Any:
    """What training_step's batch gives forward, by the common shapes: (x, y) -> x, a dict as is."""
    if isinstance(batch, (list, tuple)) and batch:
        return batch[0]
    return batch
