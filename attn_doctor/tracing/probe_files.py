"""The probes' standalone files (attn_doctor/probes/target/STEM.py) loaded by path inside the traced
interpreter: the tracer sits below the probes and may not import them, yet asks the same questions
of torch (why a fused SDPA backend refuses a call, a kernel's numbers against float64)."""

from __future__ import annotations

import os

_PROBES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "probes", "target")
_LOADED = {}


def probe_file(stem):
    """attn_doctor/probes/target/STEM.py, loaded by path once: the standalone files the check's probes load
    inside the target interpreter (the tracer is below the probes: it may not import them)."""
    mod = _LOADED.get(stem)
    if mod is None:
        import importlib.util

        spec = importlib.util.spec_from_file_location("attn_doctor_%s_for_trace" % stem, os.path.join(_PROBES, stem + ".py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _LOADED[stem] = mod
    return mod


def sdpa_verdicts():
    """probes/target/sdpa_verdicts.py, whose fused_verdicts asks torch why it refuses a backend."""
    return probe_file("sdpa_verdicts")
