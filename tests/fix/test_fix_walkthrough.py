"""The walk-through of issue 53, as a new user runs it: real files, the real CLI in a subprocess,
judged for a GPU by name (--gpu) or on a recorded report.

- bf16 and fp16 both on is a finding with the framework's own message, and fix keeps the one the
  GPU runs natively;
- a Lightning `trainer.precision` in every spelling is fixed to `16-mixed` on a GPU without bf16;
- a DeepSpeed JSON edit keeps every untouched number as written (`5e8`);
- `fix --undo` after the user edited the file again refuses, or with --keep-edits keeps the user's
  version beside the restored one, and says which.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
T4 = str(ROOT / "tests" / "fixtures" / "facts" / "t4.json")
A100 = str(ROOT / "tests" / "fixtures" / "facts" / "a100.json")


def cli(*args, state):
    env = dict(os.environ, ATTN_DOCTOR_STATE_DIR=str(state))
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, env=env, timeout=240, cwd=ROOT)


LLAMAFACTORY_BOTH = """\
### model
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
### method
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
### train
per_device_train_batch_size: 1
learning_rate: 1.0e-4
bf16: true   # from the A100 recipe
fp16: true
"""


@pytest.mark.parametrize("report, kept, turned_off", [(T4, "fp16", "bf16"), (A100, "bf16", "fp16")])
def test_bf16_and_fp16_both_on_is_named_with_transformers_words_and_fixed_to_one(tmp_path, report, kept, turned_off):
    cfg = tmp_path / "llama3_lora_sft.yaml"
    cfg.write_text(LLAMAFACTORY_BOTH)
    proc = cli("check", "--from-report", report, "-c", str(cfg), "--json", state=tmp_path / "state")
    results = {r["rule"]: r for r in json.loads(proc.stdout)["results"]}
    finding = results["AD504"]
    assert finding["status"] == "error" and proc.returncode == 1
    assert '"At most one of fp16 and bf16 can be True, but not both"' in finding["message"], finding["message"]
    assert "`bf16: true` and `fp16: true` (LLaMA-Factory)" in finding["message"] and f"Keep {kept}" in finding["message"]
    assert results["AD501"]["status"] == "pass"  # one finding for the file: its remedy keeps the native dtype
    fixed = cli("fix", "--from-report", report, "-c", str(cfg), "--yes", state=tmp_path / "state")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    text = cfg.read_text()
    assert f"{kept}: true" in text and f"{turned_off}: false" in text
    assert "# from the A100 recipe" in text  # the comment stays
    again = cli("check", "--from-report", report, "-c", str(cfg), "--json", state=tmp_path / "state")
    assert {r["rule"]: r for r in json.loads(again.stdout)["results"]}["AD504"]["status"] == "pass"


def test_deepspeed_bf16_and_fp16_both_enabled_is_named_with_deepspeeds_words(tmp_path):
    cfg = tmp_path / "ds_config.json"
    cfg.write_text(json.dumps({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True}, "fp16": {"enabled": True},
                               "zero_optimization": {"stage": 2}}, indent=2))
    proc = cli("check", "--from-report", A100, "-c", str(cfg), "--json", state=tmp_path / "state")
    finding = {r["rule"]: r for r in json.loads(proc.stdout)["results"]}["AD504"]
    assert '"bfloat16 and fp16 modes cannot be simultaneously enabled"' in finding["message"], finding


def test_a_generic_file_with_both_switches_is_a_warning_without_borrowed_words(tmp_path):
    cfg = tmp_path / "homegrown.yaml"
    cfg.write_text("run:\n  name: exp1\n  bf16: true\n  fp16: true\n")
    proc = cli("check", "--from-report", A100, "-c", str(cfg), "--json", state=tmp_path / "state")
    finding = {r["rule"]: r for r in json.loads(proc.stdout)["results"]}["AD504"]
    assert finding["status"] == "warning" and "no framework rule is known" in finding["message"], finding
    assert "At most one" not in finding["message"]


LIGHTNING = """\
# LightningCLI: python main.py fit --config this.yaml
seed_everything: 42
trainer:
  accelerator: gpu
  devices: 1
  precision: {value}   # the trainer's precision plugin
  max_epochs: 10
model:
  class_path: mypkg.LitModel
  init_args:
    lr: 0.001
"""


@pytest.mark.parametrize("value, written", [("bf16-mixed", "16-mixed"), ("bf16-true", "16-mixed"), ("bf16", "16-mixed"),
                                            ("transformer-engine", "16-mixed")])
def test_lightning_trainer_precision_is_fixed_to_16_mixed_on_a_t4(tmp_path, value, written):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(LIGHTNING.format(value=value))
    before = cfg.read_text()
    proc = cli("fix", "--gpu", "t4", "--quick", "-c", str(cfg), "--yes", state=tmp_path / "state")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no setting here" not in proc.stdout
    after = cfg.read_text()
    assert after == before.replace(f"precision: {value}   #", f"precision: {written}   #"), after
    check = cli("check", "--gpu", "t4", "--quick", "-c", str(cfg), "--json", state=tmp_path / "state")
    failing = [r["rule"] for r in json.loads(check.stdout)["results"] if r["area"] == "config" and r["status"] in ("error", "warning")]
    assert failing == [], failing


@pytest.mark.parametrize("value", ["16-mixed", "16", "32-true"])
def test_lightning_precisions_a_t4_runs_are_left_alone(tmp_path, value):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(LIGHTNING.format(value=value))
    proc = cli("check", "--gpu", "t4", "--quick", "-c", str(cfg), "--json", state=tmp_path / "state")
    config = json.loads(proc.stdout)["facts"]["configs"][0]
    assert config["plan"]["compute_dtype"]["key"] == "trainer.precision"
    failing = [r["rule"] for r in json.loads(proc.stdout)["results"] if r["area"] == "config" and r["status"] in ("error", "warning")]
    assert failing == [], failing


DEEPSPEED = """{
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_clipping": 1.0,
    "bf16": {
        "enabled": true
    },
    "zero_optimization": {
        "stage": 2,
        "allgather_bucket_size": 5e8,
        "reduce_bucket_size": 5E+8,
        "stage3_prefetch_bucket_size": 0.9e6,
        "overlap_comm": true
    },
    "steps_per_print": 1e3
}
"""


def test_a_deepspeed_edit_keeps_every_untouched_number_as_written(tmp_path):
    cfg = tmp_path / "ds_z2.json"
    cfg.write_text(DEEPSPEED)
    proc = cli("fix", "--gpu", "t4", "--quick", "-c", str(cfg), "--yes", state=tmp_path / "state")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = cfg.read_text()
    expected = DEEPSPEED.replace('"bf16": {\n        "enabled": true', '"bf16": {\n        "enabled": false').replace(
        '    "steps_per_print": 1e3\n}', '    "steps_per_print": 1e3,\n    "fp16": {\n        "enabled": true\n    }\n}')
    assert after == expected, after


def test_undo_after_the_user_edited_the_file_refuses_or_keeps_the_users_version(tmp_path):
    state = tmp_path / "state"
    cfg = tmp_path / "sft.yaml"
    original = "model_name_or_path: Qwen/Qwen2.5-0.5B\ndataset_name: trl-lib/Capybara\nbf16: true\noutput_dir: out\n"
    cfg.write_text(original)
    fixed = cli("fix", "--gpu", "v100", "--quick", "-c", str(cfg), "--yes", state=state)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    mine = cfg.read_text() + "num_train_epochs: 3  # my own change\n"
    cfg.write_text(mine)
    refused = cli("fix", "--undo", state=state)
    assert refused.returncode == 1 and "nothing undone" in refused.stderr and str(cfg) in refused.stderr
    assert "--keep-edits" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert cfg.read_text() == mine  # the user's lines are still there
    kept = cli("fix", "--undo", "--keep-edits", state=state)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert cfg.read_text() == original
    sides = list(tmp_path.glob("sft.yaml.edited-*"))
    assert len(sides) == 1 and sides[0].read_text() == mine
    assert f"kept your edited {cfg} as {sides[0]}" in kept.stdout
    # an undo of a file nobody touched since needs no flag
    fixed = cli("fix", "--gpu", "v100", "--quick", "-c", str(cfg), "--yes", state=state)
    assert cli("fix", "--undo", state=state).returncode == 0 and cfg.read_text() == original
    assert cli("fix", "--keep-edits", state=state).returncode == 2
