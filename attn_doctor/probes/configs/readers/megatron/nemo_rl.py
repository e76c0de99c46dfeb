"""A NeMo-RL YAML (`uv run examples/run_grpo.py --config x.yaml`; examples/configs/, recipes/), read
with its `defaults:` parents as nemo_rl/utils/config.py load_config_with_inheritance merges them
(relative to the file's folder, parents first, `_override_: true` replaces a section).

Read from NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909:
- nemo_rl/models/policy/lm_policy.py: `policy.megatron_cfg.enabled` picks the Megatron back end,
  `policy.dtensor_cfg.enabled` the DTensor (FSDP2) one, `dtensor_cfg._v2` (default False) its
  Automodel worker (DTensorPolicyWorkerV2); both on, or neither, raises ValueError.
- `policy.precision` ("float32" | "bfloat16" | "float16", no default): DTensor
  (nemo_rl/models/automodel/setup.py, policy/workers/dtensor_policy_worker.py) loads the model in
  float32 ("Always load in float32 for master weights"), shards it with FSDP2's
  MixedPrecisionPolicy(param_dtype=precision, reduce_dtype=float32, output_dtype=float32) and runs
  torch.autocast(precision) (v2 turns autocast off for Automodel's own MoE models); any other value
  raises "Unknown precision: X"; there is no GradScaler, so float16 is trained unscaled.
  Megatron (nemo_rl/models/megatron/setup.py _apply_precision_config): the Megatron-Bridge model gets
  bf16 / fp16 = precision and params_dtype = precision (Float16Module, no autocast), pipeline_dtype =
  megatron_cfg.pipeline_dtype; the Megatron optimizer keeps fp32 main params and scales the loss only
  when megatron_cfg.optimizer.fp16; _validate_dtype_config asserts optimizer.bf16 / fp16 agree with
  precision (always for float32, with use_precision_aware_optimizer for the half dtypes).
- Attention, DTensor: `policy.sequence_packing.enabled` loads the model with
  attn_implementation="flash_attention_2" ("Using FlashAttention2 for sequence packing"); v2 with
  context_parallel_size > 1 uses "sdpa", else passes None (transformers' own default, SDPA where the
  model has it; Automodel's own model classes use BackendConfig.attn, "te" where Transformer Engine is
  installed), overriding Automodel's flash_attention_2 default (nemo_automodel/_transformers/
  kernel_patches.py DEFAULT_ATTN_IMPLEMENTATION); `dtensor_cfg.automodel_kwargs.attn_implementation`
  wins, and with sequence packing anything but flash_attention_2 raises ValueError; packing with
  context parallel raises "Context parallel is not supported for sequence packing."
  Megatron: `megatron_cfg.attention_backend` (flash | fused | unfused | local | auto) ->
  Megatron Core's AttnBackend, else the Megatron-Bridge provider's own default (auto; flash for the
  Gemma and Gemma 3 providers: NVIDIA-NeMo/Megatron-Bridge 067f987df03b8355b03192d88d70f1709fedf51a
  src/megatron/bridge/models/gemma/gemma_bridge.py, gemma3_provider.py).
- fp8: `megatron_cfg.fp8_cfg` {enabled, fp8, fp8_recipe, fp8_param} -> the model config's fp8 /
  fp8_recipe / fp8_param (KeyError "Missing key in fp8_cfg" when one is absent), Transformer Engine;
  `generation.vllm_cfg.precision: fp8` is vLLM's fp8 generation (kept in settings, not the training plan).
- Remedies: precision=fp16 only on Megatron (with optimizer.fp16, Megatron's dynamic loss scaler); the DTensor
  workers would train float16 unscaled, so there the remedy for a GPU without bf16 is float32.
- Adapters: `dtensor_cfg.lora_cfg.enabled` (LoRA weights forced to float32: "FSDP requires all
  parameters to be in the same dtype"); `megatron_cfg.peft.enabled` (Megatron-Bridge LoRA, lora_dtype
  None = the model's params_dtype).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from ...plan import Reading, attention_of, get, truthy
from .. import _megatron as mg

NAME = "nemo-rl"
LABEL = "NeMo-RL"
FORMATS = ("yaml",)
MARKERS = {"policy": 2, "cluster": 2, "checkpointing": 2, "loss_fn": 3, "grpo": 3, "sft": 2, "dpo": 2, "distillation": 3,
           "ppo": 2, "defaults": 1, "env": 1}
DISTINCT = ("policy.dtensor_cfg", "policy.megatron_cfg", "loss_fn.reference_policy_kl_penalty", "grpo.num_prompts_per_step",
            "policy.train_global_batch_size", "policy.max_total_sequence_length")
_PRECISIONS = ("float32", "bfloat16", "float16")
_MAX_PARENTS = 8


def recognise_extra(doc: dict) -> int:
    score = 0
    defaults = doc.get("defaults")
    parents = [defaults] if isinstance(defaults, str) else defaults if isinstance(defaults, list) else []
    if parents and all(isinstance(p, str) and p.endswith((".yaml", ".yml")) for p in parents):
        score += 3  # load_config_with_inheritance's `defaults: parent.yaml` (Hydra's defaults lists name no files)
    policy = doc.get("policy")
    if not isinstance(policy, dict):
        return score
    if any(k in policy for k in ("dtensor_cfg", "megatron_cfg")):
        score += 5
    if any(k in policy for k in ("train_global_batch_size", "max_total_sequence_length", "sequence_packing", "dynamic_batching")):
        score += 2
    return score


# ---------------------------------------------------------------- `defaults:` inheritance


def _merge(base: Any, over: Any) -> Any:
    """OmegaConf.merge as load_config_with_inheritance uses it: mappings merge key by key, anything
    else replaces; a mapping with `_override_: true` replaces the parent's section."""
    if not isinstance(base, dict) or not isinstance(over, dict):
        return over
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and truthy(value.get("_override_")):
            out[key] = {k: v for k, v in value.items() if k != "_override_"}
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        elif value == "???" and key in out:
            continue
        else:
            out[key] = value
    return out


def _with_parents(doc: dict, base: Optional[Path], depth: int = 0, seen: tuple = ()) -> tuple[dict, list, list]:
    """(the merged config, [(file, its own doc)] lowest precedence first, [parents not found])."""
    defaults = doc.get("defaults")
    own = {k: v for k, v in doc.items() if k != "defaults"}
    if defaults is None:
        return own, [], []
    names = [defaults] if isinstance(defaults, str) else [d for d in defaults if isinstance(d, str)] if isinstance(defaults, list) else []
    merged: dict = {}
    chain: list = []
    missing: list = []
    for name in names:
        if base is None or depth >= _MAX_PARENTS:
            missing.append(name)
            continue
        path = Path(name) if name.startswith("/") else base / name
        try:
            resolved = path.resolve()
        except OSError:
            missing.append(name)
            continue
        if resolved in seen:
            missing.append(f"{name} (a cycle)")
            continue
        try:
            from ...documents import ConfigReadError, load_document

            parent = load_document(resolved)
        except (ConfigReadError, OSError, ValueError):
            missing.append(name)
            continue
        if not isinstance(parent, dict):
            missing.append(name)
            continue
        parent_merged, parent_chain, parent_missing = _with_parents(parent, resolved.parent, depth + 1, seen + (resolved,))
        merged = _merge(merged, parent_merged)
        chain += parent_chain + [(resolved, {k: v for k, v in parent.items() if k != "defaults"})]
        missing += parent_missing
    return _merge(merged, own), chain, missing


class _Config:
    """The merged config and where each key came from."""

    def __init__(self, doc: dict, ctx):
        base = ctx.base if ctx is not None else None
        self.own = {k: v for k, v in doc.items() if k != "defaults"}
        self.merged, self.chain, self.missing = _with_parents(doc, base)
        self.base = base

    def get(self, dotted: str) -> Any:
        value, _via = mg.resolve(self.merged, get(self.merged, dotted))
        return value

    def origin(self, dotted: str) -> Optional[str]:
        """None where the file itself says it, else the parent file that does."""
        if _has(self.own, dotted):
            return None
        for path, own in reversed(self.chain):
            if _has(own, dotted):
                return os.path.relpath(path, self.base) if self.base else str(path)
        return None

    def note(self, dotted: str, note: Optional[str] = None) -> Optional[str]:
        where = self.origin(dotted)
        if where is None:
            return note
        inherited = f"from {where} (defaults:)"
        return f"{note}; {inherited}" if note else inherited


def _has(doc: Any, dotted: str) -> bool:
    node = doc
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


# ---------------------------------------------------------------- the plan


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    c = _Config(doc, ctx)
    r.understood("policy.precision", "policy.dtensor_cfg.enabled", "policy.dtensor_cfg._v2", "policy.megatron_cfg.enabled",
                 "policy.sequence_packing.enabled", "policy.dtensor_cfg.automodel_kwargs.attn_implementation",
                 "policy.dtensor_cfg.context_parallel_size", "policy.dtensor_cfg.lora_cfg", "policy.megatron_cfg.peft",
                 "policy.megatron_cfg.attention_backend", "policy.megatron_cfg.fp8_cfg", "policy.megatron_cfg.pipeline_dtype",
                 "policy.megatron_cfg.optimizer.bf16", "policy.megatron_cfg.optimizer.fp16", "policy.megatron_cfg.optimizer.params_dtype",
                 "policy.megatron_cfg.optimizer.use_precision_aware_optimizer",
                 "policy.megatron_cfg.distributed_data_parallel_config.grad_reduce_in_fp32",
                 "policy.generation.vllm_cfg.precision", "policy.generation.vllm_cfg.kv_cache_dtype", "defaults")
    if not isinstance(c.merged.get("policy"), dict):
        # an evaluation / generation config (examples/configs/evals/): no policy is trained
        r.settings = {k: c.get(k) for k in ("generation.vllm_cfg.precision", "generation.model_name") if c.get(k) is not None}
        r.understood("generation.vllm_cfg.precision")
        if c.missing:
            r.settings["defaults (not found)"] = ", ".join(c.missing)
        return r
    megatron = truthy(c.get("policy.megatron_cfg.enabled"))
    dtensor = truthy(c.get("policy.dtensor_cfg.enabled"))
    partial = bool(c.missing)
    if megatron and dtensor:
        r.refused["policy.megatron_cfg.enabled"] = ("ValueError: Configure either Megatron (policy.megatron_cfg.enabled=true) or "
                                                    "DTensor (policy.dtensor_cfg.enabled=true), not both.")
    elif not megatron and not dtensor and not partial:
        r.refused["policy.dtensor_cfg.enabled"] = ("ValueError: Please either set policy.megatron_cfg.enabled=true to use Megatron "
                                                   "training backend or set policy.dtensor_cfg.enabled=true to use DTensor training backend.")
    backend = "megatron" if megatron else "dtensor" if dtensor else None
    precision = _precision(c, r, backend, partial)
    if backend == "megatron":
        _megatron(c, r, precision)
    elif backend == "dtensor":
        _dtensor(c, r, precision)
    elif partial:
        where = f"{', '.join(c.missing)} (defaults:), not found next to this file"
        r.set("attention", "auto", source="default", note=f"the back end comes from {where}")
        if truthy(c.get("policy.dtensor_cfg.lora_cfg.enabled")):
            r.set("adapter", "lora", key="policy.dtensor_cfg.lora_cfg.enabled", raw=True,
                  note=f"DTensor LoRA, if the DTensor back end is on (policy.dtensor_cfg.enabled comes from {where})")
            r.set("adapter_dtype", "float32", source="default",
                  note="nemo_rl/models/automodel/setup.py sets lora_dtype torch.float32 (FSDP needs one parameter dtype)")
    r.settings = {k: c.get(k) for k in ("policy.precision", "policy.megatron_cfg.enabled", "policy.dtensor_cfg.enabled",
                                         "policy.dtensor_cfg._v2", "policy.sequence_packing.enabled",
                                         "policy.megatron_cfg.attention_backend", "policy.megatron_cfg.fp8_cfg.enabled",
                                         "policy.generation.vllm_cfg.precision")
                  if c.get(k) is not None}
    if c.missing:
        r.settings["defaults (not found)"] = ", ".join(c.missing)
    _edits(c, r, backend, precision)
    return r


def _precision(c: _Config, r: Reading, backend: Optional[str], partial: bool) -> Optional[str]:
    raw = c.get("policy.precision")
    if raw is None:
        if partial:
            r.set("compute_dtype", "auto", source="default",
                  note=f"policy.precision comes from {', '.join(c.missing)} (defaults:), not found next to this file")
        else:
            r.refused["policy.precision"] = "KeyError: 'precision' (policy.precision has no default)"
        return None
    text = str(raw).strip()
    if text not in _PRECISIONS:
        r.refused["policy.precision"] = (f"KeyError: '{text}'" if backend == "megatron" else f"ValueError: Unknown precision: {text}")
        r.set("compute_dtype", "invalid", key="policy.precision", raw=raw, note=c.note("policy.precision"))
        return None
    if backend == "megatron":
        note = "the Megatron-Bridge model's bf16 / fp16 and params_dtype follow it (Float16Module, no autocast)"
    else:
        note = f"torch.autocast({text}) and FSDP2's MixedPrecisionPolicy(param_dtype={text}) over fp32 master weights"
    r.set("compute_dtype", text, key="policy.precision", raw=raw, note=c.note("policy.precision", note if text != "float32" else None))
    return text


def _dtensor(c: _Config, r: Reading, precision: Optional[str]) -> None:
    v2 = bool(truthy(c.get("policy.dtensor_cfg._v2")))
    worker = "DTensorPolicyWorkerV2 (Automodel)" if v2 else "DTensorPolicyWorker"
    r.set("distributed", "fsdp2", key="policy.dtensor_cfg.enabled", raw=c.get("policy.dtensor_cfg.enabled"),
          note=c.note("policy.dtensor_cfg.enabled", worker))
    if precision:
        r.set("param_dtype", "float32", source="default", note="NeMo-RL loads the policy in float32 for fp32 master weights")
        r.set("reduce_dtype", "float32", source="default", note="MixedPrecisionPolicy(reduce_dtype=torch.float32)")
        if precision == "float16":
            r.set("loss_scaling", False, source="default",
                  note="NeMo-RL's DTensor workers build no GradScaler: float16 gradients are not scaled")
    cp = c.get("policy.dtensor_cfg.context_parallel_size") or 1
    packing = bool(truthy(c.get("policy.sequence_packing.enabled")))
    requested = c.get("policy.dtensor_cfg.automodel_kwargs.attn_implementation") if v2 else None
    try:
        cp = int(cp)
    except (TypeError, ValueError):
        cp = 1
    if packing and cp > 1:
        r.refused["policy.sequence_packing.enabled"] = "ValueError: Context parallel is not supported for sequence packing."
    if isinstance(requested, str) and requested.strip():
        if packing and requested.strip() != "flash_attention_2":
            r.refused["policy.dtensor_cfg.automodel_kwargs.attn_implementation"] = (
                "ValueError: sequence_packing requires attn_implementation='flash_attention_2', but the recipe set "
                f"automodel_kwargs.attn_implementation={requested!r}.")
        r.set("attention", attention_of(requested) or requested.strip(), key="policy.dtensor_cfg.automodel_kwargs.attn_implementation",
              raw=requested, note=c.note("policy.dtensor_cfg.automodel_kwargs.attn_implementation"))
    elif packing:
        r.set("attention", "flash_attention_2", key="policy.sequence_packing.enabled", raw=c.get("policy.sequence_packing.enabled"),
              note=c.note("policy.sequence_packing.enabled",
                          "sequence packing: NeMo-RL loads the model with attn_implementation='flash_attention_2' "
                          "(nemo_rl/models/automodel/setup.py, dtensor_policy_worker.py); Automodel's own model classes "
                          "use their BackendConfig attention instead"))
    elif cp > 1:
        r.set("attention", "sdpa", key="policy.dtensor_cfg.context_parallel_size", raw=cp,
              note=c.note("policy.dtensor_cfg.context_parallel_size", "context parallel runs on SDPA (flash / efficient backends)"))
    else:
        r.set("attention", "auto", source="default",
              note="NeMo-RL passes attn_implementation=None: transformers' default (SDPA where the model has it)"
                   + ("; Automodel's own model classes use BackendConfig.attn, 'te' where Transformer Engine is installed" if v2 else ""))
    if truthy(c.get("policy.dtensor_cfg.lora_cfg.enabled")):
        r.set("adapter", "lora", key="policy.dtensor_cfg.lora_cfg.enabled", raw=True, note=c.note("policy.dtensor_cfg.lora_cfg.enabled"))
        r.set("adapter_dtype", "float32", source="default",
              note="nemo_rl/models/automodel/setup.py sets lora_dtype torch.float32 (FSDP needs one parameter dtype)")
        if not v2:
            r.refused["policy.dtensor_cfg.lora_cfg.enabled"] = "AssertionError: LoRA is not supported for DTensorPolicyWorker V1"


def _megatron(c: _Config, r: Reading, precision: Optional[str]) -> None:
    m = "policy.megatron_cfg"
    opt_bf16, opt_fp16 = truthy(c.get(f"{m}.optimizer.bf16")), truthy(c.get(f"{m}.optimizer.fp16"))
    aware = truthy(c.get(f"{m}.optimizer.use_precision_aware_optimizer"))
    if precision in ("bfloat16", "float16"):
        r.set("param_dtype", "float32", source="default",
              note=f"the model's weights are {precision} (params_dtype); Megatron's optimizer keeps fp32 main params")
        reduce32 = truthy(c.get(f"{m}.distributed_data_parallel_config.grad_reduce_in_fp32"))
        if reduce32 is not None:
            k = f"{m}.distributed_data_parallel_config.grad_reduce_in_fp32"
            r.set("reduce_dtype", "float32" if reduce32 else precision, key=k, raw=reduce32, note=c.note(k))
        if precision == "float16":
            r.set("loss_scaling", bool(opt_fp16), key=f"{m}.optimizer.fp16", raw=c.get(f"{m}.optimizer.fp16"),
                  note=c.note(f"{m}.optimizer.fp16", "Megatron's dynamic loss scaler" if opt_fp16 else
                              "optimizer.fp16 is False: Megatron's optimizer builds no loss scaler"))
        if precision == "bfloat16" and aware and not opt_bf16:
            r.refused[f"{m}.optimizer.bf16"] = ("AssertionError: policy.megatron_cfg.optimizer.bf16=True must be set if "
                                                "policy.precision=bfloat16 when using use_precision_aware_optimizer=True")
        if precision == "float16" and aware and not opt_fp16:
            r.refused[f"{m}.optimizer.fp16"] = ("AssertionError: policy.megatron_cfg.optimizer.fp16=True must be set if "
                                                "policy.precision=float16 when using use_precision_aware_optimizer=True")
    elif precision == "float32":
        r.set("param_dtype", "float32", key="policy.precision", raw=precision)
        if opt_bf16 or opt_fp16:
            r.refused[f"{m}.optimizer.{'bf16' if opt_bf16 else 'fp16'}"] = (
                "AssertionError: policy.megatron_cfg.optimizer.bf16=False and policy.megatron_cfg.optimizer.fp16=False must be set "
                "if policy.precision=float32")
    backend = c.get(f"{m}.attention_backend")
    packing_note = ("; sequence packing hands Transformer Engine packed (THD) sequences"
                    if truthy(c.get("policy.sequence_packing.enabled")) else "")
    if backend is not None and mg.set_attention(r, backend, f"{m}.attention_backend"):
        r.plan["attention"].note = c.note(f"{m}.attention_backend", r.plan["attention"].note + packing_note)
    else:
        model_name = str(c.get("policy.model_name") or "")
        family = _provider_flash(model_name)
        if family:
            r.set("attention", "flash_attention_2", source="default",
                  note=f"{model_name}: Megatron-Bridge's {family} sets attention_backend AttnBackend.flash: "
                       + mg.ATTENTION_NOTES["flash"] + packing_note)
        else:
            r.set("attention", "auto", source="default",
                  note="no megatron_cfg.attention_backend: the Megatron-Bridge provider's default, " + mg.AUTO_NOTE + packing_note)
    if truthy(c.get(f"{m}.fp8_cfg.enabled")):
        missing = [k for k in ("fp8", "fp8_recipe", "fp8_param") if c.get(f"{m}.fp8_cfg.{k}") is None]
        if missing:
            r.refused[f"{m}.fp8_cfg"] = f"KeyError: \"Missing key in fp8_cfg: '{missing[0]}'\""
        mg.set_fp8(r, c.get(f"{m}.fp8_cfg.fp8") or "e4m3", c.get(f"{m}.fp8_cfg.fp8_recipe"), key=f"{m}.fp8_cfg.enabled",
                   recipe_default=None)
        r.plan["fp8"].note = c.note(f"{m}.fp8_cfg.enabled", r.plan["fp8"].note)
        if truthy(c.get(f"{m}.fp8_cfg.fp8_param")):
            r.set("quantization", "fp8-weights", key=f"{m}.fp8_cfg.fp8_param", raw=True,
                  note=c.note(f"{m}.fp8_cfg.fp8_param", "fp8 parameters (Transformer Engine); fp32 main params in the optimizer"))
    if truthy(c.get(f"{m}.peft.enabled")):
        r.set("adapter", "lora", key=f"{m}.peft.enabled", raw=True, note=c.note(f"{m}.peft.enabled", "Megatron-Bridge LoRA"))
        lora_dtype = mg.torch_dtype(c.get(f"{m}.peft.lora_dtype"))
        if lora_dtype:
            r.set("adapter_dtype", lora_dtype, key=f"{m}.peft.lora_dtype", raw=c.get(f"{m}.peft.lora_dtype"))
        elif precision:
            r.set("adapter_dtype", precision, source="default", note="lora_dtype None: the model's params_dtype (megatron/bridge/peft/lora.py)")
    if truthy(c.get(f"{m}.distributed_data_parallel_config.use_custom_fsdp")):
        r.set("distributed", "megatron-fsdp", key=f"{m}.distributed_data_parallel_config.use_custom_fsdp", raw=True)


def _provider_flash(model_name: str) -> Optional[str]:
    """The Megatron-Bridge providers that default to FlashAttention, by the Hugging Face model id."""
    name = model_name.lower()
    if "gemma-3" in name or "gemma3" in name:
        return "Gemma3ModelProvider (gemma3_provider.py)"
    if "gemma" in name and not any(t in name for t in ("gemma-2", "gemma2", "gemma-4", "gemma4", "gemma-3n")) or \
            any(t in name for t in ("gemma-2b", "gemma-7b", "gemma-1.1")):
        return "GemmaModelBridge (gemma_bridge.py)"
    return None


def _edits(c: _Config, r: Reading, backend: Optional[str], precision: Optional[str]) -> None:
    m = "policy.megatron_cfg"
    literal_pipeline = c.get(f"{m}.pipeline_dtype") is not None and mg.resolve(c.merged, get(c.merged, f"{m}.pipeline_dtype"))[1] is None
    for intent, value in (("precision=fp16", "float16"), ("precision=fp32", "float32"), ("precision=bf16", "bfloat16")):
        if value == precision or value == "float16" and backend != "megatron":
            continue  # the DTensor workers have no GradScaler: float16 there trains unscaled, no remedy
        edit: dict[str, Any] = {"policy.precision": value}
        if backend == "megatron":
            edit[f"{m}.optimizer.bf16"] = value == "bfloat16"
            edit[f"{m}.optimizer.fp16"] = value == "float16"
            if literal_pipeline:
                edit[f"{m}.pipeline_dtype"] = value
        r.edits[intent] = edit
    attention = r.plan.get("attention")
    if attention is not None and attention.value in ("flash_attention_2", "flash_attention_3"):
        if attention.key == "policy.sequence_packing.enabled":
            r.edits["attention=sdpa"] = {"policy.sequence_packing.enabled": False}
        elif attention.key == "policy.dtensor_cfg.automodel_kwargs.attn_implementation":
            r.edits["attention=sdpa"] = {attention.key: "sdpa"}
        elif backend == "megatron":
            r.edits["attention=sdpa"] = {f"{m}.attention_backend": "unfused" if attention.source == "default" else "auto"}
    if r.plan.get("fp8") is not None:
        r.edits["fp8=off"] = {f"{m}.fp8_cfg.enabled": False}
