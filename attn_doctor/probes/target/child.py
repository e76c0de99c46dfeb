"""The probe that runs inside the *target* interpreter: its command line, and its one answer.

Whatever Python is being diagnosed (``--python``) runs it, and may not have attn-doctor, msgspec
or even a working torch. So this module and those it imports (inventory, env_probe, isolation,
torch_probe, sample_probe): standard library only, Python 3.8+ syntax, never let an exception
escape, and write exactly one JSON object to the original stdout. runner.py imports them from
this folder under another package name (runner.CHILD_BOOTSTRAP), the folder kept off sys.path.

    child env [--fingerprint JSON]   # platform, tools, installed packages (no torch
                                     # import); where MODULEs would be imported from, and a
                                     # stamp of their files
    child site                       # each site-packages folder's entries and RECORDs (fix)
    child torch [--targets JSON] [--sample JSON] [--gpu JSON] [--builds JSON] [MODULE..]
                                     # torch build; then, in isolated forks, the import health
                                     # of each MODULE, each sample forward pass of the tracer,
                                     # the CUDA facts and smoke tests of gpu_child.py, and
                                     # whether each torch-linked extension loads (builds_child.py)
                                     # (this process makes no CUDA call: its forks must stay clean)

Anything the probed libraries print goes to stderr: fd 1 is pointed at fd 2 while they run. Each
forked job prints into a file of its own, whose end comes back with its result as ``"stderr"``
(a warning at import, such as xformers' "can't load C++/CUDA extensions", is evidence about that
import); this process's own stderr is kept by the doctor. Neither reaches the user's terminal.
"""

from __future__ import annotations

import json
import os
import sys

from . import isolation
from .env_probe import collect_env
from .inventory import collect_site
from .isolation import describe_exception, write_all
from .torch_probe import IMPORT_TARGETS, collect_torch


def main(argv):
    # Keep the real stdout for our JSON; anything else written to fd 1 goes to stderr.
    out_fd = isolation.OUT_FD = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    result = {"protocol": 1}
    try:
        command = argv[0] if argv else "env"
        if command == "env":
            fingerprint = json.loads(argv[2]) if argv[1:2] == ["--fingerprint"] and len(argv) > 2 else None
            result.update(collect_env(fingerprint))
        elif command == "site":
            result["site"] = collect_site()
        elif command == "torch":
            args = argv[1:]
            options = {}
            while args[:1] in (["--sample"], ["--gpu"], ["--builds"], ["--targets"]):
                options[args[0][2:]] = json.loads(args[1])
                args = args[2:]
            IMPORT_TARGETS.update({k: tuple(v) for k, v in (options.get("targets") or {}).items()})
            result.update(collect_torch(args or list(IMPORT_TARGETS), options.get("sample"), options.get("gpu"), options.get("builds")))
        else:
            result["error"] = "unknown probe command %r" % command
    except BaseException as exc:  # noqa: BLE001
        result["error"] = describe_exception(exc)
    write_all(out_fd, json.dumps(result, default=str).encode())
    os.close(out_fd)
    return 0


def run(argv):
    """main, then out without the interpreter's teardown (with torch loaded, 0.4 s or more that the
    doctor would wait for). Nothing here needs it: forks are reaped, temporary files unlinked."""
    exit_code = main(argv)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(exit_code)
