"""A transformers ``TrainerCallback`` that runs attn_doctor.preflight() in ``on_train_begin``::

    from attn_doctor.integrations.transformers import AttnDoctorCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[AttnDoctorCallback()])
    trainer.train()  # raises attn_doctor.PreflightError before the first step if the doctor finds errors

Install with ``pip install 'attn-doctor[transformers]'``.
"""

from __future__ import annotations

from typing import Any

try:
    from transformers import TrainerCallback
except ImportError as exc:  # said in the words a user acts on
    raise ImportError("attn_doctor.integrations.transformers needs transformers: "
                      "pip install 'attn-doctor[transformers]'") from exc

from . import PreflightCallback, first_batch

__all__ = ["AttnDoctorCallback"]


class AttnDoctorCallback(PreflightCallback, TrainerCallback):
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

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        autocast = "bf16" if getattr(args, "bf16", False) else ("fp16" if getattr(args, "fp16", False) else None)
        inputs = self.example_inputs
        if inputs is None and not _takes_token_ids(model):
            inputs = first_batch(kwargs.get("train_dataloader"))
        self._preflight(model, inputs, dtype=None, autocast=autocast)


def _takes_token_ids(model: Any) -> bool:
    """A transformers model, whose token ids the trace makes itself (no data needed)."""
    return hasattr(model, "config") and hasattr(model, "get_input_embeddings")
