"""OpenRLHF's training arguments written as a YAML / JSON mapping: argparse's own names, flat
(`bf16`, `flash_attn`, `zero_stage`, ... up to v0.10.1) or in the hierarchical names of v0.10.2+
(`ds.param_dtype` as a dotted key or as `ds: {param_dtype: ...}`), and the Hydra YAML of frameworks
that vendor OpenRLHF's trainer and take its arguments as keys (MARTI's `default_agent:` block, which
its train.py copies over the top-level keys). OpenRLHF itself has no config file: its CLIs
(openrlhf/cli/train_*.py) take only command-line flags.

Read from OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7 (2026-08-13, v0.11+) and its tags, and
TsinghuaC3I/MARTI aba1b42349f0f441ef7da3e11883088efedcbd9e (marti/models/actor.py, marti/cli/commands/train.py):

- Precision. v0.10.2+: `--ds.param_dtype` bf16 | fp16 (default bf16); v0.9.2-v0.10.1: `--param_dtype`
  (same); up to v0.9.1: `--bf16` (store_true, default False). The model loads in that dtype
  (openrlhf/models/actor.py: torch_dtype=convert_to_torch_dtype(param_dtype); old: torch.bfloat16 if bf16
  else "auto") and DeepSpeed's bf16 / fp16 block is enabled to match (openrlhf/utils/deepspeed/
  deepspeed_utils.py get_train_ds_config): ZeRO keeps the fp32 master weights, fp16 gets dynamic loss
  scaling. Old `bf16` off: no DeepSpeed bf16 block and the checkpoint's own dtype ("auto").
- Attention. v0.8.10+: `--attn_implementation` (`--ds.attn_implementation`), default flash_attention_2,
  any transformers name or a kernels-hub repository; up to v0.8.9: `--flash_attn` (default False):
  flash_attention_2 if set, else eager (actor.py). `--packing_samples` needs flash-attn's varlen path:
  every CLI (train_sft / train_rm / train_dpo / train_ppo_ray; MARTI's train.py too) switches to flash_attention_2 with
  "[Warning] Please use --attn_implementation with flash_attention to accelerate when --packing_samples
  is enabled."; `--ring_attn_size` > 1 needs packing (ring_flash_attn).
- `--load_in_4bit`: bitsandbytes NF4, double quantisation, bnb_4bit_compute_dtype bfloat16 ("we only
  support bnb_4bit_compute_dtype = bf16" under any other dtype); `--lora_rank` > 0: PEFT LoRA (QLoRA
  on a 4-bit base, whose LoRA layers actor.py casts to bf16).
- `--zero_stage` (default 2): DeepSpeed ZeRO; `--grad_accum_dtype`: DeepSpeed's data_types.grad_accum_dtype;
  `--ds.deepcompile`: DeepSpeed's torch.compile-based DeepCompile. vLLM rollout engines load bfloat16
  (openrlhf/trainer/ray/vllm_engine.py, hard-coded).
"""

from __future__ import annotations

from typing import Any, Optional

from ...plan import Reading, attention_of, dtype_of, truthy

NAME = "openrlhf"
LABEL = "OpenRLHF arguments"
FORMATS = ("yaml", "json")
MARKERS = {"micro_train_batch_size": 3, "zero_stage": 3, "adam_offload": 3, "actor_learning_rate": 3, "micro_rollout_batch_size": 3,
           "vllm_num_engines": 3, "colocate_all_models": 3, "ref_num_nodes": 3, "actor_num_gpus_per_node": 3, "packing_samples": 2,
           "n_samples_per_prompt": 2, "init_kl_coef": 2, "prompt_max_len": 2, "generate_max_len": 2, "reward_pretrain": 2,
           "critic_learning_rate": 2, "rollout_batch_size": 1, "advantage_estimator": 1, "pretrain": 1,
           "default_agent": 4, "zpg": 2, "ring_attn_size": 2, "vllm_sync_backend": 2, "ckpt_path": 1, "max_ckpt_num": 2}
DISTINCT = ("micro_train_batch_size", "actor_learning_rate", "micro_rollout_batch_size", "vllm_num_engines", "colocate_all_models",
            "ref_num_nodes", "actor_num_gpus_per_node", "default_agent", "critic_learning_rate", "n_samples_per_prompt", "zpg",
            "ds.zero_stage", "ds.param_dtype", "ds.attn_implementation", "ds.packing_samples", "ds.adam_offload")


def distinct(doc: dict) -> list[str]:
    """OpenRLHF's arguments one level down (MARTI), or written dotted (`ds.zero_stage`)."""
    found = [f"{k}" for k in _agent(doc) if k in DISTINCT][:1]
    found += [str(k) for k in doc if isinstance(k, str) and k.startswith("ds.") and k in DISTINCT][:1]
    return found
# v0.10.2+ names -> the flat names before them
_NEW = {"param_dtype": "ds.param_dtype", "attn_implementation": "ds.attn_implementation", "packing_samples": "ds.packing_samples",
        "zero_stage": "ds.zero_stage", "load_in_4bit": "ds.load_in_4bit", "lora_rank": "ds.lora.rank", "ring_attn_size": "ds.ring_attn_size",
        "grad_accum_dtype": "ds.grad_accum_dtype", "deepcompile": "ds.deepcompile", "adam_offload": "ds.adam_offload"}
PACKING = ("--packing_samples needs flash-attn's varlen path: every OpenRLHF CLI (train_sft / rm / dpo / ppo_ray; flash_attn = True "
           "up to v0.8.9, and in MARTI) switches the attention to flash_attention_2 ('[Warning] Please use --attn_implementation "
           "with flash_attention to accelerate when --packing_samples is enabled.')")


def _agent(doc: dict) -> dict:
    return doc.get("default_agent") if isinstance(doc.get("default_agent"), dict) else {}


def recognise_extra(doc: dict) -> int:
    score = sum(MARKERS.get(k, 0) for k in _agent(doc))  # MARTI: OpenRLHF's arguments one level down
    ds = doc.get("ds") if isinstance(doc.get("ds"), dict) else {}
    if any(k in ds for k in ("zero_stage", "param_dtype", "attn_implementation", "packing_samples", "adam_offload")):
        score += 5  # v0.10.2+ hierarchical names
    if any(str(k).startswith("ds.") for k in doc):
        score += 5
    if isinstance(doc.get("flash_attn"), bool) or isinstance(_agent(doc).get("flash_attn"), bool):
        score += 1  # LLaMA-Factory's flash_attn is a string (auto, fa2, sdpa, disabled) since 0.6
    return score


class _Args:
    """An argument by its flat name, wherever the file puts it: MARTI's default_agent (which wins), the
    v0.10.2+ hierarchical name (nested or dotted), the flat name."""

    def __init__(self, doc: dict):
        self.doc, self.agent = doc, _agent(doc)

    def find(self, name: str) -> tuple[Any, Optional[str]]:
        new = _NEW.get(name)
        for scope, prefix in ((self.agent, "default_agent."), (self.doc, "")):
            if new:
                if new in scope:
                    return scope[new], prefix + new
                node: Any = scope
                for part in new.split("."):
                    node = node.get(part) if isinstance(node, dict) else None
                if node is not None:
                    return node, prefix + new
            if name in scope:
                return scope[name], prefix + name
        return None, None

    def era(self) -> str:
        """new (v0.10.2+ names) | param_dtype (v0.9.2-v0.10.1) | bf16 (up to v0.9.1)."""
        if any(str(k).startswith("ds.") for k in (*self.doc, *self.agent)) or isinstance(self.doc.get("ds"), dict):
            return "new"
        if "param_dtype" in self.doc or "param_dtype" in self.agent:
            return "param_dtype"
        if "bf16" in self.doc or "bf16" in self.agent:
            return "bf16"
        return "new"


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    a = _Args(doc)
    names = ("bf16", "param_dtype", "flash_attn", "attn_implementation", "packing_samples", "zero_stage", "load_in_4bit",
             "lora_rank", "ring_attn_size", "grad_accum_dtype", "deepcompile", "adam_offload", "lora_alpha", "target_modules")
    for name in names:
        for prefix in ("", "default_agent."):
            r.understood(prefix + name, prefix + _NEW.get(name, name))
    r.understood("ds", "default_agent.ds")
    era = a.era()
    compute = _precision(a, era, r)
    _attention(a, era, r)
    _quant_and_adapter(a, compute, r)

    stage, stage_key = a.find("zero_stage")
    r.set("distributed", "deepspeed", key=stage_key, raw=stage, source="file" if stage_key else "default",
          note=f"DeepSpeed ZeRO stage {stage if stage is not None else 2}" + ("" if stage_key else " (--zero_stage defaults to 2)"))
    accum, accum_key = a.find("grad_accum_dtype")
    if accum:
        r.set("reduce_dtype", dtype_of(accum) or str(accum), key=accum_key, raw=accum, note="DeepSpeed's data_types.grad_accum_dtype")
    deepcompile, dc_key = a.find("deepcompile")
    if truthy(deepcompile):
        r.set("compile", True, key=dc_key, note="DeepSpeed's DeepCompile (torch.compile-based)")
    engines, _ = a.find("vllm_num_engines")
    vllm = a.doc.get("vllm") if isinstance(a.doc.get("vllm"), dict) else {}
    if engines or vllm.get("num_engines") or a.doc.get("vllm.num_engines"):
        r.settings["rollout_dtype"] = "bfloat16"  # vllm_engine.py: "dtype": "bfloat16", whatever param_dtype says
    ring, _ = a.find("ring_attn_size")
    if isinstance(ring, int) and ring > 1:
        r.settings["ring_attn_size"] = ring
    if a.agent:
        r.settings["config_style"] = "MARTI default_agent"
    _edits(a, era, r)
    return r


def _precision(a: _Args, era: str, r: Reading) -> str:
    if era == "bf16":
        raw, key = a.find("bf16")
        if truthy(raw):
            r.set("compute_dtype", "bfloat16", key=key, raw=raw, note="DeepSpeed's bf16 block; the model loads in bfloat16")
            r.set("param_dtype", "float32", source="default", note="ZeRO's optimizer keeps the fp32 master weights of the bf16 model")
            return "bfloat16"
        r.set("compute_dtype", "auto", key=key, raw=raw,
              note="--bf16 off (OpenRLHF up to v0.9.1): no DeepSpeed bf16 / fp16 block, and the model loads in its checkpoint's "
                   "dtype (torch_dtype='auto'); most checkpoints are bf16")
        r.set("param_dtype", "auto", key=key, raw=raw, note="torch_dtype='auto': the checkpoint's dtype")
        return "auto"
    raw, key = a.find("param_dtype")
    text = str(raw).strip().lower() if raw is not None else "bf16"
    dtype = {"bf16": "bfloat16", "fp16": "float16"}.get(text)
    if dtype is None:
        r.set("compute_dtype", "invalid", key=key, raw=raw)
        if key:
            r.refused[key] = f"argument --{key.replace('default_agent.', '')}: invalid choice: '{raw}' (choose from 'bf16', 'fp16')"
        return "invalid"
    if key:
        r.set("compute_dtype", dtype, key=key, raw=raw, note="DeepSpeed's bf16 / fp16 block; the model loads in this dtype")
    else:
        r.set("compute_dtype", dtype, source="default", raw="bf16",
              note="--param_dtype defaults to bf16 (openrlhf/cli/train_*.py, v0.9.2+): DeepSpeed's bf16 block, the model loaded in bfloat16")
    r.set("param_dtype", "float32", source="default", note=f"ZeRO's optimizer keeps the fp32 master weights of the {dtype} model")
    if dtype == "float16":
        r.set("loss_scaling", True, key=key, raw=raw, note="DeepSpeed's fp16 block: dynamic loss scaling")
    return dtype


def _attention(a: _Args, era: str, r: Reading) -> None:
    impl, impl_key = a.find("attn_implementation")
    flash, flash_key = a.find("flash_attn")
    packing, packing_key = a.find("packing_samples")
    if isinstance(impl, str) and impl.strip():
        value, key, raw, source, note = attention_of(impl) or impl.strip(), impl_key, impl, "file", None
    elif flash_key is not None:
        on = bool(truthy(flash))
        value, key, raw, source = ("flash_attention_2" if on else "eager"), flash_key, flash, "file"
        note = None if on else "--flash_attn off (OpenRLHF up to v0.8.9): attn_implementation='eager' (openrlhf/models/actor.py)"
    else:
        value, key, raw, source = "flash_attention_2", None, None, "default"
        note = ("--attn_implementation defaults to flash_attention_2 (v0.8.10+); up to v0.8.9 there was --flash_attn, "
                "off by default: eager")
    if truthy(packing) and "flash" not in str(value):
        r.set("attention", "flash_attention_2", key=packing_key, raw=packing,
              note=PACKING + (f"; {key} alone would give {value}" if key else ""))
    elif source == "file":
        r.set("attention", value, key=key, raw=raw, note=note)
    else:
        r.set("attention", value, source="default", note=note)
    if packing_key is not None:
        r.settings["packing_samples"] = bool(truthy(packing))


def _quant_and_adapter(a: _Args, compute: str, r: Reading) -> None:
    four, four_key = a.find("load_in_4bit")
    if truthy(four):
        r.set("quantization", "nf4", key=four_key, raw=four, note="BitsAndBytesConfig(nf4, double quantisation) (openrlhf/models/actor.py)")
        r.set("quant_compute_dtype", "bfloat16", source="default", note="bnb_4bit_compute_dtype=torch.bfloat16, hard-coded")
        if compute != "bfloat16":
            r.refused[four_key] = "we only support bnb_4bit_compute_dtype = bf16"
    rank, rank_key = a.find("lora_rank")
    if isinstance(rank, int) and rank > 0:
        r.set("adapter", "qlora" if truthy(four) else "lora", key=rank_key, raw=rank)
        if truthy(four):
            r.set("adapter_dtype", "bfloat16", source="default",
                  note="actor.py casts the LoRA layers to bfloat16 on a 4-bit base (norms to fp32)")
        else:
            r.set("adapter_dtype", "float32", source="default",
                  note="PEFT creates fp32 adapters; DeepSpeed runs a half copy and ZeRO keeps their fp32 master weights")


def _edits(a: _Args, era: str, r: Reading) -> None:
    if era == "bf16":
        _, key = a.find("bf16")
        key = key or ("default_agent.bf16" if a.agent else "bf16")
        r.edits["precision=bf16"] = {key: True}
        # --bf16 off is not fp32 training (the checkpoint's dtype), and there is no fp16: no remedy for those
    else:
        _, key = a.find("param_dtype")
        if key is None:
            key = "ds.param_dtype" if isinstance(a.doc.get("ds"), dict) or any(str(k).startswith("ds.") for k in a.doc) else "param_dtype"
        r.edits["precision=fp16"] = {key: "fp16"}
        r.edits["precision=bf16"] = {key: "bf16"}
        # param_dtype takes bf16 | fp16 only: no fp32 remedy
    _, impl_key = a.find("attn_implementation")
    flash, flash_key = a.find("flash_attn")
    if impl_key is not None or (flash_key is None and era != "bf16"):
        hierarchical = isinstance(a.doc.get("ds"), dict) or any(str(k).startswith("ds.") for k in a.doc)
        edit: dict[str, Any] = {impl_key or ("ds.attn_implementation" if era == "new" and hierarchical else "attn_implementation"): "sdpa"}
        packing, packing_key = a.find("packing_samples")
        if truthy(packing):
            edit[packing_key] = False  # packing switches the attention back to flash_attention_2
        r.edits["attention=sdpa"] = edit
    # --flash_attn (up to v0.8.9) chooses between flash_attention_2 and eager only: no SDPA remedy
