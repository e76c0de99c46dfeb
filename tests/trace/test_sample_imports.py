"""The sample forward pass's import short cuts, against packages built here: the plain
transformers.models package (and its fall-back to the whole import where a release needs the lazy
table), and the distribution table prefetched in a fork while torch imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = str(Path(__file__).resolve().parents[2])

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="the prefetch forks")


def _fake_transformers(root: Path, llama_needs_the_table: bool) -> None:
    pkg = root / "transformers"
    (pkg / "models" / "llama").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    # The lazy table's stand-in: a side effect that shows whether models/__init__ ran.
    (pkg / "models" / "__init__.py").write_text(
        "import pathlib\npathlib.Path(%r).write_text('ran')\nTABLE = {'llama': ['LlamaConfig']}\n" % str(root / "table.ran"))
    (pkg / "models" / "llama" / "__init__.py").write_text("")
    (pkg / "models" / "llama" / "configuration_llama.py").write_text("class LlamaConfig:\n    pass\n")
    (pkg / "models" / "llama" / "modeling_llama.py").write_text(
        ("from transformers.models import TABLE\n" if llama_needs_the_table else "") + "class LlamaForCausalLM:\n    pass\n")


def _import_llama(root: Path):
    code = ("import sys\nfrom attn_doctor.tracing.runs.samples import _import_llama\n"
            "config, model = _import_llama()\nprint(config.__name__, model.__name__, type(sys.modules['transformers.models']).__name__)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), REPO]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def test_llama_imports_without_the_models_table(tmp_path):
    _fake_transformers(tmp_path, llama_needs_the_table=False)
    proc = _import_llama(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["LlamaConfig", "LlamaForCausalLM", "module"]
    assert not (tmp_path / "table.ran").exists()
    assert "transformers imported whole" not in proc.stderr


def test_a_release_that_needs_the_models_table_is_imported_whole_and_says_so(tmp_path):
    _fake_transformers(tmp_path, llama_needs_the_table=True)
    proc = _import_llama(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:2] == ["LlamaConfig", "LlamaForCausalLM"]
    assert (tmp_path / "table.ran").read_text() == "ran"
    assert "transformers imported whole: importing the Llama modules alone failed (ImportError: cannot import name 'TABLE'" \
        in proc.stderr


@needs_fork
def test_the_prefetched_distribution_table_is_what_importlib_metadata_says():
    code = ("import importlib.metadata, json, sys\nsys.path.insert(0, %r)\n"
            "from attn_doctor.probes.target import sample_probe\n"
            "got = sample_probe.finish_distributions_prefetch(sample_probe.start_distributions_prefetch())\n"
            "want = importlib.metadata.packages_distributions()\n"
            "print(json.dumps([got == json.loads(json.dumps(want)), len(want)]))\n" % REPO)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    same, count = json.loads(proc.stdout)
    assert same and count > 5


@needs_fork
def test_a_prefetch_that_takes_too_long_is_given_up_and_killed():
    # The samples then let transformers compute the table itself: slower, never stuck.
    from attn_doctor.probes.target import sample_probe

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        time.sleep(60)
        os._exit(0)
    os.close(write_fd)
    start = time.monotonic()
    assert sample_probe.finish_distributions_prefetch((read_fd, pid), timeout=0.5) is None
    assert time.monotonic() - start < 5
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: killed, not left sleeping
