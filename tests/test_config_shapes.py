"""The user's attention shape from --config (head dim and dtype), carried to the smoke probe, and
SDPA's answer for it in the report: real config files, a real child probe, real rendering."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import msgspec

from attn_doctor.core import diagnose
from attn_doctor.gather import load_facts_file
from attn_doctor.facts import BF16_NATIVE_FROM, SdpaChoice
from attn_doctor.probes.configs import attention_shapes, head_dim_of, probe_config
from attn_doctor.probes.runner import start_child
from attn_doctor.render.human import render
from attn_doctor.rules.loader import load_recipes

FIXTURES = Path(__file__).parent / "fixtures"


def test_head_dim_as_transformers_computes_it():
    assert head_dim_of({"head_dim": 256, "hidden_size": 3072, "num_attention_heads": 16}) == 256  # Gemma
    assert head_dim_of({"hidden_size": 4096, "num_attention_heads": 32}) == 128
    assert head_dim_of({"hidden_size": 2560, "num_attention_heads": 32}) == 80  # Phi-2
    assert head_dim_of({"model_type": "llava", "text_config": {"hidden_size": 4096, "num_attention_heads": 32}}) == 128
    assert head_dim_of({"head_dim": None, "hidden_size": 4096, "num_attention_heads": 32}) == 128
    for broken in ({"hidden_size": 100, "num_attention_heads": 3}, {"head_dim": True}, {"hidden_size": "4096"}, {}):
        assert head_dim_of(broken) is None


def test_model_config_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gemma", "head_dim": 256, "hidden_size": 3072,
                                "num_attention_heads": 16, "torch_dtype": "bfloat16"}))
    config = probe_config(str(path))
    assert config.kind == "transformers" and config.settings["head_dim"] == 256
    assert attention_shapes([config]) == [{"head_dim": 256, "dtype": "bfloat16", "source": "config.json"}]
    # An fp32 checkpoint (trained under autocast): no dtype pinned, each native dtype is asked about.
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "dtype": "float32"}))
    assert attention_shapes([probe_config(str(path))]) == [{"head_dim": 128, "dtype": None, "source": "config.json"}]


def test_llamafactory_yaml_with_a_local_model_folder(tmp_path, monkeypatch):
    model = tmp_path / "models" / "qwen-0.5b"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 896, "num_attention_heads": 14}))
    train = tmp_path / "configs" / "train.yaml"
    train.parent.mkdir()
    train.write_text(textwrap.dedent("""\
        ### model
        model_name_or_path: ../models/qwen-0.5b   # relative to this file
        stage: sft
        finetuning_type: lora
        flash_attn: fa2
        fp16: true  # a T4
        """))
    monkeypatch.chdir(tmp_path)  # not the YAML's folder: found beside the YAML instead
    config = probe_config(str(train))
    assert config.kind == "llamafactory"
    assert config.settings["head_dim"] == 64 and config.settings["model_config"] == str(model / "config.json")
    assert attention_shapes([config]) == [{"head_dim": 64, "dtype": "float16", "source": "train.yaml"}]


def test_llamafactory_yaml_with_a_hub_model_has_no_shape():
    config = probe_config(str(FIXTURES / "configs" / "llamafactory_lora_bf16.yaml"))
    assert config.kind == "llamafactory" and "head_dim" not in config.settings
    assert attention_shapes([config]) == []


def test_shapes_are_deduplicated(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path in (a, b):
        path.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "torch_dtype": "bfloat16"}))
    assert len(attention_shapes([probe_config(str(a)), probe_config(str(b))])) == 1


FAKE_GPU_CHILD = """
def cuda_facts():
    return {"status": "ok", "cuda_available": True, "devices": []}

LIBRARIES = {}
COMPILED = {}

def smoke_groups(capability, libraries=(), compiled=(), numerics=True, numerics_only=()):
    return ["main"]

def run_smoke_group(group, index=0, groups=None, shapes=None, kernel_cache=None, capability=None, budget_s=None):
    return {"status": "ok", "results": [], "choices": [
        {"dtype": s["dtype"] or "bfloat16", "head_dim": s["head_dim"], "backend": "efficient_attention", "source": s["source"]}
        for s in shapes]}
"""


def test_shapes_reach_the_smoke_group_in_the_target_interpreter(tmp_path):
    script = tmp_path / "gpu_child.py"
    script.write_text(FAKE_GPU_CHILD)
    shapes = [{"head_dim": 512, "dtype": "bfloat16", "source": "config.json"}]
    config = {"script": str(script), "smoke": True, "capability": "9.0", "shapes": shapes,
              "bf16_native_from": list(BF16_NATIVE_FROM)}
    data = start_child(sys.executable, ["torch", "--gpu", json.dumps(config), "triton"]).result(60)
    assert data["smoke"]["main"]["choices"] == [
        {"dtype": "bfloat16", "head_dim": 512, "backend": "efficient_attention", "source": "config.json"}]


def _rendered(report) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    render(report, Console(file=out, width=400, color_system=None, highlight=False))
    return out.getvalue()


def _h200_with(choices):
    facts = load_facts_file(FIXTURES / "facts" / "h200.json")
    facts.smoke.choices = [msgspec.convert(c, SdpaChoice) for c in choices]
    return facts


def test_report_shows_the_models_fast_path_and_why_the_others_were_refused():
    reason = "Flash attention requires q,k,v to have the same last dimension and to be less than or equal to 256. Got Query.size(-1): 512"
    facts = _h200_with([
        {"dtype": "bfloat16", "head_dim": 128, "backend": "cudnn_attention"},
        {"dtype": "bfloat16", "head_dim": 512, "backend": "efficient_attention", "source": "config.json",
         "refused": {"flash": [reason]}},
    ])
    report = diagnose(facts, load_recipes(None), "error")
    text = _rendered(report)
    assert "SDPA picks cuDNN" in text
    assert f"your model (config.json: bfloat16, head dim 512): SDPA picks mem-efficient (flash refused: {reason})" in text
    assert {r.rule: r.status for r in report.results}["AD702"] == "pass"  # a fused kernel: no warning


def test_math_for_the_models_head_dim_is_a_warning_naming_the_config():
    facts = _h200_with([
        {"dtype": "bfloat16", "head_dim": 128, "backend": "flash_attention"},
        {"dtype": "bfloat16", "head_dim": 1024, "backend": "math", "source": "config.json",
         "refused": {"flash": ["over 256"], "mem_efficient": ["disabled"]}},
    ])
    result = {r.rule: r for r in diagnose(facts, load_recipes(None), "error").results}["AD702"]
    assert result.status == "warning"
    assert result.message.startswith("For bfloat16 inputs with head dim 1024 (your model, config.json), ")
    assert "flash: over 256; mem_efficient: disabled" in result.message
