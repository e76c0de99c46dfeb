"""The open world of `trace --hf` in CI: a stratified sample of the architectures the newest
transformers ships (benchmarks/open_world_trace.py, which runs them all), each from a scaled-down
config, in the default dtype, bf16 and fp16, held to the invariants that need no labels:

- the doctor never crashes, and every run that did not reach attention says why (a model without
  attention, transformers refusing its own defaults, inputs it needs that a config cannot give);
- faithful: the traced forward returns what the plain forward returns (each output's dtype and
  shape), or raises what it raises;
- no false alarm: an error on a build is confirmed by the same build's plain forward raising on
  the CPU, and no warning is left on transformers' own code (at most a note).

The sample is drawn per release (seeded), so a new transformers is sampled afresh: a regression, or
a new architecture the doctor mishandles, fails here before a user meets it.
"""
import json
import os
import subprocess

import pytest

from conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.realenv]

SAMPLE = int(os.environ.get("ATTN_DOCTOR_OPEN_WORLD_SAMPLE", "14"))


def _open_world(transformers_venv, tmp_path, args, timeout):
    """(the benchmark's stdout, its rows, the transformers version) of open_world_trace.py run with
    `args` under the newest transformers, this checkout's attn_doctor on its path."""
    from attn_doctor.tracing.runs.launch import package_dir

    python, version = transformers_venv(None)
    pkg = package_dir()
    out = tmp_path / "open_world.jsonl"
    env = dict(os.environ, PYTHONPATH=pkg, OPEN_WORLD_TIMEOUT="600")
    try:
        proc = subprocess.run([python, os.path.join(REPO, "benchmarks", "open_world_trace.py"), *args, "--workers", "2",
                               "--out", str(out)], capture_output=True, text=True, env=env, timeout=timeout,
                              cwd=str(tmp_path))
    finally:
        import shutil

        shutil.rmtree(pkg, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, [json.loads(line) for line in out.read_text().splitlines()], version


def test_a_stratified_sample_of_every_architecture(transformers_venv, tmp_path):
    stdout, rows, version = _open_world(transformers_venv, tmp_path, ["--sample", str(SAMPLE), "--seed", "52"], 3000)
    print(stdout)
    assert len({r["model_type"] for r in rows}) == SAMPLE, stdout
    where = "transformers %s\n%s" % (version, stdout[-4000:])
    # never the doctor's own failure
    assert not [r for r in rows if r["outcome"] in ("crash", "worker_died", "timeout")], where
    assert not [r for r in rows if "internal error" in (r.get("error") or "")], where
    # every run that judged nothing says why, in one line
    for r in rows:
        if r["outcome"] in ("failed", "no_attention", "no_build", "no_config"):
            reason = r.get("error") or r.get("reason") or ""
            assert reason and "\n" not in reason, (r, where)
    # faithful wherever the two forwards can be compared
    assert not [r for r in rows if r.get("faithful") is False], where
    # no false alarm: errors only where the plain CPU forward raises too; no warning on transformers' code
    assert not [r for r in rows if r["outcome"] == "erred"], where
    assert not [r for r in rows if r["outcome"] == "warned"], where


# Input layouts the config alone does not give, each reached from the model's own words or signature:
# a spectrogram whose mel bins are the last axis (Parakeet), a codec's [batch, 1, samples] (DAC),
# flattened patches with their grid (SigLIP 2's NaFlex), inputs the forward names (LXMERT's visual
# features, Bros's boxes) made in their documented shapes, a spectrogram turned round by what a batch
# norm counted (CLAP), an image read off None and sized by the table it is added to (TVP), an image
# pair in the 5-D layout the message states (EfficientLoFTR).
LAYOUTS = ("parakeet_ctc", "dac", "siglip2_vision_model", "lxmert", "bros", "clap", "tvp", "efficientloftr")


def test_inputs_whose_layout_the_model_says_are_made(transformers_venv, tmp_path):
    stdout, rows, version = _open_world(transformers_venv, tmp_path, ["--only", ",".join(LAYOUTS), "--dtypes", "default"],
                                        1200)
    shipped = [r for r in rows if r["outcome"] != "no_config"]  # an architecture this release lacks
    assert shipped, stdout
    built = [r for r in shipped if r["outcome"] not in ("no_build", "failed")]
    assert len(built) == len(shipped), "transformers %s\n%s" % (version, stdout[-4000:])
