"""A OneTrainer config JSON (`scripts/train.py --config-path x.json`, the UI's saved configs and its
training_presets/#*.json presets).

Read from Nerogar/OneTrainer 23df3832e8f213d64c337e39f9365ba46e99fed0 (2026-08-19):

- modules/util/config/TrainConfig.py: the file is laid over TrainConfig.default_values(): `train_dtype`
  FLOAT_16, `fallback_train_dtype` BFLOAT_16, `attention_mechanism` SDP, `training_method` FINE_TUNE,
  `model_type` STABLE_DIFFUSION_15, every model part's `weight_dtype` FLOAT_32, `lora_weight_dtype` and
  `embedding_weight_dtype` FLOAT_32, `peft_type` LORA, `compile` False. A file with `__version` older than 11
  is migrated (BaseConfig.from_dict): `unet_weight_dtype` & co. move into the part (migration 1), a part's
  "NONE" takes the top-level `weight_dtype` (migration 9). Built-in presets (#*.json) are loaded without
  migration (TopBarController.load_config_from_file, scripts/train.py --preset-path): a top-level
  `weight_dtype` there is no field and does nothing. An enum value it does not know ("XFORMERS") is
  printed ("Could not set attention_mechanism as XFORMERS") and the default kept.
- modules/util/enum/DataType.py: FLOAT_32 / FLOAT_16 / BFLOAT_16 / TFLOAT_32 (fp32 with TF32 on: GenericTrainer
  sets torch.backends.cuda.matmul.allow_tf32 for train_dtype TFLOAT_32). Quantised weight dtypes
  (modules/util/quantization_util.py): FLOAT_8 -> LinearFp8 (float8_e4m3fn + one scale, dequantised to the
  train dtype in forward: storage), INT_8 -> bitsandbytes Linear8bitLt, NFLOAT_4 -> LinearNf4 (bitsandbytes
  NF4), FLOAT_W8A8 / INT_W8A8 (and _COMPRESSED) -> LinearW8A8: weights *and* activations in fp8 / int8,
  torch._scaled_mm / torch._int_mm: 8-bit compute; GGUF, GGUF_A8_FLOAT / GGUF_A8_INT.
- modules/util/dtype_util.py: train_dtype is torch.autocast's dtype; fp16-unstable parts run under
  fallback_train_dtype instead (disable_fp16_autocast: the HiDream and HunyuanVideo transformers, the Stable
  Cascade prior, text encoders). A GradScaler only where train_dtype is FLOAT_16 and every trained parameter
  is fp32 (enable_grad_scaling).
- modules/modelSetup/BaseModelSetup.py _set_attention_backend: diffusers' attention dispatcher, SDP ->
  "native" (F.scaled_dot_product_attention), FLASH -> "flash" (the flash-attn package), CUDNN ->
  "_native_cudnn" (SDPA pinned to cuDNN), FLEX -> "flex". OneTrainer before 482333fc (2025-03-08) had
  DEFAULT (diffusers' AttnProcessor: eager) and XFORMERS (its default then).
- LoRA (`training_method` LORA): `peft_type` LORA / LOHA / LOKR / OFT_2, `lora_decompose` is DoRA; adapters
  in `lora_weight_dtype`.
"""

from __future__ import annotations

from typing import Any, Optional

from ...plan import Reading, truthy

NAME = "onetrainer"
LABEL = "OneTrainer"
FORMATS = ("json",)
MARKERS = {"__version": 2, "training_method": 4, "train_dtype": 2, "fallback_train_dtype": 5, "base_model_name": 3,
           "output_model_format": 4, "output_model_destination": 4, "concept_file_name": 4, "latent_caching": 2,
           "lora_weight_dtype": 3, "embedding_weight_dtype": 3, "peft_type": 2, "layer_filter_preset": 3,
           "lora_layer_preset": 3, "backup_after": 2, "timestep_distribution": 2, "output_dtype": 2, "enable_autocast_cache": 3,
           "workspace_dir": 2, "unet_weight_dtype": 2, "dynamic_timestep_shifting": 2, "noising_weight": 1, "batch_size": 1,
           "resolution": 1, "model_type": 1, "attention_mechanism": 1}
DISTINCT = ("fallback_train_dtype", "training_method", "output_model_format", "output_model_destination", "concept_file_name",
            "enable_autocast_cache", "layer_filter_preset", "lora_layer_preset")
_MODEL_TYPES = ("STABLE_DIFFUSION_", "STABLE_CASCADE_1", "WUERSTCHEN_2", "PIXART_", "FLUX_", "SANA", "HUNYUAN_VIDEO",
                "HI_DREAM_FULL", "CHROMA_1", "QWEN", "ANIMA", "KREA_2", "Z_IMAGE", "ERNIE", "IDEOGRAM_4")
_PLAIN = {"FLOAT_32": "float32", "FLOAT_16": "float16", "BFLOAT_16": "bfloat16", "TFLOAT_32": "float32"}
_QUANT = {"FLOAT_8": "fp8-weights", "INT_8": "int8", "NFLOAT_4": "nf4", "FLOAT_W8A8": "fp8-w8a8", "INT_W8A8": "int8-w8a8",
          "FLOAT_W8A8_COMPRESSED": "fp8-w8a8", "INT_W8A8_COMPRESSED": "int8-w8a8", "GGUF": "gguf",
          "GGUF_A8_FLOAT": "gguf-a8-fp8", "GGUF_A8_INT": "gguf-a8-int8"}
_QUANT_NOTES = {
    "FLOAT_8": "LinearFp8: float8_e4m3fn with one scale per layer, dequantised to the train dtype in forward (storage, not fp8 compute)",
    "INT_8": "bitsandbytes Linear8bitLt (LLM.int8())",
    "NFLOAT_4": "LinearNf4: bitsandbytes NF4",
    "FLOAT_W8A8": "LinearW8A8: fp8 weights and per-token fp8 activations, torch._scaled_mm (fp8 compute)",
    "FLOAT_W8A8_COMPRESSED": "LinearW8A8 (nvcomp-compressed): fp8 weights and activations, torch._scaled_mm (fp8 compute)",
    "INT_W8A8": "LinearW8A8: int8 weights and per-token int8 activations, torch._int_mm (int8 compute)",
    "INT_W8A8_COMPRESSED": "LinearW8A8 (nvcomp-compressed): int8 weights and activations, torch._int_mm (int8 compute)",
    "GGUF": "a GGUF checkpoint, dequantised per layer",
    "GGUF_A8_FLOAT": "LinearGGUFA8: GGUF weights with fp8 activations",
    "GGUF_A8_INT": "LinearGGUFA8: GGUF weights with int8 activations",
}
# fp16-unstable denoisers that run under fallback_train_dtype (disable_fp16_autocast_context)
_FALLBACK = {"HI_DREAM_FULL": "BaseHiDreamSetup.py", "HUNYUAN_VIDEO": "BaseHunyuanVideoSetup.py", "STABLE_CASCADE_1": "BaseWuerstchenSetup.py"}
_LEGACY_PART_KEYS = {"unet": "unet_weight_dtype", "prior": "prior_weight_dtype", "text_encoder": "text_encoder_weight_dtype",
                     "text_encoder_2": "text_encoder_2_weight_dtype", "vae": "vae_weight_dtype"}


def recognise_extra(doc: dict) -> int:
    model_type = doc.get("model_type")
    score = 3 if isinstance(model_type, str) and model_type.startswith(_MODEL_TYPES) else 0
    parts = [doc.get(p) for p in ("unet", "transformer", "prior", "text_encoder", "vae")]
    if any(isinstance(p, dict) and "weight_dtype" in p for p in parts):
        score += 3
    return score


def _denoiser(model_type: str) -> str:
    if model_type.startswith("STABLE_DIFFUSION_") and not model_type.startswith("STABLE_DIFFUSION_3"):
        return "unet"  # SD 1.x / 2.x / XL
    if model_type in ("WUERSTCHEN_2", "STABLE_CASCADE_1"):
        return "prior"
    return "transformer"


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    version = doc.get("__version")
    legacy = version is None and any(k in doc for k in _LEGACY_PART_KEYS.values())
    migrates = legacy or (isinstance(version, int) and version < 11)
    model_type = str(doc.get("model_type") or "STABLE_DIFFUSION_15")
    method = str(doc.get("training_method") or "FINE_TUNE")
    part_name = _denoiser(model_type)
    r.understood("train_dtype", "fallback_train_dtype", "weight_dtype", "output_dtype", "attention_mechanism", "compile",
                 "lora_weight_dtype", "embedding_weight_dtype", "enable_autocast_cache", "training_method", "peft_type",
                 "lora_decompose", "quantization", "multi_gpu", "gradient_reduce_precision", "model_type",
                 *_LEGACY_PART_KEYS.values(),
                 *(f"{p}.weight_dtype" for p in ("unet", "prior", "transformer", "unconditional_transformer", "text_encoder",
                                                  "text_encoder_2", "text_encoder_3", "text_encoder_4", "vae", "effnet_encoder",
                                                  "decoder", "decoder_text_encoder", "decoder_vqgan")))

    # -- train dtype (torch.autocast)
    train_raw = doc.get("train_dtype")
    train = str(train_raw or "FLOAT_16")
    fallback_raw = doc.get("fallback_train_dtype")
    fallback = str(fallback_raw or "BFLOAT_16")
    compute = _PLAIN.get(train)
    if model_type in _FALLBACK and train == "FLOAT_16" and _PLAIN.get(fallback):
        r.set("compute_dtype", _PLAIN[fallback], source="file" if fallback_raw else "default",
              key="fallback_train_dtype" if fallback_raw else None, raw=fallback,
              note=f"train_dtype FLOAT_16, but the {model_type} {part_name} is fp16-unstable and runs under fallback_train_dtype "
                   f"({_FALLBACK[model_type]} disable_fp16_autocast)")
        compute = _PLAIN[fallback]
    elif train_raw is None:
        r.set("compute_dtype", "float16", source="default", raw="FLOAT_16",
              note="OneTrainer's train_dtype defaults to FLOAT_16 (TrainConfig.default_values): fp16 autocast")
    elif compute:
        r.set("compute_dtype", compute, key="train_dtype", raw=train_raw,
              note="torch.autocast dtype (dtype_util.create_autocast_context)" if compute != "float32" else
              "float32: fp32 autocast on CUDA, lower-precision weights upcast on the fly")
    else:
        r.set("compute_dtype", "invalid", key="train_dtype", raw=train_raw)
        r.refused["train_dtype"] = f"Could not set train_dtype as {train_raw}"
    if train == "TFLOAT_32":
        r.set("tf32", True, key="train_dtype", raw=train_raw, note="TFLOAT_32: GenericTrainer sets torch.backends.cuda.matmul.allow_tf32")

    # -- the denoiser's weights
    dtype_raw, dtype_key, dtype_note = _part_dtype(doc, part_name, migrates)
    weight = str(dtype_raw)
    if weight in _PLAIN:
        src = "file" if dtype_key else "default"
        trained = method == "FINE_TUNE" and _trains(doc, part_name)
        r.set("param_dtype", _PLAIN[weight], source=src, key=dtype_key, raw=dtype_raw,
              note=(dtype_note + ("; the trained weights themselves, no fp32 master copy" if trained and weight != "FLOAT_32" else
                                  "" if trained else "; the frozen base")).lstrip("; "))
    elif weight in _QUANT:
        r.set("quantization", _QUANT[weight], source="file" if dtype_key else "default", key=dtype_key, raw=dtype_raw,
              note=_QUANT_NOTES[weight] + (f"; {dtype_note}" if dtype_note else ""))
        if compute:
            r.set("quant_compute_dtype", compute, source="default", note="LinearFp8 / LinearW8A8 compute_dtype = the train dtype (quantize_layers)")
        if weight.startswith("FLOAT_W8A8") or weight == "GGUF_A8_FLOAT":
            r.set("fp8", True, key=dtype_key, raw=dtype_raw, requires="8.9",
                  note="fp8 matrix multiplies through torch._scaled_mm (SM 8.9+), no Transformer Engine / torchao")
            r.set("fp8_backend", "scaled_mm", source="default", note="OneTrainer's LinearW8A8: torch._scaled_mm")
        elif weight == "FLOAT_8":
            r.set("fp8", False, key=dtype_key, raw=dtype_raw, note="FLOAT_8 is weight storage, dequantised per matmul")
        svd = doc.get("quantization", {}).get("svd_dtype") if isinstance(doc.get("quantization"), dict) else None
        if svd not in (None, "NONE"):
            r.plan["quantization"].note += f"; SVDQuant low-rank branch in {svd}"
    elif weight not in ("NONE", "None"):
        r.refused[dtype_key or f"{part_name}.weight_dtype"] = f"Could not set weight_dtype as {dtype_raw}"

    # -- what trains
    if method == "LORA":
        peft = str(doc.get("peft_type") or "LORA")
        adapter = {"LORA": "lora", "LOHA": "loha", "LOKR": "lokr", "OFT_2": "oft"}.get(peft, peft.lower())
        if adapter == "lora" and truthy(doc.get("lora_decompose")):
            adapter = "dora"
        r.set("adapter", adapter, key="peft_type" if "peft_type" in doc else "training_method", raw=doc.get("peft_type") or method,
              note="lora_decompose: DoRA" if adapter == "dora" else None)
        lw = doc.get("lora_weight_dtype")
        r.set("adapter_dtype", _PLAIN.get(str(lw or "FLOAT_32"), str(lw)), source="file" if lw else "default",
              key="lora_weight_dtype" if lw else None, raw=lw,
              note=None if lw else "lora_weight_dtype defaults to FLOAT_32 (TrainConfig.default_values)")
    elif method == "EMBEDDING":
        ew = doc.get("embedding_weight_dtype")
        r.set("adapter", "embedding", key="training_method", raw=method, note="textual inversion: only the new embeddings train")
        r.set("adapter_dtype", _PLAIN.get(str(ew or "FLOAT_32"), str(ew)), source="file" if ew else "default",
              key="embedding_weight_dtype" if ew else None, raw=ew)

    failure = _migration_failure(doc, version, migrates)
    if failure:
        r.refused[failure[0]] = failure[1]
    scaled, why = _grad_scaling(doc, train, method, part_name, migrates)
    if train == "FLOAT_16":
        if compute != "float16":
            why += f"; the {part_name} itself runs under fallback_train_dtype"
        r.set("loss_scaling", scaled, source="file" if train_raw else "default", key="train_dtype" if train_raw else None,
              raw=train, note=why)

    _attention(doc, r)
    if truthy(doc.get("compile")) is not None:
        r.set("compile", bool(truthy(doc.get("compile"))), key="compile", raw=doc.get("compile"))
    if truthy(doc.get("multi_gpu")):
        r.set("distributed", "ddp", key="multi_gpu", raw=doc.get("multi_gpu"),
              note="OneTrainer's own multi-GPU (torch.distributed, gradients all-reduced by the trainer)")
        reduce_raw = str(doc.get("gradient_reduce_precision") or "FLOAT_32_STOCHASTIC")
        r.set("reduce_dtype", "float32" if reduce_raw.startswith("FLOAT_32") else "weight dtype",
              source="file" if "gradient_reduce_precision" in doc else "default",
              key="gradient_reduce_precision" if "gradient_reduce_precision" in doc else None, raw=reduce_raw)

    r.settings = {k: doc[k] for k in ("train_dtype", "fallback_train_dtype", "attention_mechanism", "training_method",
                                      "model_type", "lora_weight_dtype", "peft_type", "compile") if k in doc}
    if dtype_key:
        r.settings[dtype_key] = dtype_raw
    _edits(doc, r, train, part_name, dtype_key, weight)
    return r


def _part_dtype(doc: dict, part: str, migrates: bool) -> tuple[Any, Optional[str], str]:
    """(the denoiser part's weight_dtype as written, its dotted key, how it was found)."""
    block = doc.get(part) if isinstance(doc.get(part), dict) else None
    if part == "transformer" and block is None and migrates and isinstance(doc.get("prior"), dict):
        block, part = doc["prior"], "prior"  # migration 8: the transformer was the prior before
    legacy = _LEGACY_PART_KEYS.get(part)
    if block is not None and "weight_dtype" in block:
        raw, key, note = block["weight_dtype"], f"{part}.weight_dtype", ""
    elif legacy and legacy in doc and migrates:
        raw, key, note = doc[legacy], legacy, f"{legacy} (moved into {part}.weight_dtype by migration 1)"
    else:
        return "FLOAT_32", None, f"{part}.weight_dtype defaults to FLOAT_32 (TrainModelPartConfig.default_values)"
    if str(raw) == "NONE" and migrates and doc.get("weight_dtype"):
        return doc["weight_dtype"], "weight_dtype", f"{key} NONE takes the top-level weight_dtype (migration 9)"
    return raw, key, note


_MIGRATION_1_PARTS = ("unet", "prior", "text_encoder", "text_encoder_2", "vae", "effnet_encoder", "decoder",
                      "decoder_text_encoder", "decoder_vqgan")


def _migration_failure(doc: dict, version: Any, migrates: bool) -> Optional[tuple[str, str]]:
    """TrainConfig.__migration_9 reads every part's weight_dtype and pops the top-level weight_dtype with no
    default: a version-0 file missing one of the flat *_weight_dtype keys (migration 1 makes every part, with
    weight_dtype only where that key was there), or without `weight_dtype`, stops the load with KeyError."""
    if not migrates or (isinstance(version, int) and version >= 10):
        return None
    if not isinstance(version, int) or version < 2:
        for part in _MIGRATION_1_PARTS:
            if f"{part}_weight_dtype" not in doc and not (isinstance(doc.get(part), dict) and "weight_dtype" in doc[part]):
                return (f"{part}_weight_dtype", "KeyError: 'weight_dtype' (TrainConfig.__migration_9: migration 1 made the "
                        f"\"{part}\" part without a weight_dtype, as the file has no {part}_weight_dtype)")
    elif any(isinstance(doc.get(p), dict) and "weight_dtype" not in doc[p] for p in _MIGRATION_1_PARTS):
        part = next(p for p in _MIGRATION_1_PARTS if isinstance(doc.get(p), dict) and "weight_dtype" not in doc[p])
        return f"{part}.weight_dtype", "KeyError: 'weight_dtype' (TrainConfig.__migration_9 reads every part's weight_dtype)"
    if isinstance(version, int) and version >= 10:
        return None
    if "weight_dtype" not in doc:
        return "weight_dtype", "KeyError: 'weight_dtype' (TrainConfig.__migration_9 pops the top-level weight_dtype)"
    return None


def _trains(doc: dict, part: str) -> bool:
    block = doc.get(part) if isinstance(doc.get(part), dict) else {}
    return truthy(block.get("train")) is not False


def _grad_scaling(doc: dict, train: str, method: str, part: str, migrates: bool) -> tuple[bool, str]:
    """dtype_util.enable_grad_scaling: FLOAT_16 training with every trained parameter in fp32."""
    if method == "LORA":
        trained = [str(doc.get("lora_weight_dtype") or "FLOAT_32")]
        what = "lora_weight_dtype"
    elif method == "EMBEDDING":
        trained = [str(doc.get("embedding_weight_dtype") or "FLOAT_32")]
        what = "embedding_weight_dtype"
    else:
        raw, _key, _note = _part_dtype(doc, part, migrates)
        trained = [str(raw)]
        what = f"{part}.weight_dtype"
    fp32 = all(t in ("FLOAT_32", "TFLOAT_32") for t in trained)
    if fp32:
        return True, f"a GradScaler: train_dtype FLOAT_16 and the trained weights ({what}) are fp32 (dtype_util.enable_grad_scaling)"
    return False, (f"no GradScaler: the trained weights ({what} {trained[0]}) are not fp32, and dtype_util.enable_grad_scaling "
                   "only scales fp16 training over fp32 parameters: fp16 gradients unscaled")


def _attention(doc: dict, r: Reading) -> None:
    raw = doc.get("attention_mechanism")
    value = str(raw).strip().upper() if raw is not None else None
    known = {"SDP": ("sdpa", "diffusers' \"native\" backend: F.scaled_dot_product_attention"),
             "FLASH": ("flash_attention_2", "diffusers' \"flash\" backend: the flash-attn package (flash_attn_func)"),
             "CUDNN": ("sdpa", "diffusers' \"_native_cudnn\" backend: SDPA pinned to cuDNN attention"),
             "FLEX": ("flex_attention", "diffusers' \"flex\" backend: torch flex_attention")}
    if value is None:
        r.set("attention", "sdpa", source="default",
              note="attention_mechanism defaults to SDP: diffusers' \"native\" backend, F.scaled_dot_product_attention "
                   "(BaseModelSetup._set_attention_backend)")
    elif value in known:
        name, note = known[value]
        r.set("attention", name, key="attention_mechanism", raw=raw, note=note)
    else:
        r.set("attention", "sdpa", source="default", raw=raw,
              note=f"{raw} is no AttentionMechanism any more: OneTrainer prints \"Could not set attention_mechanism as {raw}\" "
                   "and keeps SDP (F.scaled_dot_product_attention); OneTrainer before 2025-03-08 (482333fc) ran "
                   + ("xformers" if value == "XFORMERS" else "diffusers' AttnProcessor (eager)" if value == "DEFAULT" else raw))


def _edits(doc: dict, r: Reading, train: str, part: str, dtype_key: Optional[str], weight: str) -> None:
    method = str(doc.get("training_method") or "FINE_TUNE")

    def precision(value: str) -> dict:
        out: dict[str, Any] = {"train_dtype": value}
        if not (dtype_key and dtype_key.endswith(".weight_dtype")) or weight not in ("BFLOAT_16", "FLOAT_16"):
            return out
        if method == "FINE_TUNE" and value in ("FLOAT_16", "FLOAT_32"):
            out[dtype_key] = "FLOAT_32"  # fp16 training gets its GradScaler only over fp32 weights (enable_grad_scaling)
        elif value == "FLOAT_16" and weight == "BFLOAT_16":
            out[dtype_key] = "FLOAT_16"  # the frozen base: fp16 storage instead of bf16
        return out

    r.edits["precision=fp16"] = precision("FLOAT_16")
    r.edits["precision=bf16"] = precision("BFLOAT_16")
    r.edits["precision=fp32"] = precision("FLOAT_32")
    attention = r.plan.get("attention")
    if (attention is not None and attention.source == "file" and attention.value != "sdpa") or \
            str(doc.get("attention_mechanism") or "").upper() == "CUDNN":
        r.edits["attention=sdpa"] = {"attention_mechanism": "SDP"}
    if train == "TFLOAT_32":
        r.edits["tf32=off"] = {"train_dtype": "FLOAT_32"}
    fp8 = r.plan.get("fp8")
    if fp8 is not None and fp8.value is True and dtype_key:
        r.edits["fp8=off"] = {dtype_key: "FLOAT_8"}
