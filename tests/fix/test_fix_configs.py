"""fix on config files, end to end through the CLI: a recorded T4 report, real YAML/JSON with comments."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from .conftest import CONFIGS, FACTS, cli

T4 = str(FACTS / "t4.json")


@pytest.fixture
def state(tmp_path):
    return tmp_path / "state"


def _result(proc, rule):
    """The check's result for `rule` in its --json output."""
    return next(r for r in json.loads(proc.stdout)["results"] if r["rule"] == rule)


def copy(name, tmp_path):
    dst = tmp_path / name
    shutil.copyfile(CONFIGS / name, dst)
    return dst


def test_llamafactory_yaml_on_t4_gets_fp16_and_a_valid_flash_attn_with_every_comment(tmp_path, state):
    cfg = copy("llamafactory_lora_bf16.yaml", tmp_path)
    os.chmod(cfg, 0o640)
    before = cfg.read_bytes()
    proc = cli("fix", "--from-report", T4, "--config", str(cfg), "--yes", "--json", state=state)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    statuses = {a["rule"]: a["status"] for a in doc["actions"]}
    assert statuses == {"AD501": "verified", "AD502": "verified"}
    after = cfg.read_bytes()
    # Exactly the three intended lines changed; every comment, blank line and key order kept.
    old_lines, new_lines = before.decode().splitlines(), after.decode().splitlines()
    changed = [l for l in new_lines if l not in old_lines]
    assert changed == ["flash_attn: sdpa    # FlashAttention-2: fastest on A100", "bf16: false         # mixed precision (set by the WebUI)", "fp16: true"]
    assert [l for l in old_lines if l not in new_lines] == ["flash_attn: fa2    # FlashAttention-2: fastest on A100", "bf16: true         # mixed precision (set by the WebUI)"]
    assert [l for l in old_lines if "#" in l and "flash_attn" not in l and "bf16" not in l] == [
        l for l in new_lines if "#" in l and "flash_attn" not in l and "bf16" not in l
    ]
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o640
    # The re-check passes for this file, as the tool reads it (YAML 1.1).
    check = cli("check", "--from-report", T4, "--config", str(cfg), "--json", state=state)
    results = {r["rule"]: r["status"] for r in json.loads(check.stdout)["results"]}
    assert results["AD501"] == "pass" and results["AD502"] == "pass" and results["AD503"] == "pass"
    # The history and the undo, as JSON too (the same seam as every command's --json).
    history = cli("fix", "--history", "--json", state=state)
    assert history.returncode == 0, history.stderr
    assert [run["id"] for run in json.loads(history.stdout)["history"]] == [doc["run"]]
    # Undo brings the exact bytes and mode back.
    undo = cli("fix", "--undo", "--json", state=state)
    assert undo.returncode == 0, undo.stderr
    undone = json.loads(undo.stdout)
    assert (undone["schema"], undone["undone"]) == ("attn-doctor/fix", doc["run"]) and str(cfg) in " ".join(undone["changed"])
    assert cfg.read_bytes() == before and stat.S_IMODE(cfg.stat().st_mode) == 0o640
    again = cli("fix", "--undo", doc["run"], state=state)
    assert again.returncode == 1 and "already undone" in again.stderr


def test_dry_run_changes_nothing_byte_for_byte(tmp_path, state):
    files = [copy(n, tmp_path) for n in ("llamafactory_lora_bf16.yaml", "deepspeed_z2_bf16.json", "accelerate_bf16.yaml", "model_config.json")]
    before = {f: f.read_bytes() for f in files}
    mtimes = {f: f.stat().st_mtime_ns for f in files}
    args = [a for f in files for a in ("--config", str(f))]
    proc = cli("fix", "--from-report", T4, *args, "--dry-run", state=state)
    assert proc.returncode == 0, proc.stderr
    assert "dry run" in proc.stdout and "+fp16: true" in proc.stdout and "-bf16: true" in proc.stdout
    # What is targeted, and why only the configs: the packages of a recorded report's machine are not changed here.
    assert proc.stdout.splitlines()[1] == "judged with a report recorded on 7f3c9a1d2b4e: only config files are changed here, not its packages"
    assert json.loads(cli("fix", "--from-report", T4, *args, "--dry-run", "--json", state=state).stdout)["target"] is None
    assert {f: f.read_bytes() for f in files} == before
    assert {f: f.stat().st_mtime_ns for f in files} == mtimes
    assert not state.exists() or not list(state.rglob("journal.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f.name for f in files) + (["state"] if state.exists() else [])


def test_json_configs_deepspeed_accelerate_transformers(tmp_path, state):
    ds, acc, model = (copy(n, tmp_path) for n in ("deepspeed_z2_bf16.json", "accelerate_bf16.yaml", "model_config.json"))
    proc = cli("fix", "--from-report", T4, "--config", str(ds), "--config", str(acc), "--config", str(model), "--yes", "--json", state=state)
    assert proc.returncode == 0, proc.stderr
    statuses = {a["rule"]: a["status"] for a in json.loads(proc.stdout)["actions"]}
    # one finding per cause: bf16 on a T4 (the three files, each in its own keys), FlashAttention-2 on a T4
    assert statuses == {"AD501": "verified", "AD502": "verified"}
    ds_doc = json.loads(ds.read_text())
    assert ds_doc["bf16"] == {"enabled": False} and ds_doc["fp16"] == {"enabled": True}
    assert ds.read_text().startswith('{\n    "train_batch_size"')  # its own 4-space indent
    model_doc = json.loads(model.read_text())
    # a checkpoint's saved dtype is not the job's precision (float16 there would load pure fp16
    # weights under the trainer's GradScaler): only its attention is changed
    assert model_doc["torch_dtype"] == "bfloat16" and model_doc["attn_implementation"] == "sdpa"
    assert list(model_doc) == ["architectures", "attn_implementation", "hidden_size", "model_type", "torch_dtype"]
    assert acc.read_text() == (CONFIGS / "accelerate_bf16.yaml").read_text().replace("mixed_precision: bf16", "mixed_precision: fp16")


@pytest.mark.parametrize(
    "version, expected",
    [("0.9.1", "flash_attn: disabled   # no flash attention"), ("0.8.2", None), ("0.6.3", None)],
)
def test_flash_attn_value_is_spelt_for_the_installed_version(tmp_path, state, version, expected):
    # An unquoted `off` is YAML 1.1 false, which LLaMA-Factory 0.8.3+ rejects; 0.7-0.8.2 wants "off".
    cfg = copy("llamafactory_off.yaml", tmp_path)
    report = json.loads((FACTS / "t4.json").read_text())
    facts = report.get("facts", report)
    facts["packages"]["llamafactory"]["version"] = version
    (tmp_path / "t4.json").write_text(json.dumps(report))
    proc = cli("fix", "--from-report", str(tmp_path / "t4.json"), "--config", str(cfg), "--only", "AD503", "--yes", "--json", state=state)
    doc = json.loads(proc.stdout)
    if version == "0.9.1":
        assert [a["status"] for a in doc["actions"]] == ["verified"]
        assert expected in cfg.read_text()
    elif version == "0.8.2":
        # `off` is the 0.8.2 spelling; false is not among its values: written quoted, so YAML keeps it a string.
        assert [a["status"] for a in doc["actions"]] == ["verified"], doc
        assert 'flash_attn: "off"   # no flash attention' in cfg.read_text()
    else:
        assert doc["actions"] == [] and proc.returncode == 0  # <= 0.6: a boolean, false is valid


def test_usage_errors_are_one_line(tmp_path, state):
    for args in (["--undo", "--from-report", "nope.json", "x"], ["stray-id"]):
        proc = cli("fix", *args, state=state)
        assert proc.returncode in (1, 2) and proc.stderr.startswith("attn-doctor: error:"), proc.stderr
        assert "Traceback" not in proc.stderr
    proc = cli("fix", "--from-report", T4, "--config", str(copy("accelerate_bf16.yaml", tmp_path)), state=state)
    # Not a terminal and no --yes: refuse rather than hang on a prompt.
    assert proc.returncode == 2 and "--yes" in proc.stderr
    nothing = cli("fix", "--undo", state=state)
    assert nothing.returncode == 1 and "nothing to undo" in nothing.stderr
    # a config that is there but cannot be read is a note of check's report (the rest is judged, the
    # exit code is the rest's); one that is not there is a usage error of both
    (tmp_path / "empty.yaml").write_text("")
    bad = cli("check", "--config", str(tmp_path / "empty.yaml"), "--quick", state=state)
    assert "AD512 config-unreadable" in bad.stdout and "not read: the file is empty" in bad.stdout, bad.stdout
    assert "[i] Configs: 1 file not read (the file is empty)" in bad.stdout and "System:" in bad.stdout
    missing = cli("check", "--config", str(tmp_path / "missing.yaml"), "--quick", state=state)
    assert missing.returncode == 2 and "no such file" in missing.stderr and "Traceback" not in missing.stderr


def test_fa2_without_flash_attn_on_a_login_node_is_a_note_and_fix_changes_nothing(tmp_path, state):
    # A CPU-only torch on a machine without a GPU is not the environment the job runs in: what it
    # lacks is said as a note, and fix does not take FlashAttention-2 out of a config meant for an A100.
    cfg = copy("llamafactory_lora_bf16.yaml", tmp_path)
    before = cfg.read_text()
    report = str(FACTS / "cpu-only.json")
    check = cli("check", "--from-report", report, "--config", str(cfg), "--json", state=state)
    result = _result(check, "AD508")
    assert result["status"] == "info" and "not the one the job runs in" in result["message"], result
    fixed = cli("fix", "--from-report", report, "--config", str(cfg), "--yes", "--json", state=state)
    assert fixed.returncode == 0, fixed.stderr
    assert "AD508" not in {a["rule"] for a in json.loads(fixed.stdout)["actions"]}
    assert cfg.read_text() == before


@pytest.mark.parametrize("fixture", ["h100"])
def test_fa2_without_flash_attn_is_a_warning_tied_to_the_file_and_key_then_fixed(tmp_path, state, fixture):
    # LLaMA-Factory logs "FlashAttention-2 is not installed." and trains on transformers' default:
    # a silent fallback, reported where the environment is the job's (a CUDA torch on a GPU node).
    cfg = copy("llamafactory_lora_bf16.yaml", tmp_path)
    report = str(FACTS / f"{fixture}.json")
    check = cli("check", "--from-report", report, "--config", str(cfg), "--json", state=state)
    result = _result(check, "AD508")
    assert result["status"] == "warning", result
    assert result["message"].startswith(f"{cfg}: `flash_attn: fa2`, but flash-attn is not installed"), result["message"]
    assert "'FlashAttention-2 is not installed.'" in result["message"] and "SDPA" in result["message"]
    assert [r["kind"] for r in result["remedies"]] == ["config", "pip"]
    assert result["remedies"][1]["requirement"] == "flash-attn"
    human = cli("check", "--from-report", report, "--config", str(cfg), state=state).stdout
    assert "[!] Configs" in human and "AD508" in human
    fixed = cli("fix", "--from-report", report, "--config", str(cfg), "--yes", "--json", state=state)
    assert fixed.returncode == 0, fixed.stderr
    assert {a["rule"]: a["status"] for a in json.loads(fixed.stdout)["actions"]}.get("AD508") == "verified"
    assert "flash_attn: sdpa    # FlashAttention-2: fastest on A100" in cfg.read_text()


def test_fa2_with_a_flash_attn_that_does_not_import_is_an_error_on_a_gpu(tmp_path, state):
    # Installed but broken: is_flash_attn_2_available() reads metadata only, so LLaMA-Factory asks for
    # flash_attention_2 and the model load raises the import error.
    cfg = copy("llamafactory_lora_bf16.yaml", tmp_path)
    check = cli("check", "--from-report", str(FACTS / "flash-attn-undefined-symbol.json"), "--config", str(cfg),
                "--json", state=state)
    result = _result(check, "AD508")
    assert result["status"] == "error", result
    assert "is installed but does not import (ImportError: " in result["message"]
    assert "loading the model raises that import error" in result["message"]


@pytest.mark.parametrize(("kernels", "status"), [(None, "error"), ("0.10.4", "warning")])
def test_transformers_config_fa2_with_and_without_the_kernels_fallback(tmp_path, kernels, status):
    # transformers >= 4.56 downloads kernels-community/flash-attn where the kernels package is there.
    from attn_doctor.core import diagnose
    from attn_doctor.gather import load_facts_file
    from attn_doctor.facts import ConfigFile, Package
    from attn_doctor.rules.loader import load_recipes

    facts = load_facts_file(str(FACTS / "h100.json"))
    if kernels:
        facts.packages["kernels"] = Package(version=kernels)
    from attn_doctor.facts import PlanSetting

    facts.configs = [ConfigFile(path="/m/config.json", kind="transformers", settings={"attn_implementation": "flash_attention_2"},
                                plan={"attention": PlanSetting(value="flash_attention_2", key="attn_implementation")})]
    result = next(r for r in diagnose(facts, load_recipes(None)).results if r.rule == "AD505")
    assert result.status == status, result
    assert ("kernels-community/flash-attn" in result.message) == bool(kernels)


@pytest.mark.parametrize("name", ["llamafactory_lora_bf16.yaml"])
def test_a_crlf_file_keeps_its_line_endings_on_the_lines_fix_adds(tmp_path, state, name):
    # a config written on Windows: every line ends in \r\n, and the line fix adds (fp16: true) does too
    cfg = tmp_path / name
    cfg.write_bytes((CONFIGS / name).read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    before = cfg.read_bytes()
    proc = cli("fix", "--from-report", T4, "--config", str(cfg), "--yes", "--json", state=state)
    assert proc.returncode == 0, proc.stderr
    after = cfg.read_bytes()
    assert after.count(b"\n") == after.count(b"\r\n") == before.count(b"\r\n") + 1
    assert b"fp16: true\r\n" in after and b"bf16: false" in after
    # and the lines it did not touch are the same bytes
    old, new = before.split(b"\r\n"), after.split(b"\r\n")
    assert [line for line in old if line not in new] == [line for line in old if line.startswith((b"flash_attn:", b"bf16:"))]


AXOLOTL_FULL = """# a full fine-tune: no adapter, every weight trained
base_model: NousResearch/Llama-3.2-1B
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
sequence_len: 2048
micro_batch_size: 2
{precision}
"""


def test_an_axolotl_full_fine_tune_is_never_fixed_into_fp16_weights_under_a_scaler(tmp_path, state):
    # axolotl loads the model in the training dtype (resolve_dtype): fp16: true without an adapter
    # trains fp16 weights, and the Trainer's GradScaler stops at the first step
    by_hand = tmp_path / "fp16.yml"
    by_hand.write_text(AXOLOTL_FULL.format(precision="fp16: true"))
    proc = cli("check", "--from-report", T4, "--config", str(by_hand), "--json", state=state)
    result = _result(proc, "AD506")
    assert result["status"] == "error" and "Attempting to unscale FP16 gradients" in result["message"], result
    cfg = tmp_path / "bf16.yml"
    cfg.write_text(AXOLOTL_FULL.format(precision="bf16: true"))
    before = cfg.read_text()
    fixed = cli("fix", "--from-report", T4, "--config", str(cfg), "--yes", "--json", state=state)
    assert fixed.returncode in (0, 1), fixed.stderr
    assert cfg.read_text() == before, cfg.read_text()  # not offered: the edited plan fails AD506
    action = next(a for a in json.loads(fixed.stdout)["actions"] if a["rule"] == "AD501")
    assert action["status"] != "verified" and "AD506" in json.dumps(action), action
    lora = tmp_path / "lora.yml"
    lora.write_text(AXOLOTL_FULL.format(precision="adapter: lora\nlora_r: 8\nfp16: true"))
    ok = cli("check", "--from-report", T4, "--config", str(lora), "--json", state=state)
    assert _result(ok, "AD506")["status"] == "pass"


def test_a_torch_dtype_beside_bf16_is_the_weights_and_fix_keeps_them_fp32_under_fp16(tmp_path, state):
    # a TRL-style file (no key only TRL writes, so read generically): torch_dtype is what
    # from_pretrained loads, and trains; fp16 mixed precision needs it float32
    cfg = tmp_path / "sft.yaml"
    cfg.write_text("model_name_or_path: Qwen/Qwen2.5-0.5B  # the model\ndataset_name: trl-lib/Capybara\n"
                   "bf16: true\ntorch_dtype: bfloat16\noutput_dir: out\n")
    proc = cli("fix", "--from-report", T4, "--config", str(cfg), "--yes", "--json", state=state)
    assert proc.returncode == 0, proc.stderr
    text = cfg.read_text()
    assert "fp16: true" in text and "bf16: false" in text and "torch_dtype: float32" in text, text
    assert "# the model" in text
    by_hand = tmp_path / "fp16.yaml"
    by_hand.write_text("model_name_or_path: Qwen/Qwen2.5-0.5B\nfp16: true\ntorch_dtype: float16\noutput_dir: out\n")
    check = cli("check", "--from-report", T4, "--config", str(by_hand), "--json", state=state)
    assert _result(check, "AD506")["status"] == "error"


def test_tf32_in_a_training_arguments_file_is_an_error_before_ampere(tmp_path, state):
    # TrainingArguments' own fields: HfArgumentParser reads the file into them, and their check raises
    # "--tf32 requires Ampere or a newer GPU arch" on a T4; a file of another kind only ignores it
    args = tmp_path / "args.yaml"
    args.write_text("output_dir: out\nper_device_train_batch_size: 4\nlearning_rate: 2.0e-5\nfp16: true\ntf32: true\n")
    check = cli("check", "--from-report", T4, "--config", str(args), "--json", state=state)
    result = _result(check, "AD509")
    assert result["status"] == "error" and "--tf32 requires Ampere" in result["message"], result
    other = tmp_path / "other.yaml"
    other.write_text("model:\n  width: 64\ntf32: true\n")
    check = cli("check", "--from-report", T4, "--config", str(other), "--json", state=state)
    assert _result(check, "AD509")["status"] == "warning"


def test_an_empty_key_as_axolotls_examples_write_it_is_filled_in(tmp_path, state):
    # axolotl's example layout: `fp16:` with no value beside `bf16: true`; fixed whole, exit 0
    cfg = tmp_path / "config.yml"
    cfg.write_text(AXOLOTL_FULL.format(precision="adapter: lora\nlora_r: 8\n\nbf16: true\nfp16:   # set for older GPUs\ntf32: false"))
    proc = cli("fix", "--from-report", T4, "--config", str(cfg), "--yes", "--json", state=state)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    action = next(a for a in json.loads(proc.stdout)["actions"] if a["rule"] == "AD501")
    assert action["status"] == "verified", action
    text = cfg.read_text()
    assert "\nfp16: true  # set for older GPUs\n" in text and "\nbf16: false\n" in text, text


TRL_FP16_WEIGHTS = """# TRL SFT config (trl sft --config)
model_name_or_path: Qwen/Qwen2.5-0.5B
dataset_name: trl-lib/Capybara
dataset_train_split: train
dtype: float16      # loaded in it, and trained in it
output_dir: out
fp16: true
"""


def test_trl_dtype_beside_the_model_is_the_weights_and_fix_loads_them_in_fp32(tmp_path, state):
    # TRL's ModelConfig writes from_pretrained's dtype as `dtype` (torch_dtype until TRL 0.27): fp16
    # weights under fp16 AMP stop at the GradScaler's first step
    cfg = tmp_path / "sft.yaml"
    cfg.write_text(TRL_FP16_WEIGHTS)
    check = cli("check", "--from-report", T4, "--config", str(cfg), "--json", state=state)
    assert _result(check, "AD506")["status"] == "error"
    proc = cli("fix", "--from-report", T4, "--config", str(cfg), "--yes", "--json", "--only", "AD506", state=state)
    assert proc.returncode == 0, proc.stderr
    assert {a["rule"]: a["status"] for a in json.loads(proc.stdout)["actions"]} == {"AD506": "verified"}
    assert cfg.read_text() == TRL_FP16_WEIGHTS.replace("dtype: float16      #", "dtype: float32      #")
    again = cli("check", "--from-report", T4, "--config", str(cfg), "--json", state=state)
    assert _result(again, "AD506")["status"] == "pass"


def test_a_dtype_in_a_file_of_no_known_framework_is_not_read_as_the_weights(tmp_path, state):
    # a `dtype` beside a model but in no framework's file (Parler-TTS's is the Accelerator's mixed
    # precision) says nothing of the weights
    cfg = tmp_path / "train.yaml"
    cfg.write_text("model_name_or_path: ./parler-tts-untrained-600M\ndtype: float16\noutput_dir: out\nfp16: true\n")
    check = cli("check", "--from-report", T4, "--config", str(cfg), "--json", state=state)
    assert _result(check, "AD506")["status"] != "error"


NEOX_FLOW = """# GPT-NeoX 125M, written as the repository writes its configs: one flow mapping over many lines
{
  # parallelism settings
  "pipe-parallel-size": 1,
  "model-parallel-size": 1,

  "num-layers": 12,
  "hidden-size": 768,
  "attention-config": [[["flash"], 12]],   # flash-attn 2's kernel

  "bf16": {
    "enabled": true
  },
  "precision": "bfloat16",
  "optimizer": {"type": "Adam", "params": {"lr": 0.0006}},
}
"""


def test_a_gpt_neox_flow_style_config_is_fixed_in_place_with_its_comments(tmp_path, state):
    # on a T4: fp16 for bf16 and NeoX's own "global" attention for flash-attn's, each value replaced
    # on its own line; the comments, the trailing commas and every other byte kept
    cfg = tmp_path / "125M.yml"
    cfg.write_text(NEOX_FLOW)
    proc = cli("fix", "--from-report", T4, "--config", str(cfg), "--yes", "--json", state=state)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    actions = {a["rule"]: a["status"] for a in json.loads(proc.stdout)["actions"]}
    assert actions.get("AD501") == "verified" and actions.get("AD502") == "verified", actions
    text = cfg.read_text()
    expected = (NEOX_FLOW.replace('[[["flash"], 12]]', '[[["global"], 12]]')
                .replace('"enabled": true', '"enabled": false').replace('"precision": "bfloat16"', '"precision": "fp16"'))
    assert text == expected
    again = cli("check", "--from-report", T4, "--config", str(cfg), "--json", state=state)
    results = {r["rule"]: r["status"] for r in json.loads(again.stdout)["results"]}
    assert results["AD501"] != "error" and results["AD502"] not in ("error", "warning"), results


def test_a_new_key_in_a_flow_mapping_goes_beside_a_sibling_followed_by_a_comma():
    from attn_doctor.fix.edits import EditError, apply_settings

    text = '{\n  "train_batch_size": 8,\n  "bf16": {"enabled": true},\n}\n'
    new = apply_settings(Path("ds.yaml"), text.encode(), {"gradient_clipping": 1.0}).decode()
    assert new == '{\n  "train_batch_size": 8,\n  "gradient_clipping": 1.0,\n  "bf16": {"enabled": true},\n}\n'
    # no sibling line ends in a comma: nothing to put it beside, the file is left alone
    with pytest.raises(EditError, match="edit it by hand"):
        apply_settings(Path("ds.yaml"), b'{\n  "train_batch_size": 8\n}\n', {"gradient_clipping": 1.0})
