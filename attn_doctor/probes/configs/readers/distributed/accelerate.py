"""An `accelerate config` YAML (src/accelerate/commands/config/config_args.py ClusterConfig, the
launcher's precision in commands/launch.py).

`mixed_precision`: no | fp16 | bf16 | fp8; the ACCELERATE_MIXED_PRECISION variable the launcher
exports is what a script's Accelerator() reads. fp8 takes its backend from `fp8_config.backend`
(TE, MSAMP, AO); accelerate's is_fp8_available() only checks that a backend is installed, while fp8
matrix multiplies need compute capability 8.9. FSDP keeps fp32 weights and computes in the mixed
precision dtype (its MixedPrecision policy is built from `mixed_precision`); `downcast_bf16` is for TPUs.
"""

from __future__ import annotations

from ...plan import Reading, dtype_of, truthy

NAME = "accelerate"
LABEL = "accelerate"
FORMATS = ("yaml", "json")
MARKERS = {"compute_environment": 4, "distributed_type": 3, "main_training_function": 3, "downcast_bf16": 3, "num_processes": 2,
           "machine_rank": 2, "num_machines": 2, "rdzv_backend": 2, "same_network": 2, "tpu_env": 2, "dynamo_config": 2,
           "fp8_config": 2, "use_cpu": 1, "fsdp_config": 1, "deepspeed_config": 1, "mixed_precision": 1, "gpu_ids": 1,
           "main_process_port": 1, "enable_cpu_affinity": 2}
DISTINCT = ("compute_environment", "distributed_type", "main_training_function", "downcast_bf16")
_BACKENDS = {"te": "te", "transformer_engine": "te", "msamp": "msamp", "ms-amp": "msamp", "ao": "torchao", "torchao": "torchao"}


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    r.understood("mixed_precision", "fp8_config", "downcast_bf16", "dynamo_config", "fsdp_config", "deepspeed_config",
                 "distributed_type")
    value = doc.get("mixed_precision")
    env = ctx.env.get("ACCELERATE_MIXED_PRECISION") if ctx.env else None
    if env:
        _precision(r, env, source="env", key="ACCELERATE_MIXED_PRECISION")
    elif value is not None:
        _precision(r, value, source="file", key="mixed_precision")
    else:
        r.set("compute_dtype", "float32", source="default", note="accelerate's mixed_precision defaults to no")
    if "compute_dtype" in r.plan:
        r.default("param_dtype", "float32", "accelerate's autocast keeps the weights in fp32")
    fp8 = r.plan.get("fp8")
    if fp8 is not None and fp8.value:
        backend = (doc.get("fp8_config") or {}).get("backend") if isinstance(doc.get("fp8_config"), dict) else None
        if backend:
            r.set("fp8_backend", _BACKENDS.get(str(backend).strip().lower(), str(backend)), key="fp8_config.backend", raw=backend)
        else:
            r.set("fp8_backend", "auto", source="default", note="accelerate picks the first installed: MS-AMP, Transformer Engine, torchao")
    dynamo = doc.get("dynamo_config")
    if isinstance(dynamo, dict) and dynamo.get("dynamo_backend"):
        backend = str(dynamo["dynamo_backend"]).strip().lower()
        r.set("compile", backend != "no", key="dynamo_config.dynamo_backend", raw=dynamo["dynamo_backend"])
    kind = str(doc.get("distributed_type") or "").upper()
    fsdp = doc.get("fsdp_config") if isinstance(doc.get("fsdp_config"), dict) else {}
    if kind == "FSDP":
        version = fsdp.get("fsdp_version")
        r.set("distributed", "fsdp2" if str(version) == "2" else "fsdp", key="distributed_type", raw=doc.get("distributed_type"),
              note="FSDP's MixedPrecision policy comes from mixed_precision")
    elif kind == "DEEPSPEED":
        r.set("distributed", "deepspeed", key="distributed_type", raw=doc.get("distributed_type"),
              note="a deepspeed_config_file's bf16/fp16 blocks decide where it names one")
    r.settings = {k: doc[k] for k in ("mixed_precision", "distributed_type") if k in doc}
    if value is not None:
        r.edits["precision=fp16"] = {"mixed_precision": "fp16"}
        r.edits["precision=fp32"] = {"mixed_precision": "no"}
        r.edits["precision=bf16"] = {"mixed_precision": "bf16"}
        if str(value).strip().lower() == "fp8":
            r.edits["fp8=off"] = {"mixed_precision": "bf16"}
    return r


def _precision(r: Reading, value, source: str, key: str) -> None:
    text = str(value).strip().lower()
    if text == "fp8":
        r.set("compute_dtype", "bfloat16", source=source, key=key, raw=value,
              note="fp8 matrix multiplies, the rest under bf16 autocast")
        r.set("fp8", True, source=source, key=key, raw=value)
    elif truthy(value) is False or text == "no":
        r.set("compute_dtype", "float32", source=source, key=key, raw=value, note="no mixed precision")
    elif dtype_of(text):
        r.set("compute_dtype", dtype_of(text), source=source, key=key, raw=value)
        if dtype_of(text) == "float16":
            r.set("loss_scaling", True, source=source, key=key, note="accelerate's GradScaler")
