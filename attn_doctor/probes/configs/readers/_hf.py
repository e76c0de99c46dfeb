"""What Hugging Face's TrainingArguments make of their precision keys; every framework that hands
them on (LLaMA-Factory, TRL and the alignment handbook, axolotl, ms-swift) reads them through here.

transformers' training_args.py: `bf16` and `fp16` turn on torch.autocast (fp16 with a GradScaler)
over weights loaded in whatever dtype the model was loaded in (fp32 unless the script or the
framework passes a dtype); both default to False. `tf32=True` raises `--tf32 requires Ampere or a
newer GPU arch, cuda>=11 and torch>=1.7` below compute capability 8.0; None leaves torch's default.
"""

from __future__ import annotations

from typing import Any, Optional

from ..plan import Reading, dtype_of, truthy

TF32_NOTE = "transformers' TrainingArguments raises below compute capability 8.0"
# TrainingArguments.__post_init__ (transformers/training_args.py) refuses these pairs on together.
EXCLUSIVE = ((("bf16", "fp16"), "At most one of fp16 and bf16 can be True, but not both"),
             (("bf16_full_eval", "fp16_full_eval"), "At most one of fp16 and bf16 can be True for full eval, but not both"))


def training_arguments(doc: dict, r: Reading, bf16_default: Optional[bool] = False, default_note: str = "",
                       loaded_dtype: Optional[str] = None, loaded_key: Optional[str] = None) -> None:
    """Fill compute_dtype, param_dtype, loss_scaling, tf32 and compile from TrainingArguments' keys.

    bf16_default: what the framework makes of an absent `bf16` (TRL: True unless fp16), with its note.
    loaded_dtype: the dtype the framework loads the weights in (a `torch_dtype` key), when it says."""
    bf16, fp16 = truthy(doc.get("bf16")), truthy(doc.get("fp16"))
    r.exclusive(doc, EXCLUSIVE)
    r.understood("bf16", "fp16", "bf16_full_eval", "fp16_full_eval", "half_precision_backend", "fp16_opt_level",
                 "fp16_backend", "tf32", "torch_compile", "torch_compile_backend", "torch_compile_mode")
    if bf16:
        r.set("compute_dtype", "bfloat16", key="bf16", raw=doc.get("bf16"),
              note="TrainingArguments check bf16 with torch.cuda.is_bf16_supported(), True by emulation on sm70/sm75")
    elif fp16:
        r.set("compute_dtype", "float16", key="fp16", raw=doc.get("fp16"))
        r.set("loss_scaling", True, key="fp16", note="the Trainer's GradScaler")
    elif "bf16" not in doc and bf16_default and not fp16:
        r.set("compute_dtype", "bfloat16", source="default", note=default_note)
    elif "bf16" in doc or "fp16" in doc or bf16_default is not None:
        keys = [k for k in ("bf16", "fp16") if k in doc]
        if keys:
            r.set("compute_dtype", "float32", key=keys[0], raw=doc.get(keys[0]), note="no mixed precision: fp32 matrix multiplies")
        else:
            r.set("compute_dtype", "float32", source="default", note="TrainingArguments: bf16 and fp16 default to False")
    if loaded_dtype:
        r.set("param_dtype", loaded_dtype, key=loaded_key, raw=doc.get(loaded_key) if loaded_key else None,
              note="the weights are loaded in it: with the same autocast dtype, no fp32 master copy")
    elif "compute_dtype" in r.plan:
        r.default("param_dtype", "float32", "the weights are loaded in fp32 unless a dtype is given")
    tf32 = truthy(doc.get("tf32"))
    if tf32 is not None:
        r.set("tf32", tf32, key="tf32", raw=doc.get("tf32"), note=TF32_NOTE if tf32 else None)
    compile_ = truthy(doc.get("torch_compile"))
    if compile_ is not None:
        r.set("compile", compile_, key="torch_compile", raw=doc.get("torch_compile"))


def precision_edits(doc: dict, r: Reading, dtype_keys: tuple[str, ...] = ()) -> None:
    """The remedies in TrainingArguments' keys: fp16 (bf16 off), fp32 (both off), tf32 off. A loaded
    dtype key that says bfloat16 follows the precision, except that fp16 mixed precision keeps the
    trained weights in fp32: the Trainer's GradScaler refuses fp16 ones ("Attempting to unscale FP16
    gradients"), so a full fine-tune loads in float32 (transformers' and TRL's docs: fp16 mixed
    precision over fp32 weights), while adapters (kept in fp32 by PEFT) on a frozen base may keep it
    in float16."""
    def with_dtype(value: str, only_bf16: bool = True) -> dict[str, Any]:
        out = {}
        for key in dtype_keys:
            if dtype_of(doc.get(key)) == "bfloat16" or not only_bf16 and dtype_of(doc.get(key)) in ("float16", "bfloat16"):
                out[key] = value
        return out

    adapters = r.plan.get("adapter") is not None
    fp16: dict[str, Any] = {"fp16": True}
    if "bf16" in doc or r.plan.get("compute_dtype") is not None and r.plan["compute_dtype"].source == "default":
        fp16["bf16"] = False
    for key in ("pure_bf16", "bfloat16"):
        if truthy(doc.get(key)):
            fp16[key] = False
    r.edits["precision=fp16"] = {**fp16, **with_dtype("float16" if adapters else "float32")}
    weights = with_dtype("float32", only_bf16=False)
    if weights:
        r.edits["weights=fp32"] = weights
    fp32: dict[str, Any] = {k: False for k in ("bf16", "fp16", "pure_bf16", "bfloat16") if truthy(doc.get(k))}
    if "bf16" not in fp32 and r.plan.get("compute_dtype") is not None and r.plan["compute_dtype"].source == "default":
        fp32["bf16"] = False
    r.edits["precision=fp32"] = {**fp32, **with_dtype("float32")}
    if truthy(doc.get("bf16")) and truthy(doc.get("fp16")):
        # both on (refused): keeping bf16 is turning fp16 off
        r.edits["precision=bf16"] = {"fp16": False}
    if truthy(doc.get("tf32")):
        r.edits["tf32=off"] = {"tf32": False}
