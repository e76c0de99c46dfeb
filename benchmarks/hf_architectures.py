"""Every architecture the installed transformers ships with a model class, each as a small config
a trace can build: the class a user trains or runs (a causal LM, a seq2seq LM, an image-text model,
a speech model, ... else the base model), from transformers' own default config, scaled down by
rules that keep what the attention path depends on (head dim, grouped-query ratio, sliding windows,
layer types, the vision and audio towers) and shrink what it does not (layers, heads, widths,
experts). No list of architectures is chosen here: the installed release's auto mappings are the
list.

Used by benchmarks/open_world_trace.py and benchmarks/bug_injection.py, and by the test suite's
stratified sample (tests/realenv/test_open_world.py). Standard library plus transformers.
"""

from __future__ import annotations

import copy
import json
import os
import re

# The task heads tried first, in the order a user is most likely to train or run them.
# (an encoder-decoder's whole model before its decoder alone: WhisperForConditionalGeneration, not
# WhisperForCausalLM; a vision-language model before its language model alone)
HEAD_ORDER = ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
              "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
              "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
              "MODEL_FOR_CTC_MAPPING_NAMES", "MODEL_FOR_MASKED_LM_MAPPING_NAMES", "MODEL_MAPPING_NAMES")

LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
              "num_encoder_layers", "num_decoder_layers", "text_layers", "vision_layers", "num_decoder_blocks",
              "num_encoder_blocks")
HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads", "n_heads", "encoder_attention_heads",
             "decoder_attention_heads")
KV_KEYS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num")
WIDTH_KEYS = ("hidden_size", "d_model", "n_embd", "embed_dim", "dim")
FFN_KEYS = ("intermediate_size", "ffn_dim", "d_ff", "n_inner", "encoder_ffn_dim", "decoder_ffn_dim",
            "moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size",
            "ffn_hidden_size", "decoder_intermediate_size", "encoder_intermediate_size")
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts")
TOPK_KEYS = ("num_experts_per_tok", "moe_topk", "top_k", "num_selected_experts", "moe_k")
# per-layer (or cyclic) lists of layer kinds
KIND_KEYS = ("layer_types", "layers_block_type", "block_types")
MAX_HEADS = 4
MAX_EXPERTS = 4


def mappings():
    from transformers.models.auto import modeling_auto

    return {k: v for k, v in vars(modeling_auto).items()
            if k.startswith("MODEL") and k.endswith("MAPPING_NAMES") and isinstance(v, dict)}


def architectures():
    """Every model_type that some auto mapping gives a model class, sorted."""
    return sorted(set().union(*(set(v) for v in mappings().values())))


def model_class_name(model_type, maps=None):
    maps = maps or mappings()
    for name in HEAD_ORDER + tuple(sorted(maps)):
        table = maps.get(name) or {}
        if model_type in table:
            value = table[model_type]
            return value[0] if isinstance(value, (list, tuple)) else value
    return None


def _subconfigs(config):
    import transformers

    base = getattr(transformers, "PreTrainedConfig", None) or transformers.PretrainedConfig
    for key, value in list(vars(config).items()):
        if isinstance(value, base):
            yield key, value


def _configs(config, where="", depth=0):
    """(where, config) for ``config`` and its sub-configs, three levels down, each before its own."""
    yield where, config
    if depth < 3:
        for key, sub in _subconfigs(config):
            yield from _configs(sub, where + key + ".", depth + 1)


def _set(config, key, value, changed, where):
    try:
        old = getattr(config, key)
        setattr(config, key, value)
        if old != value:
            changed.append("%s%s %s->%s" % (where, key, old, value))
    except Exception:  # noqa: BLE001 - a config that computes the attribute
        pass


def _ints(config, keys):
    for k in keys:
        v = vars(config).get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            yield k, v


def _shrink_layers(config, changed, where):
    before = {k: v for k, v in _ints(config, LAYER_KEYS)}
    for k, v in _ints(config, LAYER_KEYS):
        if v > 2:
            _set(config, k, 2, changed, where)
    # every list with one entry per layer (mlp_layer_types, per-layer sizes) follows the count
    counts = {v: vars(config).get(k) for k, v in before.items() if v > 2}
    for key, value in list(vars(config).items()):
        if key in KIND_KEYS or not isinstance(value, list) or len(value) not in counts:
            continue
        _set(config, key, value[:counts[len(value)]], changed, where)
    per_layer = vars(config).get("per_layer_config")
    n = vars(config).get("num_hidden_layers")
    if isinstance(per_layer, dict) and isinstance(n, int):
        kept = {k: v for k, v in per_layer.items() if str(k).isdigit() and int(k) < n}
        _set(config, "per_layer_config", kept, changed, where)
    for key in ("out_features", "out_indices"):
        if vars(config).get(key) is not None and before:
            _set(config, key, None, changed, where)  # a backbone's stages past the layers kept
    for k in ("depths", "encoder_depths", "decoder_depths"):
        v = vars(config).get(k)
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, int) for x in v):
            _set(config, k, type(v)(min(x, 2) for x in v), changed, where)
    n = vars(config).get("num_hidden_layers")
    for key in KIND_KEYS:
        types = vars(config).get(key)
        if not (isinstance(types, list) and isinstance(n, int) and len(types) > n):
            continue
        # keep one layer of each kind (a sliding and a full one, an attention layer of a hybrid): a
        # hybrid cut to its first layers may keep no attention at all
        kinds, keep = [], []
        for i, t in enumerate(types):
            if t not in kinds:
                kinds.append(t)
                keep.append(i)
        while len(keep) < n:
            keep.append(next(i for i in range(len(types)) if i not in keep))
        keep = sorted(keep)
        if len(keep) != n:
            _set(config, "num_hidden_layers", len(keep), changed, where)
            n = len(keep)
        _set(config, key, [types[i] for i in keep], changed, where)
        ids = vars(config).get("hybrid_layer_ids")
        if key == "layers_block_type" and isinstance(ids, list):
            _set(config, "hybrid_layer_ids", [j for j, i in enumerate(keep) if types[i] == "hybrid"], changed, where)
    # attention every `period` layers from `offset`: the kept layers hold one
    for period, offset in (("attn_layer_period", "attn_layer_offset"), ("expert_layer_period", "expert_layer_offset")):
        p, o = vars(config).get(period), vars(config).get(offset)
        if isinstance(n, int) and n > 1 and isinstance(p, int) and isinstance(o, int) and not any(i % p == o for i in range(n)):
            _set(config, period, n, changed, where)
            _set(config, offset, n - 1, changed, where)
    if "attn_layer_indices" in vars(config) and isinstance(n, int):
        idx = vars(config).get("attn_layer_indices")
        if not idx or not any(isinstance(i, int) and i < n for i in idx):
            _set(config, "attn_layer_indices", [n - 1], changed, where)


# A width another config reads (a vision tower's output projected into the text model's hidden size):
# where it equalled a width scaled elsewhere, it takes the same new value, so the two still agree.
_READS_WIDTH = re.compile(r"(?:^|_)(?:hidden_size|hidden_dim|embed_dim|d_model|n_embd|projection_dim|proj_dim|out_dim)$")


def _follow_widths(config, widths, changed):
    """Set every width-like key equal to a scaled width's old value to its new value (``widths``:
    old -> new, only where all configs scaled that old value alike)."""
    for where, cfg in _configs(config):
        for key, value in list(vars(cfg).items()):
            if key in WIDTH_KEYS or not _READS_WIDTH.search(key) or isinstance(value, bool) \
                    or not isinstance(value, int) or value not in widths:
                continue
            _set(cfg, key, widths[value], changed, where)


def _shrink_width(config, changed, where, widths=None):
    heads = next(_ints(config, HEAD_KEYS), None)
    width = next(_ints(config, WIDTH_KEYS), None)
    if heads is None or width is None or heads[1] <= MAX_HEADS:
        return
    hk, h = heads
    wk, d = width
    new_h = MAX_HEADS
    explicit = vars(config).get("head_dim") or vars(config).get("attention_head_dim")
    if not explicit and d % h:
        return
    head_dim = explicit if isinstance(explicit, int) and explicit > 0 else d // h
    new_d = max(64, int(round(d * new_h / float(h) / 64.0)) * 64)
    if not explicit:
        new_d = head_dim * new_h
    if not new_d or new_d < 8:
        return
    ratio = new_d / float(d)
    for k, _ in _ints(config, HEAD_KEYS):
        _set(config, k, new_h, changed, where)
    for k, kv in _ints(config, KV_KEYS):
        _set(config, k, new_h if kv >= h else (2 if kv >= 2 else 1), changed, where)
    if not explicit:
        _set(config, "head_dim", head_dim, changed, where) if "head_dim" in vars(config) else None
    for k, old in _ints(config, WIDTH_KEYS):
        _set(config, k, new_d, changed, where)
        if widths is not None:
            widths.setdefault(old, set()).add(new_d)
    for k, v in _ints(config, FFN_KEYS):
        # multiples of 64: grouped matmul (MoE experts) wants 16-byte aligned rows
        _set(config, k, max(64, int(round(v * ratio / 64.0)) * 64), changed, where)


def _shrink_experts(config, changed, where):
    for k, v in _ints(config, EXPERT_KEYS):
        if v > MAX_EXPERTS:
            _set(config, k, MAX_EXPERTS, changed, where)
    for k, v in _ints(config, TOPK_KEYS):
        if v > 2:
            _set(config, k, 2, changed, where)
    for k in ("n_group", "topk_group"):
        v = vars(config).get(k)
        if isinstance(v, int) and v > 1:
            _set(config, k, 1, changed, where)


def _token_ids(config):
    ids = []
    for cfg in [config] + [sub for _, sub in _subconfigs(config)]:
        for key, value in vars(cfg).items():
            if ("token" in key or key.endswith(("_id", "_index"))) and isinstance(value, int) \
                    and not isinstance(value, bool) and value >= 0:
                ids.append(value)
    return ids


def _vocab_holds_tokens(config, changed):
    """Some defaults name special tokens past their own vocabulary (an image token id of 32000 in a
    32000-token text config): every token id the config names must index its embeddings."""
    top = max(_token_ids(config), default=-1)
    for where, cfg in [("", config)] + [(k + ".", sub) for k, sub in _subconfigs(config)]:
        v = vars(cfg).get("vocab_size")
        if isinstance(v, int) and 0 < v <= top:
            _set(cfg, "vocab_size", top + 1, changed, where)


_PLACEHOLDERS = ("image_token_id", "image_token_index", "video_token_id", "audio_token_id")


def _name_placeholders(config, changed):
    """Some defaults leave a multimodal model's placeholder token unnamed (InstructBLIP's
    image_token_id is None: every checkpoint names one); a model built from them compares ids with
    None. Each such key gets an id of its own past every id the config names."""
    for key in _PLACEHOLDERS:
        if key in vars(config) and vars(config)[key] is None:
            _set(config, key, max(_token_ids(config), default=0) + 1, changed, "")


def scale_down(config, width=True):
    """Scale ``config`` (a transformers config, changed in place, sub-configs too) down; returns the
    changes as "key old->new" strings. width=False keeps widths and heads (layers and experts only)."""
    changed, widths = [], {}
    for where, cfg in _configs(config):
        _shrink_layers(cfg, changed, where)
        _shrink_experts(cfg, changed, where)
        if width:
            _shrink_width(cfg, changed, where, widths)
    _follow_widths(config, {old: new.pop() for old, new in widths.items() if len(new) == 1}, changed)
    _name_placeholders(config, changed)
    _vocab_holds_tokens(config, changed)
    return changed


LEVELS = ("widths", "layers", "none")


def write_config(model_type, folder, width=True):
    """Write a scaled-down config.json of ``model_type`` (its ``architectures`` the picked class) into
    ``folder``, read back by transformers (its validators run there). Scaled as far as the config's
    own validators allow: widths and layers, else layers only, else transformers' defaults (meta
    builds any size). Returns {"model_type", "class", "changed", "level", "folder"} or raises what
    transformers raises for its defaults."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    name = model_class_name(model_type)
    if name is None or getattr(transformers, name, None) is None:
        raise LookupError("transformers %s has no model class for %s" % (transformers.__version__, model_type))
    os.makedirs(folder, exist_ok=True)
    last = None
    for level in (LEVELS if width else LEVELS[1:]):
        try:
            config = CONFIG_MAPPING[model_type]()
            changed = scale_down(config, width=level == "widths") if level != "none" else []
            config.architectures = [name]
            config.save_pretrained(folder)
            transformers.AutoConfig.from_pretrained(folder)
        except Exception as exc:  # noqa: BLE001 - a validator refusing this scaling: the next level
            last = exc
            continue
        return {"model_type": model_type, "class": name, "changed": changed, "level": level, "folder": folder}
    raise last


def describe(folder):
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as fh:
        return json.load(fh)


def copy_config(config):
    return copy.deepcopy(config)
