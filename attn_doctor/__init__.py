"""attn-doctor: a doctor and auto-fixer for the FlashAttention / mixed-precision stack of PyTorch.

The Python API (attn_doctor/api.py): `check`, `explain`, `trace`, `preflight`, and the exceptions
of attn_doctor/errors.py. Loaded on first use: `import attn_doctor` stays cheap (no msgspec, no
torch), as the CLI and the trace child in another interpreter need it to be.
"""

__version__ = "0.1.0"

# name -> the module that defines it (loaded on first access)
_EXPORTS = {
    "check": "api",
    "explain": "api",
    "preflight": "api",
    "trace": "api",
    "Finding": "results",
    "PreflightResult": "results",
    "TraceReport": "results",
    "AttnDoctorError": "errors",
    "UsageError": "errors",
    "ProbeError": "errors",
    "PreflightError": "results",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    import importlib

    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
