"""An Open Instruct (allenai/open-instruct) training YAML: the flat keys of its argument dataclasses
(open_instruct/finetune.py FlatArguments, dpo_utils.py DPOExperimentConfig, model_utils.py
ModelConfig), as in configs/train_configs/{sft,dpo,tulu3,olmo2}/*.yaml, given to the script as its
one argument (utils.py ArgumentParserPlus.parse -> HfArgumentParser.parse_yaml_file, which refuses
keys no dataclass has).

Read from allenai/open-instruct at e6c3044aa6201c8bfa4573c1b03142af599e730d (and its history):

- Precision has no key: finetune.py main() and dpo_tune_cache.py load the model with
  dtype=torch.bfloat16 (the QLoRA, plain and reference-model paths); grpo_fast.py the same. Autocast
  and the optimizer's master copy come from the launch, not the file: `accelerate launch
  --mixed_precision bf16` and the DeepSpeed configs (bf16 "enabled": "auto"), whose ZeRO optimizer
  keeps fp32 master weights. With `use_liger_kernel: true` finetune.py passes no dtype
  (AutoLigerKernelForCausalLM.from_pretrained): transformers>=5 (pyproject) loads the checkpoint's dtype.
- Attention has no key either, since 9e8e2187c (2026-03-30, "Automatically configures flash
  attention"): model_utils.py detect_attn_implementation() takes flash_attention_4 where flash-attn-4
  is installed and the GPU is sm100+, flash_attention_3 where flash-attn-3 is installed and the GPU is
  sm90+, else flash_attention_2 whenever flash-attn (2) is installed -- transformers'
  is_flash_attn_2_available(), with no compute-capability check -- else sdpa. pyproject installs
  flash-attn>=2.8.3 on Linux x86_64. Before that, `use_flash_attn` (default True) chose
  "flash_attention_2" (from 98ccfb460, 2023-10) or "eager"; from d2cf8a90d (2026-03-26) to 9e8e2187c it
  chose "flash_attention_3". A current open-instruct refuses the key ("Some keys are not used by the
  HfArgumentParser"); as open-instruct runs from a git checkout (dynamic version) the reader cannot tell
  which side of 9e8e2187c is installed, so this is said in settings, not as a refusal. ModelConfig / OLMo-core configs take `attn_implementation` in OLMo-core's names
  (flash_2, flash_3, flash_4, torch, te; model_utils.py _OLMO_CORE_TO_HF_ATTN: torch and te -> sdpa).
- `use_lora` (LoRA on q/k/v/o/gate/up/down) and `use_qlora` (finetune.py: BitsAndBytesConfig 4-bit,
  nf4, double quant, bnb_4bit_compute_dtype=torch.bfloat16; peft's prepare_model_for_kbit_training).
  PEFT's get_peft_model keeps bf16/fp16 adapter weights in fp32 (autocast_adapter_dtype, on by default).
- OLMo-core trainers (dpo.py, olmo_core_finetune.py): FSDP with param_dtype bfloat16, reduce_dtype
  float32, and `compile_model` (default True).
"""

from __future__ import annotations

from ...plan import Reading, attention_of, truthy

NAME = "open-instruct"
LABEL = "Open Instruct"
FORMATS = ("yaml", "json")
MARKERS = {"with_tracking": 2, "checkpointing_steps": 2, "use_slow_tokenizer": 2, "dataset_mix_dir": 4, "use_flash_attn": 2,
           "add_bos": 2, "keep_last_n_checkpoints": 2, "hf_metadata_dataset": 3, "try_launch_beaker_eval_jobs": 4,
           "try_auto_save_to_beaker": 4, "use_qlora": 3, "dataset_mixer_list": 2, "dataset_transform_fn": 3,
           "dataset_local_cache_dir": 3, "dataset_cache_mode": 3, "oe_eval_tasks": 3, "gs_bucket_path": 3, "final_lr_ratio": 2,
           "clip_grad_norm": 2, "reduce_loss": 2, "concatenated_forward": 3, "use_8bit_optimizer": 2, "fused_optimizer": 2,
           "load_balancing_loss": 2, "sync_each_batch": 2, "wandb_project_name": 1, "hf_entity": 1, "tokenizer_name": 1,
           "lora_rank": 1, "dataset_mixer": 1, "num_epochs": 1, "max_seq_length": 1, "gamma_beta_ratio": 2}
DISTINCT = ("dataset_mix_dir", "try_launch_beaker_eval_jobs", "try_auto_save_to_beaker", "hf_metadata_dataset",
            "dataset_transform_fn", "dataset_local_cache_dir", "dataset_cache_mode", "oe_eval_tasks", "gs_bucket_path",
            "concatenated_forward", "dataset_mixer_list", "use_slow_tokenizer", "reduce_loss", "add_bos")


def recognise_extra(doc: dict) -> int:
    """finetune.py descends from transformers' run_clm_no_trainer (with_tracking, checkpointing_steps,
    use_slow_tokenizer next to model_name_or_path); `use_lora` with `lora_rank` is open-instruct's
    spelling (TRL writes use_peft / lora_r)."""
    score = 0
    if "model_name_or_path" in doc and "with_tracking" in doc:
        score += 2
        if "checkpointing_steps" in doc or "use_slow_tokenizer" in doc or "tokenizer_name" in doc:
            score += 2
    if "use_lora" in doc and "lora_rank" in doc:
        score += 2
    return score

_OLMO_CORE = {"flash_2": "flash_attention_2", "flash_3": "flash_attention_3", "flash_4": "flash_attention_4",
              "torch": "sdpa", "te": "sdpa"}
AUTODETECT = ("open_instruct/model_utils.py detect_attn_implementation(): flash_attention_2 whenever flash-attn is installed "
              "(transformers' is_flash_attn_2_available(), no compute-capability check; pyproject installs flash-attn on Linux "
              "x86_64), flash_attention_3 / flash_attention_4 only where those packages are installed on sm90+ / sm100+, "
              "sdpa without flash-attn; before 9e8e2187c (2026-03-30) use_flash_attn defaulted to True")
BF16 = ("open_instruct/finetune.py and dpo_tune_cache.py load the model with dtype=torch.bfloat16 (no key); the launch's "
        "accelerate --mixed_precision bf16 / DeepSpeed bf16 \"auto\" adds autocast")


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    r.understood("use_flash_attn", "attn_implementation", "use_lora", "use_qlora", "use_liger_kernel", "compile_model",
                 "use_8bit_optimizer", "fused_optimizer", "dtype")
    liger = truthy(doc.get("use_liger_kernel")) is True
    r.set("compute_dtype", "bfloat16", source="default", note=BF16)
    if liger:
        r.set("param_dtype", "auto", source="default",
              note="use_liger_kernel: finetune.py passes no dtype to AutoLigerKernelForCausalLM.from_pretrained, so transformers>=5 "
                   "loads the checkpoint's dtype")
    else:
        r.set("param_dtype", "bfloat16", source="default",
              note="loaded with dtype=torch.bfloat16 (finetune.py / dpo_tune_cache.py); under the DeepSpeed launch its ZeRO optimizer "
                   "keeps an fp32 master copy")

    if "use_flash_attn" in doc:
        on = truthy(doc.get("use_flash_attn"))
        r.set("attention", "flash_attention_2" if on else "eager", key="use_flash_attn", raw=doc.get("use_flash_attn"),
              note=("open-instruct before 9e8e2187c: attn_implementation=\"flash_attention_2\" if use_flash_attn else \"eager\" "
                    "(\"flash_attention_3\" from d2cf8a90d, 2026-03-26, to 9e8e2187c, 2026-03-30)"))
        # Not a `refused`: open-instruct runs from a git checkout (dynamic version), so which releases
        # refuse the key cannot be matched against what is installed.
        r.settings["use_flash_attn_removed"] = ("removed in 9e8e2187c (2026-03-30): a later checkout refuses it "
                                                "(\"Some keys are not used by the HfArgumentParser: ['use_flash_attn']\") "
                                                "and auto-detects the attention")
    elif isinstance(doc.get("attn_implementation"), str) and doc["attn_implementation"].strip():
        raw = doc["attn_implementation"].strip()
        value = _OLMO_CORE.get(raw) or attention_of(raw) or raw
        r.set("attention", value, key="attn_implementation", raw=raw,
              note="OLMo-core's AttentionBackendName, mapped by model_utils.py olmo_core_attn_to_hf" if raw in _OLMO_CORE else None)
    else:
        r.set("attention", "flash_attention_2", source="default", note=AUTODETECT)

    _adapters(doc, r)
    if truthy(doc.get("compile_model")) is not None:
        r.set("compile", truthy(doc.get("compile_model")), key="compile_model", raw=doc.get("compile_model"))
    r.settings.update({k: doc[k] for k in ("use_flash_attn", "attn_implementation", "use_lora", "use_qlora", "use_liger_kernel")
                       if k in doc})
    # Precision is not in the file (bf16 is hard-coded): no precision remedy can be written here.
    if "use_flash_attn" in doc and truthy(doc.get("use_flash_attn")):
        r.edits["attention=sdpa"] = {"use_flash_attn": False}  # the old releases' only other choice: eager
    elif "attn_implementation" in doc:
        r.edits["attention=sdpa"] = {"attn_implementation": "torch"}
    return r


def _adapters(doc: dict, r: Reading) -> None:
    qlora, lora = truthy(doc.get("use_qlora")) is True, truthy(doc.get("use_lora")) is True
    if qlora:
        r.set("quantization", "nf4", key="use_qlora", raw=doc.get("use_qlora"),
              note="finetune.py BitsAndBytesConfig(load_in_4bit, nf4, double quant)")
        r.set("quant_compute_dtype", "bfloat16", source="default", note="bnb_4bit_compute_dtype=torch.bfloat16 (finetune.py)")
    if lora or qlora:
        r.set("adapter", "qlora" if qlora else "lora", key="use_qlora" if qlora else "use_lora",
              raw=doc.get("use_qlora") if qlora else doc.get("use_lora"))
        r.set("adapter_dtype", "float32", source="default",
              note="PEFT's get_peft_model keeps bf16/fp16 adapter weights in fp32 (autocast_adapter_dtype, on by default)")
