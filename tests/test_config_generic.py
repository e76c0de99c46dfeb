"""The generic reader (attn_doctor/probes/configs/readers/generic.py): a file no framework reader
recognises is read for the idioms every framework shares, judged, and fixed in its own spelling;
a file with none of them stays "not recognised" (AD513)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from attn_doctor.probes.configs import probe_config
from attn_doctor.probes.configs.readers.generic import parse_precision

HERE = Path(__file__).resolve().parent / "fixtures" / "configs" / "generic"


@pytest.mark.parametrize("value, expected", [
    ("bf16-mixed", ("bfloat16", True)), ("amp_bf16", ("bfloat16", True)), ("BFLOAT_16", ("bfloat16", None)),
    ("torch.bfloat16", ("bfloat16", None)), ("bf16-true", ("bfloat16", False)), ("16-mixed", ("float16", True)),
    ("amp_fp16", ("float16", True)), ("FLOAT_16", ("float16", None)), ("half", ("float16", None)),
    ("32-true", ("float32", False)), ("no", ("float32", None)), ("amp_fp8", ("fp8", True)), ("FLOAT_8", ("fp8", None)),
    ("auto", None), ("int64", None), (True, None), (4, None), ("a" * 60, None),
])
def test_every_spelling_of_a_precision(value, expected):
    assert parse_precision(value) == expected


def test_a_home_grown_file_is_read_generically_with_its_keys():
    c = probe_config(str(HERE / "homegrown.yaml"))
    assert c.kind == "generic" and c.why == "keys run.amp_dtype, net.attn_backend"
    plan = {k: (v.value, v.key) for k, v in c.plan.items()}
    assert plan["compute_dtype"] == ("bfloat16", "run.amp_dtype") and plan["param_dtype"] == ("float32", "run.amp_dtype")
    assert plan["attention"] == ("flash_attention_2", "net.attn_backend")
    assert c.edits["precision=fp16"] == {"run.amp_dtype": "amp_fp16"}
    assert c.edits["attention=sdpa"] == {"net.attn_backend": "sdpa"}


def test_fp8_weights_are_storage_not_fp8_compute():
    c = probe_config(str(HERE / "onetrainer_like.json"))
    assert c.kind == "generic"
    assert c.plan["quantization"].value == "fp8-weights" and "fp8" not in c.plan
    assert c.plan["compute_dtype"].value == "bfloat16" and c.plan["attention"].value == "sdpa"


def test_a_file_with_none_of_the_idioms_is_still_not_recognised():
    c = probe_config(str(HERE / "nothing.toml"))
    assert c.kind == "unknown" and "not those of a framework" in c.why


def test_judged_on_a_t4_and_fixed_in_place_keeping_comments(tmp_path):
    import subprocess
    import sys

    config = tmp_path / "run.yaml"
    shutil.copy(HERE / "homegrown.yaml", config)
    t4 = str(Path(__file__).resolve().parent / "fixtures" / "facts" / "t4.json")
    out = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--from-report", t4, "-c", str(config)],
                         capture_output=True, text=True).stdout
    assert "Configs: 1 file read: read generically" in out
    assert "`net.attn_backend: flash` (read generically) on Tesla T4" in out and "AD502" in out
    assert "`run.amp_dtype: amp_bf16` (read generically) means bf16 mixed precision on Tesla T4" in out
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "fix", "--from-report", t4, "-c", str(config), "--yes"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = config.read_text()
    assert "  amp_dtype: amp_fp16  # autocast over fp32 weights" in text
    assert "  attn_backend: sdpa  # FlashAttention-2" in text and "# A home-grown trainer" in text


LONGTAIL = Path(__file__).resolve().parent / "fixtures" / "configs" / "longtail"
# What the long tail's frameworks mean by their keys (read in each project's code; the harvest's
# survey): the generic reader must say that, or say nothing, never the opposite.
LONGTAIL_EXPECTED = {
    "picotron_base_config.json": ("generic", {"compute_dtype": "bfloat16", "attention": "flash_attention_2"}),
    "vits_ljs_base.json": ("generic", {"compute_dtype": "float16"}),  # fp16_run: fp16 autocast with a GradScaler
    "autotrain_llama3-8b-dpo-qlora.yml": ("generic", {"compute_dtype": "float16"}),  # mixed_precision: fp16, not axolotl's bf16
    "opennmt_wmt17_fp16_transformer.yaml": ("generic", {"compute_dtype": "float16"}),  # fp32 master weights: no param_dtype said
    "lingua_llama_1B.yaml": ("generic", {"compute_dtype": "bfloat16"}),  # FSDP2's compute dtype over fp32 weights
    "levanter_gpt2_small.yaml": ("generic", {"compute_dtype": "bfloat16", "param_dtype": "float32"}),  # jmp p=f32,c=bfloat16
}


def test_the_long_tail_is_read_without_a_stop_and_never_claims_pure_half_from_a_dtype_key():
    names = sorted(p.name for p in LONGTAIL.iterdir() if p.name != "SOURCES.toml")
    assert len(names) >= 38  # a framework that gets a reader takes its files to real/ (GPT-NeoX's five)
    for name in names:
        c = probe_config(str(LONGTAIL / name))
        assert c.status == "ok", (name, c.error)
        if c.kind == "generic" and "param_dtype" in c.plan:
            assert c.plan["param_dtype"].value == "float32" or "true" in str(c.plan["param_dtype"].raw).lower(), name
    for name, (kind, plan) in LONGTAIL_EXPECTED.items():
        c = probe_config(str(LONGTAIL / name))
        assert c.kind == kind and {k: c.plan[k].value for k in plan if k in c.plan} == plan, (name, c.kind, c.plan)
    # a preset's use_flash_attention: true beside the defaults' false: not judged either way
    assistant = probe_config(str(LONGTAIL / "openassistant_config.yaml"))
    assert "attention" not in assistant.plan


def test_every_long_tail_file_has_its_source():
    import re

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    sources = tomllib.loads((LONGTAIL / "SOURCES.toml").read_text())["file"]
    assert {s["name"] for s in sources} == {p.name for p in LONGTAIL.iterdir() if p.name != "SOURCES.toml"}
    for s in sources:
        assert re.fullmatch(r"[0-9a-f]{40}", s["commit"]) and s["url"] == f"https://github.com/{s['repo']}/blob/{s['commit']}/{s['path']}"


def test_an_inference_engines_attention_backend_is_not_read_as_a_training_attention_implementation(tmp_path):
    """An RL recipe's `sglang.attention_backend: fa3` is SGLang's FlashAttention-3 build, which runs on
    sm80 as on sm90 (its own assertion: SM>=80 and SM<=90): read as transformers' flash_attention_3
    (Hopper only) it was an error on an A100. It is said not understood; the trainer's own key is read."""
    path = tmp_path / "grpo.yaml"
    path.write_text("actor:\n  dtype: bfloat16\nsglang:\n  dtype: bfloat16\n  attention_backend: fa3\n")
    config = probe_config(str(path), {})
    assert config.kind == "generic" and config.plan["compute_dtype"].key == "actor.dtype"
    assert "attention" not in config.plan
    assert "sglang.attention_backend" in config.unread
