"""A prime-rl TOML (PrimeIntellect-ai/prime-rl: src/prime_rl/trainer/config.py `ModelConfig`,
src/prime_rl/trainer/model.py).

- The trainer's model settings sit under `[model]` (the SFT trainer's file; the RL launcher's shared
  section) and `[trainer.model]` (the RL launcher's trainer section, which wins): `attn` (transformers'
  attention implementation: flash_attention_2, flash_attention_3, sdpa, ...), `optimization_dtype`
  ("float32" by default, or "bfloat16": the dtype the model is loaded and optimised in, its master
  weights), `reduce_dtype` ("float32" by default: FSDP's gradient reduction).
- The trainer shards the model with FSDP2's `MixedPrecisionPolicy(param_dtype=torch.bfloat16)`: it
  computes in bf16 whatever the file says (no key changes it), so a GPU without native bf16 cannot
  train it. flash_attention_3 needs the flash_attn_3 package ("Flash attention 3 is only supported if
  the flash_attn_3 package is installed").
- `[inference]` configures vLLM's engine (its own dtype, quantization and attention backend), not the
  trainer: left unread, as every reader leaves an inference engine's section.
"""

from __future__ import annotations

from ...plan import Reading, attention_of, get

NAME = "prime-rl"
LABEL = "prime-rl"
FORMATS = ("toml",)
MARKERS = {"orchestrator": 3, "trainer": 1, "inference": 1, "weight_broadcast": 3, "deployment": 2, "model": 1,
           "monitors": 1, "ckpt": 1, "data": 1, "optim": 1, "renderer": 2}
# prime-rl's own sections and keys (config.py): its RL launcher's orchestrator and weight broadcast, its
# model config's dtype names and implementation switch
DISTINCT = ("orchestrator.train", "orchestrator.renderer", "weight_broadcast", "deployment.num_train_gpus",
            "deployment.num_train_nodes", "model.optimization_dtype", "trainer.model.optimization_dtype",
            "trainer.model.impl", "model.vlm.vision_encoder_attr")

_DTYPES = ("bfloat16", "float32")


def _sections(doc: dict) -> list[tuple[str, dict]]:
    """The model sections the trainer reads, the one that wins first."""
    out = []
    for prefix in ("trainer.model", "model"):
        section = get(doc, prefix)
        if isinstance(section, dict):
            out.append((prefix, section))
    return out


def _first(sections, key):
    for prefix, section in sections:
        if key in section:
            return f"{prefix}.{key}", section[key]
    return None, None


def _dtype(r: Reading, sections, name: str):
    """(key, raw value, the dtype) of one of ModelConfig's dtype literals; a value it refuses is said
    as refused, with no dtype."""
    key, raw = _first(sections, name)
    value = str(raw).strip().lower() if raw is not None else None
    if value is not None and value not in _DTYPES:
        r.refused[key] = f"{name} must be 'bfloat16' or 'float32' (prime-rl's ModelConfig), not {raw!r}"
        value = None
    return key, raw, value


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    sections = _sections(doc)
    for prefix, _ in sections:
        r.understood(f"{prefix}.attn", f"{prefix}.optimization_dtype", f"{prefix}.reduce_dtype", f"{prefix}.impl")
    r.set("compute_dtype", "bfloat16", source="default",
          note="prime-rl's FSDP2 MixedPrecisionPolicy computes in bf16 (param_dtype=torch.bfloat16); no key changes it")
    key, optimization, value = _dtype(r, sections, "optimization_dtype")
    if value is not None:
        r.set("param_dtype", value, key=key, raw=optimization,
              note="the weights the optimizer updates" + ("" if value == "float32" else ": no fp32 master copy"))
    else:
        r.default("param_dtype", "float32", "optimization_dtype defaults to float32: fp32 master weights")
    key, raw, value = _dtype(r, sections, "reduce_dtype")
    if value is not None:
        r.set("reduce_dtype", value, key=key, raw=raw)
    attn_key, attn_raw = _first(sections, "attn")
    attention = attention_of(attn_raw)
    if attention is not None and attention != "auto":
        r.set("attention", attention, key=attn_key, raw=attn_raw)
    elif attn_raw is not None:
        r.read.discard(attn_key)  # a value the doctor has no name for (fa4, auto): said not understood
    r.set("distributed", "fsdp2", source="default", note="prime-rl's trainer shards with FSDP2")
    r.settings = {k: v for k, v in (("attn", attn_raw), ("optimization_dtype", optimization)) if v is not None}
    if attn_key:
        r.edits["attention=sdpa"] = {attn_key: "sdpa"}
    return r
