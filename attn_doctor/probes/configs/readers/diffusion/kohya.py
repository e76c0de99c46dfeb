"""A kohya-ss sd-scripts config: the TOML given with `--config_file` (train_network.py, sdxl_train_network.py,
flux_train_network.py, sd3_train_network.py, lumina_train_network.py, hunyuan_image_train_network.py,
anima_train_network.py, fine_tune.py, train_db.py, sdxl_train.py, ...), or the JSON the kohya_ss GUI
(bmaltais/kohya_ss) saves and turns into that TOML.

Read from kohya-ss/sd-scripts 48d368fa557731ad0488c07304dfeba8c07910eb (2026-02-16) and bmaltais/kohya_ss
45088f04af78e11cec5407ff4652ea3ed2c14422 (2026-07-10):

- library/train_util.py read_config_from_file: the TOML's tables are flattened one level ("combine all
  sections into one"; a later table's key wins) and the values land in the argparse Namespace as they are
  (argparse does not check a value a config file sets against `choices`).
- `mixed_precision` (add_training_arguments: default "no", choices no | fp16 | bf16) goes to
  Accelerator(mixed_precision=...) in prepare_accelerator: autocast in it, fp16 with accelerate's GradScaler.
  Because sd-scripts always passes it, `accelerate launch --mixed_precision` / ACCELERATE_MIXED_PRECISION
  never override it. prepare_dtype makes weight_dtype (fp16 / bf16 / fp32) of it: the frozen U-Net / DiT and
  text encoders are cast to it (train_network.py `unet.to(dtype=unet_weight_dtype)`); the trained LoRA
  network stays fp32 unless `full_fp16` / `full_bf16` (network.to(weight_dtype); asserts mixed_precision
  fp16 / bf16). Fine-tuning scripts keep the trained U-Net fp32 the same way (sdxl_train.py).
- `fp8_base` / `fp8_base_unet`: the base U-Net / DiT (and, for fp8_base, the text encoders) is *stored* in
  float8_e4m3fn and upcast by autocast for each matmul: weight storage, not fp8 compute (asserts
  mixed_precision != "no": "fp8_base requires mixed precision='fp16' or 'bf16'"). `fp8_scaled`
  (hunyuan_image_train_network.py) is scaled fp8 storage, dequantized in fp8_linear_forward_patch.
- Attention (train_util.replace_unet_modules, library/original_unet.py, sdxl_original_unet.py): for the
  SD1/SD2/SDXL U-Net `mem_eff_attn` wins over `xformers` over `sdpa`; with none of them sd-scripts' own
  CrossAttention runs its plain baddbmm + softmax (eager). `mem_eff_attn` is sd-scripts' pure-PyTorch
  FlashAttention-algorithm port (FlashAttentionFunction), no kernel. FLUX.1 (library/flux_models.py
  attention()) and SD3 (sd3_utils.load_mmdit attn_mode "torch") always call F.scaled_dot_product_attention;
  Lumina takes `use_flash_attn` (flash_attn_varlen_func) / `use_sage_attn`, else SDPA; HunyuanImage and Anima
  take `attn_mode` (torch | xformers | flash | sageattn; "sdpa" means torch), `xformers` when attn_mode is
  unset, else "torch" (SDPA).
- kohya_ss GUI JSON: `xformers` is the attention dropdown ("xformers" | "sdpa" | "none"; bool in old GUIs);
  lora_gui.py writes `sdpa: true` / `xformers: true` from it. `LoRA_type` picks network_module (Standard ->
  networks.lora, LyCORIS/* -> lycoris.kohya with that algo, Flux1 -> networks.lora_flux ...); the
  flux1_checkbox / sd3_checkbox / lumina_checkbox / hunyuan_image_checkbox / anima_checkbox pick the script.
- `torch_compile` (dynamo_backend, default inductor) -> Accelerator(dynamo_backend=...); the GUI's
  `dynamo_backend` goes to accelerate launch. No TF32 switch: torch's defaults stand.
"""

from __future__ import annotations

from typing import Any, Optional

from ...plan import Reading, truthy

NAME = "kohya-sd-scripts"
LABEL = "kohya sd-scripts"
FORMATS = ("toml", "json")
MARKERS = {
    # sd-scripts' own argument names
    "pretrained_model_name_or_path": 2, "network_module": 2, "network_dim": 1, "network_alpha": 1, "network_args": 1,
    "mem_eff_attn": 3, "full_fp16": 2, "full_bf16": 2, "fp8_base": 1, "save_precision": 1, "save_model_as": 2,
    "v2": 1, "v_parameterization": 2, "clip_skip": 2, "train_data_dir": 2, "reg_data_dir": 2, "prior_loss_weight": 2,
    "shuffle_caption": 2, "keep_tokens": 1, "max_token_length": 1, "caption_extension": 1, "cache_latents": 1,
    "enable_bucket": 1, "bucket_reso_steps": 1, "lowram": 2, "network_train_unet_only": 3, "xformers": 1, "sdpa": 1,
    "mixed_precision": 1, "optimizer_type": 1, "unet_lr": 1, "text_encoder_lr": 1,
    # the conventional TOML tables (sd-scripts README / docs/config_README)
    "model_arguments": 3, "additional_network_arguments": 3, "training_arguments": 3, "saving_arguments": 3,
    "optimizer_arguments": 2, "dataset_arguments": 2, "sample_prompt_arguments": 2, "dreambooth_arguments": 2,
    # the kohya_ss GUI's own keys
    "LoRA_type": 5, "LyCORIS_preset": 3, "model_list": 2, "sdxl_no_half_vae": 3, "sdxl_checkbox": 3, "flux1_checkbox": 3,
    "sd3_checkbox": 3, "max_resolution": 1, "lr_warmup": 1, "color_aug": 1, "flip_aug": 1,
}
# sd-scripts' own argument names, at the top or one table down (lora-scripts' TOML).
# (full_fp16 / full_bf16 are musubi-tuner's too.)
DISTINCT = ("mem_eff_attn", "network_train_unet_only", "save_model_as", "shuffle_caption",
            "v_parameterization", "prior_loss_weight", "LoRA_type", "network_train_text_encoder_only", "clip_skip", "lowram")


def distinct(doc: dict) -> list[str]:
    found = []
    for table, value in doc.items():
        if isinstance(value, dict):
            found += [f"{table}.{k}" for k in value if isinstance(k, str) and k in DISTINCT]
    return found[:2]
# Keys only musubi-tuner (DiT video/image trainer from the same author) or SimpleTuner / OneTrainer write.
_OTHERS = ("dit", "dit_dtype", "fp8_llm", "img_in_txt_in_offloading", "flash3", "caching_teo_text_encoder_dtype",
           "model_family", "data_backend_config", "base_model_precision", "training_method", "train_dtype")
_GUI_KEYS = ("LoRA_type", "model_list", "sdxl_no_half_vae", "sdxl_checkbox", "flux1_checkbox", "sd3_checkbox",
             "max_resolution", "lr_warmup", "LyCORIS_preset")
_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "no": "float32"}
_SRC = ("sd-scripts library/train_util.py (add_training_arguments, prepare_dtype, prepare_accelerator) @ 48d368fa")


def flatten(doc: dict) -> tuple[dict, dict]:
    """read_config_from_file: top-level values as they are, each table's keys merged into one namespace
    (a later table's key wins). (flat values, key -> dotted place in the file)."""
    flat: dict[str, Any] = {}
    where: dict[str, str] = {}
    for name, value in doc.items():
        if isinstance(value, dict):
            for key, inner in value.items():
                flat[key] = inner
                where[key] = f"{name}.{key}"
        else:
            flat[name] = value
            where[name] = name
    return flat, where


def recognise_extra(doc: dict) -> int:
    """Keys inside tables count like top-level ones (sd-scripts flattens them); musubi-tuner's, SimpleTuner's
    and OneTrainer's own keys count against."""
    nested = 0
    for value in doc.values():
        if isinstance(value, dict):
            nested += sum(MARKERS.get(k, 0) for k in value if k not in doc)
    flat, _ = flatten(doc)
    if any(k in flat for k in _OTHERS):
        return min(nested, 12) - 12
    network = str(flat.get("network_module") or "")
    bonus = 3 if network.startswith(("networks.lora", "networks.dylora", "networks.oft", "lycoris.kohya")) and "dit" not in flat else 0
    return min(nested, 12) + bonus


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    flat, where = flatten(doc)
    gui = any(k in flat for k in _GUI_KEYS)

    def key(name: str) -> str:
        place = where.get(name, name)
        section, _, leaf = place.rpartition(".")
        return f"[{section}] {leaf}" if section else leaf

    def dotted(name: str) -> str:
        return where.get(name, name)

    for name in ("mixed_precision", "full_fp16", "full_bf16", "fp8_base", "fp8_base_unet", "fp8_scaled", "save_precision",
                 "xformers", "sdpa", "mem_eff_attn", "attn_mode", "use_flash_attn", "use_sage_attn", "split_attn",
                 "torch_compile", "dynamo_backend", "dynamo_mode", "dynamo_use_fullgraph", "dynamo_use_dynamic",
                 "no_half_vae", "sdxl_no_half_vae", "upcast_attention", "deepspeed", "t5xxl_dtype", "fp8_vl",
                 "apply_t5_attn_mask", "apply_lg_attn_mask", "flux1_checkbox", "sd3_checkbox", "lumina_checkbox",
                 "hunyuan_image_checkbox", "anima_checkbox", "sdxl", "sdxl_checkbox", "save_t5xxl", "cpu_offload_checkpointing",
                 "mem_eff_save"):
        if name in flat:
            r.understood(dotted(name))
    family = _family(flat)
    network = _network(flat, gui)

    # -- precision
    raw = flat.get("mixed_precision")
    text = "no" if raw is None else str(raw).strip().lower()
    if raw is None:
        r.set("compute_dtype", "float32", source="default",
              note="sd-scripts' --mixed_precision defaults to \"no\" (train_util.py add_training_arguments) and is passed to "
                   "Accelerator(mixed_precision=...) explicitly, so accelerate launch's own --mixed_precision does not apply")
    elif text in _DTYPES:
        r.set("compute_dtype", _DTYPES[text], key=key("mixed_precision"), raw=raw,
              note="Accelerator(mixed_precision=...) autocast; the frozen model is cast to it too (prepare_dtype)"
              if text != "no" else "no mixed precision: fp32 matrix multiplies")
    elif text == "fp8":
        r.set("compute_dtype", "bfloat16", key=key("mixed_precision"), raw=raw,
              note="not one of sd-scripts' choices (no, fp16, bf16), but a config file's value is not checked against them: "
                   "accelerate's fp8 mixed precision runs, and prepare_dtype keeps the model in fp32")
        r.set("fp8", True, key=key("mixed_precision"), raw=raw)
        r.set("fp8_backend", "auto", source="default", note="accelerate picks the first installed: MS-AMP, Transformer Engine, torchao")
    else:
        r.set("compute_dtype", "invalid", key=key("mixed_precision"), raw=raw)
        r.refused[key("mixed_precision")] = (f"accelerate: Unknown mixed_precision mode: {text}. Choose between "
                                             "['no', 'fp8', 'fp16', 'bf16']")
    weight = _DTYPES.get(text, "float32")
    full_fp16, full_bf16 = truthy(flat.get("full_fp16")), truthy(flat.get("full_bf16"))
    if full_fp16 and text != "fp16":
        r.refused[key("full_fp16")] = "full_fp16 requires mixed precision='fp16' / full_fp16を使う場合はmixed_precision='fp16'を指定してください。"
    if full_bf16 and text != "bf16":
        r.refused[key("full_bf16")] = "full_bf16 requires mixed precision='bf16' / full_bf16を使う場合はmixed_precision='bf16'を指定してください。"
    full = full_fp16 if text == "fp16" else full_bf16 if text == "bf16" else False
    full_key = key("full_fp16") if text == "fp16" else key("full_bf16")

    fp8_keys = [k for k in ("fp8_base", "fp8_base_unet", "fp8_scaled") if truthy(flat.get(k))]
    if family == "anima":
        fp8_keys = []  # anima_train_network.py: "fp8_base and fp8_base_unet are not supported" (set back to False)
    if fp8_keys:
        fk = fp8_keys[0]
        if text == "no":
            r.refused[key(fk)] = "fp8_base requires mixed precision='fp16' or 'bf16' / fp8を使う場合はmixed_precision='fp16'または'bf16'が必要です。"
        scaled = fk == "fp8_scaled" or (family == "hunyuan_image" and truthy(flat.get("fp8_scaled")))
        what = "U-Net / DiT" if fk == "fp8_base_unet" else "U-Net / DiT and text encoders"
        r.set("quantization", "fp8-weights", key=key(fk), raw=flat.get(fk),
              note=(f"the {what} stored in float8_e4m3fn" + (" with per-block scales (fp8_optimization_utils)" if scaled else "")
                    + ": storage only, each matmul runs in the autocast dtype"))
        r.set("quant_compute_dtype", weight, key=key(fk), raw=flat.get(fk),
              note="autocast upcasts the fp8 weights for every matmul")
        r.set("fp8", False, key=key(fk), raw=flat.get(fk),
              note="fp8 weight storage, not fp8 matrix multiplies (no torch._scaled_mm in training)")

    if network:
        adapter, adapter_key = network
        r.set("adapter", adapter, key=key(adapter_key), raw=flat.get(adapter_key))
        r.understood(dotted(adapter_key), dotted("network_args"))
        if full:
            r.set("adapter_dtype", weight, key=full_key, raw=True, note="full_fp16 / full_bf16: network.to(weight_dtype), no fp32 copy")
        else:
            r.set("adapter_dtype", "float32", source="default",
                  note="the LoRA network is created in fp32 and stays so without full_fp16 / full_bf16 (train_network.py)")
        if not fp8_keys:
            r.set("param_dtype", weight, source="file" if raw is not None else "default",
                  key=key("mixed_precision") if raw is not None else None, raw=raw,
                  note="the frozen base model is cast to weight_dtype (train_network.py unet.to(dtype=unet_weight_dtype))")
    else:
        if full:
            r.set("param_dtype", weight, key=full_key, raw=True, note="full_fp16 / full_bf16: the trained model in it, no fp32 copy")
        elif not fp8_keys:
            r.set("param_dtype", "float32", source="default",
                  note="fine-tuning keeps the trained U-Net / DiT in fp32 under autocast unless full_fp16 / full_bf16 (sdxl_train.py)")
    if text == "fp16":
        r.set("loss_scaling", True, key=key("mixed_precision"), raw=raw,
              note="accelerate's GradScaler" + ("; full_fp16 patches it to unscale fp16 gradients "
                                                 "(patch_accelerator_for_fp16_training)" if full_fp16 else ""))

    _attention(flat, key, family, gui, r)

    compile_raw = flat.get("torch_compile")
    if truthy(compile_raw):
        r.set("compile", True, key=key("torch_compile"), raw=compile_raw,
              note=f"Accelerator(dynamo_backend={flat.get('dynamo_backend') or 'inductor'})")
    elif gui and isinstance(flat.get("dynamo_backend"), str):
        backend = flat["dynamo_backend"].strip().lower()
        r.set("compile", backend not in ("", "no"), key=key("dynamo_backend"), raw=flat["dynamo_backend"],
              note="the GUI hands it to accelerate launch --dynamo_backend")
    elif compile_raw is not None:
        r.set("compile", False, key=key("torch_compile"), raw=compile_raw)
    if truthy(flat.get("deepspeed")):
        r.set("distributed", "deepspeed", key=key("deepspeed"), raw=flat.get("deepspeed"),
              note="deepspeed_utils.prepare_deepspeed_plugin; its mixed precision follows --mixed_precision")
    elif truthy(flat.get("multi_gpu")) or _int(flat.get("num_processes")) > 1:
        k = "multi_gpu" if truthy(flat.get("multi_gpu")) else "num_processes"
        r.set("distributed", "ddp", key=key(k), raw=flat.get(k), note="accelerate launch, DistributedDataParallel")

    r.settings = {k: flat[k] for k in ("mixed_precision", "full_fp16", "full_bf16", "fp8_base", "fp8_base_unet", "xformers",
                                       "sdpa", "mem_eff_attn", "attn_mode", "network_module", "LoRA_type", "save_precision")
                  if k in flat}
    _edits(flat, where, gui, family, fp8_keys, r)
    return r


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _family(flat: dict) -> str:
    """Which training script the file is for: the network module, the GUI's model checkboxes, the model files."""
    network = str(flat.get("network_module") or "").lower()
    lora_type = str(flat.get("LoRA_type") or "")

    def given(name: str) -> bool:
        value = flat.get(name)
        return bool(value) and value is not True and str(value).strip() != ""

    if "flux" in network or truthy(flat.get("flux1_checkbox")) or lora_type.startswith("Flux1") or \
            str(flat.get("model_type") or "").lower() == "chroma" or (given("ae") and given("t5xxl") and not given("clip_g")):
        return "flux"
    if "sd3" in network or truthy(flat.get("sd3_checkbox")) or given("clip_g"):
        return "sd3"
    if "lumina" in network or truthy(flat.get("lumina_checkbox")) or given("gemma2"):
        return "lumina"
    if "hunyuan_image" in network or truthy(flat.get("hunyuan_image_checkbox")):
        return "hunyuan_image"
    if "anima" in network or truthy(flat.get("anima_checkbox")) or given("qwen3"):
        return "anima"
    if truthy(flat.get("sdxl")) or truthy(flat.get("sdxl_checkbox")) or "sdxl" in str(flat.get("model_train_type") or ""):
        return "sdxl"
    return "sd"


_LYCORIS = {"lora": "locon", "locon": "locon", "loha": "loha", "lokr": "lokr", "ia3": "ia3", "dylora": "dylora",
            "glora": "glora", "full": "full", "diag-oft": "oft", "boft": "boft"}


def _network(flat: dict, gui: bool) -> Optional[tuple[str, str]]:
    """(adapter kind, the key that says it), or None for a full fine-tune / DreamBooth / textual inversion."""
    module = flat.get("network_module")
    if isinstance(module, str) and module.strip():
        name = module.strip().lower()
        if name.startswith("lycoris"):
            args = flat.get("network_args") or []
            args = args if isinstance(args, list) else str(args).split()
            opts = dict(str(a).split("=", 1) for a in args if "=" in str(a))
            algo = str(opts.get("algo", "lora")).strip().lower()
            kind = _LYCORIS.get(algo, algo)
            if truthy(opts.get("dora_wd")) and kind == "locon":
                kind = "dora"
            return kind, "network_module"
        if "dylora" in name:
            return "dylora", "network_module"
        if "oft" in name:
            return "oft", "network_module"
        return "lora", "network_module"
    lora_type = flat.get("LoRA_type")
    if gui and isinstance(lora_type, str) and lora_type.strip():
        text = lora_type.strip()
        tail = text.split("/", 1)[1] if "/" in text else text
        low = tail.lower()
        if "oft" in low:
            return "oft", "LoRA_type"
        if "dylora" in low:
            return "dylora", "LoRA_type"
        if low in ("locon", "kohya locon"):
            return "locon", "LoRA_type"
        if text.startswith("LyCORIS/"):
            kind = _LYCORIS.get(low, low)
            if kind == "locon" and truthy(flat.get("dora_wd")):
                kind = "dora"
            return kind, "LoRA_type"
        return "lora", "LoRA_type"
    return None


def _attention(flat: dict, key, family: str, gui: bool, r: Reading) -> None:
    xformers_raw = flat.get("xformers")
    if gui and isinstance(xformers_raw, str):
        choice = xformers_raw.strip().lower()
        xformers, sdpa = choice == "xformers", choice == "sdpa" or truthy(flat.get("sdpa")) is True
    else:
        xformers, sdpa = bool(truthy(xformers_raw)), bool(truthy(flat.get("sdpa")))
    mem_eff = bool(truthy(flat.get("mem_eff_attn")))
    if family in ("flux", "sd3"):
        where = "library/flux_models.py attention()" if family == "flux" else "library/sd3_utils.py load_mmdit(attn_mode=\"torch\")"
        ignored = [k for k, on in (("xformers", xformers), ("mem_eff_attn", mem_eff)) if on]
        r.set("attention", "sdpa", source="default",
              note=f"{'FLUX.1' if family == 'flux' else 'SD3'}: the DiT always calls F.scaled_dot_product_attention ({where})"
                   + (f"; {', '.join(ignored)} does not reach it" if ignored else ""))
        return
    if family == "lumina":
        if truthy(flat.get("use_sage_attn")):
            r.set("attention", "sage", key=key("use_sage_attn"), raw=flat.get("use_sage_attn"),
                  note="library/lumina_models.py sage_attn (SageAttention)")
        elif truthy(flat.get("use_flash_attn")):
            r.set("attention", "flash_attention_2", key=key("use_flash_attn"), raw=flat.get("use_flash_attn"),
                  note="library/lumina_models.py: flash_attn_varlen_func from the flash-attn package")
        else:
            r.set("attention", "sdpa", source="default", note="Lumina: F.scaled_dot_product_attention unless use_flash_attn / use_sage_attn")
        return
    if family in ("hunyuan_image", "anima"):
        mode = flat.get("attn_mode")
        script = "hunyuan_image_train_network.py" if family == "hunyuan_image" else "anima_train_network.py"
        if isinstance(mode, str) and mode.strip():
            value = {"torch": "sdpa", "sdpa": "sdpa", "xformers": "xformers", "flash": "flash_attention_2",
                     "sageattn": "sage"}.get(mode.strip().lower(), mode.strip())
            r.set("attention", value, key=key("attn_mode"), raw=mode,
                  note=f"{script}: attn_mode overrides --xformers" + ("; xformers requires --split_attn" if value == "xformers" else "")
                  + ("; sageattn does not support training (inference only)" if value == "sage" else ""))
        elif xformers:
            r.set("attention", "xformers", key=key("xformers"), raw=xformers_raw, note=f"{script}: attn_mode = \"xformers\" from --xformers")
        else:
            r.set("attention", "sdpa", source="default", note=f"{script}: attn_mode defaults to \"torch\" (F.scaled_dot_product_attention)")
        return
    # sd-scripts' own SD1 / SD2 / SDXL U-Net (train_util.replace_unet_modules): mem_eff_attn > xformers > sdpa
    if mem_eff:
        r.set("attention", "eager", key=key("mem_eff_attn"), raw=flat.get("mem_eff_attn"),
              note="mem_eff_attn wins over xformers / sdpa: sd-scripts' pure-PyTorch FlashAttention-algorithm port "
                   "(original_unet.py FlashAttentionFunction), not a flash kernel"
                   + ("; xformers is also set and ignored" if xformers else ""))
    elif xformers:
        r.set("attention", "xformers", key=key("xformers"), raw=xformers_raw,
              note="xformers.ops.memory_efficient_attention in the U-Net (and the diffusers VAE)"
                   + ("; sdpa is also set and ignored" if sdpa else ""))
    elif sdpa:
        k = "sdpa" if "sdpa" in flat and (not gui or not isinstance(xformers_raw, str)) else "xformers"
        r.set("attention", "sdpa", key=key(k), raw=flat.get(k), note="F.scaled_dot_product_attention in the U-Net (set_use_sdpa)")
    else:
        r.set("attention", "eager", source="default",
              note="no mem_eff_attn / xformers / sdpa: sd-scripts' U-Net (library/original_unet.py, sdxl_original_unet.py) "
                   "runs its plain baddbmm + softmax attention")


def _edits(flat: dict, where: dict, gui: bool, family: str, fp8_keys: list, r: Reading) -> None:
    """Remedies in sd-scripts' own keys, where the file keeps them (a TOML table's key dotted)."""
    anchor = next((where[k] for k in ("mixed_precision", "xformers", "sdpa", "full_bf16", "save_precision") if k in where), "")
    section = anchor.rpartition(".")[0]

    def place(name: str) -> str:
        if name in where:
            return where[name]
        return f"{section}.{name}" if section else name

    def precision(value: str) -> dict:
        out: dict[str, Any] = {place("mixed_precision"): value}
        if truthy(flat.get("full_bf16")) and value != "bf16":
            out[place("full_bf16")] = False
        if truthy(flat.get("full_fp16")) and value != "fp16":
            out[place("full_fp16")] = False
        if value == "no":
            out.update({place(k): False for k in fp8_keys})
        return out

    r.edits["precision=fp16"] = precision("fp16")
    r.edits["precision=bf16"] = precision("bf16")
    r.edits["precision=fp32"] = precision("no")
    attention = r.plan.get("attention")
    if attention is not None and attention.value not in ("sdpa",) and family in ("sd", "sdxl"):
        if gui:  # the GUI's attention dropdown (lora_gui.py writes sdpa / xformers from it)
            edit: dict[str, Any] = {place("xformers"): "sdpa"}
        else:
            edit = {place("sdpa"): True}
            if "xformers" in flat:
                edit[place("xformers")] = False
        if truthy(flat.get("mem_eff_attn")):
            edit[place("mem_eff_attn")] = False
        r.edits["attention=sdpa"] = edit
    elif attention is not None and attention.source == "file" and family in ("hunyuan_image", "anima"):
        r.edits["attention=sdpa"] = {place("attn_mode"): "torch"}
    elif attention is not None and attention.source == "file" and family == "lumina":
        r.edits["attention=sdpa"] = {place(k): False for k in ("use_flash_attn", "use_sage_attn") if truthy(flat.get(k))}
