"""The probes' code that runs inside the *target* interpreter (the Python being diagnosed, which may
not have attn-doctor, msgspec or anything but the standard library and torch).

child.py is the entry point (runner.CHILD_BOOTSTRAP makes this folder importable there as the package
``attn_doctor_child`` without putting it on sys.path, so this file does not run there); env_probe.py
and inventory.py read the platform and the installed distributions; torch_probe.py imports torch and
the attention libraries, each in an isolated fork (isolation.py); sample_probe.py runs the tracer's
sample forward passes; gpu_child.py, builds_child.py and numerics_child.py are loaded by path (the
smoke tests, the extensions' builds, the numerics sweep against float64).

May import: the standard library, each other (relatively), and, inside functions, torch, the
attention libraries and attn_doctor.tracing.runs.samples. Nothing else of attn_doctor: the rest of
probes/ imports from here, never the other way round.
"""
