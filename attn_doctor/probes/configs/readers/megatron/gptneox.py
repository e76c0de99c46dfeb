"""A GPT-NeoX YAML (EleutherAI/gpt-neox, megatron/neox_arguments/: neox_args.py, arguments.py).

- `precision` ("fp16" | "bfloat16" | "fp32"); where absent, derived from DeepSpeed's blocks in the same
  file: `fp16.enabled` gives fp16, `bf16.enabled` bfloat16 (arguments.py, "derive precision"), else
  fp32. A `precision` that disagrees with an enabled block is refused: "DeepSpeed fp16 field was set
  but precision conflicts" (bf16 likewise). NeoX trains on DeepSpeed: an fp16 or bf16 copy of the
  model, fp32 master weights in the optimizer, dynamic loss scaling for fp16.
- NeoX merges every YAML given on its command line into one config: a file without any precision
  key (a model file beside a setup file) says nothing about precision, and none is assumed.
- `attention_config` ([[["flash"], 32]], expanded per layer): "flash" is flash-attn's kernel (the
  package, >= 2.3 for sliding windows); "global" is NeoX's own attention (torch's matmuls and
  softmax: any GPU), which `fix` writes in its place where flash-attn cannot run.
- `fp32_allreduce`: gradients all-reduced in fp32.
"""

from __future__ import annotations

from ...plan import Reading, get, truthy

# NeoX reads each top-level key with its hyphens as underscores ("attention-config", its own
# configs' spelling, is attention_config): the file is recognised and read so, and said and edited
# as it is written.
HYPHENS_ARE_UNDERSCORES = True
NAME = "gpt-neox"
LABEL = "GPT-NeoX"
FORMATS = ("yaml", "json")
MARKERS = {"pipe_parallel_size": 3, "model_parallel_size": 3, "attention_config": 4, "gpt_j_residual": 3,
           "no_weight_tying": 2, "output_layer_parallelism": 3, "pos_emb": 1, "norm": 1, "precision": 1,
           "fp32_allreduce": 2, "checkpoint_factor": 2}
# NeoX's own argument names (neox_args.py): Megatron-LM and NeMo spell the parallel sizes otherwise.
DISTINCT = ("pipe_parallel_size", "gpt_j_residual", "output_layer_parallelism", "attention_config")

_PRECISIONS = {"fp16": "float16", "bfloat16": "bfloat16", "fp32": "float32"}
_CONFLICT = "DeepSpeed %s field was set but precision conflicts"


def _attention_types(config) -> list[str]:
    """The attention types `attention_config` names ([[["flash"], 32], [["global", "local"], 2]])."""
    types = []
    for item in config if isinstance(config, list) else []:
        names = item[0] if isinstance(item, list) and item else None
        for name in names if isinstance(names, list) else []:
            if isinstance(name, str) and name not in types:
                types.append(name)
    return types


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    r.understood("precision", "fp16", "bf16", "attention_config", "fp32_allreduce", "data_types")
    fp16 = truthy(get(doc, "fp16.enabled")) if isinstance(doc.get("fp16"), dict) else None
    bf16 = truthy(get(doc, "bf16.enabled")) if isinstance(doc.get("bf16"), dict) else None
    raw = doc.get("precision")
    precision = _PRECISIONS.get(str(raw).strip().lower()) if raw is not None else None
    if raw is not None and precision is None:
        r.refused["precision"] = f"precision must be one of fp16, fp32, bfloat16 (neox_args.py), not {raw!r}"
    for block, on, name in (("fp16", fp16, "float16"), ("bf16", bf16, "bfloat16")):
        if on and precision is not None and precision != name:
            r.conflicts[f"precision, {block}.enabled"] = _CONFLICT % block
    if precision is not None:
        r.set("compute_dtype", precision, key="precision", raw=raw)
    elif fp16:
        r.set("compute_dtype", "float16", key="fp16.enabled", raw=True, note="NeoX derives precision fp16 from it")
    elif bf16:
        r.set("compute_dtype", "bfloat16", key="bf16.enabled", raw=True, note="NeoX derives precision bfloat16 from it")
    compute = r.plan.get("compute_dtype")
    if compute is not None and compute.value != "float32":
        r.set("param_dtype", "float32", source="default",
              note="DeepSpeed runs a half copy of the model; the optimizer keeps the fp32 master weights")
        if compute.value == "float16":
            r.set("loss_scaling", True, source="default", note="DeepSpeed's fp16 engine scales the loss (dynamic by default)")
    r.set("distributed", "deepspeed", source="default", note="GPT-NeoX trains on DeepSpeed")
    if truthy(doc.get("fp32_allreduce")):
        r.set("reduce_dtype", "float32", key="fp32_allreduce", raw=doc.get("fp32_allreduce"))
    types = _attention_types(doc.get("attention_config"))
    if "flash" in types:
        r.set("attention", "flash_attention_2", key="attention_config", raw="flash",
              note="NeoX's \"flash\" attention is flash-attn's kernel")
    r.settings = {k: v for k, v in (("precision", raw), ("fp16.enabled", fp16), ("bf16.enabled", bf16)) if v is not None}
    edits = {}
    for intent, value in (("precision=fp16", "fp16"), ("precision=bf16", "bfloat16"), ("precision=fp32", "fp32")):
        edit: dict = {"precision": value}
        if bf16 and value != "bfloat16":
            edit["bf16.enabled"] = False
        if fp16 and value != "fp16":
            edit["fp16.enabled"] = False
        edits[intent] = edit
    if compute is not None:  # a file without precision keys gets no edit: another YAML of the run decides
        r.edits.update(edits)
    if "flash" in types:
        # NeoX's own attention ("global": the attention its configs default to) runs on any GPU
        r.edits["attention=sdpa"] = {"attention_config": _replaced(doc.get("attention_config"), "flash", "global")}
    return r


def _replaced(config, old: str, new: str):
    """attention_config with every `old` type named `new` ([[["flash"], 12]] -> [[["global"], 12]])."""
    if isinstance(config, list):
        return [_replaced(item, old, new) for item in config]
    return new if config == old else config
