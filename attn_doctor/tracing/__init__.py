"""The dtype tracer: find where a half-precision tensor is promoted to float32 on its way to an
attention kernel, and point at the source line (`attn-doctor trace`, the API's `attn_doctor.trace`,
named apart from this package, and the sample forward passes that check's probes run).

Runtime code here depends on the standard library and torch only (it also runs inside another
interpreter, ``python -m attn_doctor.tracing.runs.child``) and returns plain JSON-able dicts:
``trace(...) -> dict``, ``run_sample_forward(...) -> dict``. Importing it does not import torch.

May import (the layering contract, pyproject.toml): the bottom layer only (schemas' envelope,
bytecode). Not probes (which run it), rules, the pipeline or the API.
"""


def trace(*args, **kwargs):
    from .runs.api import trace as _trace

    return _trace(*args, **kwargs)


def run_sample_forward(*args, **kwargs):
    from .runs.samples import run_sample_forward as _run

    return _run(*args, **kwargs)


__all__ = ["trace", "run_sample_forward"]
