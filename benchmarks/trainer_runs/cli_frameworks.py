"""axolotl and LLaMA-Factory, each run by its own command line for two steps on a tiny local Llama
(run_two_steps.py's runners for the frameworks whose trainer is a CLI, not a class to call).

Both functions
  * build a tiny Llama (LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)) + a tiny word-level
    PreTrainedTokenizerFast (pad/bos/eos/unk) + a 32-line jsonl dataset inside work_dir,
  * read the framework's YAML config (which carries the precision keys: bf16/fp16/tf32 ...),
    fill in model path, dataset, output dir and the "2 steps" keys,
  * run the framework's own CLI in a subprocess (offline env), and
  * return dict(losses=[...], returncode=..., log=path, config=path).

On a GPU machine without network the frameworks come as wheels (git-ignored folders .whl-axl and
.whl-lf, listed in README.md), installed apart because their pins differ (datasets, TRL):
    pip install --no-index --no-deps --target /tmp/site-axl .whl-axl/*.whl
    pip install --no-index --no-deps --target /tmp/site-lf  .whl-lf/*.whl
and put on PYTHONPATH (site_dir=..., or PYTHONPATH as run_two_steps.py is started with).
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

WORDS = (
    "the cat dog bird fish sat ran flew swam on in under over a mat log tree pond big small red "
    "blue green old young happy sad quick slow jumped walked looked saw and then very near far "
    "house garden river hill sun moon star day night"
).split()

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]


# ----------------------------------------------------------------------------- tiny assets
def _texts(n: int = 32) -> list[str]:
    out = []
    for i in range(n):
        k = 6 + (i % 7)
        out.append(" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(k)) + " .")
    return out


def build_tiny_assets(work_dir: str | os.PathLike) -> dict:
    """Tiny Llama + tokenizer (saved together in work_dir/tiny-llama) and datasets."""
    work = Path(work_dir).resolve()
    model_dir = work / "tiny-llama"
    data_dir = work / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    texts = _texts()

    if not (model_dir / "config.json").exists():
        import torch
        from tokenizers import Tokenizer, models, pre_tokenizers, processors
        from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

        vocab = {t: i for i, t in enumerate(SPECIALS)}
        for w in WORDS + [".", ",", ":", "?", "!", "Human", "Assistant", "User", "System"]:
            vocab.setdefault(w, len(vocab))
        assert len(vocab) <= 128, len(vocab)
        tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
        hf_tok = PreTrainedTokenizerFast(
            tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
            unk_token="<unk>", model_max_length=64)
        hf_tok.padding_side = "right"
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=128, pad_token_id=0, bos_token_id=1,
                          eos_token_id=2, tie_word_embeddings=False)
        model = LlamaForCausalLM(cfg)
        model.save_pretrained(model_dir)
        hf_tok.save_pretrained(model_dir)

    # completion/pretraining data (axolotl) : {"text": ...}
    (data_dir / "texts.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    # alpaca-style sft data (LLaMA-Factory) + dataset_info.json
    sft = [{"instruction": " ".join(t.split()[:3]), "input": "", "output": t} for t in texts]
    (data_dir / "tiny_sft.json").write_text(json.dumps(sft))
    (data_dir / "dataset_info.json").write_text(json.dumps({
        "tiny_sft": {"file_name": "tiny_sft.json",
                     "columns": {"prompt": "instruction", "query": "input", "response": "output"}}
    }, indent=1))
    return {"model_dir": str(model_dir), "data_dir": str(data_dir),
            "texts_jsonl": str(data_dir / "texts.jsonl")}


# ----------------------------------------------------------------------------- helpers
def _load_yaml(path):
    import yaml
    with open(path) as f:
        return yaml.safe_load(f) or {}


def _dump_yaml(cfg, path):
    import yaml
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)


def _prepared(config_path, work_dir, dropped):
    """The work folder, the tiny model, tokenizer and data in it, and the config without `dropped` keys."""
    work = Path(work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    assets = build_tiny_assets(work)
    cfg = _load_yaml(config_path)
    for k in dropped:
        cfg.pop(k, None)
    return work, assets, cfg


def _env(site_dir, extra=None):
    env = dict(os.environ)
    env.update({
        "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "WANDB_DISABLED": "true", "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false",
        "DO_NOT_TRACK": "1", "AXOLOTL_DO_NOT_TRACK": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
        "PYTHONUNBUFFERED": "1",
    })
    if site_dir:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in [str(site_dir), env.get("PYTHONPATH", "")] if p)
    env.update(extra or {})
    return env


_LOSS_DICT = re.compile(r"\{[^{}]*'loss'[^{}]*\}")


def _parse_losses(text: str) -> list[float]:
    """Trainer logs lines like {'loss': '4.852', 'grad_norm': ..., 'epoch': ...}."""
    losses = []
    for m in _LOSS_DICT.finditer(text):
        try:
            d = ast.literal_eval(m.group(0))
        except Exception:
            mm = re.search(r"'loss':\s*'?([0-9.eE+-]+|nan|inf)", m.group(0))
            d = {"loss": mm.group(1)} if mm else {}
        if "loss" in d and "train_loss" not in d:
            losses.append(float(d["loss"]))
    return losses


def _losses_from_state(out_dir: Path) -> list[float]:
    for p in sorted(out_dir.rglob("trainer_state.json")):
        try:
            hist = json.loads(p.read_text()).get("log_history", [])
            ls = [float(h["loss"]) for h in hist if "loss" in h]
            if ls:
                return ls
        except Exception:
            pass
    return []


# An import-only stand-in for wandb, which axolotl imports at load but a run without use_wandb never
# calls (its wheel is 20 MiB). It goes on PYTHONPATH after the carried wheels, so a real wandb wins;
# it has no .dist-info, so transformers' is_wandb_available() stays False and adds no callback.
_WANDB_STUB = """
class _Missing:
    def __init__(self, *a, **k):
        raise ImportError(__name__ + ' is a stub: the real package is not installed')
    def __class_getitem__(cls, item):
        return cls
run = None
def __getattr__(name):
    if name.startswith('__'):
        raise AttributeError(name)
    return _Missing
"""


def _write_wandb_stub(stub_dir: Path) -> str:
    (stub_dir / "wandb").mkdir(parents=True, exist_ok=True)
    (stub_dir / "wandb" / "__init__.py").write_text(_WANDB_STUB)
    return str(stub_dir)


def _run(cmd, env, log_path, cwd, timeout=None):
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                              timeout=timeout)
    return proc.returncode, Path(log_path).read_text(errors="replace")


# ----------------------------------------------------------------------------- axolotl
AXOLOTL_TRAIN_KEYS = {
    "max_steps": 2, "micro_batch_size": 2, "gradient_accumulation_steps": 1,
    "sequence_len": 32, "sample_packing": False, "val_set_size": 0.0, "num_epochs": 1,
    "logging_steps": 1, "save_strategy": "no", "eval_strategy": "no",
    "dataset_processes": 1, "dataloader_num_workers": 0, "use_wandb": False,
    "warmup_steps": 0, "seed": 42,
}


def run_axolotl(config_path, work_dir, site_dir=None, overrides=None, python=sys.executable,
                timeout=1800) -> dict:
    """Train the tiny Llama for 2 steps with `python -m axolotl.cli.train CONFIG` (full FT)."""
    # the config's adapter (LoRA) is kept: whether its weights train in fp32 is what decides fp16's loss scaling
    work, a, cfg = _prepared(config_path, work_dir, ("lora_model_dir", "wandb_project", "wandb_entity", "hub_model_id",
                                                     "deepspeed", "fsdp", "fsdp_config", "hf_use_auth_token", "test_datasets"))
    cfg.update({
        "base_model": a["model_dir"], "tokenizer_config": a["model_dir"],
        "model_type": "LlamaForCausalLM", "tokenizer_type": "PreTrainedTokenizerFast",
        "datasets": [{"path": a["texts_jsonl"], "ds_type": "json", "type": "completion",
                      "field": "text"}],
        "dataset_prepared_path": str(work / "axl_prepared"),
        "output_dir": str(work / "axl_out"),
    })
    cfg.update(AXOLOTL_TRAIN_KEYS)
    cfg.update(overrides or {})
    cfg_path = work / "axolotl_run.yaml"
    _dump_yaml(cfg, cfg_path)
    env = _env(site_dir)
    stub_dir = _write_wandb_stub(work / "_stubs")
    env["PYTHONPATH"] = os.pathsep.join(p for p in [env.get("PYTHONPATH", ""), stub_dir] if p)
    # axolotl.cli.train's __main__ calls fire.Fire(do_cli) -> `python -m axolotl.cli.train CFG`
    cmd = [python, "-m", "axolotl.cli.train", str(cfg_path)]
    rc, text = _run(cmd, env, work / "axolotl_train.log", work, timeout)
    losses = _parse_losses(text) or _losses_from_state(work / "axl_out")
    return {"losses": losses, "returncode": rc, "log": str(work / "axolotl_train.log"),
            "config": str(cfg_path)}


# ----------------------------------------------------------------------------- LLaMA-Factory
LF_TRAIN_KEYS = {
    "stage": "sft", "do_train": True, "finetuning_type": "full",
    "max_steps": 2, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1,
    "cutoff_len": 32, "logging_steps": 1, "save_strategy": "no", "report_to": "none",
    "overwrite_output_dir": True, "preprocessing_num_workers": None,
    "dataloader_num_workers": 0, "warmup_steps": 0, "seed": 42, "plot_loss": False,
    "overwrite_cache": True,
}


def run_llamafactory(config_path, work_dir, site_dir=None, overrides=None, python=sys.executable,
                     timeout=1800) -> dict:
    """Train the tiny Llama for 2 steps with `python -m llamafactory.cli train CONFIG` (sft/full)."""
    # warmup_ratio: removed from transformers 5's TrainingArguments (warmup_steps takes a fraction now)
    work, a, cfg = _prepared(config_path, work_dir, ("deepspeed", "lora_rank", "lora_target", "lora_alpha", "lora_dropout",
                                                     "eval_dataset", "val_size", "eval_strategy", "eval_steps",
                                                     "per_device_eval_batch_size", "max_samples", "resume_from_checkpoint",
                                                     "warmup_ratio"))
    cfg.update({
        "model_name_or_path": a["model_dir"], "trust_remote_code": False,
        "dataset": "tiny_sft", "dataset_dir": a["data_dir"], "template": "default",
        "output_dir": str(work / "lf_out"),
    })
    cfg.update(LF_TRAIN_KEYS)
    cfg.update(overrides or {})
    cfg = {k: v for k, v in cfg.items() if v is not None}
    cfg_path = work / "llamafactory_run.yaml"
    _dump_yaml(cfg, cfg_path)
    env = _env(site_dir, {"DISABLE_VERSION_CHECK": "1", "FORCE_TORCHRUN": "0",
                          "USE_MODELSCOPE_HUB": "0", "USE_OPENMIND_HUB": "0",
                          "LLAMAFACTORY_VERBOSITY": "INFO"})
    # llamafactory-cli == python -m llamafactory.cli (console script -> llamafactory.cli:main)
    cmd = [python, "-m", "llamafactory.cli", "train", str(cfg_path)]
    rc, text = _run(cmd, env, work / "llamafactory_train.log", work, timeout)
    losses = _parse_losses(text) or _losses_from_state(work / "lf_out")
    return {"losses": losses, "returncode": rc, "log": str(work / "llamafactory_train.log"),
            "config": str(cfg_path)}


if __name__ == "__main__":  # python cli_frameworks.py {axolotl|llamafactory} CONFIG WORK_DIR [SITE_DIR] [cpu]
    which, conf, wd = sys.argv[1], sys.argv[2], sys.argv[3]
    site = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] not in ("", "-") else None
    cpu = len(sys.argv) > 5 and sys.argv[5] == "cpu"
    if which == "axolotl":
        ov = {"bf16": False, "fp16": False, "tf32": False} if cpu else None
        res = run_axolotl(conf, wd, site, ov)
    else:
        ov = {"bf16": False, "fp16": False, "pure_bf16": False} if cpu else None
        res = run_llamafactory(conf, wd, site, ov)
    print(json.dumps(res, indent=1))
    sys.exit(0 if res["returncode"] == 0 and len(res["losses"]) >= 2 else 1)
