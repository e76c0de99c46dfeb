"""Generic bug injection: every single-line mutation of benchmarks/mutations.py (insert_cast,
drop_upcast, change_dtype_arg, widen_fill, bool_mask_to_numbers, drop_contiguous) at the sites near
attention of real installed model files (transformers, timm, diffusers, open_clip, torchvision,
x-transformers), loaded in place of the original module, each judged twice:

- observable by plain torch: the mutant's plain CPU forward in bf16 / fp16 raises where the
  healthy one does not; or gives inf/NaN where the healthy one does not; or its error against the
  float64 reference (the healthy model ``.double()`` on float64 inputs, the same weights) is more
  than ERR_FACTOR times the healthy half model's and above the dtype's floor; or its output differs
  from the healthy half model's by more than DIFF_FACTOR times the healthy half noise (a masking
  change). A ``drop_contiguous`` that changes none of these is "gpu-only" (a kernel choice), not
  counted as observable on CPU. A mutant whose plain forward raises because the mutation is
  meaningless there (``.float()`` on a non-tensor) is "invalid" and not counted at all; one whose
  line never runs in the healthy build and forward is "not_reached" and not traced.
- named by the doctor: ``trace`` (in process, on a model object: device meta, then cpu) has a
  finding that names the changed line anywhere (the sink, the chain, operand origins, the line to
  change, mask makers, the patch's lines, a file:line in its message).

The healthy twin (the unchanged source, loaded the same way from a copy) is traced too: its error
and warning findings are false alarms, counted per target.

A target is (codebase, the file to mutate, the module that file is, a factory returning a float32
CPU (model, inputs) and taking a ``dtype`` to build in, as the library builds it). TARGETS below is
the list; the split by codebase ("build" / "held") is benchmarks/zoo.py's SPLIT where that file
exists (transformers is "build"; any codebase it does not name is "held"). Targets of the zoo's
libraries run in /work/venvs/zoo/bin/python (PYTHONS), the rest in .venv-dev; a target's model
weights are re-drawn (seeded, unit-scale scores) so attention is not uniform.

How a run goes: phase 1 runs each healthy twin (its half error against float64, its trace, the
lines of the file that run); phase 2 runs the reached mutations (all, or --sample N per target and
kind, drawn per target with --seed), one job per mutation (both dtypes, both devices) in --workers
long-lived processes (benchmarks/worker_pool.py) with a per-job --timeout. The doctor traced is a
git export of --doctor (HEAD by default: other people's uncommitted edits in the tree are not used).

    python benchmarks/inject_generic.py --out gen.jsonl                        # every reached mutation
    python benchmarks/inject_generic.py --sample 10 --seed 0 --out gen.jsonl   # <= 10 per target x kind
    python benchmarks/inject_generic.py --only transformers/llama,timm --out x.jsonl   # targets or codebases
    python benchmarks/inject_generic.py --split held --out held.jsonl          # the held-out codebases
    python benchmarks/inject_generic.py --only transformers/llama --list       # a target's mutations
    python benchmarks/inject_generic.py --table gen.jsonl [--split held]       # tables of a finished run
    python benchmarks/inject_generic.py --misses gen.jsonl                     # observable, not named
"""

from __future__ import annotations

import argparse
import collections
import copy
import hashlib
import importlib
import inspect
import json
import os
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import mutations as M  # noqa: E402

TIMEOUT = int(os.environ.get("INJECT_GENERIC_TIMEOUT", "180"))
DTYPES = ("bf16", "fp16")
TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}
ERR_FACTOR = 2.0      # the mutant's error against float64 over the healthy half model's
DIFF_FACTOR = 3.0     # the mutant's difference from the healthy half output, over the healthy error
FLOOR = {"bf16": 4e-3, "fp16": 5e-4}  # relative errors below these are half noise whatever the ratio
DEVICES = ("meta", "cpu")
# INJECT_PYTHON_DEV / INJECT_PYTHON_ZOO name other interpreters (CI's sample runs both in one venv)
PYTHONS = {"dev": os.environ.get("INJECT_PYTHON_DEV") or os.path.join(REPO, ".venv-dev", "bin", "python"),
           "zoo": os.environ.get("INJECT_PYTHON_ZOO") or "/work/venvs/zoo/bin/python"}


@dataclass(frozen=True)
class Target:
    codebase: str                 # the library whose code it is (the split is by codebase)
    name: str                     # unique: codebase/what
    module: str                   # the importable module that the mutated file is
    factory: str                  # MODULE:FUNCTION, returning (model, inputs) in float32 on CPU; takes dtype=
    python: str = "dev"           # which interpreter runs it (PYTHONS)
    note: str = ""
    kwargs: dict = field(default_factory=dict, hash=False, compare=False)


# ---------------------------------------------------------------- factories (transformers, small configs)

SEQ = 96


def _ids(n=SEQ, vocab=128, batch=2, seed=1):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (batch, n), generator=g)


def _pad_mask(ids, pad=12):
    """Right padding on the second row (no query row sees no key, causal or not)."""
    import torch

    mask = torch.ones_like(ids)
    mask[1, -pad:] = 0
    return mask


def _hf_build(cls_path, config, dtype):
    import torch

    module, _, cls = cls_path.rpartition(".")
    klass = getattr(importlib.import_module(module), cls)
    if dtype:
        return klass._from_config(config, dtype=getattr(torch, dtype)).eval()
    return klass._from_config(config).eval()


def hf_llama(dtype=None, impl="sdpa", rope=None, padded=True):
    import transformers

    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=128, max_position_embeddings=4096,
                                   attention_dropout=0.0)
    if rope:
        cfg.rope_parameters = dict(cfg.rope_parameters, **rope)
    cfg._attn_implementation = impl
    model = _hf_build("transformers.models.llama.modeling_llama.LlamaForCausalLM", cfg, dtype)
    ids = _ids()
    return model, ({"input_ids": ids, "attention_mask": _pad_mask(ids)} if padded else {"input_ids": ids})


def hf_llama_eager(dtype=None):
    return hf_llama(dtype, impl="eager")


def hf_llama_yarn(dtype=None):
    return hf_llama(dtype, rope={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024})


def hf_gpt2(dtype=None):
    import transformers

    cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=512,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    cfg._attn_implementation = "eager"
    model = _hf_build("transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel", cfg, dtype)
    ids = _ids()
    return model, {"input_ids": ids, "attention_mask": _pad_mask(ids)}


def hf_t5(dtype=None):
    import transformers

    cfg = transformers.T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
                                vocab_size=128, dropout_rate=0.0, relative_attention_num_buckets=32)
    cfg._attn_implementation = "eager"
    model = _hf_build("transformers.models.t5.modeling_t5.T5ForConditionalGeneration", cfg, dtype)
    ids = _ids(64)
    return model, {"input_ids": ids, "attention_mask": _pad_mask(ids), "decoder_input_ids": _ids(32, seed=2)}


def hf_whisper(dtype=None):
    import torch
    import transformers

    cfg = transformers.WhisperConfig(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                     vocab_size=128, num_mel_bins=16, max_source_positions=48,
                                     max_target_positions=64, dropout=0.0, attention_dropout=0.0,
                                     pad_token_id=1, bos_token_id=2, eos_token_id=2, decoder_start_token_id=2)
    cfg._attn_implementation = "sdpa"
    model = _hf_build("transformers.models.whisper.modeling_whisper.WhisperForConditionalGeneration", cfg, dtype)
    g = torch.Generator().manual_seed(3)
    feats = torch.randn(2, 16, 96, generator=g)
    return model, {"input_features": feats, "decoder_input_ids": _ids(24, seed=2)}


def hf_vit(dtype=None):
    import torch
    import transformers

    cfg = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                 image_size=64, patch_size=8, num_channels=3, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0, num_labels=10)
    cfg._attn_implementation = "sdpa"
    model = _hf_build("transformers.models.vit.modeling_vit.ViTForImageClassification", cfg, dtype)
    g = torch.Generator().manual_seed(4)
    return model, {"pixel_values": torch.randn(2, 3, 64, 64, generator=g)}


def hf_bert(dtype=None):
    import transformers

    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                  vocab_size=128, max_position_embeddings=512, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0)
    cfg._attn_implementation = "eager"
    model = _hf_build("transformers.models.bert.modeling_bert.BertModel", cfg, dtype)
    ids = _ids()
    return model, {"input_ids": ids, "attention_mask": _pad_mask(ids)}


# ---------------------------------------------------------------- factories (the zoo's libraries)

def _image(size=64, batch=2, seed=5):
    import torch

    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))


def _cast(model, dtype):
    import torch

    return model.to(getattr(torch, dtype)) if dtype else model


def timm_vit(dtype=None):
    import timm.models.vision_transformer as vt

    model = vt.VisionTransformer(img_size=64, patch_size=8, embed_dim=64, depth=2, num_heads=4, num_classes=10,
                                 qk_norm=True)
    return _cast(model.eval(), dtype), (_image(),)


def timm_eva(dtype=None):
    import timm.models.eva as eva

    model = eva.Eva(img_size=64, patch_size=8, embed_dim=64, depth=2, num_heads=4, num_classes=10, use_rot_pos_emb=True,
                    ref_feat_shape=(8, 8), qkv_fused=False, swiglu_mlp=True, scale_mlp=True)
    return _cast(model.eval(), dtype), (_image(),)


def timm_swin(dtype=None):
    import timm.models.swin_transformer as sw

    model = sw.SwinTransformer(img_size=64, patch_size=4, window_size=4, embed_dim=32, depths=(2, 2),
                               num_heads=(2, 4), num_classes=10)
    return _cast(model.eval(), dtype), (_image(),)


def diffusers_attn(dtype=None):
    """diffusers' Attention with its default processor (SDPA), self-attention with a padding mask,
    as a UNet block runs it."""
    import torch
    from diffusers.models.attention_processor import Attention

    model = Attention(query_dim=64, heads=4, dim_head=16, bias=True, qk_norm="layer_norm")
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 96, 64, generator=g)
    keep = torch.ones(2, 96)
    keep[1, -12:] = 0
    # diffusers' processors take an additive mask (UNet2DConditionModel makes it so from a 0/1 one)
    mask = (1.0 - keep) * -10000.0
    return _cast(model.eval(), dtype), ((x,), {"attention_mask": mask})


def diffusers_unet(dtype=None):
    """A tiny UNet2DConditionModel: timestep embeddings, cross-attention through attention_processor."""
    import torch
    from diffusers import UNet2DConditionModel

    model = UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                                 block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                 attention_head_dim=8, norm_num_groups=8)
    g = torch.Generator().manual_seed(7)
    inputs = ((torch.randn(2, 4, 16, 16, generator=g), torch.tensor([10.0, 700.0])),
              {"encoder_hidden_states": torch.randn(2, 12, 32, generator=g)})
    return _cast(model.eval(), dtype), inputs


def diffusers_flux(dtype=None):
    """A tiny FluxTransformer2DModel: rotary positions (embeddings.py), timestep tables, joint attention."""
    import torch
    from diffusers import FluxTransformer2DModel

    model = FluxTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                   attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                   pooled_projection_dim=32, axes_dims_rope=(4, 6, 6))
    g = torch.Generator().manual_seed(8)
    n_img, n_txt = 64, 12
    img_ids = torch.zeros(n_img, 3)
    img_ids[:, 1] = torch.arange(n_img) // 8
    img_ids[:, 2] = torch.arange(n_img) % 8
    inputs = ((), {"hidden_states": torch.randn(1, n_img, 16, generator=g),
                   "encoder_hidden_states": torch.randn(1, n_txt, 32, generator=g),
                   "pooled_projections": torch.randn(1, 32, generator=g), "timestep": torch.tensor([0.5]),
                   "img_ids": img_ids, "txt_ids": torch.zeros(n_txt, 3), "return_dict": False})
    return _cast(model.eval(), dtype), inputs


def open_clip_text(dtype=None):
    import torch
    from open_clip.transformer import TextTransformer

    model = TextTransformer(context_length=64, vocab_size=128, width=64, heads=4, layers=2, output_dim=32)
    return _cast(model.eval(), dtype), (_ids(64, 128).clamp(max=127),)


def open_clip_vision(dtype=None):
    from open_clip.transformer import VisionTransformer

    model = VisionTransformer(image_size=64, patch_size=8, width=64, layers=2, heads=4, mlp_ratio=2.0, output_dim=32)
    return _cast(model.eval(), dtype), (_image(),)


def tv_vit(dtype=None):
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(image_size=64, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
                              num_classes=10)
    return _cast(model.eval(), dtype), (_image(),)


def tv_swin(dtype=None):
    from torchvision.models.swin_transformer import SwinTransformer

    model = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                            num_classes=10)
    return _cast(model.eval(), dtype), (_image(),)


def xt_decoder(dtype=None):
    from x_transformers import Decoder, TransformerWrapper

    model = TransformerWrapper(num_tokens=128, max_seq_len=256,
                               attn_layers=Decoder(dim=64, depth=2, heads=4, rotary_pos_emb=True, attn_qk_norm=False))
    ids = _ids()
    return _cast(model.eval(), dtype), (ids,)  # (a padding mask: einx makes the masked output float32)


def xt_encoder_alibi(dtype=None):
    from x_transformers import Encoder, TransformerWrapper

    model = TransformerWrapper(num_tokens=128, max_seq_len=256, use_abs_pos_emb=False,
                               attn_layers=Encoder(dim=64, depth=2, heads=4, alibi_pos_bias=True, alibi_num_heads=2))
    ids = _ids()
    return _cast(model.eval(), dtype), (ids,)  # (a padding mask: einx makes the masked output float32)


def vitp_vit(dtype=None):
    from vit_pytorch import ViT

    model = ViT(image_size=64, patch_size=8, num_classes=10, dim=64, depth=2, heads=4, mlp_dim=128, dim_head=16)
    return _cast(model.eval(), dtype), (_image(),)


_T = "inject_generic:"
TARGETS = (
    Target("transformers", "transformers/llama", "transformers.models.llama.modeling_llama", _T + "hf_llama"),
    Target("transformers", "transformers/llama-eager", "transformers.models.llama.modeling_llama",
           _T + "hf_llama_eager"),
    Target("transformers", "transformers/masking_utils-sdpa", "transformers.masking_utils", _T + "hf_llama"),
    Target("transformers", "transformers/masking_utils-eager", "transformers.masking_utils", _T + "hf_llama_eager"),
    Target("transformers", "transformers/sdpa_attention", "transformers.integrations.sdpa_attention", _T + "hf_llama"),
    Target("transformers", "transformers/rope_utils-yarn", "transformers.modeling_rope_utils", _T + "hf_llama_yarn"),
    Target("transformers", "transformers/gpt2", "transformers.models.gpt2.modeling_gpt2", _T + "hf_gpt2"),
    Target("transformers", "transformers/t5", "transformers.models.t5.modeling_t5", _T + "hf_t5"),
    Target("transformers", "transformers/whisper", "transformers.models.whisper.modeling_whisper", _T + "hf_whisper"),
    Target("transformers", "transformers/vit", "transformers.models.vit.modeling_vit", _T + "hf_vit"),
    Target("transformers", "transformers/bert", "transformers.models.bert.modeling_bert", _T + "hf_bert"),
    Target("timm", "timm/vision_transformer", "timm.models.vision_transformer", _T + "timm_vit", "zoo"),
    Target("timm", "timm/layers.attention", "timm.layers.attention", _T + "timm_vit", "zoo"),
    Target("timm", "timm/eva", "timm.models.eva", _T + "timm_eva", "zoo"),
    Target("timm", "timm/layers.pos_embed_sincos", "timm.layers.pos_embed_sincos", _T + "timm_eva", "zoo"),
    Target("timm", "timm/swin_transformer", "timm.models.swin_transformer", _T + "timm_swin", "zoo"),
    Target("diffusers", "diffusers/attention_processor", "diffusers.models.attention_processor",
           _T + "diffusers_attn", "zoo"),
    Target("diffusers", "diffusers/attention_processor-unet", "diffusers.models.attention_processor",
           _T + "diffusers_unet", "zoo"),
    Target("diffusers", "diffusers/embeddings-unet", "diffusers.models.embeddings", _T + "diffusers_unet", "zoo"),
    Target("diffusers", "diffusers/embeddings-flux", "diffusers.models.embeddings", _T + "diffusers_flux", "zoo"),
    Target("diffusers", "diffusers/transformer_flux", "diffusers.models.transformers.transformer_flux",
           _T + "diffusers_flux", "zoo"),
    Target("open_clip", "open_clip/transformer-text", "open_clip.transformer", _T + "open_clip_text", "zoo"),
    Target("open_clip", "open_clip/transformer-vision", "open_clip.transformer", _T + "open_clip_vision", "zoo"),
    Target("torchvision", "torchvision/vision_transformer", "torchvision.models.vision_transformer", _T + "tv_vit",
           "zoo"),
    Target("torchvision", "torchvision/swin_transformer", "torchvision.models.swin_transformer", _T + "tv_swin",
           "zoo"),
    Target("x_transformers", "x_transformers/decoder-rotary", "x_transformers.x_transformers", _T + "xt_decoder",
           "zoo"),
    Target("x_transformers", "x_transformers/encoder-alibi", "x_transformers.x_transformers",
           _T + "xt_encoder_alibi", "zoo"),
    Target("x_transformers", "x_transformers/attend", "x_transformers.attend", _T + "xt_decoder", "zoo"),
    Target("vit_pytorch", "vit_pytorch/vit", "vit_pytorch.vit", _T + "vitp_vit", "zoo"),
)
BY_NAME = {t.name: t for t in TARGETS}


def split_of():
    """{codebase: "build" | "held"}: benchmarks/zoo.py's SPLIT where it exists; transformers, on
    which the doctor was developed, is "build"."""
    out = {"transformers": "build"}
    try:
        import zoo  # noqa: F401

        split = getattr(sys.modules["zoo"], "SPLIT", None) or {}
    except Exception:  # noqa: BLE001
        split = {}
    if isinstance(split, dict):
        for k, v in split.items():
            if isinstance(v, str):
                out[k] = v
            elif isinstance(v, (list, tuple, set)):  # {"build": [codebases], "held": [...]}
                for c in v:
                    out[c] = k
    return out


# ---------------------------------------------------------------- loading a source in place of its module

_PRISTINE = {}   # module name -> its namespace as first imported
_CURRENT = {}    # module name -> its namespace as last loaded


def _swappable(obj, modname):
    if isinstance(obj, (type,)) or inspect.isfunction(obj):
        return getattr(obj, "__module__", None) == modname
    return getattr(type(obj), "__module__", None) == modname and not isinstance(obj, (str, bytes, int, float))


_DEFAULTS = {}   # module name -> (len(sys.modules) when scanned, {id(function): function})
_LOCATIONS = {}  # module name -> (len(sys.modules) when scanned, {(id(dict), key): dict})


def _lookup(swap, v):
    new = swap.get(id(v))
    if new is None and inspect.isfunction(v) and getattr(v, "__attn_doctor_wrapper__", False):
        # the doctor's wrapper of an old function (a trace wraps transformers' attention registry and
        # leaves it): the new function itself, which the next trace wraps again
        new = swap.get(id(_doctor_original(v)))
    return new


def _containers(skip):
    """Every plain dict that may hold a reference to a module's objects: each module's namespace, its
    dicts, its classes' dicts and its instances' dicts (registries, interfaces)."""
    for name, mod in list(sys.modules.items()):
        if mod is None or name == skip:
            continue
        d = getattr(mod, "__dict__", None)
        if type(d) is not dict:
            continue
        yield d
        for v in list(d.values()):
            if type(v) is dict:  # a plain dict only: a lazy mapping (transformers' auto maps) imports on reading
                yield v
            elif isinstance(v, type):
                for cv in list(v.__dict__.values()):
                    if type(cv) is dict:
                        yield cv
            elif not isinstance(v, type(sys)) and not inspect.isroutine(v) and _has_dict(v):
                inner = object.__getattribute__(v, "__dict__")
                if type(inner) is dict:
                    for cv in list(inner.values()):
                        if type(cv) is dict:
                            yield cv


def _rebind(swap, skip):
    """Point every module attribute (and every dict one level down: registries, interfaces) that holds
    an old object at its new one. The places found are remembered per module and scanned again only
    when modules were imported since."""
    if not swap:
        return
    seen_n, places = _LOCATIONS.get(skip, (-1, {}))
    if seen_n != len(sys.modules):
        for d in _containers(skip):
            for k, v in list(d.items()):
                if _lookup(swap, v) is not None:
                    places[id(d), k] = d
        _LOCATIONS[skip] = (len(sys.modules), places)
    for (_, k), d in list(places.items()):
        v = d.get(k)
        new = _lookup(swap, v) if v is not None else None
        if new is not None:
            d[k] = new
    # default arguments that hold a class of the module (timm's Block(attn_layer=Attention))
    seen_n, fns = _DEFAULTS.get(skip, (-1, {}))
    if seen_n != len(sys.modules):
        for d in _containers(skip):
            for v in list(d.values()):
                for fn in ([v] if inspect.isfunction(v) else list(vars(v).values()) if isinstance(v, type) else []):
                    fn = getattr(fn, "__func__", fn)
                    if inspect.isfunction(fn) and (
                            any(_lookup(swap, x) is not None for x in fn.__defaults__ or ()) or
                            any(_lookup(swap, x) is not None for x in (fn.__kwdefaults__ or {}).values())):
                        fns[id(fn)] = fn
        _DEFAULTS[skip] = (len(sys.modules), fns)
    for fn in fns.values():
        if fn.__defaults__:
            fn.__defaults__ = tuple(_lookup(swap, x) or x for x in fn.__defaults__)
        if fn.__kwdefaults__:
            fn.__kwdefaults__ = {k: _lookup(swap, x) or x for k, x in fn.__kwdefaults__.items()}


def _doctor_original(fn):
    """The function an attn-doctor sink wrapper calls (through transformers' registry shim)."""
    for _ in range(6):
        if getattr(fn, "__attn_doctor_wrapper__", False):
            fn = fn.__wrapped__
        elif inspect.isfunction(fn) and fn.__kwdefaults__ and "_fn" in fn.__kwdefaults__:
            fn = fn.__kwdefaults__["_fn"]
        else:
            break
    return fn


def _has_dict(obj):
    try:
        object.__getattribute__(obj, "__dict__")
        return True
    except Exception:  # noqa: BLE001
        return False


def _unregister(modname):
    """Registries that refuse a name registered twice (torchvision's register_model): the module's
    entries go, its code registers them again."""
    api = sys.modules.get("torchvision.models._api")
    table = getattr(api, "BUILTIN_MODELS", None)
    if isinstance(table, dict):
        for key, fn in list(table.items()):
            if getattr(fn, "__module__", None) == modname:
                del table[key]


def load_in_place(modname, path, source=None):
    """Run ``source`` (the text of ``path``, compiled with that file name) in the namespace of the
    already imported module ``modname``, as that module; every other module's reference to its
    classes and functions (``from .x import Y``, registries) is pointed at the new ones. Relative
    imports resolve as the original's: the namespace keeps its __name__, __package__ and __spec__."""
    mod = importlib.import_module(modname)
    ns = mod.__dict__
    pristine = _PRISTINE.setdefault(modname, dict(ns))
    before = _CURRENT.get(modname, pristine)
    if source is None:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    code = compile(source, path, "exec")
    _unregister(modname)
    ns.clear()
    ns.update(pristine)
    exec(code, ns)  # noqa: S102 - the benchmark's own copy of an installed file
    after = dict(ns)
    swap = {}
    for k, old in before.items():
        new = after.get(k)
        if new is not None and new is not old and _swappable(old, modname):
            swap[id(old)] = new
    _rebind(swap, modname)
    _CURRENT[modname] = after
    return mod


def restore(modname):
    if modname not in _PRISTINE:
        return
    mod = sys.modules[modname]
    ns = mod.__dict__
    before = _CURRENT.get(modname, _PRISTINE[modname])
    _unregister(modname)
    ns.clear()
    ns.update(_PRISTINE[modname])
    swap = {id(v): _PRISTINE[modname][k] for k, v in before.items()
            if k in _PRISTINE[modname] and _PRISTINE[modname][k] is not v and _swappable(v, modname)}
    _rebind(swap, modname)
    api = sys.modules.get("torchvision.models._api")
    if isinstance(getattr(api, "BUILTIN_MODELS", None), dict):
        for k, v in _PRISTINE[modname].items():
            if inspect.isfunction(v) and v.__module__ == modname and k not in api.BUILTIN_MODELS and \
                    hasattr(sys.modules.get("torchvision.models"), k):
                api.BUILTIN_MODELS[k] = v
    _CURRENT[modname] = dict(_PRISTINE[modname])


# ---------------------------------------------------------------- plain torch: building, running, comparing

def _factory(spec):
    module, _, fn = spec.rpartition(":")
    return getattr(importlib.import_module(module), fn)


def _normalize(inputs):
    import torch

    if inputs is None:
        return (), {}
    if isinstance(inputs, torch.Tensor):
        return (inputs,), {}
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, tuple) and len(inputs) == 2 and isinstance(inputs[0], (tuple, list)) and \
            isinstance(inputs[1], dict):
        return tuple(inputs[0]), dict(inputs[1])
    return tuple(inputs), {}


def _map_inputs(inputs, dtype):
    import torch

    def conv(x):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x.to(dtype)
        if isinstance(x, (list, tuple)):
            return type(x)(conv(v) for v in x)
        if isinstance(x, dict):
            return {k: conv(v) for k, v in x.items()}
        return x

    args, kwargs = inputs
    return conv(tuple(args)), conv(dict(kwargs))


def _reinit(model, seed=0, gain=1.5):
    """Weights at which attention is not uniform (each 2-D weight N(0, gain^2 / fan_in): scores of unit
    order), seeded; norm scales near 1, biases small."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() >= 2:
                fan_in = max(1, p[0].numel())
                p.copy_(torch.randn(p.shape, generator=g) * (gain / fan_in ** 0.5))
            elif name.endswith("bias") or "bias" in name.rsplit(".", 1)[-1]:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            else:
                p.copy_(1.0 + torch.randn(p.shape, generator=g) * 0.1 if bool((p == 1).all()) else
                        p + torch.randn(p.shape, generator=g) * 0.1 * (p.abs().mean() + 1e-3))


def _load_params(model, params):
    import torch

    missing = 0
    with torch.no_grad():
        for name, p in model.named_parameters():
            src = params.get(name)
            if src is None or src.shape != p.shape:
                missing += 1
                continue
            p.copy_(src)
    return missing


def _build(target, dtype):
    """(model, inputs as (args, kwargs)) from the target's factory, in ``dtype`` (None: float32)."""
    import torch

    fn = _factory(target.factory)
    torch.manual_seed(0)
    takes_dtype = "dtype" in inspect.signature(fn).parameters
    result = fn(dtype=TORCH_DTYPE.get(dtype, dtype), **target.kwargs) if (takes_dtype and dtype) else \
        fn(**target.kwargs)
    model, inputs = result if isinstance(result, (tuple, list)) else (result, None)
    if dtype and not takes_dtype:
        model = model.to(getattr(torch, TORCH_DTYPE[dtype]))
    return model.eval(), _normalize(inputs)


def _floats(out):
    """The floating tensors of a model's output, in a fixed order."""
    import torch

    found = []

    def walk(x, depth=0):
        if depth > 4:
            return
        if isinstance(x, torch.Tensor):
            if x.is_floating_point():
                found.append(x)
        elif isinstance(x, dict):
            for k in sorted(x, key=str):
                walk(x[k], depth + 1)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v, depth + 1)
        elif hasattr(x, "to_tuple"):
            walk(x.to_tuple(), depth + 1)
        elif hasattr(x, "sample") and isinstance(getattr(x, "sample"), torch.Tensor):
            walk(x.sample, depth + 1)

    walk(out)
    return found


def _forward(model, inputs):
    import torch

    args, kwargs = inputs
    with torch.no_grad():
        return _floats(model(*args, **kwargs))


def _compare(outs, ref):
    """(relative error, nonfinite count) of ``outs`` against ``ref`` (positions where ref is finite)."""
    import torch

    if len(outs) != len(ref):
        return float("inf"), -1
    worst, bad = 0.0, 0
    for a, b in zip(outs, ref):
        if a.shape != b.shape:
            return float("inf"), -1
        a64, b64 = a.double(), b.double()
        fin = torch.isfinite(b64)
        bad += int((~torch.isfinite(a64) & fin).sum())
        d = (a64 - b64)[fin & torch.isfinite(a64)]
        n = b64[fin].norm()
        worst = max(worst, float(d.norm() / n) if float(n) > 0 else float(d.norm()))
    return worst, bad


class _Coverage(object):
    """The lines of one file that run (sys.settrace, that file's frames only)."""

    def __init__(self, path):
        self.path, self.lines = path, set()

    def _local(self, frame, event, arg):
        if event == "line":
            self.lines.add(frame.f_lineno)
        return self._local

    def _global(self, frame, event, arg):
        if frame.f_code.co_filename == self.path:
            self.lines.add(frame.f_lineno)
            return self._local
        return None

    def __enter__(self):
        self._old = sys.gettrace()
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc):
        sys.settrace(self._old)


def _exc(exc):
    return "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:240])


def _exc_line(exc, path):
    """The last line of ``path`` in the exception's traceback, or None."""
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


INVALID = re.compile(r"object has no attribute '(float|to|half|bfloat16|double|type|contiguous|add_)'|"
                     r"has no attribute 'dtype'|descriptor 'to' |object is not callable|RecursionError|"
                     r"unsupported operand type|not supported between instances", re.I)


# ---------------------------------------------------------------- the doctor's findings: every place named

def places(finding):
    """Every (realpath, line) a finding names: any dict with file and line (the sink, the chain, its
    operand origins, the line to change, mask makers, callers, ...), the old lines a patch changes
    or inserts at, and file:line mentions in its message."""
    out = set()

    def walk(x, depth=0):
        if depth > 12:
            return
        if isinstance(x, dict):
            f, ln = x.get("file"), x.get("line")
            if isinstance(f, str) and isinstance(ln, int):
                out.add((os.path.realpath(f), ln))
            for v in x.values():
                walk(v, depth + 1)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v, depth + 1)

    walk(finding)
    return out


def patch_lines(finding):
    """{(basename, old line)} a finding's unified diff changes (a removed line) or inserts after."""
    out = set()
    patch = finding.get("patch")
    if not isinstance(patch, str):
        return out
    name, old = None, 0
    for line in patch.splitlines():
        if line.startswith("--- "):
            name = os.path.basename(line[4:].strip().split("\t")[0])
        elif line.startswith("@@"):
            m = re.match(r"@@ -(\d+)", line)
            old = int(m.group(1)) if m else 0
        elif line.startswith("-"):
            out.add((name, old))
            old += 1
        elif line.startswith("+"):
            out.add((name, old - 1))
            out.add((name, old))
        else:
            old += 1
    return out


def message_lines(finding):
    out = set()
    for m in re.finditer(r"([\w.\-]+\.py):(\d+)", finding.get("message") or ""):
        out.add((m.group(1), int(m.group(2))))
    return out


def names_line(finding, path, line, span=None):
    """Which parts of the finding name (path, line): "place" / "patch" / "message" where one names the
    line itself; "statement" where it names another line of the same statement (the first line of a
    call whose dtype= argument, on a line of its own, is the one changed)."""
    how = []
    real, base = os.path.realpath(path), os.path.basename(path)
    named = places(finding)
    if (real, line) in named:
        how.append("place")
    if (base, line) in patch_lines(finding):
        how.append("patch")
    if (base, line) in message_lines(finding):
        how.append("message")
    if not how and span and span[0] != span[1]:
        lines = {ln for fp, ln in named if fp == real} | {ln for b, ln in patch_lines(finding) | message_lines(finding)
                                                          if b == base}
        if any(span[0] <= ln <= span[1] for ln in lines):
            how.append("statement")
    return how


def rejudge(rows):
    """Recompute ``named`` from the lines each finding names (kept in the rows), counting a line of
    the changed statement as the changed line: rows of runs made before that rule."""
    import ast

    spans = {}
    for r in rows:
        if r.get("kind") not in M.KINDS or not r.get("traces") or r.get("named"):
            continue
        path = r.get("file")
        if path not in spans:
            try:
                with open(path, encoding="utf-8") as fh:
                    spans[path] = M._statement_spans(ast.parse(fh.read()))
            except Exception:  # noqa: BLE001
                spans[path] = {}
        a, b = spans[path].get(r["line"], (r["line"], r["line"]))
        on = [dev for dev, tr in sorted(r["traces"].items())
              if any(a <= ln <= b for f in tr.get("findings") or () for ln in f.get("lines") or ())]
        if on:
            r.update(named=True, named_on=on, outcome="named", named_how="statement")
    return rows


def _trace(model, inputs, device):
    from attn_doctor.tracing.runs.api import trace

    t0 = time.monotonic()
    try:
        report = trace(model=copy.deepcopy(model), inputs=inputs, device=device, routes=False)
    except BaseException as exc:  # noqa: BLE001 - the doctor's crash is a result here
        return {"status": "crash", "error": _exc(exc), "findings": [], "s": round(time.monotonic() - t0, 2)}
    return {"status": report.get("status"), "error": (report.get("error") or {}).get("message"),
            "findings": list(report.get("findings") or ()), "s": round(time.monotonic() - t0, 2),
            "sinks": len(report.get("sinks") or ())}


def _brief(f, path=None):
    """A finding as the rows keep it: its rule, severity, message, and the lines of ``path`` (the
    mutated file) it names anywhere."""
    out = {"id": f.get("id"), "severity": f.get("severity"), "message": (f.get("message") or "")[:1500]}
    if path:
        real, base = os.path.realpath(path), os.path.basename(path)
        lines = {ln for (fp, ln) in places(f) if fp == real}
        lines |= {ln for (b, ln) in patch_lines(f) | message_lines(f) if b == base}
        lines = {ln for ln in lines if isinstance(ln, int) and ln > 0}
        out["lines"] = sorted(lines)
        fix = f.get("fix_line") or (f.get("sink") or {}).get("fix_line")
        if isinstance(fix, dict) and fix.get("line"):
            out["fix_line"] = "%s:%s" % (os.path.basename(str(fix.get("file"))), fix.get("line"))
    return out


# ---------------------------------------------------------------- one target in a worker

class _State(object):
    """A target's healthy twin, per dtype: weights, inputs, the float64 reference, the healthy half
    output and error, the lines that run."""

    def __init__(self, target, workdir):
        self.target = target
        self.workdir = os.path.join(workdir, target.name.replace("/", "__"))
        os.makedirs(self.workdir, exist_ok=True)
        mod = importlib.import_module(target.module)
        self.path = os.path.realpath(mod.__file__)
        with open(self.path, encoding="utf-8") as fh:
            self.source = fh.read()
        self.torch_name = M.torch_alias(self.source) or "torch"
        self.mutations = M.enumerate_mutations(self.source)
        self.stmt_span = _statement_spans(self.source)
        healthy_dir = os.path.join(self.workdir, "healthy")
        os.makedirs(healthy_dir, exist_ok=True)
        self.healthy_path = os.path.join(healthy_dir, os.path.basename(self.path))
        with open(self.healthy_path, "w", encoding="utf-8") as fh:
            fh.write(self.source)
        self.per = {}
        self._setup()

    def _setup(self):
        import torch

        load_in_place(self.target.module, self.healthy_path, self.source)
        m32, inputs = _build(self.target, None)
        _reinit(m32)
        self.params = {k: v.detach().clone() for k, v in m32.named_parameters()}
        m64 = copy.deepcopy(m32).double()
        self.ref = _forward(m64, _map_inputs(inputs, torch.float64))
        del m64
        self.inputs32 = inputs
        for dtype in DTYPES:
            half = getattr(torch, TORCH_DTYPE[dtype])
            cov = _Coverage(self.healthy_path)
            entry = {"inputs": _map_inputs(inputs, half)}
            with cov:
                try:
                    mh, _ = _build(self.target, dtype)
                    _load_params(mh, self.params)
                    out = _forward(mh, entry["inputs"])
                    entry.update(model=mh, out=out, raised=None)
                    entry["err"], entry["nonfinite"] = _compare(out, self.ref)
                except Exception as exc:  # noqa: BLE001
                    entry.update(model=None, out=None, raised=_exc(exc), err=None, nonfinite=None)
            entry["lines"] = cov.lines
            self.per[dtype] = entry

    def reached(self, mutation, dtype):
        lines = self.per[dtype]["lines"]
        if mutation.line in lines:
            return True
        span = self.stmt_span.get(mutation.line)
        return bool(span) and any(ln in lines for ln in range(span[0], span[1] + 1))


def _statement_spans(source):
    import ast

    return M._statement_spans(ast.parse(source))


_STATE = {}


def _state(target, workdir):
    st = _STATE.get(target.name)
    if st is None:
        for name in list(_STATE):  # one target's models at a time
            restore(_STATE[name].target.module)
            del _STATE[name]
        st = _STATE[target.name] = _State(target, workdir)
    return st


def _healthy_rows(st, devices):
    rows = []
    load_in_place(st.target.module, st.healthy_path, st.source)
    for dtype in DTYPES:
        e = st.per[dtype]
        row = {"target": st.target.name, "codebase": st.target.codebase, "kind": "healthy", "dtype": dtype,
               "file": st.path, "mutations": len(st.mutations), "lines_run": sorted(e["lines"]),
               "healthy_err": e["err"], "healthy_nonfinite": e["nonfinite"], "healthy_raised": e["raised"]}
        alarms, traces = [], {}
        if e["model"] is not None:
            for dev in devices:
                tr = _trace(e["model"], e["inputs"], dev)
                traces[dev] = {"status": tr["status"], "error": tr["error"], "s": tr["s"], "sinks": tr.get("sinks"),
                               "findings": [_brief(f, st.healthy_path) for f in tr["findings"]]}
                alarms += [dict(_brief(f, st.healthy_path), device=dev) for f in tr["findings"] if f.get("severity") in ("error", "warning")]
        row.update(traces=traces, false_alarms=alarms,
                   mutation_kinds=dict(collections.Counter(m.kind for m in st.mutations)))
        rows.append(row)
    return rows


def _observe(st, dtype, mutant_out, raised, raised_line, kind):
    """(observable: yes / no / gpu-only / invalid, what plain torch showed, numbers)."""
    e = st.per[dtype]
    nums = {"healthy_err": e["err"]}
    if raised is not None:
        if e["raised"] is not None:
            return "no", "raises as the healthy model does (%s)" % raised, nums
        if INVALID.search(raised):
            return "invalid", "the mutation is meaningless here: %s" % raised, nums
        return "yes", "raises: %s%s" % (raised, " (at the file's line %d)" % raised_line if raised_line else ""), nums
    if e["out"] is None:
        return "no", "the healthy half model raises (%s)" % e["raised"], nums
    err, bad = _compare(mutant_out, st.ref)
    diff, _ = _compare(mutant_out, e["out"])
    nums.update(err=err, diff=diff, nonfinite=bad)
    floor = FLOOR[dtype]
    if bad < 0:
        return "yes", "the output's structure changed (shapes or count)", nums
    if bad > (e["nonfinite"] or 0):
        return "yes", "%d inf/NaN values where the healthy model has %d" % (bad, e["nonfinite"] or 0), nums
    h = e["err"] or 0.0
    if err > ERR_FACTOR * h and err > floor:
        return "yes", "error against float64 %.3g, %.1fx the healthy half model's %.3g" % (err, err / max(h, 1e-12),
                                                                                            h), nums
    if diff > DIFF_FACTOR * h and diff > floor:
        return "yes", "output differs from the healthy half model's by %.3g (healthy error %.3g; error %.3g)" % (
            diff, h, err), nums
    if kind == "drop_contiguous":
        return "gpu-only", "same output on CPU (err %.3g, healthy %.3g): a layout change, seen by the GPU's kernel " \
                           "choice only" % (err, h), nums
    return "no", "error %.3g vs healthy %.3g, diff %.3g (within half noise)" % (err, h, diff), nums


def _mutant_rows(st, index, devices, dtypes):
    mut = st.mutations[index]
    rows = []
    for dtype in dtypes:
        row = {"target": st.target.name, "codebase": st.target.codebase, "index": index, "kind": mut.kind,
               "dtype": dtype, "line": mut.line, "function": mut.function, "original": mut.original.strip(),
               "new": mut.render(dtype, st.torch_name).strip(), "description": mut.description,
               "file": st.path}
        if st.per[dtype]["raised"] is not None and st.per[dtype]["model"] is None:
            row.update(outcome="healthy_raises", reason=st.per[dtype]["raised"])
            rows.append(row)
            continue
        if not st.reached(mut, dtype):
            row.update(outcome="not_reached")
            rows.append(row)
            continue
        folder = os.path.join(st.workdir, "m%04d-%s" % (index, dtype))
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, os.path.basename(st.path))
        source = M.apply(st.source, mut, dtype, st.torch_name)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(source)
        row["mutant_file"] = path
        model, out, raised, raised_line = None, None, None, None
        try:
            load_in_place(st.target.module, path, source)
            model, _ = _build(st.target, dtype)
            row["params_missing"] = _load_params(model, st.params)
            out = _forward(model, st.per[dtype]["inputs"])
        except Exception as exc:  # noqa: BLE001 - the mutant's failure is the observation
            raised, raised_line = _exc(exc), _exc_line(exc, path)
        obs, shown, nums = _observe(st, dtype, out, raised, raised_line, mut.kind)
        row.update(observable=obs, plain=shown, **{k: (None if v is None else (round(v, 6) if isinstance(v, float)
                                                                             and v == v and v != float("inf") else v))
                                                   for k, v in nums.items()})
        if obs == "invalid":
            row["outcome"] = "invalid"
            rows.append(row)
            continue
        traces, named_by, said = {}, [], []
        if model is None:
            # the build raised: the doctor builds it itself (a factory file), and may name the line in a
            # finding; its error message naming the line is kept apart (not a finding)
            fac = os.path.join(folder, "factory_m%04d_%s.py" % (index, dtype))
            with open(fac, "w", encoding="utf-8") as fh:
                fh.write(FACTORY.format(here=HERE, module=st.target.module, path=path, target=st.target.name,
                                        dtype=dtype))
            for dev in devices:
                tr = _trace_target(fac + ":build", dev, folder)
                span = st.stmt_span.get(mut.line)
                hits = [{"id": f.get("id"), "severity": f.get("severity"), "how": names_line(f, path, mut.line, span)}
                        for f in tr["findings"] if names_line(f, path, mut.line, span)]
                err_names = bool(tr["error"]) and ("%s:%d" % (os.path.basename(path), mut.line)) in tr["error"]
                traces[dev] = {"status": tr["status"], "error": tr["error"], "s": tr["s"], "via": "factory",
                               "findings": [_brief(f, path) for f in tr["findings"]], "at_line": hits,
                               "error_names_line": err_names}
                if hits:
                    named_by.append(dev)
                said += [h["id"] for h in hits]
        else:
            for dev in devices:
                tr = _trace(model, st.per[dtype]["inputs"], dev)
                hits = []
                for f in tr["findings"]:
                    how = names_line(f, path, mut.line, st.stmt_span.get(mut.line))
                    if how:
                        hits.append({"id": f.get("id"), "severity": f.get("severity"), "how": how})
                traces[dev] = {"status": tr["status"], "error": tr["error"], "s": tr["s"],
                               "findings": [_brief(f, path) for f in tr["findings"]], "at_line": hits}
                if hits:
                    named_by.append(dev)
                said += [h["id"] for h in hits]
        row.update(traces=traces, named=bool(named_by), named_on=named_by, at_line=sorted(set(said)),
                   outcome="named" if named_by else "not_named")
        rows.append(row)
    load_in_place(st.target.module, st.healthy_path, st.source)
    return rows


FACTORY = """import sys
sys.path.insert(0, {here!r})
import inject_generic as G


def build():
    G.load_in_place({module!r}, {path!r})
    model, inputs = G._build(G.BY_NAME[{target!r}], {dtype!r})
    return model, inputs
"""


def _trace_target(target, device, cwd):
    from attn_doctor.tracing.runs.api import trace

    t0 = time.monotonic()
    try:
        report = trace(target=target, device=device, routes=False, cwd=cwd)
    except BaseException as exc:  # noqa: BLE001
        return {"status": "crash", "error": _exc(exc), "findings": [], "s": round(time.monotonic() - t0, 2)}
    return {"status": report.get("status"), "error": (report.get("error") or {}).get("message"),
            "findings": list(report.get("findings") or ()), "s": round(time.monotonic() - t0, 2)}


def mutation_hash(m):
    return hashlib.sha1(("%s|%d|%s|%s" % (m.kind, m.line, m.original, m.new)).encode("utf-8")).hexdigest()[:10]


def run_one(job, workdir, devices, dtypes):
    import warnings

    warnings.filterwarnings("ignore")
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except Exception:  # noqa: BLE001
        pass
    name, _, what = job.partition("|")
    target = BY_NAME[name]
    t0 = time.monotonic()
    try:
        st = _state(target, workdir)
    except BaseException as exc:  # noqa: BLE001
        return [{"model_type": job, "target": name, "codebase": target.codebase, "kind": "setup",
                 "outcome": "setup_failed", "reason": _exc(exc)}]
    if what == "healthy":
        rows = _healthy_rows(st, devices)
    else:
        index, _, digest = what.partition("|")
        index = int(index)
        if digest and (index >= len(st.mutations) or mutation_hash(st.mutations[index]) != digest):
            # the worker enumerated another list (mutations.py changed): find the mutation by its hash
            index = next((i for i, m in enumerate(st.mutations) if mutation_hash(m) == digest), None)
        if index is None:
            return [{"model_type": job, "target": name, "codebase": target.codebase, "outcome": "stale",
                     "reason": "no mutation %s in this worker's list" % digest}]
        rows = _mutant_rows(st, index, devices, dtypes)
    for r in rows:
        r["model_type"] = job  # worker_pool's key
        r["s"] = round(time.monotonic() - t0, 2)
    return rows


# ---------------------------------------------------------------- the driver

def _importable(python, modules):
    """The modules of ``modules`` that ``python`` imports (one process for all of them)."""
    import subprocess

    if not python or not os.path.exists(python):
        return set()
    code = ("import importlib, json, sys\nok = []\nfor m in json.loads(sys.argv[1]):\n    try:\n"
            "        importlib.import_module(m); ok.append(m)\n    except Exception:\n        pass\nprint(json.dumps(ok))")
    try:
        proc = subprocess.run([python, "-c", code, json.dumps(sorted(modules))], capture_output=True, text=True,
                              timeout=600)
        return set(json.loads(proc.stdout.strip().splitlines()[-1]))
    except Exception:  # noqa: BLE001
        return set()


_FILES = {}


def _module_file(python, module):
    import subprocess

    if (python, module) in _FILES:
        return _FILES[python, module]
    code = "import importlib.util,sys; s=importlib.util.find_spec(sys.argv[1]); print(s.origin if s else '')"
    try:
        out = subprocess.run([python, "-W", "ignore", "-c", code, module], capture_output=True, text=True, timeout=300,
                             cwd=REPO, env=dict(os.environ, PYTHONPATH=HERE))
        path = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else None
    except Exception:  # noqa: BLE001
        path = None
    _FILES[python, module] = path
    return path


_MUTS = {}


def _mutations_of(path):
    if path not in _MUTS:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
        _MUTS[path] = (source, M.enumerate_mutations(source), M.torch_alias(source) or "torch")
    return _MUTS[path]


def select(target, path, lines_by_dtype, sample, rng, kinds):
    """(chosen indexes, unreached indexes) of ``target``'s mutations: those whose line runs in the
    healthy build and forward (in some dtype), all or up to ``sample`` per kind drawn with ``rng``."""
    import ast

    source, muts, _ = _mutations_of(path)
    spans = M._statement_spans(ast.parse(source))
    run = set()
    for lines in lines_by_dtype.values():
        run |= set(lines)
    by_kind, unreached = collections.defaultdict(list), []
    for i, m in enumerate(muts):
        if m.kind not in kinds:
            continue
        a, b = spans.get(m.line, (m.line, m.line))
        if m.line in run or any(ln in run for ln in range(a, b + 1)):
            by_kind[m.kind].append(i)
        else:
            unreached.append(i)
    chosen = []
    for kind in M.KINDS:
        idx = by_kind.get(kind, [])
        if sample and len(idx) > sample:
            idx = sorted(rng.sample(idx, sample))
        chosen += idx
    return sorted(chosen), unreached, sum(len(v) for v in by_kind.values())


def table(rows, split=None):
    """The counts by codebase x kind (mutation x dtype), by kind, and the healthy twins' false alarms."""
    splits = split_of()
    rows = [r for r in rows if split in (None, "all") or splits.get(r.get("codebase"), "held") == split]
    lines = []
    muts = [r for r in rows if r.get("kind") in M.KINDS]
    healthy = [r for r in rows if r.get("kind") == "healthy"]
    codebases = sorted({r["codebase"] for r in rows if r.get("codebase") in {h["codebase"] for h in healthy}} |
                       {r["codebase"] for r in muts})
    # every mutation x dtype of each target (the healthy rows carry the target's counts by kind)
    total = collections.Counter()
    for h in healthy:
        for kind, n in (h.get("mutation_kinds") or {}).items():
            total[h["codebase"], kind] += n  # one healthy row per dtype: n per dtype
    fa = collections.defaultdict(set)
    for h in healthy:
        for f in h.get("false_alarms") or ():
            fa[h["codebase"]].add("%s %s %s" % (h["target"].split("/", 1)[-1], f["id"], h["dtype"]))
    lines.append("mutants (mutation x dtype) of %d targets in %d codebases%s; the doctor: %s" % (
        len({h["target"] for h in healthy}), len(codebases), "" if split in (None, "all") else " (split %s)" % split,
        ", ".join(sorted({str(h.get("doctor")) for h in healthy if h.get("doctor")})) or "?"))
    fmt = "%-15s %-21s %6s %6s %6s %5s %6s %5s %6s %5s %6s %6s"
    lines.append(fmt % ("codebase", "kind", "all", "unrch", "reachd", "run", "invald", "obs", "named", "gpu", "unobs",
                        "said~"))
    grand = collections.Counter()

    def line(cb, kind, c, n_all):
        reached = n_all - c["unreached"]
        return fmt % (cb, kind, n_all, c["unreached"], reached, c["ran"], c["invalid"], c["obs"],
                      _pct(c["named"], c["obs"]), c["gpu"], c["unobs"], c["said"])

    for cb in codebases:
        cb_all = 0
        for kind in M.KINDS:
            rs = [r for r in muts if r["codebase"] == cb and r["kind"] == kind]
            n_all = total.get((cb, kind), 0) or len(rs)
            if not n_all:
                continue
            c = _counts(rs)
            grand.update(c)
            cb_all += n_all
            lines.append(line(cb, kind, c, n_all))
        lines.append(line(cb, "(all kinds)", _counts([r for r in muts if r["codebase"] == cb]), cb_all) +
                     "   healthy-twin false alarms: %d%s" % (len(fa.get(cb, ())), (" (%s)" % "; ".join(
                         sorted(fa[cb]))) if fa.get(cb) else ""))
        grand["all"] += cb_all
    lines.append(line("ALL", "", grand, grand["all"]))
    lines.append("  all: mutations x dtypes (bf16, fp16); unrch: the changed line never runs in the healthy build and "
                 "forward (not traced); reachd: the rest; run: reached and sampled (the table's counts below are of "
                 "these); invald: meaningless there (.float() on a non-tensor); obs: observable by plain torch on CPU; "
                 "named: of those, the trace names the changed line (meta or cpu); gpu: drop_contiguous seen only by "
                 "a GPU kernel choice (the trace names %d of them); unobs: reached, no plain-torch effect; said~: the "
                 "trace names the changed line of an unobservable or gpu-only mutant" % grand["gpu_named"])
    lines.append("")
    by_kind = collections.defaultdict(collections.Counter)
    for r in muts:
        by_kind[r["kind"]].update(_counts([r]))
    lines.append("%-21s %5s %6s %9s %6s %6s" % ("kind", "obs", "named", "rate", "unobs", "said~"))
    for kind in M.KINDS:
        c = by_kind.get(kind)
        if c:
            lines.append("%-21s %5d %6d %9s %6d %6d" % (kind, c["obs"], c["named"], _pct(c["named"], c["obs"], bare=True),
                                                       c["unobs"] + c["gpu"], c["said"]))
    lines.append("")
    lines.append("healthy twins: error/warning findings per target and dtype (meta and cpu)")
    for r in sorted(healthy, key=lambda r: (r["codebase"], r["target"], r["dtype"])):
        alarms = r.get("false_alarms") or []
        statuses = ",".join("%s:%s" % (d, (t or {}).get("status")) for d, t in sorted((r.get("traces") or {}).items()))
        lines.append("  %-38s %-5s %d %s  [healthy half error %s, %d lines run; %s]" % (
            r["target"], r["dtype"], len(alarms), ", ".join(sorted({"%s(%s)" % (f["id"], f["device"]) for f in alarms})),
            _g(r.get("healthy_err")), len(r.get("lines_run") or ()), statuses))
    fail = [r for r in rows if r.get("outcome") in ("setup_failed", "timeout", "worker_died", "crash", "stale")]
    if fail:
        lines.append("")
        lines.append("not run (%d): %s" % (len(fail), "; ".join("%s %s %s" % (r.get("model_type"), r.get("outcome"),
                                                                              (r.get("reason") or "")[:120])
                                                                for r in fail[:30])))
    return "\n".join(lines)


def _g(x):
    return "-" if x is None else "%.3g" % x


def _counts(rs):
    c = collections.Counter()
    for r in rs:
        c["runs"] += 1
        o = r.get("outcome")
        if o == "not_reached":
            c["unreached"] += 1
            continue
        c["ran"] += 1
        if o == "not_reached":
            pass
        elif o == "invalid":
            c["invalid"] += 1
        elif r.get("observable") == "yes":
            c["obs"] += 1
            c["named"] += bool(r.get("named"))
        elif r.get("observable") == "gpu-only":
            c["gpu"] += 1
            c["gpu_named"] += bool(r.get("named"))
            c["said"] += bool(r.get("named"))
        elif r.get("observable") == "no":
            c["unobs"] += 1
            c["said"] += bool(r.get("named"))
    return c


def _pct(a, b, bare=False):
    if not b:
        return "-"
    return ("%d (%.0f%%)" % (a, 100.0 * a / b)) if bare else "%d" % a


def misses(rows, split=None):
    """One line per observable mutant the doctor did not name (both dtypes on one line where they
    agree): codebase, file:line, kind, original -> new, what plain torch showed, what the trace said
    (each finding's rule, the lines of the file it names, its message)."""
    splits = split_of()
    groups = collections.OrderedDict()
    for r in rows:
        if r.get("kind") not in M.KINDS or r.get("observable") != "yes" or r.get("named"):
            continue
        if split not in (None, "all") and splits.get(r.get("codebase"), "held") != split:
            continue
        key = (r["target"], r["line"], r["original"], re.sub(r"b?float16", "<half>", r["new"]))
        groups.setdefault(key, []).append(r)
    out = []
    for (target, line, original, new), rs in groups.items():
        r = rs[0]
        said = []
        for dev, tr in sorted((r.get("traces") or {}).items()):
            fs = tr.get("findings") or []
            if not fs:
                said.append("%s: %s, no findings%s" % (dev, tr.get("status"),
                                                      " (%s)" % tr["error"][:160] if tr.get("error") else ""))
                continue
            said.append("%s: %s" % (dev, "; ".join(
                "%s %s [names lines %s of the file]: %s" % (f["id"], f["severity"], ",".join(map(str, f.get("lines") or []))
                                                            or "none", f["message"][:220]) for f in fs[:3])))
        rel = r["file"].split("site-packages/")[-1]
        out.append("%s | %s | %s:%d | %s | %s | `%s` -> `%s` | plain torch: %s | trace: %s" % (
            r["codebase"], target, rel, line, r["kind"], "+".join(x["dtype"] for x in rs), original, new, r.get("plain"),
            " || ".join(said)))
    return out


def _doctor(spec, workdir):
    """(folder to put first on the workers' PYTHONPATH, what it is)."""
    import subprocess

    if spec == "tree":
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "attn_doctor", "recipes"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                             text=True).stdout.strip()
        return REPO, "working tree at %s%s" % (rev, " with uncommitted edits" if dirty else "")
    if os.path.isdir(os.path.join(spec, "attn_doctor")):
        return os.path.abspath(spec), "folder %s" % spec
    rev = subprocess.run(["git", "rev-parse", spec], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    folder = os.path.join(workdir, "doctor-%s" % rev[:12])
    if not os.path.isdir(os.path.join(folder, "attn_doctor")):
        os.makedirs(folder, exist_ok=True)
        archive = subprocess.run(["git", "archive", rev, "attn_doctor", "recipes"], cwd=REPO, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    subject = subprocess.run(["git", "log", "-1", "--format=%h %cd %s", "--date=short", rev], cwd=REPO,
                             capture_output=True, text=True).stdout.strip()
    return folder, "git %s" % subject[:100]


def _unreached_row(target, path, index, dtype):
    source, muts, torch_name = _mutations_of(path)
    m = muts[index]
    return {"target": target.name, "codebase": target.codebase, "index": index, "kind": m.kind, "dtype": dtype,
            "line": m.line, "function": m.function, "original": m.original.strip(),
            "new": m.render(dtype, torch_name).strip(), "description": m.description,
            "file": path, "outcome": "not_reached", "model_type": "%s|%d" % (target.name, index)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="inject_generic.jsonl")
    ap.add_argument("--only", help="target names or codebases, comma-separated")
    ap.add_argument("--split", choices=("build", "held", "all"), default="all", help="codebases of this split")
    ap.add_argument("--kinds", default=",".join(M.KINDS))
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--devices", default=",".join(DEVICES))
    ap.add_argument("--sample", type=int, help="at most N reached mutations per target and kind (stratified)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=TIMEOUT, help="seconds per job (one mutation, both dtypes)")
    ap.add_argument("--list", action="store_true", help="print each selected target's mutations and exit")
    ap.add_argument("--table", metavar="JSONL", help="print the tables of a finished run")
    ap.add_argument("--misses", metavar="JSONL", help="print the observable mutants not named")
    ap.add_argument("--doctor", default="HEAD",
                    help="the attn-doctor that traces: a git revision of this repository (exported with git archive: "
                         "uncommitted edits in the tree are not used; default HEAD), or a folder holding attn_doctor/, "
                         "or 'tree' for the working tree as it is")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    devices, dtypes = tuple(args.devices.split(",")), tuple(args.dtypes.split(","))
    kinds = set(args.kinds.split(","))
    if args.serve:
        from worker_pool import serve

        serve(lambda job: run_one(job, args.workdir, devices, dtypes))
        return 0
    if args.table or args.misses:
        with open(args.table or args.misses, encoding="utf-8") as fh:
            rows = rejudge([json.loads(line) for line in fh if line.strip()])
        print(table(rows, args.split) if args.table else "\n".join(misses(rows, args.split)))
        return 0
    splits = split_of()
    targets = [t for t in TARGETS if args.split == "all" or splits.get(t.codebase, "held") == args.split]
    if args.only:
        want = set(args.only.split(","))
        targets = [t for t in targets if t.name in want or t.codebase in want]
    zoo = {t.module for t in targets if t.python == "zoo"}
    if zoo:
        ok = _importable(PYTHONS["zoo"], zoo)
        if ok != zoo:
            print("the zoo interpreter %s cannot import %s: skipping %s" % (
                PYTHONS["zoo"], ", ".join(sorted(zoo - ok)),
                ", ".join(t.name for t in targets if t.python == "zoo" and t.module not in ok)), file=sys.stderr)
            targets = [t for t in targets if t.python != "zoo" or t.module in ok]
    if args.list:
        for t in targets:
            path = _module_file(PYTHONS[t.python], t.module)
            source, muts, _ = _mutations_of(path)
            print("== %s  %s  (%d mutations)" % (t.name, path, len(muts)))
            for i, m in enumerate(muts):
                if m.kind in kinds:
                    print("  #%-4d %-20s %5d  %s  ->  %s" % (i, m.kind, m.line, m.original.strip()[:70],
                                                            m.render("bf16").strip()[:90]))
        return 0
    workdir = args.workdir or tempfile.mkdtemp(prefix="inject-generic-")
    doctor_path, doctor_rev = _doctor(args.doctor, workdir)
    print("tracing with attn_doctor from %s (%s)" % (doctor_path, doctor_rev), file=sys.stderr)
    from worker_pool import run_jobs

    t0 = time.monotonic()
    all_rows = []
    with open(args.out, "w", encoding="utf-8") as out:
        def emit(rows):
            for row in rows:
                out.write(json.dumps(row) + "\n")
            out.flush()
            all_rows.extend(rows)

        for python in ("dev", "zoo"):
            group = [t for t in targets if t.python == python]
            if not group:
                continue
            cmd = [PYTHONS[python], os.path.abspath(__file__), "--serve", "--workdir", workdir, "--devices",
                   ",".join(devices), "--dtypes", ",".join(dtypes)]
            env_path = os.environ.get("PYTHONPATH", "")
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (doctor_path, HERE, env_path) if p)
            try:
                # phase 1: each healthy twin (its errors, its trace, the lines that run)
                healthy = run_jobs(cmd, ["%s|healthy" % t.name for t in group], args.workers, args.timeout * 3,
                                   cwd=REPO, recycle=150)
                for r in healthy:
                    r["doctor"] = doctor_rev
                    r.setdefault("target", r.get("model_type", "").split("|")[0])
                    r.setdefault("codebase", BY_NAME.get(r["target"], Target("?", "?", "?", "?")).codebase)
                emit(healthy)
                names = []
                for t in group:
                    hrows = [r for r in healthy if r.get("target") == t.name and r.get("kind") == "healthy"]
                    if not hrows:
                        continue
                    path = hrows[0]["file"]
                    lines = {r["dtype"]: r.get("lines_run") or [] for r in hrows}
                    chosen, unreached, reached = select(t, path, lines, args.sample,
                                                        random.Random("%d:%s" % (args.seed, t.name)), kinds)
                    emit([_unreached_row(t, path, i, d) for i in unreached for d in dtypes])
                    print("%-45s %4d mutations: %4d reached, %4d chosen" % (t.name, len(_mutations_of(path)[1]),
                                                                          reached, len(chosen)), file=sys.stderr)
                    muts = _mutations_of(path)[1]
                    names += ["%s|%d|%s" % (t.name, i, mutation_hash(muts[i])) for i in chosen]
                done = [0]

                def on_done(name, got):
                    done[0] += 1
                    emit(got)
                    print("[%d/%d %.0fs] %s %s" % (done[0], len(names), time.monotonic() - t0, name,
                                                   ",".join(sorted({"%s/%s" % (r.get("observable"), r.get("outcome"))
                                                                    for r in got}))), file=sys.stderr, flush=True)

                run_jobs(cmd, names, args.workers, args.timeout, on_done=on_done, cwd=REPO, recycle=150)
            finally:
                os.environ["PYTHONPATH"] = env_path
    print(table(all_rows))
    print("wall time: %.0f s with %d workers" % (time.monotonic() - t0, args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
