"""A --config file the doctor cannot read is not an error of the job (issue 53, item 4).

check names it as not read, with the reason in plain words, and exits on the job's own findings;
the header never counts it as read. fix cannot change a file it cannot read: a usage error (exit 2)
under --yes as under --dry-run, and its header never says "dry run" when it is not one. Real
subprocesses of the real CLI, judged on the recorded T4 report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
T4 = str(ROOT / "tests" / "fixtures" / "facts" / "t4.json")
REAL = ROOT / "tests" / "fixtures" / "configs" / "real"


def cli(*args, state=None):
    env = dict(os.environ)
    if state is not None:
        env["ATTN_DOCTOR_STATE_DIR"] = str(state)
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, env=env, timeout=240, cwd=ROOT)


# name -> (how the file is made, the reason in plain words)
BROKEN = {
    "empty.yaml": (b"", "the file is empty"),
    "blank.yaml": (b"\n   \n\n", "the file is empty"),
    "comments.yaml": (b"# nothing set yet\n", "the file holds no settings (only comments, or an empty document)"),
    "syntax.yaml": (b"model_name_or_path: x\nbf16: true\nflash_attn: fa2: yes\n", "YAML syntax error at line 3, column 16"),
    "list.yaml": (b"- bf16\n- fp16\n", "the file holds a list, not settings"),
    "binary.yaml": (bytes(range(256)), "a binary file, not a text config"),
    "syntax.json": (b'{"bf16": {"enabled": true,}}\n', "JSON syntax error at line 1, column 27"),
    "folder.yaml": ("dir", "a folder, not a file"),
}


def make(tmp_path: Path, name: str) -> Path:
    content, _ = BROKEN[name]
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    return path


@pytest.fixture(scope="module")
def exit_without_configs():
    return cli("check", "--from-report", T4, "--json").returncode


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_check_names_the_file_as_not_read_and_exits_on_the_jobs_findings(tmp_path, name, exit_without_configs):
    path = make(tmp_path, name)
    reason = BROKEN[name][1]
    proc = cli("check", "--from-report", T4, "-c", str(path), "--json")
    assert proc.returncode == exit_without_configs, proc.stderr  # the unread file adds nothing to the exit code
    doc = json.loads(proc.stdout)
    result = next(r for r in doc["results"] if r["rule"] == "AD512")
    assert result["status"] == "info" and f"{path}: not read: {reason}" in result["message"], result
    human = cli("check", "--from-report", T4, "-c", str(path))
    header = next(line for line in human.stdout.splitlines() if "Configs:" in line)
    assert "read:" not in header and f"1 file not read ({reason}" in header, header
    assert f"· {path}: not read: {reason}" in human.stdout
    assert "Traceback" not in human.stderr + human.stdout


def test_an_unread_file_beside_a_read_one_is_counted_apart(tmp_path):
    broken = make(tmp_path, "empty.yaml")
    good = tmp_path / "config.yml"
    shutil.copyfile(REAL / "axolotl" / "config.yml", good)
    proc = cli("check", "--from-report", T4, "-c", str(broken), "-c", str(good))
    header = next(line for line in proc.stdout.splitlines() if "Configs:" in line)
    assert "1 file read: axolotl; 1 file not read (the file is empty)" in header, header
    assert proc.returncode == 1  # the axolotl file's own findings (tf32 on a T4)


@pytest.mark.parametrize("name", sorted(BROKEN))
@pytest.mark.parametrize("mode", ["--yes", "--dry-run"])
def test_fix_with_a_file_it_cannot_read_is_a_usage_error(tmp_path, name, mode):
    path = make(tmp_path, name)
    before = path.read_bytes() if path.is_file() else None
    proc = cli("fix", "--gpu", "v100", "--quick", "-c", str(path), mode, state=tmp_path / "state")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert lines[0] == f"attn-doctor: error: --config {path}: {BROKEN[name][1]}" + lines[0].split(BROKEN[name][1], 1)[1]
    assert lines[0].endswith("fix cannot change a file it cannot read")
    assert "dry run" not in proc.stdout and proc.stdout == ""
    assert (path.read_bytes() if path.is_file() else None) == before
    assert not (tmp_path / "state" / "runs").exists() or not any((tmp_path / "state" / "runs").iterdir())


def test_a_plan_nothing_of_which_can_be_applied_does_not_call_itself_a_dry_run(tmp_path):
    # A flow-style YAML mapping is not edited automatically: fix --yes plans the change, blocks it,
    # applies nothing.
    cfg = tmp_path / "train.yaml"
    cfg.write_text("{model_name_or_path: x, finetuning_type: lora, flash_attn: fa2, bf16: true}\n")
    proc = cli("fix", "--from-report", T4, "-c", str(cfg), "--yes", state=tmp_path / "state")
    assert "dry run" not in proc.stdout, proc.stdout
    assert proc.stdout.startswith("Plan (nothing here can be applied: nothing changed)"), proc.stdout
    dry = cli("fix", "--from-report", T4, "-c", str(cfg), "--dry-run", state=tmp_path / "state")
    assert dry.stdout.startswith("Plan (dry run: nothing will change)"), dry.stdout


def test_an_attention_choice_nested_deep_in_a_file_no_reader_claims_is_said_not_understood(tmp_path):
    """A Stability-style YAML picks xformers six levels down (model.params.first_stage_config.params.
    ddconfig.attn_type): it is listed as not understood, never skipped for its depth; the resolutions
    at which attention runs are no attention setting; a setting left off asks for nothing."""
    from attn_doctor.probes.configs import probe_config

    path = tmp_path / "autoencoder.yaml"
    path.write_text(
        "model:\n  target: sgm.models.autoencoder.AutoencodingEngine\n  params:\n    first_stage_config:\n"
        "      params:\n        ddconfig:\n          attn_type: vanilla-xformers\n          attn_resolutions: [16]\n"
        "lightning:\n  trainer:\n    enable_autocast: false\n")
    config = probe_config(str(path), {})
    assert config.status == "ok" and config.kind == "unknown"
    assert config.unread == ["model.params.first_stage_config.params.ddconfig.attn_type"]


def test_json_with_comments_is_read_as_its_framework_reads_it(tmp_path):
    """Coqui TTS writes its JSON configs with // and /* */ comments and strips them when it loads them:
    the doctor reads them the same way (a // inside a string stays), and a real syntax error in such a
    file is still said at its own line and column."""
    from attn_doctor.probes.configs import probe_config

    path = tmp_path / "config.json"
    path.write_text('{\n    "run_name": "wavegrad",\n    "stats_path": "http://host/scale_stats.npy", // a URL stays\n'
                    '    /* the mixed precision\n       switch */\n    "mixed_precision": true,     // (true, false)\n'
                    '    "note": "a \\"quoted // text\\""\n}\n')
    config = probe_config(str(path), {})
    assert config.status == "ok", config.error
    assert "mixed_precision" in config.unread  # read, and Coqui's key said not understood: no reader for it
    broken = tmp_path / "broken.json"
    broken.write_text('{\n    "a": 1 // one\n    "b": 2\n}\n')
    config = probe_config(str(broken), {})
    assert config.status != "ok" and "line 3, column 5" in (config.error or "") and "delimiter" in config.error, config.error


def test_a_config_that_is_not_there_is_a_usage_error(tmp_path):
    # a typo in a pre-flight gate's -c must not pass it: exit 2, one line, before anything runs
    missing = tmp_path / "trian.yaml"
    proc = cli("check", "--from-report", T4, "-c", str(missing))
    assert proc.returncode == 2 and proc.stderr.strip() == f"attn-doctor: error: --config {missing}: no such file", proc.stderr
    assert not proc.stdout
