"""A TRL recipe (`trl sft --config x.yaml`; TrlParser, trl/scripts/utils.py) or an alignment-handbook
recipe (the same parser over ScriptArguments + SFTConfig / DPOConfig + ModelConfig, one flat YAML).

- Every TRL trainer config sets `bf16 = not fp16` when `bf16` is not given (trl/trainer/base_config.py,
  from TRL 0.19): bf16 autocast unless the file says otherwise.
- ModelConfig's `dtype` (`torch_dtype` before TRL 0.27, which refuses it since) is the dtype the
  weights load in; TRL's own default is float32 (trl/trainer/utils.py create_model_from_path).
- `attn_implementation` (a transformers name or a kernels-hub repository); the handbook's older
  recipes wrote `use_flash_attention_2: true`.
- TrainingArguments' `tf32: true` raises below Ampere.
"""

from __future__ import annotations

from ...plan import Reading, attention_of, dtype_of, truthy
from .. import _hf

NAME = "trl"
LABEL = "TRL"
FORMATS = ("yaml", "json")
MARKERS = {"dataset_name": 3, "dataset_mixture": 3, "dataset_mixer": 3, "use_peft": 2, "model_revision": 2, "dataset_text_field": 2,
           "num_generations": 2, "use_vllm": 2, "dataset_train_split": 2, "dataset_splits": 2, "model_name_or_path": 1,
           "hub_model_id": 1, "max_seq_length": 1, "max_length": 1, "attn_implementation": 1, "torch_dtype": 1,
           "chat_template": 1, "dataset_num_proc": 1, "gradient_checkpointing_kwargs": 1, "beta": 1, "per_device_train_batch_size": 1,
           "use_liger_kernel": 1, "preprocessing_num_workers": 1, "push_to_hub": 1, "lora_r": 1, "load_in_4bit": 1,
           "use_flash_attention_2": 2, "model_init_kwargs": 2, "packing": 1, "completion_only_loss": 2, "loss_type": 1}
# TRL's ScriptArguments / ModelConfig / trainer configs and the alignment handbook's (dataset_name is
# transformers' example scripts' too, model_name_or_path everyone's).
# (dataset_mixer and model_revision are Open Instruct's too; num_generations, use_vllm and dataset_num_proc ms-swift's.)
DISTINCT = ("dataset_mixture", "dataset_text_field", "use_peft", "completion_only_loss", "model_init_kwargs", "dataset_train_split",
            "dataset_test_split", "use_flash_attention_2", "assistant_only_loss", "vllm_mode", "dataset_splits")
BF16_DEFAULT = "TRL's configs set bf16 = not fp16 when bf16 is not given (trl/trainer/base_config.py)"


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    r.understood("dtype", "torch_dtype", "attn_implementation", "use_flash_attention_2", "model_init_kwargs", "use_liger_kernel",
                 "load_in_4bit", "load_in_8bit", "bnb_4bit_compute_dtype", "bnb_4bit_quant_storage", "use_peft", "use_dora")
    init = doc.get("model_init_kwargs") if isinstance(doc.get("model_init_kwargs"), dict) else {}
    key = next((k for k in ("dtype", "torch_dtype") if doc.get(k) is not None), None)
    if key is None and init.get("dtype", init.get("torch_dtype")) is not None:
        key = "model_init_kwargs." + ("dtype" if init.get("dtype") is not None else "torch_dtype")
    value = doc.get(key) if key and "." not in key else init.get(key.split(".", 1)[1]) if key else None
    loaded = dtype_of(value)
    _hf.training_arguments(doc, r, bf16_default=True, default_note=BF16_DEFAULT, loaded_dtype=loaded, loaded_key=key)
    if not loaded and "compute_dtype" in r.plan:
        note = ("dtype auto: the checkpoint's dtype" if str(value).lower() == "auto"
                else "TRL loads the weights in float32 when no dtype is given (ModelConfig.dtype)")
        r.set("param_dtype", "auto" if str(value).lower() == "auto" else "float32",
              source="file" if key else "default", key=key, raw=value, note=note)
    impl = doc.get("attn_implementation", init.get("attn_implementation"))
    if isinstance(impl, str) and impl.strip():
        k = "attn_implementation" if "attn_implementation" in doc else "model_init_kwargs.attn_implementation"
        r.set("attention", attention_of(impl) or impl.strip(), key=k, raw=impl)
    elif truthy(doc.get("use_flash_attention_2")):
        r.set("attention", "flash_attention_2", key="use_flash_attention_2", raw=doc.get("use_flash_attention_2"))
    else:
        r.set("attention", "auto", source="default", note="no attn_implementation: transformers' default (SDPA)")
    if truthy(doc.get("use_peft")):
        # ModelConfig.use_peft: LoRA adapters (get_peft_config), which PEFT keeps in fp32 over a frozen base
        r.set("adapter", "dora" if truthy(doc.get("use_dora")) else "lora", key="use_peft", raw=doc.get("use_peft"))
        r.set("adapter_dtype", "float32", source="default",
              note="PEFT's get_peft_model keeps bf16/fp16 adapter weights in fp32 (autocast_adapter_dtype)")
    if doc.get("deepspeed"):
        r.set("distributed", "deepspeed", key="deepspeed", raw=doc.get("deepspeed"))
    if "torch_dtype" in doc:
        # TrlParser refuses any key no dataclass has; ModelConfig.torch_dtype is gone from TRL 0.27
        r.refused["torch_dtype"] = ("Unknown arguments from config file: ['torch_dtype']. Please remove them, add them to the "
                                    "dataclass, or set `fail_with_unknown_args=False`. (TRL 0.27 renamed ModelConfig.torch_dtype to dtype)")
        r.refused_by["torch_dtype"] = "trl>=0.27"
    r.settings = {k: doc[k] for k in ("bf16", "fp16", "tf32", "dtype", "torch_dtype", "attn_implementation") if k in doc}
    _hf.precision_edits(doc, r, dtype_keys=("dtype", "torch_dtype"))
    if "attn_implementation" in doc:
        r.edits["attention=sdpa"] = {"attn_implementation": "sdpa"}
    elif truthy(doc.get("use_flash_attention_2")):
        r.edits["attention=sdpa"] = {"use_flash_attention_2": False}
    return r
