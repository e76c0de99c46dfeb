"""LLaMA-Factory: a YAML fixed by `attn-doctor fix` is read by that release's own parser.

Three releases (the oldest on PyPI, 0.8.3, the newest): each spells `flash_attn` its own way. The
fixed YAML goes through the release's `get_train_args()` and `configure_attn_implementation`
(tests/realenv/llamafactory_parse.py, in the environment's Python); the unfixed one is shown to be
refused by the same code, so the check can fail.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from .conftest import FACTS, HERE, actions, assert_verdicts, fired

CONFIGS = HERE / "configs"
RELEASES = ["0.7.1", "0.8.3", "0.9.5"]
# The spelling each release accepts for "no flash attention", and the file written for another one.
DISABLED = {"0.7.1": ("off", "llama3_lora_sft_disabled.yaml"), "0.8.3": ("disabled", "llama3_lora_sft_off.yaml"),
            "0.9.5": ("disabled", "llama3_lora_sft_off.yaml")}


def parse(env, config, tmp_path) -> dict:
    """The release's reading of `config` (see llamafactory_parse.py)."""
    out = tmp_path / f"parsed-{config.stem}.json"
    proc = subprocess.run([str(env.python), str(HERE / "llamafactory_parse.py"), str(config), str(out)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.is_file(), f"the parse helper wrote nothing (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(out.read_text())


@pytest.mark.parametrize("release", RELEASES)
def test_check_on_the_installed_release(release, realenv, doctor):
    env = realenv.get(f"llamafactory-{release}")
    run = doctor("check", "--python", env.python, "--json", "--no-sample", env=env)
    report = run.json()
    assert report["facts"]["packages"]["llamafactory"]["version"] == release
    assert_verdicts(report, {"AD101"})


@pytest.mark.parametrize("release", RELEASES)
def test_t4_fix_is_accepted_by_the_release(release, realenv, doctor, tmp_path):
    env = realenv.get(f"llamafactory-{release}")
    cfg = tmp_path / "train.yaml"
    shutil.copyfile(CONFIGS / "llama3_lora_sft.yaml", cfg)
    before = cfg.read_bytes()

    # The unfixed file is what the T4 cannot run: the release reads it as bf16 + FA2 (0.9.5, with
    # transformers 5, already refuses bf16 here, on a machine without a GPU).
    unfixed = parse(env, cfg, tmp_path)
    assert unfixed["llamafactory"] == release, unfixed
    if unfixed["ok"]:
        assert (unfixed["flash_attn"], unfixed["bf16"], unfixed["fp16"]) == ("fa2", True, False)
    else:
        assert unfixed["stage"] == "get_train_args" and "bf16" in unfixed["error"], unfixed

    run = doctor("fix", "--from-report", FACTS / "t4.json", "--config", cfg, "--yes", "--json", env=env)
    doc = run.json()
    assert run.returncode == 0, doc
    acts = actions(doc)
    assert {r: a["status"] for r, a in acts.items()} == {"AD501": "verified", "AD502": "verified"}, doc
    assert acts["AD501"]["settings"] == {"fp16": True, "bf16": False} and acts["AD502"]["settings"] == {"flash_attn": "sdpa"}
    text = cfg.read_text()
    assert "flash_attn: sdpa    # FlashAttention-2: fastest on A100" in text
    assert "bf16: false         # mixed precision (set by the WebUI)" in text and "\nfp16: true\n" in text

    fixed = parse(env, cfg, tmp_path)
    assert fixed["ok"], fixed  # get_train_args and configure_attn_implementation accepted it
    assert (fixed["flash_attn"], fixed["fp16"], fixed["bf16"], fixed["pure_bf16"]) == ("sdpa", True, False, False), fixed
    assert fixed["compute_dtype"] == "torch.float16" and fixed["attn_implementation"] == "sdpa", fixed

    undo = doctor("fix", "--undo", doc["run"], env=env)
    assert undo.returncode == 0, undo.stderr
    assert cfg.read_bytes() == before


@pytest.mark.parametrize("release", RELEASES)
def test_flash_attn_respelt_for_the_installed_release(release, realenv, doctor, tmp_path):
    # A file written for another release: the probed environment's version decides the spelling.
    env = realenv.get(f"llamafactory-{release}")
    spelling, source = DISABLED[release]
    cfg = tmp_path / "train.yaml"
    shutil.copyfile(CONFIGS / source, cfg)
    before = cfg.read_bytes()

    refused = parse(env, cfg, tmp_path)
    assert not refused["ok"] and refused["stage"] == "configure_attn_implementation", refused
    assert refused["error"].startswith("NotImplementedError: Unknown attention type"), refused

    check = doctor("check", "--python", env.python, "--config", cfg, "--json", "--no-sample", env=env).json()
    assert fired(check) == {"AD101", "AD503"}, [(r["rule"], r["message"]) for r in check["results"] if r["rule"] in fired(check)]

    dry = doctor("fix", "--python", env.python, "--config", cfg, "--dry-run", "--json", "--no-sample", env=env).json()
    assert {r: a["status"] for r, a in actions(dry).items()} == {"AD503": "planned"}
    assert cfg.read_bytes() == before

    run = doctor("fix", "--python", env.python, "--config", cfg, "--yes", "--json", "--no-sample", env=env)
    doc = run.json()
    assert run.returncode == 0 and actions(doc)["AD503"]["status"] == "verified", doc
    assert actions(doc)["AD503"]["settings"] == {"flash_attn": spelling}
    assert "# no flash attention" in cfg.read_text()  # the comment on that line stays

    accepted = parse(env, cfg, tmp_path)
    assert accepted["ok"], accepted
    assert accepted["flash_attn"] == spelling and accepted["attn_implementation"] == "eager", accepted
    assert (accepted["fp16"], accepted["bf16"]) == (True, False)

    undo = doctor("fix", "--undo", doc["run"], env=env)
    assert undo.returncode == 0, undo.stderr
    assert cfg.read_bytes() == before


@pytest.mark.parametrize("release", RELEASES)
def test_fa2_without_flash_attn_falls_back_silently_and_is_reported(release, realenv, doctor, tmp_path):
    # The release's own code: flash_attn: fa2 without flash-attn logs one warning and requests no
    # attention implementation (transformers' default then runs). The check says so (AD508).
    env = realenv.get(f"llamafactory-{release}")
    cfg = tmp_path / "train.yaml"  # fp32 (0.9.5 refuses bf16 without a GPU): the fallback does not depend on it
    cfg.write_text((CONFIGS / "llama3_lora_sft.yaml").read_text().replace("bf16: true ", "bf16: false"))
    parsed = parse(env, cfg, tmp_path)
    assert parsed["ok"] and parsed["flash_attn"] == "fa2" and parsed["attn_implementation"] is None, parsed
    assert "FlashAttention-2 is not installed." in parsed["warnings"], parsed
    check = doctor("check", "--python", env.python, "--config", cfg, "--json", "--no-sample", env=env).json()
    result = next(r for r in check["results"] if r["rule"] == "AD508")
    # this environment's torch is a CPU build on a machine without a GPU: not the job's, so what it
    # lacks is a note that says so, and fix leaves the config alone
    assert result["status"] == "info" and result["evidence"].get("elsewhere"), result
    assert "not the one the job runs in" in result["message"], result
    assert "'FlashAttention-2 is not installed.'" in result["message"] and "`flash_attn: fa2`" in result["message"]
