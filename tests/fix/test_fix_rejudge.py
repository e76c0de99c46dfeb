"""fix judges every edit before it offers it (issue 53, item 6): the edited text is read by the same
readers and every rule is evaluated on the result; an edit after which any rule fails for the file
(one that did not before, or its own finding still there) is not offered.

The issue's TRL case: a full fine-tune with `torch_dtype: bfloat16` and `bf16: true`, `fix --gpu
v100`: fp16 mixed precision over fp32 weights, never fp16 weights under the GradScaler (AD506, the
crash `explain` names AD654). A planted bad edit (what fix wrote before) is refused by the judge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from attn_doctor.core import diagnose
from attn_doctor.fix.plan import Options, build_plan
from attn_doctor.gather import load_facts_file
from attn_doctor.probes.configs import probe_config
from attn_doctor.rules.loader import load_recipes

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "fixtures" / "facts"
RECIPES = load_recipes()

TRL_FULL = """\
# TRL SFT, a full fine-tune (no use_peft)
model_name_or_path: Qwen/Qwen2.5-0.5B
torch_dtype: bfloat16
attn_implementation: sdpa
dataset_name: trl-lib/Capybara
dataset_train_split: train
learning_rate: 2.0e-5
per_device_train_batch_size: 2
gradient_checkpointing: true
bf16: true
output_dir: Qwen2.5-0.5B-SFT
"""


def cli(*args, state):
    env = dict(os.environ, ATTN_DOCTOR_STATE_DIR=str(state))
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, env=env, timeout=240, cwd=ROOT)


def test_the_issues_trl_case_moves_to_fp16_mixed_precision_over_fp32_weights(tmp_path):
    cfg = tmp_path / "trl_sft.yaml"
    cfg.write_text(TRL_FULL)
    proc = cli("fix", "--gpu", "v100", "--quick", "-c", str(cfg), "--yes", state=tmp_path / "state")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = cfg.read_text()
    assert "fp16: true" in text and "bf16: false" in text
    assert "torch_dtype: float32" in text and "float16" not in text  # never fp16 weights under the GradScaler
    check = cli("check", "--gpu", "v100", "--quick", "-c", str(cfg), "--json", state=tmp_path / "state")
    doc = json.loads(check.stdout)
    plan = doc["facts"]["configs"][0]["plan"]
    assert plan["compute_dtype"]["value"] == "float16" and plan["param_dtype"]["value"] == "float32"
    failing = [r["rule"] for r in doc["results"] if r["area"] == "config" and r["status"] in ("error", "warning")]
    assert failing == [], failing


def test_adapters_on_a_frozen_half_base_keep_the_base_in_fp16(tmp_path):
    cfg = tmp_path / "trl_lora.yaml"
    cfg.write_text(TRL_FULL.replace("# TRL SFT, a full fine-tune (no use_peft)", "# TRL SFT with LoRA") + "use_peft: true\nlora_r: 16\n")
    proc = cli("fix", "--gpu", "v100", "--quick", "-c", str(cfg), "--yes", state=tmp_path / "state")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torch_dtype: float16" in cfg.read_text() and "fp16: true" in cfg.read_text()
    check = cli("check", "--gpu", "v100", "--quick", "-c", str(cfg), "--json", state=tmp_path / "state")
    results = {r["rule"]: r for r in json.loads(check.stdout)["results"]}
    assert results["AD506"]["status"] == "pass"  # the adapters, the only trained weights, are fp32


def test_fp16_weights_under_a_gradscaler_is_a_finding_with_torchs_words(tmp_path):
    cfg = tmp_path / "trl_sft.yaml"
    cfg.write_text(TRL_FULL.replace("torch_dtype: bfloat16", "torch_dtype: float16").replace("bf16: true", "fp16: true"))
    check = cli("check", "--gpu", "v100", "--quick", "-c", str(cfg), "--json", state=tmp_path / "state")
    finding = {r["rule"]: r for r in json.loads(check.stdout)["results"]}["AD506"]
    assert finding["status"] == "error" and "Attempting to unscale FP16 gradients" in finding["message"]
    assert "`torch_dtype: float16` and `fp16: true` (TRL)" in finding["message"]
    fixed = cli("fix", "--gpu", "v100", "--quick", "-c", str(cfg), "--yes", state=tmp_path / "state")
    assert fixed.returncode == 0 and "torch_dtype: float32" in cfg.read_text(), fixed.stdout


def _report_with_edit(cfg: Path, gpu: str, intent: str, edit: dict):
    """The check's report for `cfg`, the reader's remedy for `intent` replaced by `edit`: what a
    reader with a bug (or fix before this issue) would plan."""
    facts = load_facts_file(FACTS / f"{gpu}.json")
    config = probe_config(str(cfg), {})
    config = msgspec.structs.replace(config, edits={**config.edits, intent: edit})
    facts = msgspec.structs.replace(facts, configs=[config])
    return diagnose(facts, RECIPES)


def test_an_edit_that_would_train_fp16_weights_under_a_gradscaler_is_not_offered(tmp_path):
    cfg = tmp_path / "trl_sft.yaml"
    cfg.write_text(TRL_FULL)
    report = _report_with_edit(cfg, "v100", "precision=fp16", {"fp16": True, "bf16": False, "torch_dtype": "float16"})
    assert {r.rule: r for r in report.results}["AD501"].status == "warning"
    plan = build_plan(report, Options(), RECIPES.data, RECIPES)
    action = next(a for a in plan.actions if a.rule == "AD501")
    assert action.status == "blocked" and "not offered: the edited file would fail AD506" in action.reason, action
    assert "Attempting to unscale FP16 gradients" in action.reason
    assert cfg.read_text() == TRL_FULL
    # the same report with the reader's own edit is offered
    good = build_plan(diagnose(msgspec.structs.replace(report.facts, configs=[probe_config(str(cfg), {})]), RECIPES),
                      Options(), RECIPES.data, RECIPES)
    assert next(a for a in good.actions if a.rule == "AD501").status == "planned"


def test_an_edit_that_leaves_its_own_finding_is_not_offered(tmp_path):
    cfg = tmp_path / "trl_sft.yaml"
    cfg.write_text(TRL_FULL)
    # bf16 kept on: AD501 would still fire on the result
    report = _report_with_edit(cfg, "t4", "precision=fp16", {"fp16": True})
    plan = build_plan(report, Options(), RECIPES.data, RECIPES)
    action = next(a for a in plan.actions if a.rule == "AD501")
    assert action.status == "blocked", action
    assert "would fail AD504" in action.reason or "AD501 would still fire" in action.reason, action.reason


def test_a_later_remedy_that_would_undo_an_earlier_one_is_not_planned(tmp_path):
    # Lightning's transformer-engine on a T4: AD501 (bf16) writes 16-mixed, which also ends fp8;
    # AD510's own remedy (fp8 off: bf16-mixed) would bring bf16 back, so it is not planned.
    cfg = tmp_path / "config.yaml"
    cfg.write_text("seed_everything: 1\ntrainer:\n  devices: 1\n  precision: transformer-engine\nmodel:\n  class_path: m.M\n")
    facts = load_facts_file(FACTS / "t4.json")
    facts = msgspec.structs.replace(facts, configs=[probe_config(str(cfg), {})])
    report = diagnose(facts, RECIPES)
    fired = {r.rule for r in report.results if r.status in ("error", "warning")}
    assert {"AD501", "AD510"} <= fired, fired
    plan = build_plan(report, Options(), RECIPES.data, RECIPES)
    assert [a.rule for a in plan.actions] == ["AD501"], [(a.rule, a.status, a.reason) for a in plan.actions]
    assert plan.actions[0].status == "planned" and "also resolves AD510" in plan.actions[0].note
    assert "precision: 16-mixed" in plan.actions[0].new_bytes[str(cfg)].decode()


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "tests" / "fixtures" / "configs" / "real" / "trl").glob("*.yaml")))
def test_no_real_trl_file_is_ever_fixed_into_a_failing_plan(tmp_path, name):
    cfg = tmp_path / name
    cfg.write_bytes((ROOT / "tests" / "fixtures" / "configs" / "real" / "trl" / name).read_bytes())
    for gpu in ("t4", "v100"):
        facts = load_facts_file(FACTS / f"{gpu}.json")
        facts = msgspec.structs.replace(facts, configs=[probe_config(str(cfg), {})])
        plan = build_plan(diagnose(facts, RECIPES), Options(), RECIPES.data, RECIPES)
        for action in plan.actions:
            if action.kind != "config" or action.status != "planned":
                continue
            edited = tmp_path / ("edited_" + name)
            edited.write_bytes(action.new_bytes[str(cfg)])
            after = msgspec.structs.replace(facts, configs=[probe_config(str(edited), {})])
            failing = {r.rule for r in diagnose(after, RECIPES).results if r.area == "config" and r.status in ("error", "warning")
                       and str(edited) in (r.evidence.get("config_files") or [])}
            assert "AD506" not in failing and "AD504" not in failing and action.rule not in failing, (gpu, action.rule, failing)
