"""A kohya-ss musubi-tuner config: the TOML given with `--config_file` to hv_train_network.py, wan_train_network.py,
fpack_train_network.py, flux_kontext / flux_2 / qwen_image / zimage / kandinsky5 / hv_1_5 / krea2 / ideogram4 /
hidream_o1 _train_network.py (and the full fine-tune scripts), as the GUIs built on it save it
(bmaltais/musubi-tuner-gui, SECourses Musubi Trainer) with musubi's own argument names.

Read from kohya-ss/musubi-tuner 30c658c4f4b0bf05038b3346eff9670259b10fc7 (2026-06-24):

- training/parser_common.py read_config_from_file: the TOML's tables are flattened one level (a later table's
  key wins) into the argparse Namespace; values are not checked against `choices`.
- `mixed_precision` (no | fp16 | bf16) defaults to None: training/accelerator_setup.py passes
  Accelerator(mixed_precision=None), so accelerate's own setting decides (ACCELERATE_MIXED_PRECISION, i.e.
  `accelerate launch --mixed_precision`, else the `accelerate config` file, else "no");
  trainer_base._prepare_accelerator_and_dtypes then reads it back. Autocast in it; fp16 with accelerate's
  GradScaler.
- The DiT's weights are kept in dit_dtype: trainer_base defaults it to bfloat16 (`--dit_dtype`), and the
  architectures set it in code: FramePack, Qwen-Image, Krea 2, HiDream-O1 bf16; FLUX.1 Kontext / FLUX.2 fp16
  under mixed_precision fp16 else bf16; Kandinsky 5 bf16 under bf16 else fp16; Z-Image the mixed precision's
  dtype; Wan 2.x and HunyuanVideo 1.5 the checkpoint's dtype (wan_train_network.py asserts "DiT weights are
  in bf16, mixed precision must be bf16 or no", and the fp16 counterpart). Without autocast
  (mixed_precision "no") the DiT computes in dit_dtype.
- `fp8_base` keeps the DiT in float8_e4m3fn (`fp8_scaled`: per-block scaled fp8 through
  modules/fp8_optimization_utils.py, dequantized per matmul; "fp8_scaled requires fp8_base"): weight
  storage, computed in the DiT dtype. Only Kandinsky 5's `fp8_fast` runs torch._scaled_mm (fp8 compute).
  `fp8_llm` / `fp8_t5` / `fp8_vl` / `fp8_text_encoder` store a text encoder in fp8 (caching only).
- The LoRA network stays fp32: trainer_base forces `args.full_fp16 = args.full_bf16 = False` ("temporary
  disabled because stochastic rounding is not supported yet").
- Attention (trainer_base._load_dit_and_swap): `sdpa` > `flash_attn` > `sage_attn` > `xformers` > `flash3`,
  and with none of them "either --sdpa, --flash-attn, --flash3, --sage-attn or --xformers must be specified";
  `sage_attn` is refused for training first ("SageAttention doesn't support training currently").
  flash_attn is the flash-attn package (flash_attn_func / flash_attn_varlen_func), flash3 FlashAttention-3's
  flash_attn_interface (Wan, Kandinsky 5).
- `cuda_allow_tf32` turns TF32 on (torch.backends.cuda.matmul / cudnn); `compile` wraps the DiT in
  torch.compile, `dynamo_backend` (default NO) hands accelerate a TorchDynamoPlugin.
"""

from __future__ import annotations

from typing import Any, Optional

from .kohya import flatten  # parser_common.read_config_from_file flattens as sd-scripts does
from ...plan import Reading, dtype_of, truthy

NAME = "musubi-tuner"
LABEL = "musubi-tuner"
FORMATS = ("toml",)
MARKERS = {"dit": 5, "dit_dtype": 4, "dit_high_noise": 4, "text_encoder1": 3, "text_encoder2": 1, "fp8_llm": 3,
           "fp8_t5": 3, "fp8_vl": 3, "fp8_scaled": 2, "fp8_text_encoder": 2, "sage_attn": 2, "flash_attn": 2, "flash3": 3,
           "split_attn": 2, "blocks_to_swap": 2, "img_in_txt_in_offloading": 4, "discrete_flow_shift": 1, "timestep_sampling": 1,
           "guidance_scale": 1, "vae_dtype": 1, "vae_tiling": 2, "vae_chunk_size": 2, "vae_spatial_tile_sample_min_size": 3,
           "cuda_allow_tf32": 2, "cuda_cudnn_benchmark": 2, "offload_inactive_dit": 4, "task": 1, "network_module": 1,
           "network_dim": 1, "mixed_precision": 1, "sdpa": 1, "xformers": 1}
DISTINCT = ("dit", "dit_dtype", "dit_high_noise", "text_encoder1", "fp8_llm", "fp8_t5", "fp8_vl", "img_in_txt_in_offloading",
            "offload_inactive_dit", "vae_spatial_tile_sample_min_size", "flash3", "split_attn")


def distinct(doc: dict) -> list[str]:
    found = []
    for table, value in doc.items():
        if isinstance(value, dict):
            found += [f"{table}.{k}" for k in value if isinstance(k, str) and k in DISTINCT[:10]]
    return found[:2]
# musubi's network modules (networks/*.py); "networks.lora" is HunyuanVideo's, "networks.lora_flux" FLUX.1 Kontext's
_ARCH = {"networks.lora": "HunyuanVideo", "networks.lora_wan": "Wan", "networks.lora_framepack": "FramePack",
         "networks.lora_flux": "FLUX.1 Kontext", "networks.lora_flux_2": "FLUX.2", "networks.lora_qwen_image": "Qwen-Image",
         "networks.lora_zimage": "Z-Image", "networks.lora_kandinsky": "Kandinsky 5", "networks.lora_hv_1_5": "HunyuanVideo 1.5",
         "networks.lora_krea2": "Krea 2", "networks.lora_ideogram4": "Ideogram 4", "networks.lora_hidream_o1": "HiDream-O1"}
_NO_ATTENTION = ("either --sdpa, --flash-attn, --flash3, --sage-attn or --xformers must be specified / "
                 "--sdpa, --flash-attn, --flash3, --sage-attn, --xformersのいずれかを指定してください")
_SAGE = ("SageAttention doesn't support training currently. Please use `--sdpa` or `--xformers` etc. instead. / "
         "SageAttentionは現在学習をサポートしていないようです。`--sdpa`や`--xformers`などの他のオプションを使ってください")
_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "no": "float32"}


def recognise_extra(doc: dict) -> int:
    nested = 0
    for value in doc.values():
        if isinstance(value, dict):
            nested += sum(MARKERS.get(k, 0) for k in value if k not in doc)
    flat, _ = flatten(doc)
    network = str(flat.get("network_module") or "")
    bonus = 4 if network in _ARCH and network not in ("networks.lora", "networks.lora_flux") else 0
    bonus += 3 if any(k.startswith("caching_teo_") or k.startswith("caching_latent_") for k in flat) else 0
    return min(nested, 12) + bonus


def _arch(flat: dict) -> Optional[str]:
    network = str(flat.get("network_module") or "").strip()
    if network in _ARCH:
        return _ARCH[network]
    task = str(flat.get("task") or "")
    if task.startswith(("t2v-", "i2v-", "t2i-", "flf2v-")):
        return "Wan"
    return None


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    flat, where = flatten(doc)

    def key(name: str) -> str:
        place = where.get(name, name)
        section, _, leaf = place.rpartition(".")
        return f"[{section}] {leaf}" if section else leaf

    for name in ("mixed_precision", "dit_dtype", "vae_dtype", "text_encoder_dtype", "fp8_base", "fp8_scaled", "fp8_fast",
                 "fp8_llm", "fp8_t5", "fp8_vl", "fp8_text_encoder", "sdpa", "flash_attn", "sage_attn", "xformers", "flash3",
                 "split_attn", "full_fp16", "full_bf16", "cuda_allow_tf32", "compile", "compile_backend", "compile_mode",
                 "compile_dynamic", "compile_fullgraph", "dynamo_backend", "dynamo_mode", "dynamo_use_fullgraph",
                 "dynamo_use_dynamic", "dynamo_fullgraph", "dynamo_dynamic", "network_module", "network_args",
                 "save_precision", "caching_teo_text_encoder_dtype", "caching_teo_fp8_llm", "clip_vision_dtype"):
        if name in flat:
            r.understood(where.get(name, name))
    arch = _arch(flat)
    arch_text = f"{arch}: " if arch else ""

    # -- mixed precision: the file, else accelerate's own setting
    raw = flat.get("mixed_precision")
    text = str(raw).strip().lower() if raw not in (None, "") else None
    env = ctx.env.get("ACCELERATE_MIXED_PRECISION") if ctx is not None and ctx.env else None
    if text is None and env:
        text = str(env).strip().lower()
        source, mp_key, mp_raw = "env", "ACCELERATE_MIXED_PRECISION", env
    elif text is None:
        source, mp_key, mp_raw = "default", None, None
    else:
        source, mp_key, mp_raw = "file", key("mixed_precision"), raw
    if text is not None and text not in _DTYPES:
        r.refused[mp_key or "mixed_precision"] = f"accelerate: Unknown mixed_precision mode: {text}. Choose between ['no', 'fp8', 'fp16', 'bf16']"

    # handle_model_specific_args runs before the accelerator resolves an unset mixed_precision: the DiT dtype
    # an architecture derives from it sees only the file's (the command line's) value
    file_mp = str(raw).strip().lower() if raw not in (None, "") else None
    dit_dtype, dit_note, dit_key = _dit_dtype(flat, arch, file_mp, key)
    if arch == "Wan" and file_mp is None:
        r.refused[key("mixed_precision")] = ("DiT weights are in bf16, mixed precision must be bf16 or no "
                                             "(wan_train_network.py asserts it before accelerate fills an unset mixed_precision)")
    if text in ("fp16", "bf16"):
        r.set("compute_dtype", _DTYPES[text], source=source, key=mp_key, raw=mp_raw,
              note=f"Accelerator autocast; the DiT's weights are {dit_dtype or 'the checkpoint dtype'} ({dit_note})")
        if text == "fp16":
            r.set("loss_scaling", True, source=source, key=mp_key, raw=mp_raw, note="accelerate's GradScaler")
    elif text == "no":
        r.set("compute_dtype", dit_dtype or "float32", source=source, key=mp_key, raw=mp_raw,
              note=f"no autocast: the DiT runs in its weight dtype ({dit_note})")
    elif text is None:
        r.set("compute_dtype", "auto", source="default",
              note="mixed_precision unset: Accelerator(mixed_precision=None) takes accelerate's own setting "
                   "(accelerate launch --mixed_precision / ACCELERATE_MIXED_PRECISION / the accelerate config file, else \"no\"); "
                   f"the DiT's weights are {dit_dtype or 'the checkpoint dtype'} ({dit_note})")
    if arch == "Wan" and text in ("fp16", "bf16"):
        r.plan["compute_dtype"].note += ("; wan_train_network.py asserts the checkpoint's dtype matches: \"DiT weights are in "
                                         f"{'bf16' if text == 'fp16' else 'fp16'}, mixed precision must be "
                                         f"{'bf16' if text == 'fp16' else 'fp16'} or no\" otherwise")

    fp8_base, fp8_scaled = truthy(flat.get("fp8_base")), truthy(flat.get("fp8_scaled"))
    if fp8_scaled and not fp8_base:
        r.refused[key("fp8_scaled")] = "fp8_scaled requires fp8_base / fp8_scaledはfp8_baseが必要です"
    if fp8_base:
        k = "fp8_scaled" if fp8_scaled else "fp8_base"
        r.set("quantization", "fp8-weights", key=key(k), raw=flat.get(k),
              note=(f"{arch_text}the DiT stored in float8_e4m3fn"
                    + (" with per-block scales, dequantized per matmul (modules/fp8_optimization_utils.py)" if fp8_scaled
                       else " (transformer.to(float8_e4m3fn))")))
        compute = r.plan.get("compute_dtype")
        qc = compute.value if compute is not None and compute.value not in ("auto", "float32") else (dit_dtype or "bfloat16")
        r.set("quant_compute_dtype", qc, source="default", note="the fp8 weights are upcast for every matmul")
        fast = truthy(flat.get("fp8_fast")) and fp8_scaled and arch == "Kandinsky 5"
        if fast:
            r.set("fp8", True, key=key("fp8_fast"), raw=flat.get("fp8_fast"), requires="8.9",
                  note="kandinsky5_train_network.py: apply_fp8_monkey_patch(use_scaled_mm=True), torch._scaled_mm needs SM 8.9+")
            r.set("fp8_backend", "scaled_mm", source="default", note="torch._scaled_mm, no extra package")
        else:
            r.set("fp8", False, key=key(k), raw=flat.get(k), note="fp8 weight storage, not fp8 matrix multiplies")
    elif dit_dtype:
        r.set("param_dtype", dit_dtype, source="file" if dit_key else "default", key=key(dit_key) if dit_key else None,
              raw=flat.get(dit_key) if dit_key else None, note=f"the frozen DiT is kept in it ({dit_note})")

    network = flat.get("network_module")
    if isinstance(network, str) and network.strip():
        args = flat.get("network_args") or []
        args = args if isinstance(args, list) else str(args).split()
        opts = dict(str(a).split("=", 1) for a in args if "=" in str(a))
        name = network.strip().lower()
        adapter = "lokr" if name.endswith("lokr") else "loha" if name.endswith("loha") else \
            "dora" if truthy(opts.get("use_dora")) else "lora"
        r.set("adapter", adapter, key=key("network_module"), raw=network)
        ignored = [k for k in ("full_bf16", "full_fp16") if truthy(flat.get(k))]
        r.set("adapter_dtype", "float32", source="default",
              note="the network stays fp32: trainer_base sets args.full_fp16 = args.full_bf16 = False"
                   + (f" ({', '.join(ignored)} in the file does nothing)" if ignored else ""))

    _attention(flat, key, arch, r)

    tf32 = flat.get("cuda_allow_tf32")
    if truthy(tf32) is not None:
        r.set("tf32", bool(truthy(tf32)), key=key("cuda_allow_tf32"), raw=tf32,
              note="torch.backends.cuda.matmul.allow_tf32 / cudnn.allow_tf32" if truthy(tf32) else "torch's defaults")
    if truthy(flat.get("compile")):
        r.set("compile", True, key=key("compile"), raw=flat.get("compile"), note="torch.compile of the DiT (compile_transformer)")
    elif isinstance(flat.get("dynamo_backend"), str) and flat["dynamo_backend"].strip().lower() not in ("", "no"):
        r.set("compile", True, key=key("dynamo_backend"), raw=flat["dynamo_backend"], note="accelerate TorchDynamoPlugin")
    elif "compile" in flat or "dynamo_backend" in flat:
        k = "compile" if "compile" in flat else "dynamo_backend"
        r.set("compile", False, key=key(k), raw=flat.get(k))
    if truthy(flat.get("multi_gpu")) or _int(flat.get("num_processes")) > 1:
        k = "multi_gpu" if truthy(flat.get("multi_gpu")) else "num_processes"
        r.set("distributed", "ddp", key=key(k), raw=flat.get(k), note="accelerate launch, DistributedDataParallel")

    r.settings = {k: flat[k] for k in ("mixed_precision", "dit_dtype", "fp8_base", "fp8_scaled", "sdpa", "flash_attn",
                                       "sage_attn", "xformers", "flash3", "split_attn", "network_module", "cuda_allow_tf32")
                  if k in flat}
    _edits(flat, where, r)
    return r


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _dit_dtype(flat: dict, arch: Optional[str], mp: Optional[str], key) -> tuple[Optional[str], str, Optional[str]]:
    """(the DiT weight dtype, where it comes from, the file's key for it if any)."""
    given = dtype_of(flat.get("dit_dtype"))
    if arch in ("FramePack", "Qwen-Image", "Krea 2", "HiDream-O1"):
        return "bfloat16", f"{arch} fixes dit_dtype to bfloat16 in code", None
    if arch in ("FLUX.1 Kontext", "FLUX.2"):
        value = "float16" if mp == "fp16" else "bfloat16"
        return value, f"{arch}: dit_dtype follows mixed_precision (fp16 under fp16, else bf16)", None
    if arch == "Kandinsky 5":
        value = "bfloat16" if mp == "bf16" else "float16"
        return value, "Kandinsky 5: bf16 under mixed_precision bf16, else fp16", None
    if arch == "Z-Image":
        value = {"fp16": "float16", "bf16": "bfloat16"}.get(mp or "", "float32")
        return value, "Z-Image: dit_dtype is the mixed precision's dtype", None
    if arch in ("Wan", "HunyuanVideo 1.5"):
        if arch == "HunyuanVideo 1.5" and given:
            return given, "dit_dtype", "dit_dtype"
        return None, f"{arch}: dit_dtype is read from the checkpoint (detect_*_sd_dtype); a dit_dtype key is overwritten", None
    if given:
        return given, "dit_dtype", "dit_dtype"
    return "bfloat16", "trainer_base: dit_dtype defaults to bfloat16", None


def _attention(flat: dict, key, arch: Optional[str], r: Reading) -> None:
    if truthy(flat.get("sage_attn")):
        r.refused[key("sage_attn")] = _SAGE
    order = (("sdpa", "sdpa", "F.scaled_dot_product_attention (attn_mode \"torch\")"),
             ("flash_attn", "flash_attention_2", "the flash-attn package's flash_attn_func / flash_attn_varlen_func (attn_mode \"flash\")"),
             ("sage_attn", "sage", "SageAttention (attn_mode \"sageattn\"), refused for training"),
             ("xformers", "xformers", "xformers.ops.memory_efficient_attention (attn_mode \"xformers\")"),
             ("flash3", "flash_attention_3", "FlashAttention-3's flash_attn_interface (attn_mode \"flash3\")"))
    chosen = [(k, value, what) for k, value, what in order if truthy(flat.get(k))]
    if not chosen:
        r.refused[key("sdpa")] = _NO_ATTENTION
        r.set("attention", "unset", source="default",
              note="none of sdpa / flash_attn / sage_attn / xformers / flash3: trainer_base._load_dit_and_swap raises")
        return
    k, value, what = chosen[0]
    others = [c[0] for c in chosen[1:]]
    note = what + (f"; {', '.join(others)} also set, {k} wins (trainer_base._load_dit_and_swap order)" if others else "")
    if truthy(flat.get("split_attn")):
        note += "; split_attn: one sequence at a time"
    if value == "flash_attention_3" and arch not in (None, "Wan", "Kandinsky 5"):
        note += f"; {arch} has no flash3 path (only Wan and Kandinsky 5 call flash_attn_interface)"
    r.set("attention", value, key=key(k), raw=flat.get(k), note=note)


def _edits(flat: dict, where: dict, r: Reading) -> None:
    anchor = next((where[k] for k in ("mixed_precision", "sdpa", "fp8_base") if k in where), "")
    section = anchor.rpartition(".")[0]

    def place(name: str) -> str:
        if name in where:
            return where[name]
        return f"{section}.{name}" if section else name

    r.edits["precision=fp16"] = {place("mixed_precision"): "fp16"}
    r.edits["precision=bf16"] = {place("mixed_precision"): "bf16"}
    r.edits["precision=fp32"] = {place("mixed_precision"): "no"}
    attention = r.plan.get("attention")
    if attention is not None and attention.value != "sdpa":
        edit: dict[str, Any] = {place("sdpa"): True}
        edit.update({place(k): False for k in ("flash_attn", "sage_attn", "xformers", "flash3") if truthy(flat.get(k))})
        r.edits["attention=sdpa"] = edit
    if truthy(flat.get("cuda_allow_tf32")):
        r.edits["tf32=off"] = {place("cuda_allow_tf32"): False}
    fp8 = r.plan.get("fp8")
    if fp8 is not None and fp8.value is True:
        r.edits["fp8=off"] = {place("fp8_fast"): False}
