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
    root = os.environ.get("ATTN_DOCTOR_CACHE_DIR")  # attn_doctor.cache.CACHE_DIR_ENV, not imported yet
    if not root:
        sys.dont_write_bytecode = True  # platformdirs, read to find the folder, is not compiled into the install
        try:
            import platformdirs

            root = platformdirs.user_cache_dir("attn-doctor")
        finally:
            sys.dont_write_bytecode = False
    sys.pycache_prefix = os.path.join(os.path.expanduser(root), "pycache")


_keep_bytecode_out()

from .cli import entry  # noqa: E402 - after the bytecode's place is settled

entry()
