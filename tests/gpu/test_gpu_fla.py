"""fla's states_in_fp32 workaround, as `fix --unsafe` writes it, on the real flash-linear-attention
0.2.2 (whose GSA op passes states_in_fp32=False), run on the GPU by the check `fix` runs after the
edit: the release's GSA op runs forward and backward in bf16; the edited one imports but its
forward no longer compiles on this Triton (GSA's kernel takes the fp32 states into a tl.dot with
bf16 q), which is why `fix` rolls the edit back where it fails. The CPU matrix (tests/realenv) can
only apply and undo the edit: running fla needs a GPU. fla from PyPI, or ATTN_DOCTOR_WHEELHOUSE."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from attn_doctor.facts import Facts
from attn_doctor.fix.patches import fla_states_patch, verify_fla_states_edit


def _install(target) -> None:
    wheelhouse = os.environ.get("ATTN_DOCTOR_WHEELHOUSE")
    source = ["--no-index", "--find-links", wheelhouse] if wheelhouse else []
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *source, "--no-deps", "--target", str(target),
                           "flash-linear-attention==0.2.2"], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip("could not install flash-linear-attention 0.2.2: " + proc.stderr.strip()[-300:])


def test_fla_states_in_fp32_edit_is_judged_by_running_it_on_the_gpu(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _install(site)
    monkeypatch.setenv("PYTHONPATH", str(site))  # the patch finds fla as the target interpreter would
    facts = Facts()
    facts.platform.python_executable = sys.executable
    path, edited, diff = fla_states_patch(facts)
    assert path == str(site / "fla" / "ops" / "gsa" / "chunk.py") and "states_in_fp32=True" in diff

    assert verify_fla_states_edit(sys.executable, str(site / "fla")) == ""  # the release as published runs
    with open(path, "wb") as fh:
        fh.write(edited)
    why = verify_fla_states_edit(sys.executable, str(site / "fla"))
    import triton

    # Triton 3.6 (torch 2.11's pin) refuses the edited kernel; another Triton may accept it, and
    # then the check must say it runs.
    if triton.__version__.startswith("3.6"):
        assert why and "must be same dtype" in why, why
    else:
        assert why is not None, why
