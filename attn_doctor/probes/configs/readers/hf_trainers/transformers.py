"""A model's config.json, as transformers reads it (configuration_utils.py).

`torch_dtype` (`dtype` from transformers 4.56) is the dtype the weights were saved in, and what
from_pretrained(dtype="auto") loads — the default from transformers 5; `attn_implementation`
(saved as `_attn_implementation` by some versions) is used when from_pretrained is not given one.
"""

from __future__ import annotations

from ... import shapes
from ...plan import Reading, attention_of, dtype_of

NAME = "transformers"
LABEL = "a model's config.json"
FORMATS = ("json",)
MARKERS = {"architectures": 3, "transformers_version": 3, "num_hidden_layers": 2, "num_attention_heads": 2, "model_type": 1,
           "hidden_size": 1, "vocab_size": 1, "torch_dtype": 1, "max_position_embeddings": 1, "text_config": 1, "rope_theta": 1}
DISTINCT = ("architectures", "transformers_version")
_SHAPE_KEYS = ("num_attention_heads", "hidden_size", "head_dim", "text_config", "num_hidden_layers")


def distinct(doc: dict) -> list:
    """A model config as transformers saves it: a top-level model_type beside the model's shape keys
    (a training config names its model by a path or an id, not by its widths)."""
    if isinstance(doc.get("model_type"), str) and sum(k in doc for k in _SHAPE_KEYS) >= 2:
        return ["model_type with %s" % ", ".join(k for k in _SHAPE_KEYS if k in doc)]
    return []


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    r.understood("torch_dtype", "dtype", "attn_implementation", "_attn_implementation", "text_config", "vision_config")
    key = next((k for k in ("dtype", "torch_dtype") if doc.get(k) is not None), None)
    if key:
        dtype = dtype_of(doc[key])
        if dtype:
            r.set("param_dtype", dtype, key=key, raw=doc[key], note="what from_pretrained(dtype=\"auto\") loads (transformers 5's default)")
    impl_key = next((k for k in ("attn_implementation", "_attn_implementation") if doc.get(k) is not None), None)
    if impl_key:
        r.set("attention", attention_of(doc[impl_key]) or str(doc[impl_key]), key=impl_key, raw=doc[impl_key])
    r.settings = {k.lstrip("_"): doc[k] for k in ("torch_dtype", "dtype", "attn_implementation", "_attn_implementation")
                  if doc.get(k) is not None}
    head_dim = shapes.head_dim_of(doc)
    if head_dim:
        r.settings["head_dim"] = head_dim
    # no precision edit: the checkpoint's dtype is what its weights were saved in, not how a job trains
    # (float16 there would load pure fp16 weights, which a GradScaler refuses); the training precision
    # is the trainer's setting, and the dtype the job loads the weights in its from_pretrained call
    if impl_key:
        keys = [k for k in ("attn_implementation", "_attn_implementation") if k in doc]
        r.edits["attention=sdpa"] = {k: "sdpa" for k in keys}
    return r
