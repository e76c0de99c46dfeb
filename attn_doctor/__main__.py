"""`python -m attn_doctor`: the command line, also from a read-only shared install
(`pip install --target /shared/ad attn_doctor-*.whl; chmod -R a-w /shared/ad`, then
`PYTHONPATH=/shared/ad python -m attn_doctor check`)."""


def _keep_bytecode_out() -> None:
    """Where this install has no bytecode for this Python (a uv install without
    --compile-bytecode, another Python version than the one that installed it) and may not be
    written to, the modules imported from here on keep their bytecode in the user's cache folder:
    never in the install (root would write into it), and not compiled again on every run. Only
    this package and its __main__ are compiled before this line can run."""
    import importlib.util
    import os
    import sys

    if sys.dont_write_bytecode or sys.pycache_prefix:
        return  # the user's own choice (PYTHONDONTWRITEBYTECODE, PYTHONPYCACHEPREFIX) stands
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.exists(importlib.util.cache_from_source(os.path.join(here, "cli", "__init__.py"))):
        return  # compiled at install time (pip's default): Python reads it where it is
    # chmod a-w marks the install read-only even for root, whom os.access lets write anywhere.
    if os.access(here, os.W_OK) and os.stat(here).st_mode & 0o222:
        return  # the user's own install: Python's usual place
    # A folder only this user can write, never the shared cache folder: Python runs whatever
    # bytecode it finds under the prefix (attn_doctor/bytecode.py). platformdirs, read to find
    # the folder, is not compiled into the install either.
    sys.dont_write_bytecode = True
    try:
        from attn_doctor.bytecode import private_pycache

        folder, why = private_pycache()
    finally:
        sys.dont_write_bytecode = False
    if folder:
        sys.pycache_prefix = folder
    else:
        sys.dont_write_bytecode = True  # nowhere safe: compiled in memory, as each run needs
        sys.stderr.write(f"attn-doctor: note: {why}\n")


_keep_bytecode_out()

from .cli import entry  # noqa: E402 - after the bytecode's place is settled

entry()
