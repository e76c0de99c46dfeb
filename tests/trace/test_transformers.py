"""transformers' attention dispatch and ``--hf``: built from a local config on meta, nothing
downloaded. transformers is installed from PyPI into a temp folder; skipped when pip cannot."""
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

CONFIG = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "torch_dtype": "bfloat16"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    try:
        import transformers  # noqa: F401

        return None
    except ImportError:
        pass
    target = tmp_path_factory.mktemp("tf")
    from helpers.x_transformers import _installer

    proc = subprocess.run([*_installer(prefer_uv=True), "--target", str(target), "transformers"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        from helpers.registry import skip_or_fail

        skip_or_fail("transformers", proc.stderr)
    for extra in target.glob("torch*"):  # never shadow the venv's torch
        subprocess.run(["rm", "-rf", str(extra)])
    return str(target)


def run(site, monkeypatch, tmp_path, **kwargs):
    from attn_doctor.tracing.runs.launch import run_child

    if site:
        monkeypatch.setenv("PYTHONPATH", site)
    folder = tmp_path / "ckpt"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    return run_child("trace", dict(hf=str(folder), **kwargs), python=sys.executable, timeout=600)


def test_hf_sdpa_bf16_is_clean_and_sees_every_layer(site, monkeypatch, tmp_path):
    r = run(site, monkeypatch, tmp_path, attn_implementation="sdpa")
    assert r["status"] == "ok", r.get("error")
    assert r["findings"] == []
    assert [s["via"] for s in r["sinks"]] == ["transformers:sdpa"] * 2
    assert {s["effective_dtypes"]["q"] for s in r["sinks"]} == {"bfloat16"}


def test_hf_fp32_model_with_flash_attention_2_is_an_error(site, monkeypatch, tmp_path):
    # LLaMA-Factory #7151 / #7998: weights in fp32, FA2 asked for, no autocast.
    r = run(site, monkeypatch, tmp_path, attn_implementation="flash_attention_2", dtype="fp32")
    assert r["status"] == "ok", r.get("error")
    # transformers' own flash path ran (its fp32 -> target-dtype cast is a no-op for fp32 weights)
    # and reached flash-attn's function in fp32, in both layers.
    (f,) = r["findings"]
    assert f["id"] in ("AD601", "AD604") and f["severity"] == "error" and f["route"] == "standin"
    assert f["kernel_message"] == "FlashAttention only support fp16 and bf16 data type"
    assert f["sink"]["name"] in ("flash_attn_func", "flash_attn_varlen_func") and f["count"] == 2
    assert f["sink"]["file"].endswith("modeling_flash_attention_utils.py")


def test_hf_fp32_model_with_flash_attention_2_under_autocast_is_fine(site, monkeypatch, tmp_path):
    # transformers casts fp32 q/k/v to the autocast dtype before calling flash-attn.
    r = run(site, monkeypatch, tmp_path, attn_implementation="flash_attention_2", dtype="fp32", autocast="bf16")
    assert r["status"] == "ok", r.get("error")
    assert r["findings"] == []


@pytest.mark.parametrize("autocast", ["fp16", "bf16"])
def test_hf_fp32_model_with_eager_attention_under_autocast_is_fine(site, monkeypatch, tmp_path, autocast):
    # The rotary table follows the fp32 hidden states, so q and k reach eager attention in fp32 and
    # v in the autocast dtype; autocast casts both of its matmuls, so nothing raises on the GPU.
    r = run(site, monkeypatch, tmp_path, attn_implementation="eager", dtype="fp32", autocast=autocast)
    assert r["status"] == "ok", r.get("error")
    assert r["findings"] == [], r["findings"]
    half = {"fp16": "float16", "bf16": "bfloat16"}[autocast]
    # transformers' eager function is traced through: its matmuls, where autocast casts, are the call
    assert [(s["name"], s["effective_dtypes"]["q"]) for s in r["sinks"]] == [("eager attention (inline)", half)] * 2
    assert all(s["file"].endswith("modeling_llama.py") for s in r["sinks"])
    assert {s["inputs"]["q"]["dtype"] for s in r["sinks"]} == {"float32"}  # what the model hands over


def test_the_transformers_sample_leaves_optional_libraries_unimported(site, tmp_path):
    # scipy, torchvision and friends cost seconds of a cold check on a node that has them, and a
    # decoder's forward pass never uses them: installed or not, the sample must not import them.
    fakes = tmp_path / "fakes"
    for name in ("scipy", "torchvision", "torchaudio", "sklearn"):
        (fakes / name).mkdir(parents=True)
        (fakes / name / "__init__.py").write_text(
            "import pathlib\npathlib.Path(%r).write_text('imported')\n__version__ = '1.0'\n" % str(tmp_path / (name + ".imported")))
    code = ("from attn_doctor.tracing.runs.samples import run_sample_forward\n"
            "out = run_sample_forward(device='meta', samples=['transformers_sdpa'])\n"
            "print(out['samples'][0]['status'], out['verdict'])\n")
    env = dict(__import__("os").environ, PYTHONPATH=":".join(filter(None, [str(fakes), site])))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["ran", "pass"], proc.stdout + proc.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.glob("*.imported")) == []


def test_the_transformers_sample_skips_the_models_table_and_uses_the_prefetched_distributions(site, tmp_path):
    # The cold check's two short cuts, against the real release: transformers.models is a plain
    # package (its __init__, which reads every model's source for a lazy table, never runs), and
    # the packages_distributions() computed ahead is the one transformers' availability checks use.
    code = (
        "import importlib.metadata, json, sys\n"
        "from attn_doctor.tracing.runs.samples import run_sample_forward\n"
        "mapping = importlib.metadata.packages_distributions()\n"
        "mapping['attn_doctor_marker'] = ['attn-doctor-marker']\n"
        "out = run_sample_forward(device='meta', samples=['transformers_sdpa'], distributions=mapping)\n"
        "models = sys.modules['transformers.models']\n"
        "iu = sys.modules['transformers.utils.import_utils']\n"
        "seen = getattr(iu, 'PACKAGE_DISTRIBUTION_MAPPING', {})\n"
        "print(json.dumps([out['samples'][0]['status'], out['verdict'], type(models).__name__,\n"
        "                  'attn_doctor_marker' in seen, hasattr(iu, 'PACKAGE_DISTRIBUTION_MAPPING')]))\n")
    env = dict(__import__("os").environ, PYTHONPATH=":".join(filter(None, [site])))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    status, verdict, models_type, marker_seen, has_mapping = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (status, verdict) == ("ran", "pass"), proc.stderr[-2000:]
    assert "transformers imported whole" not in proc.stderr
    assert models_type == "module"  # a plain package, not transformers' _LazyModule
    if has_mapping:  # transformers 5 maps modules to distributions at import
        assert marker_seen
