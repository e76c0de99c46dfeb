"""A verl Hydra config (`python -m verl.trainer.main_ppo --config-path ... --config-name x`, or a full
ppo_trainer / ppo_megatron_trainer YAML), its FSDP SFT trainer's (`verl.trainer.fsdp_sft_trainer`,
sft_trainer.yaml) or its engine SFT trainer's (`verl.trainer.sft_trainer`, sft_trainer_engine.yaml).

Read from volcengine/verl b178a3cd56f58b2d502255daba591e92833930a7 (2026-01-29, after v0.7.0), with older
releases where they differ. Much is decided in code, not in the file:

- PPO, FSDP (actor_rollout_ref.actor.strategy fsdp | fsdp2; verl/workers/fsdp_workers.py _build_model_optimizer):
  the weights load in `fsdp_config.model_dtype` (FSDPEngineConfig default "fp32", verl/workers/config/engine.py;
  with no key at all the actor loads fp32, the reference bf16); FSDP's MixedPrecision casts them to
  `fsdp_config.mixed_precision.param_dtype` (default bf16) when that block is given, else to
  `fsdp_config.dtype` (default "bfloat16"; only bfloat16 / float16 are accepted), reduces in
  `mixed_precision.reduce_dtype` (default fp32); the actor forward runs under torch.autocast(fsdp_config.dtype)
  (verl/workers/actor/dp_actor.py; bf16 hard-coded before v0.7.0) and float16 adds a ShardedGradScaler.
  The critic autocasts bf16 whatever the file says (verl/workers/critic/dp_critic.py).
- Attention: `actor_rollout_ref.model.override_config.attn_implementation`, default "flash_attention_2"
  (fsdp_workers.py, verl/workers/config/model.py HFModelConfig); verl honours the key from v0.7.0 (PR #3978),
  before it the FSDP workers always loaded flash_attention_2. `use_remove_padding` (HFModelConfig / hf_model.yaml
  default True from v0.7.0; False before) packs the batch and needs flash-attn's bert_padding
  (verl/utils/attention_utils.py): with a non-flash attention the packed sequences attend across each other.
- PPO, Megatron (strategy megatron; verl/workers/megatron_workers.py): `actor.megatron.dtype` (bfloat16 |
  float16, default bfloat16) is Megatron's bf16 / fp16 with fp32 main parameters in the distributed optimizer;
  `megatron.override_transformer_config.attention_backend` (flash in megatron.yaml; Megatron-Bridge path
  forces AttnBackend.flash) and `.fp8` (Transformer Engine fp8).
- Rollout: `actor_rollout_ref.rollout.dtype` (vLLM / SGLang, default bfloat16, "should align with FSDP") and
  `rollout.quantization` (fp8 / torchao weights of the rollout engine only) are kept in settings.
- SFT (verl/trainer/fsdp_sft_trainer.py): attn_implementation="flash_attention_2", MixedPrecision(param bf16,
  reduce fp32) and torch.autocast(bfloat16) are hard-coded; the file chooses only `model.fsdp_config.model_dtype`
  (default fp32), `model.strategy`, `use_remove_padding`, LoRA. Engine SFT (verl/workers/engine/fsdp/
  transformer_impl.py): `engine.model_dtype`, `engine.mixed_precision`, autocast bf16 hard-coded, attention
  from `model.override_config.attn_implementation` (default flash_attention_2).
- LoRA: `model.lora_rank` > 0 (or `lora_adapter_path`): PEFT LoRA on the loaded weights.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ...plan import Reading, attention_of, dtype_of, truthy

NAME = "verl"
LABEL = "verl"
FORMATS = ("yaml", "json")
MARKERS = {"actor_rollout_ref": 5, "custom_reward_function": 3, "reward_manager": 2, "ray_kwargs": 2, "ray_init": 2,
           "global_profiler": 3, "transfer_queue": 3, "ulysses_sequence_parallel_size": 3, "use_remove_padding": 3,
           "critic": 1, "reward_model": 1}
DISTINCT = ("actor_rollout_ref", "custom_reward_function", "use_remove_padding", "ulysses_sequence_parallel_size")


def distinct(doc: dict) -> list[str]:
    """verl's Hydra defaults (its trainers' config names) and its SFT trainer's model keys."""
    found = [f"defaults: {d.strip()}" for d in _defaults(doc)
             if any(t == d.strip() or d.strip().endswith(t) for t in _TRAINERS) or "@actor_rollout_ref" in d or "engine@engine" in d][:1]
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    if "partial_pretrain" in model:
        found.append("model.partial_pretrain")
    engine = doc.get("engine") if isinstance(doc.get("engine"), dict) else {}
    if str(engine.get("_target_", "")).startswith("verl."):
        found.append(f"engine._target_: {engine['_target_']}")
    return found
# trainer / data / optim / hydra / defaults / engine are Hydra's and NeMo's too: recognise_extra reads their contents
_TRAINERS = ("ppo_trainer", "ppo_megatron_trainer", "sft_trainer", "sft_trainer_engine", "evaluation", "generation")
_MEGATRON_ATTN = {"flash": "flash_attention_2", "fused": "te-fused", "unfused": "eager", "local": "eager", "auto": "auto"}
DTYPE_DEFAULT = ("fsdp_config.dtype defaults to bfloat16 (FSDPEngineConfig, verl/workers/config/engine.py): FSDP's param_dtype "
                 "and the actor's torch.autocast (verl/workers/actor/dp_actor.py; bf16 hard-coded before v0.7.0)")
ATTN_DEFAULT = ("verl loads the model with attn_implementation=override_config.get('attn_implementation', 'flash_attention_2') "
                "(verl/workers/fsdp_workers.py); before v0.7.0 always flash_attention_2")


def _defaults(doc: dict) -> list[str]:
    out: list[str] = []
    items = doc.get("defaults") if isinstance(doc.get("defaults"), list) else []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            out.extend(f"{k}: {v}" for k, v in item.items())
    return out


def recognise_extra(doc: dict) -> int:
    score = 0
    if any(any(t == d.strip() or d.strip().endswith(t) for t in _TRAINERS) or "@actor_rollout_ref" in d or "engine@engine" in d
           for d in _defaults(doc)):
        score += 4
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    if "partial_pretrain" in model:
        score += 4  # fsdp_sft_trainer
    if isinstance(model.get("fsdp_config"), dict) and "model_dtype" in model["fsdp_config"]:
        score += 2
    engine = doc.get("engine") if isinstance(doc.get("engine"), dict) else {}
    if "model_dtype" in engine or str(engine.get("_target_", "")).startswith("verl."):
        score += 3
    trainer = doc.get("trainer") if isinstance(doc.get("trainer"), dict) else {}
    if "n_gpus_per_node" in trainer and ("default_local_dir" in trainer or "project_name" in trainer):
        score += 2
    return score


class _Doc:
    """The config with OmegaConf's ${a.b} / ${oc.select:a.b,default} references resolved against it."""

    def __init__(self, doc: dict):
        self.doc = doc

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.doc
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return self.resolve(node, default)

    def has(self, dotted: str) -> bool:
        return self.get(dotted, _MISSING) is not _MISSING

    def resolve(self, value: Any, default: Any = None, depth: int = 0) -> Any:
        if not isinstance(value, str) or depth > 5:
            return value
        match = re.fullmatch(r"\$\{(?:oc\.select:)?\s*([\w.]+)\s*(?:,\s*([^}]*))?\}", value.strip())
        if not match:
            return value
        node: Any = self.doc
        for part in match.group(1).split("."):
            if not isinstance(node, dict) or part not in node:
                fallback = match.group(2)
                return _scalar(fallback) if fallback is not None else default
            node = node[part]
        return self.resolve(node, default, depth + 1)


_MISSING = object()


def _scalar(text: str) -> Any:
    text = text.strip()
    return {"null": None, "true": True, "false": False, "True": True, "False": False}.get(text, text)


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    d = _Doc(doc)
    defaults = _defaults(doc)
    if isinstance(doc.get("actor_rollout_ref"), dict) or any("ppo" in x for x in defaults):
        _read_ppo(d, defaults, r)
    elif isinstance(doc.get("engine"), dict) or any("engine@engine" in x or x.strip() == "sft_trainer_engine" for x in defaults):
        _read_sft_engine(d, defaults, r)
    else:
        _read_sft(d, r)
    return r


# ---------------------------------------------------------------- PPO


def _read_ppo(d: _Doc, defaults: list[str], r: Reading) -> None:
    A = "actor_rollout_ref."
    r.understood(A + "actor.fsdp_config", A + "actor.megatron", A + "actor.strategy", A + "model.override_config",
                 A + "model.use_remove_padding", A + "model.lora_rank", A + "model.lora", A + "model.use_fused_kernels",
                 A + "model.fused_kernel_options", A + "rollout.dtype", A + "rollout.quantization", A + "rollout.quantization_config_file",
                 A + "ref.fsdp_config", A + "ref.megatron", A + "actor.use_torch_compile", A + "ref.use_torch_compile",
                 "critic.model.fsdp_config", "critic.model.override_config", "critic.model.use_remove_padding", "critic.megatron",
                 "critic.strategy", "critic.fsdp", "reward_model", A + "actor.fsdp_config.mixed_precision",
                 A + "rollout.engine_kwargs", A + "rollout.enforce_eager")
    megatron_default = any("megatron" in x for x in defaults)
    strategy = d.get(A + "actor.strategy")
    strategy_key = A + "actor.strategy" if strategy is not None else None
    if strategy is None:
        strategy = "megatron" if megatron_default else "fsdp"
    strategy = str(strategy).strip().lower()
    if strategy == "megatron":
        _megatron(d, A + "actor.megatron", strategy_key, r, megatron_default)
    else:
        _fsdp(d, A + "actor.fsdp_config", r, role="actor")
        r.set("distributed", "fsdp2" if strategy == "fsdp2" else "fsdp", key=strategy_key,
              source="file" if strategy_key else "default",
              note=None if strategy_key else "actor.strategy defaults to fsdp (trainer/config/actor/dp_actor.yaml)")
        _hf_attention(d, A + "model", r, default_note=ATTN_DEFAULT)
        _remove_padding(d, A + "model.use_remove_padding", r, default=True,
                        default_note="HFModelConfig.use_remove_padding defaults to True from v0.7.0 (verl/workers/config/model.py; "
                                     "False before)")
        _lora(d, A + "model", r, adapter_dtype_note="PEFT's get_peft_model upcasts the adapters to fp32 (the weights load in "
                                                    "model_dtype, fp32 by default)")
    rollout_dtype = d.get(A + "rollout.dtype")
    r.settings["rollout_dtype"] = rollout_dtype if rollout_dtype is not None else "bfloat16"
    if d.get(A + "rollout.name") is not None:
        r.settings["rollout_engine"] = d.get(A + "rollout.name")
    quant = d.get(A + "rollout.quantization")
    if quant:
        r.settings["rollout_quantization"] = quant  # the rollout engine's weights only, not the trained ones
    compile_ = d.get(A + "actor.use_torch_compile")
    r.settings["use_torch_compile"] = compile_ if compile_ is not None else True  # torch.compile of entropy_from_logits only
    critic_attn = d.get("critic.model.override_config.attn_implementation")
    if critic_attn:
        r.settings["critic_attention"] = critic_attn
    _ppo_edits(d, strategy, r)


def _fsdp(d: _Doc, base: str, r: Reading, role: str) -> None:
    cfg = d.get(base) if isinstance(d.get(base), dict) else {}
    mp = d.get(base + ".mixed_precision") if isinstance(d.get(base + ".mixed_precision"), dict) else None
    dtype_raw = d.get(base + ".dtype")
    compute = dtype_of(dtype_raw) if dtype_raw is not None else None
    if dtype_raw is not None:
        r.set("compute_dtype", compute or str(dtype_raw), key=base + ".dtype", raw=dtype_raw,
              note="FSDP's param_dtype and the actor's torch.autocast dtype (v0.7.0+)")
        if compute not in ("bfloat16", "float16"):
            r.refused[base + ".dtype"] = f"dtype {dtype_raw} not supported"
    else:
        r.set("compute_dtype", "bfloat16", source="default", note=DTYPE_DEFAULT)
    if mp is not None and mp.get("param_dtype") is not None:
        cast = dtype_of(mp.get("param_dtype"))
        if cast and cast != r.plan["compute_dtype"].value:
            r.settings["fsdp_param_dtype"] = cast  # FSDP casts to this; autocast still runs in fsdp_config.dtype
    if r.plan["compute_dtype"].value == "float16":
        r.set("loss_scaling", True, key=base + ".dtype", raw=dtype_raw,
              note="dp_actor's ShardedGradScaler(growth_interval=400) for float16")
    model_dtype = cfg.get("model_dtype")
    model_dtype = d.resolve(model_dtype)
    if model_dtype is not None:
        r.set("param_dtype", dtype_of(model_dtype) or str(model_dtype), key=base + ".model_dtype", raw=model_dtype,
              note="the dtype the weights load (and stay) in; FSDP casts them for compute")
    else:
        r.set("param_dtype", "float32", source="default",
              note="no model_dtype: the actor loads fp32 (fsdp_workers.py: torch.float32 if self._is_actor else torch.bfloat16; "
                   "FSDPEngineConfig.model_dtype 'fp32')")
    if mp is not None and mp.get("reduce_dtype") is not None:
        r.set("reduce_dtype", dtype_of(mp.get("reduce_dtype")) or str(mp.get("reduce_dtype")), key=base + ".mixed_precision.reduce_dtype",
              raw=mp.get("reduce_dtype"))
    else:
        r.set("reduce_dtype", "float32", source="default",
              note="FSDP MixedPrecision reduce_dtype fp32 (mixed_precision.reduce_dtype defaults to fp32)")


def _megatron(d: _Doc, base: str, strategy_key: Optional[str], r: Reading, from_defaults: bool) -> None:
    dtype_raw = d.get(base + ".dtype")
    if dtype_raw is not None:
        dtype = dtype_of(dtype_raw) or str(dtype_raw)
        r.set("compute_dtype", dtype, key=base + ".dtype", raw=dtype_raw, note="Megatron's bf16 / fp16 (TransformerConfig.bf16 / fp16)")
    else:
        dtype = "bfloat16"
        r.set("compute_dtype", dtype, source="default", note="megatron.dtype defaults to bfloat16 (McoreEngineConfig, verl/workers/config/engine.py)")
    r.set("param_dtype", "float32", source="default",
          note="Megatron runs the model in its bf16 / fp16 parameters and keeps fp32 main parameters in the (distributed) optimizer")
    if dtype == "float16":
        r.set("loss_scaling", True, source="default", note="Megatron's dynamic loss scaler for fp16 (verl requires use_mbridge for fp16)")
    r.set("distributed", "megatron", key=strategy_key, source="file" if strategy_key else "default",
          note=None if strategy_key else "ppo_megatron_trainer defaults the actor to strategy megatron")
    tf = base + ".override_transformer_config"
    backend = d.get(tf + ".attention_backend")
    if backend is not None:
        text = str(backend).strip().lower()
        r.set("attention", _MEGATRON_ATTN.get(text, text), key=tf + ".attention_backend", raw=backend,
              note="Megatron's attention through Transformer Engine" + (" (its FlashAttention backend)" if text == "flash" else ""))
    else:
        r.set("attention", "flash_attention_2", source="default",
              note="megatron.yaml sets attention_backend: flash and the Megatron-Bridge path forces AttnBackend.flash "
                   "(verl/workers/megatron_workers.py); DeepSeek-style MLA models converted by hf_to_mcore_config use fused")
    fp8 = d.get(tf + ".fp8")
    if fp8:
        r.set("fp8", True, key=tf + ".fp8", raw=fp8, requires="8.9",
              note="Megatron's fp8 through Transformer Engine (TransformerConfig.fp8: e4m3 / hybrid)")
        r.set("fp8_backend", "te", source="default", note="Megatron's fp8 runs through Transformer Engine")
    lora = d.get("actor_rollout_ref.model.lora") if isinstance(d.get("actor_rollout_ref.model.lora"), dict) else {}
    rank = lora.get("rank")
    if isinstance(rank, int) and rank > 0:
        r.set("adapter", str(lora.get("type", "lora")), key="actor_rollout_ref.model.lora.rank", raw=rank)
        ldtype = dtype_of(lora.get("dtype")) if lora.get("dtype") else None
        r.set("adapter_dtype", ldtype or dtype, key="actor_rollout_ref.model.lora.dtype" if ldtype else None,
              source="file" if ldtype else "default", note=None if ldtype else "lora.dtype null: the adapters in the model's dtype")
    r.settings["use_remove_padding"] = d.get(base + ".use_remove_padding", True)


def _hf_attention(d: _Doc, model_base: str, r: Reading, default_note: str) -> None:
    key = model_base + ".override_config.attn_implementation"
    impl = d.get(key)
    if isinstance(impl, str) and impl.strip():
        r.set("attention", attention_of(impl) or impl.strip(), key=key, raw=impl,
              note="verl passes it to from_pretrained from v0.7.0 (PR #3978); verl before 0.7.0 ignores it and loads "
                   "flash_attention_2")
    else:
        r.set("attention", "flash_attention_2", source="default", note=default_note)


def _remove_padding(d: _Doc, key: str, r: Reading, default: bool, default_note: str) -> None:
    value = d.get(key)
    on = truthy(value) if value is not None else default
    r.settings["use_remove_padding"] = on
    attention = r.plan.get("attention")
    if on and attention is not None and "flash" not in str(attention.value):
        r.settings["remove_padding_without_flash"] = True  # packed sequences attend across each other outside flash-attn's varlen path


def _lora(d: _Doc, model_base: str, r: Reading, adapter_dtype_note: str, sft_dtype: Optional[str] = None) -> None:
    rank = d.get(model_base + ".lora_rank")
    path = d.get(model_base + ".lora_adapter_path")
    if (isinstance(rank, int) and rank > 0) or path:
        key = model_base + (".lora_rank" if isinstance(rank, int) and rank > 0 else ".lora_adapter_path")
        r.set("adapter", "lora", key=key, raw=rank if key.endswith("rank") else path)
        r.set("adapter_dtype", sft_dtype or "float32", source="default", note=adapter_dtype_note)


def _ppo_edits(d: _Doc, strategy: str, r: Reading) -> None:
    A = "actor_rollout_ref."
    if strategy == "megatron":
        base = A + "actor.megatron.dtype"
        r.edits["precision=fp16"] = {base: "float16", A + "rollout.dtype": "float16"}
        r.edits["precision=bf16"] = {base: "bfloat16", A + "rollout.dtype": "bfloat16"}
    else:
        base = A + "actor.fsdp_config"
        fp16: dict[str, Any] = {base + ".dtype": "float16", A + "rollout.dtype": "float16"}
        bf16: dict[str, Any] = {base + ".dtype": "bfloat16", A + "rollout.dtype": "bfloat16"}
        mp = d.get(base + ".mixed_precision")
        if isinstance(mp, dict) and mp.get("param_dtype") is not None:
            fp16[base + ".mixed_precision.param_dtype"] = "fp16"
            bf16[base + ".mixed_precision.param_dtype"] = "bf16"
        r.edits["precision=fp16"] = fp16
        r.edits["precision=bf16"] = bf16
        # precision=fp32: verl accepts only bfloat16 / float16 for fsdp_config.dtype ("dtype ... not supported")
        attention = r.plan.get("attention")
        if attention is not None and attention.value != "sdpa":
            edit: dict[str, Any] = {A + "model.override_config.attn_implementation": "sdpa"}
            if r.settings.get("use_remove_padding"):
                edit[A + "model.use_remove_padding"] = False  # packing needs flash-attn's varlen path
            r.edits["attention=sdpa"] = edit
    fp8_setting = r.plan.get("fp8")
    if fp8_setting is not None and fp8_setting.key:
        r.edits["fp8=off"] = {fp8_setting.key: None}


# ---------------------------------------------------------------- SFT


def _read_sft(d: _Doc, r: Reading) -> None:
    r.understood("model.fsdp_config", "model.strategy", "model.lora_rank", "use_remove_padding", "ulysses_sequence_parallel_size",
                 "model.use_liger", "model.override_config")
    note = "verl/trainer/fsdp_sft_trainer.py runs torch.autocast(bfloat16) over FSDP MixedPrecision(param_dtype=bfloat16): hard-coded"
    r.set("compute_dtype", "bfloat16", source="default", note=note)
    model_dtype = d.get("model.fsdp_config.model_dtype")
    if model_dtype is not None:
        r.set("param_dtype", dtype_of(model_dtype) or str(model_dtype), key="model.fsdp_config.model_dtype", raw=model_dtype)
    else:
        r.set("param_dtype", "float32", source="default", note="fsdp_sft_trainer: model.fsdp_config.get('model_dtype', 'fp32')")
    r.set("reduce_dtype", "float32", source="default", note="fsdp_sft_trainer's MixedPrecision(reduce_dtype=float32), hard-coded")
    r.set("attention", "flash_attention_2", source="default",
          note="fsdp_sft_trainer loads the model with attn_implementation='flash_attention_2', hard-coded (no key changes it)")
    strategy = d.get("model.strategy")
    r.set("distributed", "fsdp2" if str(strategy) == "fsdp2" else "fsdp", key="model.strategy" if strategy is not None else None,
          source="file" if strategy is not None else "default", raw=strategy,
          note=None if strategy is not None else "the engine SFT trainer's model.strategy defaults to fsdp")
    _remove_padding(d, "use_remove_padding", r, default=False, default_note="")
    sft_dtype = r.plan["param_dtype"].value
    _lora(d, "model", r, adapter_dtype_note="fsdp_sft_trainer casts the PEFT model to model_dtype after get_peft_model",
          sft_dtype=sft_dtype)
    if d.get("model.override_config.attn_implementation"):
        # fsdp_sft_trainer.py never reads it: the note on attention says so
        r.settings["ignored_attn_implementation"] = d.get("model.override_config.attn_implementation")
    r.settings["trainer"] = "fsdp_sft_trainer"
    # No remedy can be written: the SFT trainer's compute dtype and attention are not configurable.


def _read_sft_engine(d: _Doc, defaults: list[str], r: Reading) -> None:
    r.understood("engine", "model.override_config", "model.use_remove_padding", "model.lora_rank")
    strategy = d.get("engine.strategy")
    megatron = str(strategy).lower() == "megatron" or any("engine@engine: megatron" in x or "engine: megatron" in x for x in defaults)
    if megatron:
        _megatron(d, "engine", "engine.strategy" if strategy is not None else None, r, True)
        r.settings["trainer"] = "sft_trainer (engine)"
        return
    r.set("compute_dtype", "bfloat16", source="default",
          note="the FSDP engine runs torch.autocast(bfloat16) (verl/workers/engine/fsdp/transformer_impl.py forward_step), hard-coded")
    model_dtype = d.get("engine.model_dtype")
    if model_dtype is not None:
        r.set("param_dtype", dtype_of(model_dtype) or str(model_dtype), key="engine.model_dtype", raw=model_dtype)
    else:
        r.set("param_dtype", "float32", source="default", note="FSDPEngineConfig.model_dtype defaults to fp32 (engine/fsdp.yaml)")
    mp = d.get("engine.mixed_precision") if isinstance(d.get("engine.mixed_precision"), dict) else None
    if mp and mp.get("reduce_dtype") is not None:
        r.set("reduce_dtype", dtype_of(mp["reduce_dtype"]) or str(mp["reduce_dtype"]), key="engine.mixed_precision.reduce_dtype",
              raw=mp["reduce_dtype"])
    else:
        r.set("reduce_dtype", "float32", source="default", note="the FSDP engine's MixedPrecision reduce_dtype fp32")
    r.set("distributed", "fsdp2" if str(strategy) == "fsdp2" else "fsdp", key="engine.strategy" if strategy is not None else None,
          source="file" if strategy is not None else "default", raw=strategy,
          note=None if strategy is not None else "the engine SFT trainer's engine.strategy defaults to fsdp")
    _hf_attention(d, "model", r, default_note="HFModelConfig: override_config.get('attn_implementation', 'flash_attention_2') "
                                              "(verl/workers/config/model.py)")
    _remove_padding(d, "model.use_remove_padding", r, default=True, default_note="")
    _lora(d, "model", r, adapter_dtype_note="PEFT's get_peft_model upcasts the adapters to fp32")
    r.settings["trainer"] = "sft_trainer (engine)"
    attention = r.plan.get("attention")
    if attention is not None and attention.value != "sdpa":
        edit: dict[str, Any] = {"model.override_config.attn_implementation": "sdpa"}
        if r.settings.get("use_remove_padding"):
            edit["model.use_remove_padding"] = False
        r.edits["attention=sdpa"] = edit
