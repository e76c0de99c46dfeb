"""The fuzz modules write their inputs under pytest's temporary root, not into the system's
temporary folder: importing them (what collection does) must leave nothing behind there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_importing_the_fuzz_modules_creates_no_temporary_folder(tmp_path):
    system_tmp = tmp_path / "tmp"
    system_tmp.mkdir()
    modules = sorted(p.stem for p in Path(__file__).parent.glob("test_fuzz_*.py"))
    assert len(modules) >= 4  # reports, configs, fleet, explain
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module('fuzz.' + name)\n"
    env = dict(os.environ, TMPDIR=str(system_tmp), PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-c", code, *modules], cwd=TESTS, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in system_tmp.iterdir()) == []
