"""The dtype tracer: find where a half-precision tensor is promoted to float32 on its way
to an attention kernel, and point at the source line.

Runtime code here depends on the standard library and torch only (it also runs inside another
interpreter, ``python -m attn_doctor.trace.child``), and returns plain JSON-able dicts:

- ``trace(target=None, model=None, inputs=None, hf=None, dtype=None, autocast=None, device="meta",
  train=False, capability=None, ...) -> dict``
- ``run_sample_forward(device="auto", dtype="bf16", autocast=None, capability=None,
  samples=None) -> dict`` (the built-in sample forward passes ``check`` runs)

Importing this package does not import torch.
"""


def trace(*args, **kwargs):
    from .api import trace as _trace

    return _trace(*args, **kwargs)


def run_sample_forward(*args, **kwargs):
    from .samples import run_sample_forward as _run

    return _run(*args, **kwargs)


__all__ = ["trace", "run_sample_forward"]

# attn_doctor.trace(model, example_inputs, ...) is the Python API's trace (attn_doctor/api.py).
from .._callable import make_callable  # noqa: E402

make_callable(__name__)
