"""Words a user reads, true for the case in front of them (real CLI runs on recorded reports, real
config files with comments, real error messages from the corpus):

- a GPU without native bf16 is a note, not a warning: FlashAttention-2 refuses it in any dtype, fp16
  included, and once the configs ask for fp16 `--fail-on warning` passes there;
- one line that two causes give (`FlashAttention only supports Ampere GPUs or newer`) is one finding,
  its other reading under it, and the upgrade is offered only as the fix of the GPU it fits;
- a refusal of mixed q/k/v dtypes is answered with the cast toward the half dtype the message shows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FACTS = Path(__file__).parent / "fixtures" / "facts"
BF16_CONFIG = """### model
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct  # the base model
flash_attn: fa2  # FlashAttention-2

### method
stage: sft
finetuning_type: lora

### train
bf16: true  # as the WebUI wrote it
"""
FIXED_CONFIG = BF16_CONFIG.replace("flash_attn: fa2  # FlashAttention-2", "flash_attn: sdpa  # SDPA").replace(
    "bf16: true  # as the WebUI wrote it", "bf16: false  # as fix wrote it\nfp16: true")


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, timeout=240,
                          input=stdin)


def results(*args: str) -> tuple[int, dict]:
    proc = run("check", "--json", *args)
    return proc.returncode, {r["rule"]: r for r in json.loads(proc.stdout)["results"]}


@pytest.mark.parametrize("gpu", ["t4", "v100"])
def test_a_gpu_without_native_bf16_is_a_note_that_says_what_fp16_does_not_change(gpu):
    _code, found = results("--from-report", str(FACTS / f"{gpu}.json"))
    ad102 = found["AD102"]
    assert ad102["status"] == "info"
    assert "FlashAttention-2 does not run on it in any dtype (it needs Ampere, sm80)" in ad102["message"]
    assert "rejects" not in ad102["message"]
    if gpu == "t4":  # SDPA's flash kernel has never run before Ampere: said, as a note
        assert found["AD203"]["status"] == "info"


def test_fail_on_warning_passes_on_a_v100_once_the_config_asks_for_fp16(tmp_path):
    bf16, fixed = tmp_path / "train_bf16.yaml", tmp_path / "train_fp16.yaml"
    bf16.write_text(BF16_CONFIG)
    fixed.write_text(FIXED_CONFIG)
    report = str(FACTS / "v100.json")
    code, found = results("--from-report", report, "-c", str(bf16), "--fail-on", "warning")
    assert code == 1 and found["AD501"]["status"] == "warning"
    assert "does not run there in any dtype, fp16 included" in found["AD501"]["message"]
    code, found = results("--from-report", report, "-c", str(fixed), "--fail-on", "warning")
    assert code == 0, {r: v["status"] for r, v in found.items() if v["status"] in ("error", "warning")}
    assert found["AD501"]["status"] == "pass" and found["AD102"]["status"] == "info"


AMPERE = "RuntimeError: FlashAttention only supports Ampere GPUs or newer."


def test_one_line_two_causes_is_one_finding_and_the_upgrade_says_which_gpu_it_fixes():
    proc = run("explain", "--json", AMPERE)
    doc = json.loads(proc.stdout)
    assert doc["summary"]["error"] == 1 and proc.returncode == 1
    first, other = doc["matches"][0], doc["matches"][1]
    assert (first["rule"], first.get("alternative_to"), other["rule"], other["alternative_to"]) == ("AD103", None, "AD104", "AD103")
    assert "newer than Hopper" in other["remedies"][0]["summary"] and "before Ampere runs no flash-attn 2" in other["remedies"][0]["summary"]
    text = run("explain", AMPERE).stdout
    assert "[✗] or: This flash-attn release predates the GPU" in text
    assert "the same line as AD103, read another way" in text and text.rstrip().endswith("1 error  (exit code 1)")


def test_a_log_that_shows_the_gpu_gets_its_one_cause_and_no_other_reading():
    log = f"GPU 0: NVIDIA GeForce RTX 5090 (UUID: GPU-1234)\nflash-attn==2.6.3\n{AMPERE}\n"
    doc = json.loads(run("explain", "--json", "-", stdin=log).stdout)
    real = [m for m in doc["matches"] if m["likelihood"] != "unlikely"]
    assert [(m["rule"], m["alternative_to"]) for m in real] == [("AD104", None)] and doc["summary"]["error"] == 1


@pytest.mark.parametrize("dtypes, cast", [
    ("query.dtype: c10::BFloat16 key.dtype: float and value.dtype: float", "Cast k and v to bfloat16 (q's dtype)"),
    ("query.dtype: float key.dtype: float and value.dtype: c10::Half", "Cast q and k to float16 (v's dtype)"),
    ("query.dtype: struct c10::BFloat16 key.dtype: float and value.dtype: struct c10::BFloat16",
     "Cast k to bfloat16 (the dtype of q and v)"),
    ("query.dtype: torch.float32, key.dtype: torch.float32, and value.dtype: torch.bfloat16", "Cast q and k to bfloat16 (v's dtype)"),
])
def test_a_dtype_mismatch_is_cast_toward_the_half_dtype_the_message_shows(dtypes, cast):
    message = f"RuntimeError: Expected query, key, and value to have the same dtype, but got {dtypes} instead."
    doc = json.loads(run("explain", "--json", message).stdout)
    match = doc["matches"][0]
    assert match["rule"] == "AD601"
    assert match["remedies"][0]["summary"].startswith(cast + " before the attention call")
