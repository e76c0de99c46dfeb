"""A torchtitan TOML (`--job.config_file x.toml`, up to v0.2.2; torchtitan/config/job_config.py,
components/quantization/float8.py).

- `[training] mixed_precision_param` ("bfloat16" by default, or "float32"): FSDP's MixedPrecisionPolicy
  (or autocast on one device / DDP) computes in it over fp32 weights; `mixed_precision_reduce` is
  float32. `[training] dtype = "bfloat16"` keeps the weights, gradients and optimizer states in bf16 (no
  fp32 copy). There is no fp16 training.
- fp8: `[model] converters` naming float8 ("float8" to v0.1, "quantize.linear.float8" from v0.2; before
  that `[float8] enable_float8_linear = true`), through torchao; refused below SM89 unless emulated:
  "Failed to swap to Float8Linear because float8 is only supported on SM89 or later."
- `[compile] enable` (`[training] compile` to v0.1). Attention is SDPA unless the `[model] flavor`
  names flex or varlen.
"""

from __future__ import annotations

from ...plan import Reading, truthy

NAME = "torchtitan"
LABEL = "torchtitan"
FORMATS = ("toml",)
MARKERS = {"job": 2, "model": 1, "optimizer": 1, "lr_scheduler": 1, "training": 2, "parallelism": 2, "checkpoint": 1,
           "activation_checkpoint": 2, "float8": 2, "compile": 1, "metrics": 1, "profiling": 1, "experimental": 1,
           "quantize": 1, "comm": 1, "fault_tolerance": 1, "validation": 1, "memory_estimation": 1}
# torchtitan's JobConfig sections and their keys (train.py --job.config_file).
DISTINCT = ("job.dump_folder", "training.mixed_precision_param", "parallelism.data_parallel_shard_degree",
            "parallelism.tensor_parallel_degree", "activation_checkpoint.mode", "job.description", "metrics.log_freq",
            "training.steps", "float8.enable_fsdp_float8_all_gather")


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    training = doc.get("training") if isinstance(doc.get("training"), dict) else {}
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    r.understood("training.mixed_precision_param", "training.mixed_precision_reduce", "training.dtype", "training.compile",
                 "compile", "float8", "quantize", "model.converters", "model.flavor", "checkpoint.export_dtype", "mx")
    pure = training.get("dtype")
    param = training.get("mixed_precision_param")
    if str(pure).lower() == "bfloat16":
        r.set("compute_dtype", "bfloat16", key="[training] dtype", raw=pure)
        r.set("param_dtype", "bfloat16", key="[training] dtype", raw=pure, note="pure bf16: no fp32 copy of the weights")
    elif param is not None:
        value = "bfloat16" if str(param).lower() == "bfloat16" else "float32"
        r.set("compute_dtype", value, key="[training] mixed_precision_param", raw=param,
              note="FSDP's MixedPrecisionPolicy (autocast on one device / DDP)")
    else:
        r.set("compute_dtype", "bfloat16", source="default",
              note="[training] mixed_precision_param defaults to bfloat16 (FSDP's MixedPrecisionPolicy, autocast on one device)")
    r.default("param_dtype", "float32", "the weights stay in fp32 ([training] dtype defaults to float32)")
    if training.get("mixed_precision_reduce"):
        r.set("reduce_dtype", "bfloat16" if str(training["mixed_precision_reduce"]).lower() == "bfloat16" else "float32",
              key="[training] mixed_precision_reduce", raw=training["mixed_precision_reduce"])
    converters = model.get("converters") or []
    converters = [converters] if isinstance(converters, str) else converters if isinstance(converters, list) else []
    float8 = doc.get("float8") if isinstance(doc.get("float8"), dict) else {}
    fp8_converter = next((c for c in converters if isinstance(c, str) and "float8" in c), None)
    if fp8_converter or truthy(float8.get("enable_float8_linear")):
        key = "[model] converters" if fp8_converter else "[float8] enable_float8_linear"
        emulate = truthy(float8.get("emulate")) or truthy(((doc.get("quantize") or {}).get("linear") or {}).get("float8", {}).get("emulate")
                                                          if isinstance(doc.get("quantize"), dict) else None)
        r.set("fp8", "emulated" if emulate else True, key=key, raw=fp8_converter or True,
              note="emulated (no fp8 hardware needed)" if emulate else "torchao's Float8Linear: SM89 or later")
        r.set("fp8_backend", "torchao", source="default", note="torchtitan's float8 converter is torchao's")
    compile_section = doc.get("compile") if isinstance(doc.get("compile"), dict) else {}
    if "enable" in compile_section:
        r.set("compile", bool(truthy(compile_section["enable"])), key="[compile] enable", raw=compile_section["enable"])
    elif "compile" in training:
        r.set("compile", bool(truthy(training["compile"])), key="[training] compile", raw=training["compile"])
    flavor = str(model.get("flavor") or "")
    if "flex" in flavor.lower():
        r.set("attention", "flex_attention", key="[model] flavor", raw=flavor)
    elif "varlen" in flavor.lower():
        r.set("attention", "flash_attention_2", key="[model] flavor", raw=flavor, note="varlen attention (flash's varlen kernel)")
    else:
        r.set("attention", "sdpa", source="default", note="torchtitan's attention is SDPA (cuDNN, flash, math) for this flavor")
    r.set("distributed", "fsdp2", source="default", note="torchtitan shards with FSDP2 where data parallelism is on")
    r.settings = {"mixed_precision_param": param, "dtype": pure}
    r.settings = {k: v for k, v in r.settings.items() if v is not None}
    if fp8_converter:
        r.edits["fp8=off"] = {"model.converters": [c for c in converters if c != fp8_converter]}
    elif truthy(float8.get("enable_float8_linear")):
        r.edits["fp8=off"] = {"float8.enable_float8_linear": False}
    r.edits["precision=fp32"] = {"training.mixed_precision_param": "float32", **({"training.dtype": "float32"} if pure else {})}
    return r
