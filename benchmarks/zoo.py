"""The open world beyond transformers: attention models of timm, diffusers, open_clip, torchvision,
torchaudio and reference implementations (vit-pytorch, x-transformers, perceiver-pytorch, ...),
each enumerated from its library where the library can list them, built with no weights
(pretrained=False, nothing downloaded), scaled down to build and run in well under a few seconds on
a CPU, with example inputs. A trace target for `attn-doctor trace`:

    attn-doctor trace benchmarks/zoo.py:build -a codebase=timm -a name=vit_small_patch16_224 -a dtype=bfloat16
    attn-doctor trace benchmarks/zoo.py:build -a codebase=diffusers -a name=FluxTransformer2DModel --device cpu

and a registry for benchmarks/open_world_zoo.py:

    import zoo
    zoo.entries()                       # [{"codebase", "name", "family", "covers", "split"}, ...]
    model, inputs = zoo.build("timm", "vit_small_patch16_224", dtype="bfloat16")

How each codebase is enumerated and scaled:

- timm: every name of `timm.list_models()`. Each entrypoint is run with timm's builder intercepted
  (no model built: its class and keyword arguments are read), names that differ only in size (the
  same module, class and non-size arguments, numbers aside) are one family, represented by its
  smallest member; a family is kept where the model it builds (on meta) has an attention module
  (nn.MultiheadAttention, `scaled_dot_product_attention`, or a matrix product beside a softmax in a
  module's class). Depth arguments are cut (depth <= 2, one block a stage), and the smallest image
  size that runs is found once (64, 128, then the model's own), cached in ZOO_CACHE.
- diffusers: the tiny configs and dummy inputs of diffusers' own test suite (tests/models/**, read
  once with a script: DIFFUSERS_TESTS below), for every class the installed diffusers has; classes of
  diffusers with no such test are listed by `uncovered("diffusers")`.
- open_clip: every config of `open_clip.list_models()` whose towers build offline (text towers from
  the hub, hf_model_name, need a download: left out), families by the config with numbers aside,
  both towers at 2 layers, a small image and a 16-token context.
- torchvision: every name of `torchvision.models.list_models()` whose model has attention, rebuilt
  from its class with its own arguments, layers cut, at a small image size.
- torchaudio (a venv of its own: torchaudio needs an older torch): the models and factories of
  `torchaudio.models` with attention, one per family.
- reference implementations: vit-pytorch (every model class of every module), x-transformers (its
  wrappers with the attention options its README names), perceiver-pytorch, nystrom-attention,
  local-attention, performer-pytorch, tab-transformer-pytorch, segment-anything.

Every factory returns (model, inputs) in float32 on the current default device (the trace's device:
meta or cpu), in eval mode; dtype="bfloat16"/"float16" casts the model and the floating inputs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import importlib
import inspect
import json
import os
import re
import sys

SPLIT = {
    "timm": "build",
    "diffusers": "build",
    "open_clip": "held",
    "torchvision": "held",
    "torchaudio": "held",
    "vit_pytorch": "held",
    "x_transformers": "held",
    "perceiver_pytorch": "held",
    "nystrom_attention": "held",
    "local_attention": "held",
    "performer_pytorch": "held",
    "tab_transformer_pytorch": "held",
    "segment_anything": "held",
}
REFERENCE = ("vit_pytorch", "x_transformers", "perceiver_pytorch", "nystrom_attention", "local_attention",
             "performer_pytorch", "tab_transformer_pytorch", "segment_anything")
CODEBASES = tuple(SPLIT)
CACHE = os.environ.get("ZOO_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "attn-doctor-zoo")
DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
          "float16": "float16", "fp16": "float16", "half": "float16"}


# ---------------------------------------------------------------- the target

def build(codebase="timm", name="vit_small_patch16_224", dtype="float32"):
    """(model, inputs) of one zoo entry, on the current default device, cast to dtype."""
    import torch

    if codebase not in BUILDERS:
        raise ValueError("codebase %r is not one of %s" % (codebase, ", ".join(sorted(BUILDERS))))
    model, inputs = BUILDERS[codebase](name)
    model.eval()
    want = getattr(torch, DTYPES[str(dtype).replace("torch.", "")])
    if want != torch.float32:
        model.to(want)
        inputs = _cast(inputs, want)
    return model, inputs


def _cast(obj, dtype):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.is_floating_point() else obj
    if isinstance(obj, tuple):
        return tuple(_cast(o, dtype) for o in obj)
    if isinstance(obj, list):
        return [_cast(o, dtype) for o in obj]
    if isinstance(obj, dict):
        return {k: _cast(v, dtype) for k, v in obj.items()}
    return obj


def entries(codebases=None, refresh=False):
    """Every entry: {"codebase", "name", "family", "covers", "split"}, enumerated from the installed
    libraries (a codebase whose library does not import here is left out)."""
    out = []
    for cb in codebases or CODEBASES:
        try:
            got = _cached_list(cb, refresh)
        except ImportError:
            continue
        for e in got["entries"]:
            out.append(dict(e, codebase=cb, split=SPLIT[cb]))
    return out


def uncovered(codebase):
    """What the enumeration of a codebase left out, and why ({name: reason})."""
    try:
        return _cached_list(codebase, False).get("left_out", {})
    except ImportError as exc:
        return {"*": "does not import: %s" % exc}


def _version(dist):
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "0"


DISTS = {"timm": "timm", "diffusers": "diffusers", "open_clip": "open_clip_torch", "torchvision": "torchvision",
         "torchaudio": "torchaudio", "vit_pytorch": "vit-pytorch", "x_transformers": "x-transformers",
         "perceiver_pytorch": "perceiver-pytorch", "nystrom_attention": "nystrom-attention",
         "local_attention": "local-attention", "performer_pytorch": "performer-pytorch",
         "tab_transformer_pytorch": "tab-transformer-pytorch", "segment_anything": "segment-anything"}


def _cache_path(kind, key):
    import torch

    digest = hashlib.sha1(("%s|%s|%s" % (key, torch.__version__, _SOURCE_TAG)).encode()).hexdigest()[:12]
    return os.path.join(CACHE, "%s-%s.json" % (kind, digest))


def _read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def _cached_list(cb, refresh):
    importlib.import_module(cb if cb != "open_clip" else "open_clip")
    path = _cache_path("list", "%s-%s" % (cb, _version(DISTS[cb])))
    got = None if refresh else _read(path)
    if got is None:
        got = LISTERS[cb]()
        _write(path, got)
    return got


@contextlib.contextmanager
def _plain_torch(device="cpu"):
    """Outside any TorchFunctionMode (the tracer's, the trace device's context): enumeration and
    size-finding run plainly on the CPU (or meta), whatever device the factory was called under."""
    import torch

    popped = []
    try:
        while torch._C._len_torch_function_stack() > 0:
            popped.append(torch._C._pop_torch_function_stack())
        with torch.device(device):
            yield
    finally:
        for mode in reversed(popped):
            torch._C._push_on_torch_function_stack(mode)


def _calibrated(kind, key, candidates, check):
    """The first candidate (a JSON-able choice) that `check` builds and runs, cached per key; a key
    none runs raises the last candidate's error."""
    path = _cache_path("calib-" + kind, key)
    got = _read(path)
    if got is not None and "choice" in got:
        return got["choice"]
    last = None
    for cand in candidates:
        try:
            with _plain_torch():
                check(cand)
        except Exception as exc:  # noqa: BLE001 - a candidate the model refuses: try the next
            last = exc
            continue
        _write(path, {"choice": cand})
        return cand
    raise last if last is not None else RuntimeError("no candidate for %s" % key)


def _run(model, args=(), kwargs=None):
    import torch

    model.eval()
    with torch.no_grad():
        return model(*args, **(kwargs or {}))


# ---------------------------------------------------------------- attention, by the modules' classes

_MATMUL = re.compile(r"[\w\)\]]\s*@\s*[\w\(]|\bmatmul\(|\bbmm\(|\beinsum\(|\bbaddbmm\(")


@functools.lru_cache(maxsize=None)
def _class_attention(cls):
    import torch

    if issubclass(cls, torch.nn.MultiheadAttention):
        return True
    src = []
    for k in cls.__mro__:
        if k.__module__.startswith("torch.") or k is object:
            continue
        try:
            src.append(inspect.getsource(k))
        except (OSError, TypeError):
            continue
    lname = cls.__name__.lower()
    if "attn" in lname or "attention" in lname:
        # attention computed by a function of the class's module (torchvision's shifted_window_attention)
        try:
            src.append(inspect.getsource(sys.modules[cls.__module__]))
        except (OSError, TypeError, KeyError):
            pass
    text = "\n".join(src)
    if "scaled_dot_product_attention" in text or "flash_attn" in text:
        return True
    if not _MATMUL.search(text):
        return False
    return "softmax" in text or "attn" in cls.__name__.lower() or "attention" in cls.__name__.lower()


def has_attention(model):
    return any(_class_attention(type(m)) for m in model.modules())


def _capture_init(make):
    """Build with `make()` and return (model, the keyword arguments its class's __init__ got): the
    outermost __init__ frame of the model's own class, read when it first calls Module.__init__."""
    import torch

    seen = {}
    orig = torch.nn.Module.__init__

    def hook(self, *a, **k):
        if "frames" not in seen:
            frames, f = [], sys._getframe(1)
            while f is not None and f.f_code.co_name == "__init__" and f.f_locals.get("self") is self:
                frames.append(f)
                f = f.f_back
            if frames:
                seen["self"], seen["frames"] = self, [dict(fr.f_locals) for fr in frames]
        orig(self, *a, **k)

    torch.nn.Module.__init__ = hook
    try:
        model = make()
    finally:
        torch.nn.Module.__init__ = orig
    if seen.get("self") is not model:
        return model, None
    sig = inspect.signature(type(model).__init__)
    outer = seen["frames"][-1]
    kwargs = {}
    for pname, p in sig.parameters.items():
        if pname == "self":
            continue
        if p.kind == p.VAR_KEYWORD:
            kwargs.update(outer.get(pname) or {})
        elif p.kind == p.VAR_POSITIONAL:
            if outer.get(pname):
                return model, None
        elif pname in outer:
            kwargs[pname] = outer[pname]
    return model, kwargs


_DEPTH_KEY = re.compile(r"^(depth|depths|num_layers|layers|n_layers|num_blocks|serial_depths|stage_depths|"
                        r"num_encoder_layers|num_decoder_layers|encoder_layers|decoder_layers|blocks_per_stage)$")


def _shallow(value):
    """A depth argument cut down: an int to at most 2, each stage of a tuple to at most 1."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return min(value, 2)
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return type(value)(min(v, 1) for v in value)
    return value


def _shallow_kwargs(kwargs):
    out = {}
    for k, v in kwargs.items():
        if _DEPTH_KEY.match(k):
            nv = _shallow(v)
            if nv != v:
                out[k] = nv
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            nv = _shallow_dataclass(v)
            if nv is not v:
                out[k] = nv
    return out


def _shallow_dataclass(cfg):
    changes = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if _DEPTH_KEY.match(f.name) or f.name == "d":
            nv = _shallow(v)
            if f.name == "d" and isinstance(v, int):
                nv = min(v, 1)
            if nv != v:
                changes[f.name] = nv
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            nv = _shallow_dataclass(v)
            if nv is not v:
                changes[f.name] = nv
        elif isinstance(v, tuple) and v and all(dataclasses.is_dataclass(x) and not isinstance(x, type) for x in v):
            nv = tuple(_shallow_dataclass(x) for x in v)
            if any(a is not b for a, b in zip(nv, v)):
                changes[f.name] = nv
    return dataclasses.replace(cfg, **changes) if changes else cfg


def _family_key(module, cls, kwargs, size_keys):
    rest = sorted((k, v) for k, v in kwargs.items() if k not in size_keys)
    text = re.sub(r" at 0x[0-9a-f]+", "", repr(rest))
    return "%s.%s|%s" % (module, cls, re.sub(r"\d+(\.\d+)?(e-?\d+)?", "#", text))


def _size_score(kwargs):
    text = re.sub(r" at 0x[0-9a-f]+", "", repr(sorted(kwargs.items(), key=lambda kv: kv[0])))
    return sum(float(x) for x in re.findall(r"(?<![\w.])\d+(?:\.\d+)?", text) if float(x) < 1e5)


# ---------------------------------------------------------------- timm

TIMM_SIZE_KEYS = {"embed_dim", "embed_dims", "dims", "dim", "depth", "depths", "num_heads", "heads", "mlp_ratio",
                  "mlp_ratios", "img_size", "patch_size", "window_size", "layers", "widths", "channels",
                  "num_features", "stem_width", "head_dim", "drop_path_rate", "pretrained_cfg",
                  "pretrained_cfg_overlay", "feature_cfg", "hidden_dim", "num_classes", "width", "stem_chs",
                  "mlp_dim", "sr_ratios", "hidden_size", "num_blocks", "init_values", "cache_dir",
                  "pretrained_strict", "pretrained_filter_fn", "feature_cls", "serial_depths", "parallel_depth",
                  "num_heads_per_stage", "kernel_size", "global_pool_dim", "ls_init_value", "layer_scale_init_value"}


def _timm_capture(name):
    """(model class, kwargs) of a timm entrypoint, read from its call of build_model_with_cfg; None
    where the entrypoint does not go through it."""
    import timm

    class _Captured(Exception):
        pass

    got = {}

    def fake(model_cls, variant, pretrained, **kwargs):
        got["c"] = (model_cls, kwargs)
        raise _Captured()

    patched = []
    for modname, mod in list(sys.modules.items()):
        if modname.startswith("timm.models.") and getattr(mod, "build_model_with_cfg", None) is not None:
            patched.append((mod, mod.build_model_with_cfg))
            mod.build_model_with_cfg = fake
    try:
        import torch

        with torch.device("meta"):
            timm.create_model(name, pretrained=False)
    except _Captured:
        return got["c"]
    except Exception:  # noqa: BLE001
        return None
    finally:
        for mod, fn in patched:
            mod.build_model_with_cfg = fn
    return None


def _list_timm():
    import timm
    import torch

    names = timm.list_models()
    families, left = {}, {}
    for n in names:
        got = _timm_capture(n)
        if got is None:
            key, score = "%s|%s" % (n, n), 0.0
        else:
            cls, kwargs = got
            key, score = _family_key(cls.__module__, cls.__name__, kwargs, TIMM_SIZE_KEYS), _size_score(kwargs)
        families.setdefault(key, []).append((score, len(n), n))
    out = []
    for key, members in sorted(families.items()):
        members.sort()
        rep = members[0][2]
        try:
            with torch.device("meta"):
                model = timm.create_model(rep, pretrained=False)
        except Exception as exc:  # noqa: BLE001
            left[rep] = "does not build on meta: %s" % (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            continue
        attn = has_attention(model)
        del model
        gc.collect()
        if not attn:
            for _, _, n in members:
                left[n] = "no attention module (family of %s)" % rep
            continue
        out.append({"name": rep, "family": key.split("|")[0], "covers": [m[2] for m in members]})
    return {"entries": out, "left_out": left, "names": len(names)}


def _timm_input_size(name):
    import timm

    cfg = timm.get_pretrained_cfg(name)
    size = getattr(cfg, "input_size", None) if cfg is not None else None
    return tuple(size or (3, 224, 224))


def _build_timm(name):
    import timm
    import torch

    c, h, w = _timm_input_size(name)
    got = _timm_capture(name)
    kwargs = got[1] if got else {}
    cls = got[0] if got else None
    shallow = _shallow_kwargs(kwargs)
    takes_size = cls is not None and "img_size" in inspect.signature(cls.__init__).parameters
    cands = []
    for sh in ((True, False) if shallow else (False,)):
        for s in (64, 128, None):
            if s is not None and s >= max(h, w):
                continue
            cands.append({"shallow": sh, "size": s})
    cands.append({"shallow": False, "size": None})

    def make(cand):
        kw = dict(shallow) if cand["shallow"] else {}
        size = (h, w) if cand["size"] is None else (cand["size"], cand["size"])
        if cand["size"] is not None and takes_size:
            kw["img_size"] = size
        return timm.create_model(name, pretrained=False, **kw), torch.randn(1, c, *size)

    def check(cand):
        m, x = make(cand)
        _run(m, (x,))

    choice = _calibrated("timm", name, cands, check)
    model, x = make(choice)
    return model, (x,)


# ---------------------------------------------------------------- diffusers (tiny configs of its own tests)

def _list_diffusers():
    import diffusers
    import torch

    out, left = [], {}
    covered = set()
    for key, (cls_name, init, _) in sorted(DIFFUSERS_TESTS.items()):
        cls = getattr(diffusers, cls_name, None)
        if cls is None:
            left[key] = "not in diffusers %s" % diffusers.__version__
            continue
        covered.add(cls_name)
        try:
            with torch.device("meta"):
                model = cls(**init)
        except Exception as exc:  # noqa: BLE001
            left[key] = "its test config does not build: %s" % (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            continue
        if not has_attention(model):
            left[key] = "no attention module"
            continue
        out.append({"name": key, "family": cls.__module__ + "." + cls_name, "covers": [key]})
    mixin = getattr(diffusers, "ModelMixin", None)
    for n in dir(diffusers):
        obj = getattr(diffusers, n, None)
        if inspect.isclass(obj) and mixin is not None and issubclass(obj, mixin) and obj is not mixin and n not in covered:
            left.setdefault(n, "no tiny config in diffusers' tests")
    return {"entries": out, "left_out": left}


def _make_input(spec, gen):
    import torch

    kind = spec[0]
    if kind == "T":
        shape, dtype = spec[1], getattr(torch, spec[2])
        extra = spec[3] if len(spec) > 3 else None
        if extra is not None and len(extra) == _numel(shape):
            return torch.tensor(extra, dtype=dtype).reshape(shape)
        if dtype.is_floating_point:
            return torch.randn(shape, generator=gen).to(dtype)
        if dtype == torch.bool:
            return torch.ones(shape, dtype=torch.bool)
        lo, hi = (extra if extra else (0, 1))
        return torch.randint(int(lo), int(hi) + 1, shape, generator=gen).to(dtype)
    if kind == "L":
        return [_make_input(s, gen) for s in spec[1]]
    if kind == "D":
        return {k: _make_input(s, gen) for k, s in spec[1].items()}
    if kind == "V":
        return spec[1]
    return None


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _build_diffusers(name):
    import diffusers
    import torch

    cls_name, init, inputs = DIFFUSERS_TESTS[name]
    cls = getattr(diffusers, cls_name)
    model = cls(**init)
    gen = torch.Generator().manual_seed(0)
    with torch.device("cpu"):
        made = {k: _make_input(v, gen) for k, v in inputs.items() if v[0] != "U"}
    dev = torch.get_default_device() if hasattr(torch, "get_default_device") else torch.device("cpu")
    made = _to_device(made, dev)
    return model, made


def _to_device(obj, dev):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(dev)
    if isinstance(obj, list):
        return [_to_device(o, dev) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_to_device(o, dev) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_device(v, dev) for k, v in obj.items()}
    return obj


# ---------------------------------------------------------------- open_clip

def _open_clip_cfg(name):
    import copy

    import open_clip

    return copy.deepcopy(open_clip.get_model_config(name))


def _list_open_clip():
    import open_clip

    families, left = {}, {}
    for n in open_clip.list_models():
        cfg = _open_clip_cfg(n)
        if (cfg.get("text_cfg") or {}).get("hf_model_name") or (cfg.get("vision_cfg") or {}).get("hf_model_name"):
            left[n] = "a tower from the hub (hf_model_name): needs a download"
            continue
        key = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "#", json.dumps(cfg, sort_keys=True))
        families.setdefault(key, []).append((_size_score(cfg), len(n), n))
    out = []
    for key, members in sorted(families.items()):
        members.sort()
        cfg = _open_clip_cfg(members[0][2])
        timm_name = (cfg.get("vision_cfg") or {}).get("timm_model_name")
        fam = "timm:" + re.sub(r"\d+", "#", timm_name) if timm_name else (
            "resnet" if isinstance((cfg.get("vision_cfg") or {}).get("layers"), (list, tuple)) else "vit")
        fam += "+coca" if "multimodal_cfg" in cfg else ""
        out.append({"name": members[0][2], "family": fam, "covers": [m[2] for m in members]})
    return {"entries": out, "left_out": left, "names": len(open_clip.list_models())}


def _build_open_clip(name):
    import open_clip
    import torch

    def make(cand):
        cfg = _open_clip_cfg(name)
        v, t = cfg.get("vision_cfg") or {}, cfg.get("text_cfg") or {}
        if cand["shallow"] and v.get("timm_model_name"):
            with _timm_shallow(v["timm_model_name"]):
                return _make(cand, cfg, v, t)
        return _make(cand, cfg, v, t)

    def _make(cand, cfg, v, t):
        if cand["shallow"]:
            if isinstance(v.get("layers"), int):
                v["layers"] = min(v["layers"], 2)
            elif isinstance(v.get("layers"), (list, tuple)):
                v["layers"] = [min(x, 1) for x in v["layers"]]
            if isinstance(t.get("layers"), int):
                t["layers"] = min(t["layers"], 2)
            mm = cfg.get("multimodal_cfg")
            if mm and isinstance(mm.get("layers"), int):
                mm["layers"] = min(mm["layers"], 2)
            t["context_length"] = min(t.get("context_length", 77), 16)
            if mm:
                mm["context_length"] = min(mm.get("context_length", 76), 16)
        if cand["size"] is not None:
            v["image_size"] = cand["size"]
        size = v.get("image_size", 224)
        size = (size, size) if isinstance(size, int) else tuple(size)
        custom = cfg.pop("custom_text", False)
        if "multimodal_cfg" in cfg:
            cls = open_clip.CoCa
        elif custom:
            cls = open_clip.CustomTextCLIP
        else:
            cls = open_clip.CLIP
        params = inspect.signature(cls.__init__).parameters
        model = cls(**{k: val for k, val in cfg.items() if k in params})
        ctx = t.get("context_length", 77)
        text = torch.randint(1, min(t.get("vocab_size", 49408), 1000), (1, ctx))
        return model, (torch.randn(1, 3, *size), text)

    cfg = _open_clip_cfg(name)
    native = (cfg.get("vision_cfg") or {}).get("image_size", 224)
    native = native if isinstance(native, int) else max(native)
    cands = [{"shallow": True, "size": s} for s in (64, 128) if s < native] + [{"shallow": True, "size": None},
                                                                                 {"shallow": False, "size": None}]

    def check(cand):
        m, inp = make(cand)
        _run(m, inp)

    choice = _calibrated("open_clip", name, cands, check)
    return make(choice)


@contextlib.contextmanager
def _timm_shallow(name):
    """timm.create_model(name) cut to its shallow depth while in the block (a timm vision tower of
    open_clip, which passes no depth of its own)."""
    import timm

    got = _timm_capture(name)
    shallow = _shallow_kwargs(got[1]) if got else {}
    orig = timm.create_model

    def create(model_name, *a, **kw):
        if model_name == name or str(model_name).endswith("/" + name):
            kw = dict(shallow, **kw)
        return orig(model_name, *a, **kw)

    timm.create_model = create
    try:
        yield
    finally:
        timm.create_model = orig


# ---------------------------------------------------------------- torchvision

def _torchvision_get(name):
    import torchvision

    builder = torchvision.models.get_model_builder(name)
    extra = {"weights_backbone": None} if "weights_backbone" in inspect.signature(builder).parameters else {}
    return builder(weights=None, **extra)


def _list_torchvision():
    import torch
    import torchvision

    out, left = [], {}
    for n in torchvision.models.list_models():
        try:
            with torch.device("meta"):
                model = _torchvision_get(n)
        except Exception as exc:  # noqa: BLE001
            left[n] = "does not build on meta: %s" % (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            continue
        if not has_attention(model):
            left[n] = "no attention module"
            continue
        out.append({"name": n, "family": type(model).__module__ + "." + type(model).__name__, "covers": [n]})
    return {"entries": out, "left_out": left, "names": len(torchvision.models.list_models())}


_VIDEO = ("MViT", "SwinTransformer3d")


def _build_torchvision(name):
    import torch
    import torchvision

    with _plain_torch("meta"):
        proto, kwargs = _capture_init(lambda: _torchvision_get(name))
    cls = type(proto)
    video = cls.__name__ in _VIDEO
    shallow = _shallow_kwargs(kwargs or {})
    params = inspect.signature(cls.__init__).parameters
    size_key = next((k for k in ("image_size", "input_size", "spatial_size") if k in params), None)

    def make(cand):
        kw = dict(kwargs or {})
        if cand["shallow"]:
            kw.update(shallow)
        s = cand["size"] or 224
        if cand["size"] and size_key:
            kw[size_key] = s if size_key == "image_size" else (s, s)
        if video and "temporal_size" in params and cand["size"]:
            kw["temporal_size"] = 4
        model = cls(**kw) if kwargs is not None else _torchvision_get(name)
        if video:
            t = kw.get("temporal_size", 16) if "temporal_size" in params else 4
            return model, (torch.randn(1, 3, t, s, s),)
        return model, (torch.randn(1, 3, s, s),)

    cands = [{"shallow": sh, "size": s} for sh in ((True, False) if shallow else (False,)) for s in (32, 64, 128, None)]

    def check(cand):
        m, inp = make(cand)
        _run(m, inp)

    choice = _calibrated("torchvision", name, cands, check)
    return make(choice)


# ---------------------------------------------------------------- torchaudio

TORCHAUDIO_FAMILY = re.compile(r"_(base|large|xlarge|large_lv60k|300m|1b|2b|low|medium|high)(_|$)")


def _list_torchaudio():
    import torch
    import torchaudio.models as tam

    out, left, fams = [], {}, {}
    for n in sorted(getattr(tam, "__all__", dir(tam))):
        obj = getattr(tam, n, None)
        if not callable(obj) or n.startswith("_"):
            continue
        try:
            with torch.device("meta"):
                model, _ = _torchaudio_make(n, probe=True)
        except Exception as exc:  # noqa: BLE001
            left[n] = "no small recipe: %s" % (str(exc).splitlines() or [type(exc).__name__])[0][:160]
            continue
        if not has_attention(model):
            left[n] = "no attention module"
            continue
        fam = TORCHAUDIO_FAMILY.sub(r"\2", n) if inspect.isfunction(obj) else n
        fams.setdefault(fam, []).append(n)
    for fam, names in sorted(fams.items()):
        names.sort(key=lambda x: (("base" not in x and "300m" not in x), len(x), x))
        out.append({"name": names[0], "family": fam, "covers": names})
    return {"entries": out, "left_out": left}


def _torchaudio_make(name, probe=False):
    import torch
    import torchaudio.models as tam

    obj = getattr(tam, name)
    small = dict(num_heads=2, ffn_dim=32, num_layers=2)
    if name == "Conformer":
        return tam.Conformer(input_dim=16, depthwise_conv_kernel_size=3, **small), (
            torch.randn(1, 20, 16), torch.tensor([20]))
    if name == "Emformer":
        return tam.Emformer(input_dim=16, segment_length=4, right_context_length=1, **small), (
            torch.randn(1, 9, 16), torch.tensor([9]))
    if name in ("Wav2Vec2Model", "HuBERTPretrainModel", "RNNT", "Tacotron2", "WaveRNN", "ConvTasNet", "DeepSpeech",
                "Wav2Letter", "HDemucs", "SquimObjective", "SquimSubjective", "RNNTBeamSearch", "Hypothesis"):
        raise TypeError("a class built through its factories")
    if not inspect.isfunction(obj):
        raise TypeError("not a factory")
    sig = inspect.signature(obj)
    required = [p for p in sig.parameters.values() if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                                                           p.KEYWORD_ONLY)]
    kwargs = {}
    for p in required:
        if p.name in ("num_sources", "num_out", "aux_num_out"):
            kwargs[p.name] = 2
        elif p.name == "sources":
            kwargs[p.name] = ["a", "b"]
        else:
            raise TypeError("needs %s" % p.name)
    model = _torchaudio_shallow(obj, kwargs)
    cls = type(model).__name__
    if cls == "Wav2Vec2Model":
        return model, (torch.randn(1, 4000),)
    if cls == "HuBERTPretrainModel":  # waveforms, frame labels (4000 samples: 12 frames), lengths
        return model, (torch.randn(1, 4000), torch.randint(0, 100, (1, 12)), torch.tensor([4000]))
    if cls == "SquimObjective":
        return model, (torch.randn(1, 8000),)
    if cls == "SquimSubjective":
        return model, (torch.randn(1, 8000), torch.randn(1, 8000))
    if cls == "RNNT":
        return model, (torch.randn(1, 16, 80), torch.tensor([16]), torch.randint(0, 10, (1, 4)), torch.tensor([4]))
    if cls == "HDemucs":
        return model, (torch.randn(1, 2, 8192),)
    return model, None


def _torchaudio_shallow(factory, kwargs):
    """A torchaudio factory called with its encoder cut to 2 layers: the wav2vec2 family's factories
    call the module's wav2vec2_model / hubert_pretrain_model / wavlm_model with their sizes, which are
    wrapped for the call."""
    import torchaudio.models.wav2vec2.model as w2v

    mod = sys.modules.get(factory.__module__)
    if mod is not w2v:
        return factory(**kwargs)
    saved = {n: getattr(w2v, n) for n in ("wav2vec2_model", "hubert_pretrain_model", "wavlm_model")}

    def wrap(fn):
        def shallow(*a, **kw):
            if "encoder_num_layers" in kw:
                kw["encoder_num_layers"] = min(kw["encoder_num_layers"], 2)
            return fn(*a, **kw)
        return shallow

    try:
        for n, fn in saved.items():
            setattr(w2v, n, wrap(fn))
        return factory(**kwargs)
    finally:
        for n, fn in saved.items():
            setattr(w2v, n, fn)


def _build_torchaudio(name):
    model, inputs = _torchaudio_make(name)
    if inputs is None:
        raise TypeError("torchaudio.models.%s: no inputs known" % name)
    return model, inputs


# ---------------------------------------------------------------- reference implementations

VIT_PYTORCH_ARGS = dict(image_size=32, patch_size=8, num_classes=10, dim=64, depth=2, heads=4, mlp_dim=128,
                        dim_head=16, channels=3, frames=4, frame_patch_size=2, image_patch_size=8, seq_len=64,
                        num_frames=4, max_seq_len=64, dim_conv_stem=16, window_size=2, num_tokens=100,
                        local_patch_size=4, global_patch_size=8, num_vtokens=4, dims=(16, 32, 64), stages=3,
                        image_height=32, image_width=32, cls_depth=1, mlp_mult=2, spatial_depth=1,
                        temporal_depth=1, num_hierarchies=2, max_frames=4, num_residual_streams=2,
                        freq_patch_size=4, num_slots=4)


def _list_vit_pytorch():
    import torch
    import vit_pytorch

    pkg = os.path.dirname(vit_pytorch.__file__)
    out, left = [], {}
    for fn in sorted(os.listdir(pkg)):
        if not fn.endswith(".py") or fn.startswith("_"):
            continue
        modname = "vit_pytorch." + fn[:-3]
        try:
            mod = importlib.import_module(modname)
        except Exception as exc:  # noqa: BLE001
            left[modname] = "does not import: %s" % (str(exc).splitlines() or [type(exc).__name__])[0][:160]
            continue
        for cname, cls in sorted(vars(mod).items()):
            if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module) and cls.__module__ == modname):
                continue
            params = inspect.signature(cls.__init__).parameters
            if "num_classes" not in params or not ({"image_size", "seq_len", "image_height"} & set(params)):
                continue
            key = "%s.%s" % (fn[:-3], cname)
            try:
                with torch.device("meta"):
                    _vit_pytorch_make(key)
            except Exception as exc:  # noqa: BLE001
                left[key] = "no small recipe: %s" % (str(exc).splitlines() or [type(exc).__name__])[0][:160]
                continue
            out.append({"name": key, "family": key, "covers": [key]})
    return {"entries": out, "left_out": left}


def _vit_pytorch_make(key, cand=None):
    import torch

    modname, cname = key.rsplit(".", 1)
    cls = getattr(importlib.import_module("vit_pytorch." + modname), cname)
    params = inspect.signature(cls.__init__).parameters
    kw = {}
    for p in params.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is p.empty:
            if p.name not in VIT_PYTORCH_ARGS:
                raise TypeError("needs %s" % p.name)
            kw[p.name] = VIT_PYTORCH_ARGS[p.name]
        elif p.name in ("depth", "image_size", "patch_size") and p.name in VIT_PYTORCH_ARGS and isinstance(
                p.default, int):
            kw[p.name] = VIT_PYTORCH_ARGS[p.name]
    if cand:
        kw.update(cand.get("kw", {}))
    model = cls(**kw)
    return model, kw


def _vit_pytorch_inputs(kw, layout):
    import torch

    s = kw.get("image_size", kw.get("image_height", 32))
    s = s if isinstance(s, int) else s[0]
    c = kw.get("channels", 3)
    if layout == "1d":
        return (torch.randn(1, c, kw.get("seq_len", 64)),)
    if layout == "video":
        return (torch.randn(1, c, kw.get("frames", kw.get("num_frames", 4)), s, s),)
    if layout == "list":
        return ([torch.randn(c, s, s)],)
    return (torch.randn(1, c, s, s),)


def _build_vit_pytorch(name):
    cands = [{"layout": lay, "kw": kw} for kw in ({}, {"image_size": 64}, {"image_size": 224, "patch_size": 16})
             for lay in ("image", "video", "1d", "list")]

    def check(cand):
        m, kw = _vit_pytorch_make(name, cand)
        _run(m, _vit_pytorch_inputs(kw, cand["layout"]))

    choice = _calibrated("vit_pytorch", name, cands, check)
    m, kw = _vit_pytorch_make(name, choice)
    return m, _vit_pytorch_inputs(kw, choice["layout"])


# x-transformers cannot list its configurations: its wrappers, each with the attention options its
# README documents (one option a variant)
X_TRANSFORMERS = {
    "decoder": {},
    "encoder": {"kind": "encoder"},
    "decoder_flash": {"attn_flash": True},
    "decoder_rotary": {"rotary_pos_emb": True},
    "decoder_alibi": {"alibi_pos_bias": True},
    "decoder_rel_pos_bias": {"rel_pos_bias": True},
    "decoder_dynamic_pos_bias": {"dynamic_pos_bias": True},
    "decoder_qk_norm": {"attn_qk_norm": True},
    "decoder_gqa": {"attn_kv_heads": 1},
    "decoder_talking_heads": {"attn_pre_talking_heads": True, "attn_post_talking_heads": True},
    "decoder_sparse_topk": {"attn_sparse_topk": 4},
    "decoder_softclamp": {"attn_softclamp_logits": True},
    "decoder_rmsnorm_swiglu": {"use_rmsnorm": True, "ff_swish": True, "ff_glu": True},
    "decoder_xpos": {"rotary_xpos": True},
    "encoder_masked": {"kind": "encoder", "mask": True},
    "cross_attender": {"kind": "cross"},
    "xtransformer": {"kind": "encdec"},
    "vit": {"kind": "vit"},
    "continuous": {"kind": "continuous"},
}


def _build_x_transformers(name):
    import torch
    import x_transformers as xt

    opts = dict(X_TRANSFORMERS[name])
    kind, mask = opts.pop("kind", "decoder"), opts.pop("mask", False)
    layer = dict(dim=32, depth=2, heads=2, **opts)
    if kind == "decoder":
        return xt.TransformerWrapper(num_tokens=64, max_seq_len=32, attn_layers=xt.Decoder(**layer)), (
            torch.randint(0, 64, (1, 16)),)
    if kind == "encoder":
        inputs = {"x": torch.randint(0, 64, (1, 16))}
        if mask:
            inputs["mask"] = torch.arange(16)[None] < 12
        return xt.TransformerWrapper(num_tokens=64, max_seq_len=32, attn_layers=xt.Encoder(**layer)), inputs
    if kind == "cross":
        return xt.CrossAttender(**layer), ((torch.randn(1, 8, 32),), {"context": torch.randn(1, 6, 32)})
    if kind == "encdec":
        model = xt.XTransformer(dim=32, enc_num_tokens=64, enc_depth=2, enc_heads=2, enc_max_seq_len=32,
                                dec_num_tokens=64, dec_depth=2, dec_heads=2, dec_max_seq_len=32)
        src = torch.randint(0, 64, (1, 12))
        return model, ((src, torch.randint(0, 64, (1, 10))), {"mask": torch.ones(1, 12, dtype=torch.bool)})
    if kind == "vit":
        return xt.ViTransformerWrapper(image_size=32, patch_size=8, attn_layers=xt.Encoder(**layer)), (
            torch.randn(1, 3, 32, 32),)
    if kind == "continuous":
        return xt.ContinuousTransformerWrapper(dim_in=8, dim_out=8, max_seq_len=32, attn_layers=xt.Decoder(**layer)), (
            torch.randn(1, 16, 8),)
    raise KeyError(name)


def _build_reference(codebase, name):
    import torch

    if codebase == "perceiver_pytorch":
        import perceiver_pytorch as pp

        if name == "Perceiver":
            return pp.Perceiver(num_freq_bands=4, depth=2, max_freq=10.0, input_channels=3, input_axis=2,
                                num_latents=8, latent_dim=32, cross_heads=1, latent_heads=2, cross_dim_head=16,
                                latent_dim_head=16, num_classes=10), (torch.randn(1, 8, 8, 3),)
        if name == "PerceiverIO":
            return pp.PerceiverIO(dim=16, queries_dim=16, logits_dim=10, depth=2, num_latents=8, latent_dim=32,
                                  cross_heads=1, latent_heads=2, cross_dim_head=16, latent_dim_head=16), (
                (torch.randn(1, 12, 16),), {"queries": torch.randn(1, 5, 16)})
        if name == "PerceiverLM":
            from perceiver_pytorch.perceiver_io import PerceiverLM

            return PerceiverLM(num_tokens=64, dim=16, depth=2, max_seq_len=32, num_latents=8, latent_dim=32,
                               cross_heads=1, latent_heads=2, cross_dim_head=16, latent_dim_head=16), (
                torch.randint(0, 64, (1, 12)),)
    if codebase == "nystrom_attention":
        import nystrom_attention as na

        return na.Nystromformer(dim=32, depth=2, dim_head=16, heads=2, num_landmarks=4), (torch.randn(1, 16, 32),)
    if codebase == "local_attention":
        import local_attention as la

        return la.LocalTransformer(num_tokens=64, max_seq_len=32, dim=32, depth=2, local_attn_window_size=8,
                                   dim_head=16, heads=2), (torch.randint(0, 64, (1, 16)),)
    if codebase == "performer_pytorch":
        import performer_pytorch as pf

        causal = name == "PerformerLM_causal"
        return pf.PerformerLM(num_tokens=64, max_seq_len=32, dim=32, depth=2, heads=2, dim_head=16, causal=causal,
                              nb_features=16), (torch.randint(0, 64, (1, 16)),)
    if codebase == "tab_transformer_pytorch":
        import tab_transformer_pytorch as tt

        cls = getattr(tt, name)
        return cls(categories=(5, 6, 7), num_continuous=4, dim=16, depth=2, heads=2), (
            torch.randint(0, 5, (2, 3)), torch.randn(2, 4))
    if codebase == "segment_anything":
        from segment_anything.modeling import ImageEncoderViT, MaskDecoder, TwoWayTransformer

        if name == "ImageEncoderViT":
            return ImageEncoderViT(img_size=64, patch_size=16, embed_dim=32, depth=2, num_heads=2, out_chans=16,
                                   use_rel_pos=True, window_size=2, global_attn_indexes=(1,)), (
                torch.randn(1, 3, 64, 64),)
        if name == "TwoWayTransformer":
            return TwoWayTransformer(depth=2, embedding_dim=32, num_heads=2, mlp_dim=64), (
                torch.randn(1, 32, 4, 4), torch.randn(1, 32, 4, 4), torch.randn(1, 5, 32))
        if name == "MaskDecoder":
            dec = MaskDecoder(transformer_dim=32, transformer=TwoWayTransformer(depth=2, embedding_dim=32, num_heads=2,
                                                                                mlp_dim=64), num_multimask_outputs=3)
            return dec, ((), {"image_embeddings": torch.randn(1, 32, 4, 4), "image_pe": torch.randn(1, 32, 4, 4),
                              "sparse_prompt_embeddings": torch.randn(1, 2, 32),
                              "dense_prompt_embeddings": torch.randn(1, 32, 4, 4), "multimask_output": True})
    raise KeyError("%s: no entry %r" % (codebase, name))


REFERENCE_NAMES = {
    "perceiver_pytorch": ["Perceiver", "PerceiverIO", "PerceiverLM"],
    "nystrom_attention": ["Nystromformer"],
    "local_attention": ["LocalTransformer"],
    "performer_pytorch": ["PerformerLM", "PerformerLM_causal"],
    "tab_transformer_pytorch": ["TabTransformer", "FTTransformer"],
    "segment_anything": ["ImageEncoderViT", "TwoWayTransformer", "MaskDecoder"],
}


def _fixed_lister(codebase):
    def lister():
        names = list(X_TRANSFORMERS) if codebase == "x_transformers" else REFERENCE_NAMES[codebase]
        return {"entries": [{"name": n, "family": "%s.%s" % (codebase, n), "covers": [n]} for n in names],
                "left_out": {}}

    return lister


LISTERS = {"timm": _list_timm, "diffusers": _list_diffusers, "open_clip": _list_open_clip,
           "torchvision": _list_torchvision, "torchaudio": _list_torchaudio, "vit_pytorch": _list_vit_pytorch,
           "x_transformers": _fixed_lister("x_transformers")}
LISTERS.update({cb: _fixed_lister(cb) for cb in REFERENCE_NAMES})
BUILDERS = {"timm": _build_timm, "diffusers": _build_diffusers, "open_clip": _build_open_clip,
            "torchvision": _build_torchvision, "torchaudio": _build_torchaudio, "vit_pytorch": _build_vit_pytorch,
            "x_transformers": _build_x_transformers}
BUILDERS.update({cb: functools.partial(_build_reference, cb) for cb in REFERENCE_NAMES})
_SOURCE_TAG = "zoo-3"


# ---------------------------------------------------------------- diffusers' tiny test configs
# Generated from diffusers' tests/models/** (commit 58eb52c080: each tester's get_init_dict() and
# get_dummy_inputs(), or prepare_init_args_and_inputs_for_common()), one entry a tester config:
# name: [model class, init kwargs, inputs], each input ["T", shape, dtype, values or [min, max]] (a
# tensor: the values where the test's are integers or few, else random), ["L", [...]] a list,
# ["D", {...}] a dict, ["V", value] a plain value, ["U", repr] one not reproduced (left out).
DIFFUSERS_TESTS = {
    "AceStepTransformer1DModel": ["AceStepTransformer1DModel",{"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":8,"in_channels":24,"audio_acoustic_hidden_dim":8,"patch_size":2,"rope_theta":10000.0,"rms_norm_eps":1e-06,"sliding_window":16},{"hidden_states":["T",[2,8,8],"float32"],"timestep":["T",[2],"float32",[1.5409960746765137,0.293428897857666]],"timestep_r":["T",[2],"float32",[1.5409960746765137,0.293428897857666]],"encoder_hidden_states":["T",[2,10,32],"float32"],"context_latents":["T",[2,8,16],"float32"]}],
    "AllegroTransformer3DModel": ["AllegroTransformer3DModel",{"num_attention_heads":2,"attention_head_dim":8,"in_channels":4,"out_channels":4,"num_layers":1,"cross_attention_dim":16,"sample_width":8,"sample_height":8,"sample_frames":8,"caption_channels":8},{"hidden_states":["T",[2,4,2,8,8],"float32"],"encoder_hidden_states":["T",[2,16,8],"float32"],"timestep":["T",[2],"int64",[44,239]]}],
    "AnyFlowFARTransformer3DModel": ["AnyFlowFARTransformer3DModel",{"patch_size":[1,2,2],"compressed_patch_size":[1,4,4],"full_chunk_limit":3,"num_attention_heads":2,"attention_head_dim":12,"in_channels":4,"out_channels":4,"text_dim":16,"freq_dim":256,"ffn_dim":32,"num_layers":2,"cross_attn_norm":True,"rope_max_seq_len":32,"gate_value":0.25,"deltatime_type":"r"},{"hidden_states":["T",[1,4,4,16,16],"float32"],"timestep":["T",[1,4],"float32",[500.0,500.0,500.0,500.0]],"r_timestep":["T",[1,4],"float32",[250.0,250.0,250.0,250.0]],"encoder_hidden_states":["T",[1,12,16],"float32"],"chunk_partition":["V",[2,2]]}],
    "AnyFlowTransformer3DModel": ["AnyFlowTransformer3DModel",{"patch_size":[1,2,2],"num_attention_heads":2,"attention_head_dim":12,"in_channels":4,"out_channels":4,"text_dim":16,"freq_dim":256,"ffn_dim":32,"num_layers":2,"cross_attn_norm":True,"rope_max_seq_len":32,"gate_value":0.25,"deltatime_type":"r"},{"hidden_states":["T",[1,2,4,16,16],"float32"],"timestep":["T",[1,2],"float32",[500.0,500.0]],"r_timestep":["T",[1,2],"float32",[250.0,250.0]],"encoder_hidden_states":["T",[1,12,16],"float32"]}],
    "AsymmetricAutoencoderKL": ["AsymmetricAutoencoderKL",{"in_channels":3,"out_channels":3,"down_block_types":["DownEncoderBlock2D","DownEncoderBlock2D"],"down_block_out_channels":[2,4],"layers_per_down_block":1,"up_block_types":["UpDecoderBlock2D","UpDecoderBlock2D"],"up_block_out_channels":[2,4],"layers_per_up_block":1,"act_fn":"silu","latent_channels":4,"norm_num_groups":2,"sample_size":32,"scaling_factor":0.18215},{"sample":["T",[4,3,32,32],"float32"],"mask":["T",[4,1,32,32],"float32"]}],
    "AuraFlowTransformer2DModel": ["AuraFlowTransformer2DModel",{"sample_size":32,"patch_size":2,"in_channels":4,"num_mmdit_layers":1,"num_single_dit_layers":1,"attention_head_dim":8,"num_attention_heads":4,"caption_projection_dim":32,"joint_attention_dim":32,"out_channels":4,"pos_embed_max_size":256},{"hidden_states":["T",[2,4,32,32],"float32"],"encoder_hidden_states":["T",[2,256,32],"float32"],"timestep":["T",[2],"int64",[44,239]]}],
    "AutoencoderDC": ["AutoencoderDC",{"in_channels":3,"latent_channels":4,"attention_head_dim":2,"encoder_block_types":["ResBlock","EfficientViTBlock"],"decoder_block_types":["ResBlock","EfficientViTBlock"],"encoder_block_out_channels":[8,8],"decoder_block_out_channels":[8,8],"encoder_qkv_multiscales":[[],[5]],"decoder_qkv_multiscales":[[],[5]],"encoder_layers_per_block":[1,1],"decoder_layers_per_block":[1,1],"downsample_block_type":"conv","upsample_block_type":"interpolate","decoder_norm_types":"rms_norm","decoder_act_fns":"silu","scaling_factor":0.41407},{"sample":["T",[4,3,32,32],"float32"]}],
    "AutoencoderKL": ["AutoencoderKL",{"block_out_channels":[2,4],"in_channels":3,"out_channels":3,"down_block_types":["DownEncoderBlock2D","DownEncoderBlock2D"],"up_block_types":["UpDecoderBlock2D","UpDecoderBlock2D"],"latent_channels":4,"norm_num_groups":2},{"sample":["T",[4,3,32,32],"float32"]}],
    "AutoencoderKLCogVideoX": ["AutoencoderKLCogVideoX",{"in_channels":3,"out_channels":3,"down_block_types":["CogVideoXDownBlock3D","CogVideoXDownBlock3D","CogVideoXDownBlock3D","CogVideoXDownBlock3D"],"up_block_types":["CogVideoXUpBlock3D","CogVideoXUpBlock3D","CogVideoXUpBlock3D","CogVideoXUpBlock3D"],"block_out_channels":[8,8,8,8],"latent_channels":4,"layers_per_block":1,"norm_num_groups":2,"temporal_compression_ratio":4},{"sample":["T",[4,3,8,16,16],"float32"]}],
    "AutoencoderKLCosmos": ["AutoencoderKLCosmos",{"in_channels":3,"out_channels":3,"latent_channels":4,"encoder_block_out_channels":[8,8,8,8],"decode_block_out_channels":[8,8,8,8],"attention_resolutions":[8],"resolution":64,"num_layers":2,"patch_size":4,"patch_type":"haar","scaling_factor":1.0,"spatial_compression_ratio":4,"temporal_compression_ratio":4},{"sample":["T",[2,3,9,32,32],"float32"]}],
    "AutoencoderKLHunyuanVideo": ["AutoencoderKLHunyuanVideo",{"in_channels":3,"out_channels":3,"latent_channels":4,"down_block_types":["HunyuanVideoDownBlock3D","HunyuanVideoDownBlock3D","HunyuanVideoDownBlock3D","HunyuanVideoDownBlock3D"],"up_block_types":["HunyuanVideoUpBlock3D","HunyuanVideoUpBlock3D","HunyuanVideoUpBlock3D","HunyuanVideoUpBlock3D"],"block_out_channels":[8,8,8,8],"layers_per_block":1,"act_fn":"silu","norm_num_groups":4,"scaling_factor":0.476986,"spatial_compression_ratio":8,"temporal_compression_ratio":4,"mid_block_add_attention":True},{"sample":["T",[2,3,9,16,16],"float32"]}],
    "AutoencoderKLKVAE": ["AutoencoderKLKVAE",{"in_channels":3,"channels":32,"num_enc_blocks":1,"num_dec_blocks":1,"z_channels":4,"double_z":True,"ch_mult":[1,2],"sample_size":32},{"sample":["T",[2,3,32,32],"float32"]}],
    "AutoencoderKLKVAEVideo": ["AutoencoderKLKVAEVideo",{"ch":32,"ch_mult":[1,2],"num_res_blocks":1,"in_channels":3,"out_ch":3,"z_channels":4,"temporal_compress_times":2},{"sample":["T",[2,3,3,16,16],"float32"]}],
    "AutoencoderKLLTX2Audio": ["AutoencoderKLLTX2Audio",{"in_channels":2,"output_channels":2,"latent_channels":4,"base_channels":16,"ch_mult":[1,2,4],"resolution":16,"attn_resolutions":None,"num_res_blocks":2,"norm_type":"pixel","causality_axis":"height","mid_block_add_attention":False,"sample_rate":16000,"mel_hop_length":160,"mel_bins":16,"is_causal":True,"double_z":True},{"sample":["T",[2,2,8,16],"float32"]}],
    "AutoencoderKLLTX2Video": ["AutoencoderKLLTX2Video",{"in_channels":3,"out_channels":3,"latent_channels":8,"block_out_channels":[8,8,8,8],"decoder_block_out_channels":[16,32,64],"layers_per_block":[1,1,1,1,1],"decoder_layers_per_block":[1,1,1,1],"spatio_temporal_scaling":[True,True,True,True],"decoder_spatio_temporal_scaling":[True,True,True],"decoder_inject_noise":[False,False,False,False],"downsample_type":["spatial","temporal","spatiotemporal","spatiotemporal"],"upsample_residual":[True,True,True],"upsample_factor":[2,2,2],"timestep_conditioning":False,"patch_size":1,"patch_size_t":1,"encoder_causal":True,"decoder_causal":False,"encoder_spatial_padding_mode":"zeros","decoder_spatial_padding_mode":"zeros"},{"sample":["T",[2,3,9,16,16],"float32"]}],
    "AutoencoderKLLTXVideo": ["AutoencoderKLLTXVideo",{"in_channels":3,"out_channels":3,"latent_channels":8,"block_out_channels":[8,8,8,8],"decoder_block_out_channels":[8,8,8,8],"layers_per_block":[1,1,1,1,1],"decoder_layers_per_block":[1,1,1,1,1],"spatio_temporal_scaling":[True,True,False,False],"decoder_spatio_temporal_scaling":[True,True,False,False],"decoder_inject_noise":[False,False,False,False,False],"upsample_residual":[False,False,False,False],"upsample_factor":[1,1,1,1],"timestep_conditioning":False,"patch_size":1,"patch_size_t":1,"encoder_causal":True,"decoder_causal":False},{"sample":["T",[2,3,9,16,16],"float32"]}],
    "AutoencoderKLLTXVideo_2": ["AutoencoderKLLTXVideo",{"in_channels":3,"out_channels":3,"latent_channels":8,"block_out_channels":[8,8,8,8],"decoder_block_out_channels":[16,32,64],"layers_per_block":[1,1,1,1],"decoder_layers_per_block":[1,1,1,1],"spatio_temporal_scaling":[True,True,True,False],"decoder_spatio_temporal_scaling":[True,True,True],"decoder_inject_noise":[True,True,True,False],"upsample_residual":[True,True,True],"upsample_factor":[2,2,2],"timestep_conditioning":True,"patch_size":1,"patch_size_t":1,"encoder_causal":True,"decoder_causal":False},{"sample":["T",[2,3,9,16,16],"float32"],"temb":["T",[2],"float32",[0.05000000074505806,0.05000000074505806]]}],
    "AutoencoderKLMagvit": ["AutoencoderKLMagvit",{"in_channels":3,"latent_channels":4,"out_channels":3,"block_out_channels":[8,8,8,8],"down_block_types":["SpatialDownBlock3D","SpatialTemporalDownBlock3D","SpatialTemporalDownBlock3D","SpatialTemporalDownBlock3D"],"up_block_types":["SpatialUpBlock3D","SpatialTemporalUpBlock3D","SpatialTemporalUpBlock3D","SpatialTemporalUpBlock3D"],"layers_per_block":1,"norm_num_groups":8,"spatial_group_norm":True},{"sample":["T",[2,3,9,16,16],"float32"]}],
    "AutoencoderKLMiniMaxH3": ["AutoencoderKLMiniMaxH3",{"in_channels":3,"out_channels":3,"latent_channels":4,"block_out_channels":[8,16],"layers_per_block":1,"spatial_downsample_factors":[2,2],"temporal_downsample_factors":[2,2],"norm_num_groups":8,"decoder_num_layers":2,"decoder_num_attention_heads":2,"decoder_attention_head_dim":8,"decoder_num_register_tokens":2,"decoder_ffn_mult":2,"clip_length":17,"token_drop":3,"latents_mean":[0.0,0.0,0.0,0.0],"latents_std":[1.0,1.0,1.0,1.0]},{"sample":["T",[2,3,22,8,8],"float32"]}],
    "AutoencoderKLMiniMaxH3Audio": ["AutoencoderKLMiniMaxH3Audio",{"encoder_dim":4,"encoder_rates":[2,2],"latent_dim":32,"latent_channels":8,"num_attention_heads":2,"decoder_dim":16,"decoder_rates":[2,2],"decoder_kernel_sizes":[4,4],"resblock_kernel_sizes":[3,7],"resblock_dilation_sizes":[[1,3],[1,3]],"sampling_rate":32000,"latents_mean":[0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0],"latents_std":[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]},{"sample":["T",[2,1,32],"float32"]}],
    "AutoencoderKLMochi": ["AutoencoderKLMochi",{"in_channels":15,"out_channels":3,"latent_channels":4,"encoder_block_out_channels":[32,32,32,32],"decoder_block_out_channels":[32,32,32,32],"layers_per_block":[1,1,1,1,1],"act_fn":"silu","scaling_factor":1},{"sample":["T",[2,3,7,16,16],"float32"]}],
    "AutoencoderKLTemporalDecoder": ["AutoencoderKLTemporalDecoder",{"block_out_channels":[32,64],"in_channels":3,"out_channels":3,"down_block_types":["DownEncoderBlock2D","DownEncoderBlock2D"],"latent_channels":4,"layers_per_block":2},{"sample":["T",[3,3,32,32],"float32"],"num_frames":["V",3]}],
    "AutoencoderKLWan": ["AutoencoderKLWan",{"base_dim":3,"z_dim":16,"dim_mult":[1,1,1,1],"num_res_blocks":1,"temperal_downsample":[False,True,True]},{"sample":["T",[2,3,9,16,16],"float32"]}],
    "AutoencoderRAE": ["AutoencoderRAE",{"encoder_type":"tiny_test","encoder_hidden_size":16,"encoder_patch_size":8,"encoder_input_size":32,"patch_size":4,"image_size":16,"decoder_hidden_size":32,"decoder_num_hidden_layers":1,"decoder_num_attention_heads":4,"decoder_intermediate_size":64,"num_channels":3,"encoder_norm_mean":[0.5,0.5,0.5],"encoder_norm_std":[0.5,0.5,0.5],"noise_tau":0.0,"reshape_to_2d":True,"scaling_factor":1.0},{"sample":["T",[2,3,32,32],"float32"]}],
    "AutoencoderSAME": ["AutoencoderSAME",{"audio_channels":2,"patch_size":4,"encoder_channels":16,"encoder_c_mults":[1,2],"encoder_strides":[2,2],"encoder_transformer_depths":[1,1],"latent_dim":8,"use_differential_attention":False,"dim_heads":8,"ff_mult":2,"sampling_rate":44100},{"sample":["T",[2,2,128],"float32"]}],
    "AutoencoderTiny": ["AutoencoderTiny",{"in_channels":3,"out_channels":3,"encoder_block_out_channels":[32,32],"decoder_block_out_channels":[32,32],"num_encoder_blocks":[1,1],"num_decoder_blocks":[1,1]},{"sample":["T",[4,3,32,32],"float32"]}],
    "AutoencoderVidTok": ["AutoencoderVidTok",{"is_causal":False,"in_channels":3,"out_channels":3,"ch":128,"ch_mult":[1,2,4,4,4],"z_channels":6,"double_z":False,"num_res_blocks":2,"regularizer":"fsq","codebook_size":262144},{"sample":["T",[4,3,16,32,32],"float32"]}],
    "BriaFiboTransformer2DModel": ["BriaFiboTransformer2DModel",{"patch_size":1,"in_channels":48,"num_layers":1,"num_single_layers":1,"attention_head_dim":8,"num_attention_heads":2,"joint_attention_dim":64,"text_encoder_dim":32,"pooled_projection_dim":None,"axes_dims_rope":[0,4,4]},{"hidden_states":["T",[1,256,48],"float32"],"encoder_hidden_states":["T",[1,32,64],"float32"],"img_ids":["T",[256,3],"float32"],"txt_ids":["T",[32,3],"float32"],"timestep":["T",[1],"float32",[1.0]],"text_encoder_layers":["L",[["T",[1,32,32],"float32"],["T",[1,32,32],"float32"]]]}],
    "BriaTransformer2DModel": ["BriaTransformer2DModel",{"patch_size":1,"in_channels":4,"num_layers":1,"num_single_layers":1,"attention_head_dim":8,"num_attention_heads":2,"joint_attention_dim":32,"pooled_projection_dim":None,"axes_dims_rope":[0,4,4]},{"hidden_states":["T",[1,16,4],"float32"],"encoder_hidden_states":["T",[1,48,32],"float32"],"img_ids":["T",[16,3],"float32"],"txt_ids":["T",[48,3],"float32"],"timestep":["T",[1],"float32",[1.0]]}],
    "ChromaTransformer2DModel": ["ChromaTransformer2DModel",{"patch_size":1,"in_channels":4,"num_layers":1,"num_single_layers":1,"attention_head_dim":16,"num_attention_heads":2,"joint_attention_dim":32,"axes_dims_rope":[4,4,8],"approximator_num_channels":8,"approximator_hidden_dim":16,"approximator_layers":1},{"hidden_states":["T",[1,16,4],"float32"],"encoder_hidden_states":["T",[1,48,32],"float32"],"img_ids":["T",[16,3],"float32"],"txt_ids":["T",[48,3],"float32"],"timestep":["T",[1],"float32",[1.0]]}],
    "ChronoEditTransformer3DModel": ["ChronoEditTransformer3DModel",{"patch_size":[1,2,2],"num_attention_heads":2,"attention_head_dim":8,"in_channels":16,"out_channels":16,"text_dim":32,"freq_dim":16,"ffn_dim":32,"num_layers":2,"cross_attn_norm":True,"qk_norm":"rms_norm_across_heads","eps":1e-06,"image_dim":None,"added_kv_proj_dim":None,"rope_max_seq_len":64,"pos_embed_seq_len":None,"rope_temporal_skip_len":8},{"hidden_states":["T",[1,16,2,8,8],"float32"],"timestep":["T",[1],"int64",[44]],"encoder_hidden_states":["T",[1,12,32],"float32"],"encoder_hidden_states_image":["V",None]}],
    "CogVideoXTransformer3DModel": ["CogVideoXTransformer3DModel",{"num_attention_heads":2,"attention_head_dim":8,"in_channels":4,"out_channels":4,"time_embed_dim":2,"text_embed_dim":8,"num_layers":2,"sample_width":8,"sample_height":8,"sample_frames":8,"patch_size":2,"patch_size_t":None,"temporal_compression_ratio":4,"max_text_seq_length":8},{"hidden_states":["T",[2,1,4,8,8],"float32"],"encoder_hidden_states":["T",[2,8,8],"float32"],"timestep":["T",[2],"int64",[44,239]]}],
    "CogVideoXTransformer3DModel_2": ["CogVideoXTransformer3DModel",{"num_attention_heads":2,"attention_head_dim":8,"in_channels":4,"out_channels":4,"time_embed_dim":2,"text_embed_dim":8,"num_layers":2,"sample_width":8,"sample_height":8,"sample_frames":8,"patch_size":2,"patch_size_t":2,"temporal_compression_ratio":4,"max_text_seq_length":8,"use_rotary_positional_embeddings":True},{"hidden_states":["T",[2,2,4,8,8],"float32"],"encoder_hidden_states":["T",[2,8,8],"float32"],"timestep":["T",[2],"int64",[44,239]]}],
    "CogView3PlusTransformer2DModel": ["CogView3PlusTransformer2DModel",{"patch_size":2,"in_channels":4,"num_layers":2,"attention_head_dim":4,"num_attention_heads":2,"out_channels":4,"text_embed_dim":8,"time_embed_dim":8,"condition_dim":2,"pos_embed_max_size":8,"sample_size":8},{"hidden_states":["T",[2,4,8,8],"float32"],"encoder_hidden_states":["T",[2,8,8],"float32"],"original_size":["T",[2,2],"int64",[64,64,64,64]],"target_size":["T",[2,2],"int64",[64,64,64,64]],"crop_coords":["T",[2,2],"int64",[0,0,0,0]],"timestep":["T",[2],"int64",[44,239]]}],
    "CogView4Transformer2DModel": ["CogView4Transformer2DModel",{"patch_size":2,"in_channels":4,"num_layers":2,"attention_head_dim":4,"num_attention_heads":4,"out_channels":4,"text_embed_dim":8,"time_embed_dim":8,"condition_dim":4},{"hidden_states":["T",[2,4,8,8],"float32"],"encoder_hidden_states":["T",[2,8,8],"float32"],"timestep":["T",[2],"int64",[44,239]],"original_size":["T",[2,2],"int64",[64,64,64,64]],"target_size":["T",[2,2],"int64",[64,64,64,64]],"crop_coords":["T",[2,2],"int64",[0,0,0,0]]}],
    "ConsisIDTransformer3DModel": ["ConsisIDTransformer3DModel",{"num_attention_heads":2,"attention_head_dim":8,"in_channels":4,"out_channels":4,"time_embed_dim":2,"text_embed_dim":8,"num_layers":1,"sample_width":8,"sample_height":8,"sample_frames":8,"patch_size":2,"temporal_compression_ratio":4,"max_text_seq_length":8,"cross_attn_interval":1,"is_kps":False,"is_train_face":True,"cross_attn_dim_head":1,"cross_attn_num_heads":1,"LFE_id_dim":2,"LFE_vit_dim":2,"LFE_depth":5,"LFE_dim_head":8,"LFE_num_heads":2,"LFE_num_id_token":1,"LFE_num_querie":1,"LFE_output_dim":10,"LFE_ff_mult":1,"LFE_num_scale":1},{"hidden_states":["T",[2,1,4,8,8],"float32"],"encoder_hidden_states":["T",[2,8,8],"float32"],"timestep":["T",[2],"int64",[44,239]],"id_vit_hidden":["L",[["T",[2,2,2],"float32",[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]]]],"id_cond":["T",[2,2],"float32",[1.0,1.0,1.0,1.0]]}],
    "ConsistencyDecoderVAE": ["ConsistencyDecoderVAE",{"encoder_block_out_channels":[2,4],"encoder_in_channels":3,"encoder_out_channels":4,"encoder_down_block_types":["DownEncoderBlock2D","DownEncoderBlock2D"],"decoder_add_attention":False,"decoder_block_out_channels":[2,4],"decoder_down_block_types":["ResnetDownsampleBlock2D","ResnetDownsampleBlock2D"],"decoder_downsample_padding":1,"decoder_in_channels":7,"decoder_layers_per_block":1,"decoder_norm_eps":1e-05,"decoder_norm_num_groups":2,"encoder_norm_num_groups":2,"decoder_num_train_timesteps":1024,"decoder_out_channels":6,"decoder_resnet_time_scale_shift":"scale_shift","decoder_time_embedding_type":"learned","decoder_up_block_types":["ResnetUpsampleBlock2D","ResnetUpsampleBlock2D"],"scaling_factor":1,"latent_channels":4},{"sample":["T",[4,3,32,32],"float32"],"generator":["U","<torch._C.Generator object at 0x7f7d44472fb0>"]}],
    "Cosmos3AVAEAudioTokenizer": ["Cosmos3AVAEAudioTokenizer",{"sampling_rate":16,"hop_size":4,"input_channels":1,"stereo":True,"normalize_volume":True,"enc_dim":4,"enc_num_blocks":1,"enc_n_fft":8,"enc_hop_length":2,"enc_latent_dim":8,"enc_c_mults":[1],"enc_strides":[2],"vocoder_input_dim":4,"dec_dim":4,"dec_c_mults":[1,2],"dec_strides":[2,2],"dec_out_channels":2},{"sample":["T",[2,2,16],"float32"]}],
    "Cosmos3OmniTransformer": ["Cosmos3OmniTransformer",{"head_dim":6,"hidden_act":"relu2","hidden_size":12,"intermediate_size":24,"latent_channel":2,"latent_patch_size":1,"num_attention_heads":2,"num_hidden_layers":2,"num_key_value_heads":1,"patch_latent_dim":2,"qk_norm_for_text":False,"rms_norm_eps":1e-05,"rope_axes_dim":[1,1,1],"rope_theta":100000000.0,"vocab_size":32},{"input_ids":["T",[2],"int64",[1,2]],"text_indexes":["T",[2],"int64",[0,1]],"position_ids":["T",[3,3],"int64",[0,0,0,0,0,0,0,0,0]],"und_len":["V",2],"sequence_length":["V",3],"vision_tokens":["L",[["T",[1,2,1,1,1],"float32",[1.5409960746765137,-0.293428897857666]]]],"vision_token_shapes":["V",[[1,1,1]]],"vision_sequence_indexes":["T",[1],"int64",[2]],"vision_mse_loss_indexes":["T",[1],"int64",[2]],"vision_timesteps":["T",[1],"float32",[1.0]],"vision_noisy_frame_indexes":["L",[["T",[1],"int64",[0]]]]}],
    "CosmosControlNetModel": ["CosmosControlNetModel",{"n_controlnet_blocks":2,"in_channels":18,"latent_channels":18,"model_channels":32,"num_attention_heads":2,"attention_head_dim":16,"mlp_ratio":2,"text_embed_dim":32,"adaln_lora_dim":4,"patch_size":[1,2,2],"max_size":[4,32,32],"rope_scale":[2.0,1.0,1.0],"extra_pos_embed_type":None,"img_context_dim_in":32,"img_context_dim_out":32,"use_crossattn_projection":False},{"controls_latents":["T",[1,16,1,16,16],"float32"],"latents":["T",[1,16,1,16,16],"float32"],"timestep":["T",[1],"float32",[0.5]],"encoder_hidden_states":["L",[["T",[1,12,32],"float32"],["T",[1,4,32],"float32"]]],"condition_mask":["T",[1,1,1,16,16],"float32"],"conditioning_scale":["V",1.0],"padding_mask":["T",[1,1,16,16],"float32"]}],
    "CosmosTransformer3DModel": ["CosmosTransformer3DModel",{"in_channels":4,"out_channels":4,"num_attention_heads":2,"attention_head_dim":12,"num_layers":2,"mlp_ratio":2,"text_embed_dim":16,"adaln_lora_dim":4,"max_size":[4,32,32],"patch_size":[1,2,2],"rope_scale":[2.0,1.0,1.0],"concat_padding_mask":True,"extra_pos_embed_type":"learnable"},{"hidden_states":["T",[1,4,1,16,16],"float32"],"timestep":["T",[1],"int64",[44]],"encoder_hidden_states":["T",[1,12,16],"float32"],"attention_mask":["T",[1,12],"float32",[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]],"fps":["V",30],"padding_mask":["T",[1,1,16,16],"float32"]}],
    "CosmosTransformer3DModel_2": ["CosmosTransformer3DModel",{"in_channels":5,"out_channels":4,"num_attention_heads":2,"attention_head_dim":12,"num_layers":2,"mlp_ratio":2,"text_embed_dim":16,"adaln_lora_dim":4,"max_size":[4,32,32],"patch_size":[1,2,2],"rope_scale":[2.0,1.0,1.0],"concat_padding_mask":True,"extra_pos_embed_type":"learnable"},{"hidden_states":["T",[1,4,1,16,16],"float32"],"timestep":["T",[1],"int64",[44]],"encoder_hidden_states":["T",[1,12,16],"float32"],"attention_mask":["T",[1,12],"float32",[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]],"fps":["V",30],"condition_mask":["T",[1,1,1,16,16],"float32"],"padding_mask":["T",[1,1,16,16],"float32"]}],
    "DiTTransformer2DModel": ["DiTTransformer2DModel",{"in_channels":4,"out_channels":8,"activation_fn":"gelu-approximate","num_attention_heads":2,"attention_head_dim":4,"attention_bias":True,"num_layers":1,"norm_type":"ada_norm_zero","num_embeds_ada_norm":8,"patch_size":2,"sample_size":8},{"hidden_states":["T",[4,4,8,8],"float32"],"timestep":["T",[4],"int64",[44,239,933,760]],"class_labels":["T",[4],"int64",[0,3,1,0]]}],
    "EasyAnimateTransformer3DModel": ["EasyAnimateTransformer3DModel",{"attention_head_dim":16,"num_attention_heads":2,"in_channels":4,"mmdit_layers":2,"num_layers":2,"out_channels":4,"patch_size":2,"sample_height":60,"sample_width":90,"text_embed_dim":16,"time_embed_dim":8,"time_position_encoding_type":"3d_rope","timestep_activation_fn":"silu"},{"hidden_states":["T",[2,4,2,16,16],"float32"],"timestep":["T",[2],"int64",[44,239]],"timestep_cond":["V",None],"encoder_hidden_states":["T",[2,16,16],"float32"],"encoder_hidden_states_t5":["V",None],"inpaint_latents":["V",None],"control_latents":["V",None]}],
    "ErnieImageTransformer2DModel": ["ErnieImageTransformer2DModel",{"hidden_size":16,"num_attention_heads":1,"num_layers":1,"ffn_hidden_size":16,"in_channels":16,"out_channels":16,"patch_size":1,"text_in_dim":16,"rope_theta":256,"rope_axes_dim":[8,4,4],"eps":1e-06,"qk_layernorm":True},{"hidden_states":["T",[1,16,16,16],"float32"],"timestep":["T",[1],"float32",[1.0]],"text_bth":["T",[1,16,16],"float32"],"text_lens":["T",[1],"int64",[16]]}],
    "Flux2Transformer2DModel": ["Flux2Transformer2DModel",{"patch_size":1,"in_channels":4,"num_layers":1,"num_single_layers":1,"attention_head_dim":16,"num_attention_heads":2,"joint_attention_dim":32,"timestep_guidance_channels":256,"axes_dims_rope":[4,4,4,4]},{"hidden_states":["T",[1,16,4],"float32"],"encoder_hidden_states":["T",[1,48,32],"float32"],"img_ids":["T",[1,16,4],"int64",[0,0,0,0,0,0,1,0,0,0,2,0,0,0,3,0,0,1,0,0,0,1,1,0,0,1,2,0,0,1,3,0,0,2,0,0,0,2,1,0,0,2,2,0,0,2,3,0,0,3,0,0,0,3,1,0,0,3,2,0,0,3,3,0]],"txt_ids":["T",[1,48,4],"int64",[0,0,0,0,0,0,0,1,0,0,0,2,0,0,0,3,0,0,0,4,0,0,0,5,0,0,0,6,0,0,0,7,0,0,0,8,0,0,0,9,0,0,0,10,0,0,0,11,0,0,0,12,0,0,0,13,0,0,0,14,0,0,0,15,0,0,0,16,0,0,0,17,0,0,0,18,0,0,0,19,0,0,0,20,0,0,0,21,0,0,0,22,0,0,0,23,0,0,0,24,0,0,0,25,0,0,0,26,0,0,0,27,0,0,0,28,0,0,0,29,0,0,0,30,0,0,0,31,0,0,0,32,0,0,0,33,0,0,0,34,0,0,0,35,0,0,0,36,0,0,0,37,0,0,0,38,0,0,0,39,0,0,0,40,0,0,0,41,0,0,0,42,0,0,0,43,0,0,0,44,0,0,0,45,0,0,0,46,0,0,0,47]],"timestep":["T",[1],"float32",[1.0]],"guidance":["T",[1],"float32",[1.0]]}],
    "FluxTransformer2DModel": ["FluxTransformer2DModel",{"patch_size":1,"in_channels":4,"num_layers":1,"num_single_layers":1,"attention_head_dim":16,"num_attention_heads":2,"joint_attention_dim":32,"pooled_projection_dim":32,"axes_dims_rope":[4,4,8]},{"hidden_states":["T",[1,16,4],"float32"],"encoder_hidden_states":["T",[1,48,32],"float32"],"pooled_projections":["T",[1,32],"float32"],"img_ids":["T",[16,3],"float32"],"txt_ids":["T",[48,3],"float32"],"timestep":["T",[1],"float32",[1.0]]}],
    "FluxTransformer2DModel_2": ["FluxTransformer2DModel",{"patch_size":1,"in_channels":4,"num_layers":1,"num_single_layers":1,"attention_head_dim":32,"num_attention_heads":2,"joint_attention_dim":64,"pooled_projection_dim":64,"axes_dims_rope":[8,8,16]},{"hidden_states":["T",[1,16,4],"float32"],"encoder_hidden_states":["T",[1,48,64],"float32"],"pooled_projections":["T",[1,64],"float32"],"img_ids":["T",[16,3],"float32"],"txt_ids":["T",[48,3],"float32"],"timestep":["T",[1],"float32",[1.0]]}],
    "GlmImageTransformer2DModel": ["GlmImageTransformer2DModel",{"patch_size":2,"in_channels":4,"out_channels":4,"num_layers":1,"attention_head_dim":8,"num_attention_heads":2,"text_embed_dim":32,"time_embed_dim":16,"condition_dim":8,"prior_vq_quantizer_codebook_size":64},{"hidden_states":["T",[1,4,8,8],"float32"],"encoder_hidden_states":["T",[1,12,32],"float32"],"prior_token_id":["T",[1],"int64",[44]],"prior_token_drop":["T",[1],"bool",[False]],"timestep":["T",[1],"int64",[44]],"target_size":["T",[1,2],"float32",[8.0,8.0]],"crop_coords":["T",[1,2],"float32",[0.0,0.0]]}],
    "HeliosTransformer3DModel": ["HeliosTransformer3DModel",{"patch_size":[1,2,2],"num_attention_heads":2,"attention_head_dim":12,"in_channels":4,"out_channels":4,"text_dim":16,"freq_dim":256,"ffn_dim":32,"num_layers":2,"cross_attn_norm":True,"qk_norm":"rms_norm_across_heads","rope_dim":[4,4,4],"has_multi_term_memory_patch":True,"guidance_cross_attn":True,"zero_history_timestep":True,"is_amplify_history":False},{"hidden_states":["T",[1,4,2,16,16],"float32"],"timestep":["T",[1],"int64",[44]],"encoder_hidden_states":["T",[1,12,16],"float32"],"indices_hidden_states":["T",[1,2],"float32",[1.0,1.0]],"indices_latents_history_short":["T",[1,1],"float32",[1.0]],"indices_latents_history_mid":["T",[1,1],"float32",[1.0]],"indices_latents_history_long":["T",[1,4],"float32",[1.0,1.0,1.0,1.0]],"latents_history_short":["T",[1,4,1,16,16],"float32"],"latents_history_mid":["T",[1,4,1,16,16],"float32"],"latents_history_long":["T",[1,4,4,16,16],"float32"]}],
    "HiDreamImageTransformer2DModel": ["HiDreamImageTransformer2DModel",{"patch_size":2,"in_channels":4,"out_channels":4,"num_layers":1,"num_single_layers":1,"attention_head_dim":8,"num_attention_heads":4,"caption_channels":[8,4],"text_emb_dim":8,"num_routed_experts":2,"num_activated_experts":2,"axes_dims_rope":[4,2,2],"max_resolution":[32,32],"llama_layers":[0,1],"force_inference_output":True},{"hidden_states":["T",[2,4,32,32],"float32"],"encoder_hidden_states_t5":["T",[2,8,8],"float32"],"encoder_hidden_states_llama3":["T",[2,2,8,4],"float32"],"pooled_embeds":["T",[2,8],"float32",[-1.1258398294448853,-1.152360200881958,-0.2505785822868347,-0.4338788092136383,0.8487103581428528,0.6920091509819031,-0.31601276993751526,-2.1152193546295166,0.32227492332458496,-1.2633347511291504,0.34998318552970886,0.30813392996788025,0.11984150856733322,1.237657904624939,1.1167771816253662,-0.2472781538963318]],"timesteps":["T",[2],"int64",[44,239]]}],
    "HunyuanDiT2DModel": ["HunyuanDiT2DModel",{"sample_size":8,"patch_size":2,"in_channels":4,"num_layers":1,"attention_head_dim":8,"num_attention_heads":2,"cross_attention_dim":8,"cross_attention_dim_t5":8,"pooled_projection_dim":4,"hidden_size":16,"text_len":4,"text_len_t5":4,"activation_fn":"gelu-approximate"},{"hidden_states":["T",[2,4,8,8],"float32"],"encoder_hidden_states":["T",[2,4,8],"float32"],"text_embedding_mask":["T",[2,4],"float32",[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]],"encoder_hidden_states_t5":["T",[2,4,8],"float32"],"text_embedding_mask_t5":["T",[2,4],"float32",[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]],"timestep":["T",[2],"float32",[44.0,239.0]],"image_meta_size":["T",[2,6],"float32",[1024.0,1024.0,16.0,16.0,0.0,0.0,1024.0,1024.0,16.0,16.0,0.0,0.0]],"style":["T",[2],"int64",[0,0]],"image_rotary_emb":["L",[["T",[1,8],"float32",[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]],["T",[1,8],"float32",[0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0]]]]}],
    "HunyuanVideo15Transformer3DModel": ["HunyuanVideo15Transformer3DModel",{"in_channels":4,"out_channels":4,"num_attention_heads":2,"attention_head_dim":8,"num_layers":2,"num_refiner_layers":1,"mlp_ratio":2.0,"patch_size":1,"patch_size_t":1,"text_embed_dim":16,"text_embed_2_dim":8,"image_embed_dim":12,"rope_axes_dim":[2,2,4],"target_size":16,"task_type":"t2v"},{"hidden_states":["T",[1,4,1,8,8],"float32"],"timestep":["T",[1],"float32",[1.0]],"encoder_hidden_states":["T",[1,6,16],"float32"],"encoder_hidden_states_2":["T",[1,4,8],"float32"],"encoder_attention_mask":["T",[1,6],"float32",[1.0,1.0,1.0,1.0,1.0,1.0]],"encoder_attention_mask_2":["T",[1,4],"float32",[1.0,1.0,1.0,1.0]],"image_embeds":["T",[1,3,12],"float32"]}],
    "HunyuanVideoFramepackTransformer3DModel": ["HunyuanVideoFramepackTransformer3DModel",{"in_channels":4,"out_channels":4,"num_attention_heads":2,"attention_head_dim":10,"num_layers":1,"num_single_layers":1,"num_refiner_layers":1,"patch_size":2,"patch_size_t":1,"guidance_embeds":True,"text_embed_dim":16,"pooled_projection_dim":8,"rope_axes_dim":[2,4,4],"image_condition_type":None,"has_image_proj":True,"image_proj_dim":16,"has_clean_x_embedder":True},{"hidden_states":["T",[1,4,3,4,4],"float32"],"timestep":["T",[1],"int64",[44]],"encoder_hidden_states":["T",[1,12,16],"float32"],"pooled_projections":["T",[1,8],"float32",[1.5409960746765137,-0.293428897857666,-2.1787893772125244,0.5684312582015991,-1.0845223665237427,-1.3985954523086548,0.40334683656692505,0.8380263447761536]],"encoder_attention_mask":["T",[1,12],"float32",[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]],"guidance":["T",[1],"int64",[44]],"image_embeds":["T",[1,12,16],"float32"],"indices_latents":["T",[3],"float32",[1.0,1.0,1.0]],"latents_clean":["T",[1,4,2,4,4],"float32"],"indices_latents_clean":["T",[2],"float32",[1.0,1.0]],"latents_history_2x":["T",[1,4,2,4,4],"float32"],"indices_latents_history_2x":["T",[2],"float32",[1.0,1.0]],"latents_history_4x":["T",[1,4,8,4,4],"float32"],"indices_latents_history_4x":["T",[8],"float32",[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]]}],
    "HunyuanVideoTransformer3DModel": ["HunyuanVideoTransformer3DModel",{"in_channels":4,"out_channels":4,"num_attention_heads":2,"attention_head_dim":10,"num_layers":1,"num_single_layers":1,"num_refiner_layers":1,"patch_size":1,"patch_size_t":1,"guidance_embeds":True,"text_embed_dim":16,"pooled_projection_dim":8,"rope_axes_dim":[2,4,4],"image_condition_type":None},{"hidden_states":["T",[1,4,1,16,16],"float32"],"timestep":["T",[1],"float32",[44.0]],"encoder_hidden_states":["T",[1,12,16],"float32"],"pooled_projections":["T",[1,8],"float32",[1.5409960746765137,-0.293428897857666,-2.1787893772125244,0.5684312582015991,-1.0845223665237427,-1.3985954523086548,0.40334683656692505,0.8380263447761536]],"encoder_attention_mask":["T",[1,12],"float32",[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]],"guidance":["T",[1],"float32",[44.0]]}],
    "HunyuanVideoTransformer3DModel_2": ["HunyuanVideoTransformer3DModel",{"in_channels":9,"out_channels":4,"num_attention_heads":2,"attention_head_dim":10,"num_layers":1,"num_single_layers":1,"num_refiner_layers":1,"patch_size":1,"patch_size_t":1,"guidance_embeds":False,"text_embed_dim":16,"pooled_projection_dim":8,"rope_axes_dim":[2,4,4],"image_condition_type":"latent_concat"},{"hidden_states":["T",[1,9,1,16,16],"float32"],"timestep":["T",[1],"int64",[44]],"encoder_hidden_states":["T",[1,12,16],"float32"],"pooled_projections":["T",[1,8],"float32",[1.5409960746765137,-0.293428897857666,-2.1787893772125244,0.5684312582015991,-1.0845223665237427,-1.3985954523086548,0.40334683656692505,0.8380263447761536]],"encoder_attention_mask":["T",[1,12],"float32",[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]]}],
    "HunyuanVideoTransformer3DModel_3": ["HunyuanVideoTransformer3DModel",{"in_channels":2,"out_channels":4,"num_attention_heads":2,"attention_head_dim":10,"num_layers":1,"num_single_layers":1,"num_refiner_layers":1,"patch_size":1,"patch_size_t":1,"guidance_embeds":True,"text_embed_dim":16,"pooled_projection_dim":8,"rope_axes_dim":[2,4,4],"image_condition_type":"token_replace"},{"hidden_states":["T",[1,2,1,16,16],"float32"],"timestep":["T",[1],"int64",[44]],"encoder_hidden_states":["T",[1,12,16],"float32"],"pooled_projections":["T",[1,8],"float32",[1.5409960746765137,-0.293428897857666,-2.1787893772125244,0.5684312582015991,-1.0845223665237427,-1.3985954523086548,0.40334683656692505,0.8380263447761536]],"encoder_attention_mask":["T",[1,12],"float32",[1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0]],"guidance":["T",[1],"float32",[44.0]]}],
    "Ideogram4Transformer2DModel": ["Ideogram4Transformer2DModel",{"in_channels":16,"num_layers":2,"attention_head_dim":8,"num_attention_heads":4,"intermediate_size":32,"adaln_dim":16,"llm_features_dim":24,"rope_theta":10000,"mrope_section":[2,1,1],"norm_eps":1e-05},{"hidden_states":["T",[1,8,16],"float32"],"encoder_hidden_states":["T",[1,8,24],"float32"],"timestep":["T",[1],"float32",[0.5]],"position_ids":["T",[1,8,3],"int64",[0,0,0,1,1,1,2,2,2,3,3,3,65536,65536,65536,65536,65536,65537,65536,65537,65536,65536,65537,65537]],"segment_ids":["T",[1,8],"int64",[1,1,1,1,1,1,1,1]],"indicator":["T",[1,8],"int64",[3,3,3,3,2,2,2,2]]}],
    "JoyImageEditPlusTransformer3DModel": ["JoyImageEditPlusTransformer3DModel",{"patch_size":[1,2,2],"in_channels":16,"hidden_size":32,"num_attention_heads":2,"text_dim":16,"num_layers":2,"rope_dim_list":[4,6,6],"theta":256},{"hidden_states":["T",[1,2,16,1,2,2],"float32"],"encoder_hidden_states":["T",[1,12,16],"float32"],"timestep":["T",[1],"float32",[1.0]],"shape_list":["V",[[[1,1,1],[1,1,1]]]]}],
    "JoyImageEditTransformer3DModel": ["JoyImageEditTransformer3DModel",{"patch_size":[1,2,2],"in_channels":16,"hidden_size":32,"num_attention_heads":2,"text_dim":16,"num_layers":2,"rope_dim_list":[4,6,6],"theta":256},{"hidden_states":["T",[1,16,1,4,4],"float32"],"encoder_hidden_states":["T",[1,12,16],"float32"],"timestep":["T",[1],"float32",[1.0]]}],
    "Krea2Transformer2DModel": ["Krea2Transformer2DModel",{"in_channels":16,"num_layers":2,"attention_head_dim":8,"num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":32,"timestep_embed_dim":8,"text_hidden_dim":16,"num_text_layers":3,"text_num_attention_heads":2,"text_num_key_value_heads":1,"text_intermediate_size":16,"num_layerwise_text_blocks":1,"num_refiner_text_blocks":1,"axes_dims_rope":[4,2,2],"rope_theta":1000.0,"norm_eps":1e-05},{"hidden_states":["T",[1,4,16],"float32"],"encoder_hidden_states":["T",[1,4,3,16],"float32"],"timestep":["T",[1],"float32",[0.5]],"position_ids":["T",[8,3],"float32"],"encoder_attention_mask":["T",[1,4],"bool",[True,True,True,False]]}],
    "LTX2VideoDiffusionDecoderModel": ["LTX2VideoDiffusionDecoderModel",{"out_channels":3,"latent_channels":8,"patch_size":2,"decoder_head_dim":16,"decoder_stage_channels":[64,32,16,16,16],"decoder_stage_depths":[1,1,1,1,2],"decoder_stage_kernels":[[3,3,3],[3,3,3],[3,3,3],[3,3,3]],"decoder_upsample_strides":[[1,2,2],[2,1,1],[2,2,2],[2,2,2]],"decoder_upsample_channel_reductions":[2,2,1,1],"decoder_stage5_kernel":[3,3,3],"decoder_t_emb_dim":32,"spatial_compression_ratio":16,"temporal_compression_ratio":8},{"z":["T",[2,8,2,3,3],"float32"],"generator":["U","<torch._C.Generator object at 0x7f7d44472fb0>"]}],
    "LTX2VideoTransformer3DModel": ["LTX2VideoTransformer3DModel",{"in_channels":4,"out_channels":4,"patch_size":1,"patch_size_t":1,"num_attention_heads":2,"attention_head_dim":8,"cross_attention_dim":16,"audio_in_channels":4,"audio_out_channels":4,"audio_num_attention_heads":2,"audio_attention_head_dim":4,"audio_cross_attention_dim":8,"num_layers":2,"qk_norm":"rms_norm_across_heads","caption_channels":16,"rope_double_precision":False},{"hidden_states":["T",[2,512,4],"float32"],"audio_hidden_states":["T",[2,9,4],"float32"],"encoder_hidden_states":["T",[2,16,16],"float32"],"audio_encoder_hidden_states":["T",[2,16,16],"float32"],"timestep":["T",[2],"float32",[1540.99609375,293.42889404296875]],"encoder_attention_mask":["T",[2,16],"bool",[True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True]],"num_frames":["V",2],"height":["V",16],"width":["V",16],"audio_num_frames":["V",9],"fps":["V",25.0]}],
    "LTXVideoTransformer3DModel": ["LTXVideoTransformer3DModel",{"in_channels":4,"out_channels":4,"num_attention_heads":2,"attention_head_dim":8,"cross_attention_dim":16,"num_layers":1,"qk_norm":"rms_norm_across_heads","caption_channels":16},{"hidden_states":["T",[2,512,4],"float32"],"encoder_hidden_states":["T",[2,16,16],"float32"],"timestep":["T",[2],"int64",[44,239]],"encoder_attention_mask":["T",[2,16],"bool",[True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True]],"num_frames":["V",2],"height":["V",16],"width":["V",16]}],
    "LatteTransformer3DModel": ["LatteTransformer3DModel",{"sample_size":8,"num_layers":1,"patch_size":2,"attention_head_dim":4,"num_attention_heads":2,"caption_channels":8,"in_channels":4,"cross_attention_dim":8,"out_channels":8,"attention_bias":True,"activation_fn":"gelu-approximate","num_embeds_ada_norm":1000,"norm_type":"ada_norm_single","norm_elementwise_affine":False,"norm_eps":1e-06},{"hidden_states":["T",[2,4,1,8,8],"float32"],"encoder_hidden_states":["T",[2,8,8],"float32"],"timestep":["T",[2],"int64",[44,239]],"enable_temporal_attentions":["V",True]}],
    "LongCatAudioDiTTransformer": ["LongCatAudioDiTTransformer",{"dit_dim":64,"dit_depth":2,"dit_heads":4,"dit_text_dim":32,"latent_dim":8,"text_conv":False},{"hidden_states":["T",[1,16,8],"float32"],"encoder_hidden_states":["T",[1,10,32],"float32"],"encoder_attention_mask":["T",[1,10],"bool",[True,True,True,True,True,True,True,True,True,True]],"attention_mask":["T",[1,16],"bool",[True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True]],"timestep":["T",[1],"float32",[1.0]]}],
    "LongCatImageTransformer2DModel": ["LongCatImageTransformer2DModel",{"patch_size":1,"in_channels":4,"num_layers":1,"num_single_layers":1,"attention_head_dim":16,"num_attention_heads":2,"joint_attention_dim":32,"pooled_projection_dim":32,"axes_dims_rope":[4,4,8]},{"hidden_states":["T",[1,16,4],"float32"],"encoder_hidden_states":["T",[1,48,32],"float32"],"img_ids":["T",[16,3],"float32"],"txt_ids":["T",[48,3],"float32"],"timestep":["T",[1],"float32",[1.0]],"guidance":["T",[1],"float32",[3.5]]}],
    "Lumina2Transformer2DModel": ["Lumina2Transformer2DModel",{"sample_size":16,"patch_size":2,"in_channels":4,"hidden_size":24,"num_layers":2,"num_refiner_layers":1,"num_attention_heads":3,"num_kv_heads":1,"multiple_of":2,"ffn_dim_multiplier":None,"norm_eps":1e-05,"scaling_factor":1.0,"axes_dim_rope":[4,2,2],"axes_lens":[128,128,128],"cap_feat_dim":32},{"hidden_states":["T",[2,4,16,16],"float32"],"encoder_hidden_states":["T",[2,16,32],"float32"],"timestep":["T",[2],"float32",[0.49625658988952637,0.7682217955589294]],"encoder_attention_mask":["T",[2,16],"bool",[True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True]]}],
    "LuminaNextDiT2DModel": ["LuminaNextDiT2DModel",{"sample_size":16,"patch_size":2,"in_channels":4,"hidden_size":24,"num_layers":2,"num_attention_heads":3,"num_kv_heads":1,"multiple_of":16,"ffn_dim_multiplier":None,"norm_eps":1e-05,"learn_sigma":False,"qk_norm":True,"cross_attention_dim":32,"scaling_factor":1.0},{"hidden_states":["T",[2,4,16,16],"float32"],"encoder_hidden_states":["T",[2,16,32],"float32"],"timestep":["T",[2],"float32",[0.49625658988952637,0.7682217955589294]],"encoder_mask":["T",[2,16],"float32"],"image_rotary_emb":["T",[384,384,4],"float32"],"cross_attention_kwargs":["D",{}]}],
    "MiniMaxH3Transformer3DModel": ["MiniMaxH3Transformer3DModel",{"num_attention_heads":2,"attention_head_dim":16,"hidden_size":24,"num_layers":2,"num_refiner_layers":2,"ffn_dim":32,"in_channels":4,"audio_in_channels":6,"patch_size":[1,2,2],"text_dim":8,"freq_dim":8,"time_embed_hidden_dim":24,"time_embed_dim":16,"rope_freq_dim":2},{"hidden_states":["T",[2,8,16],"float32"],"audio_hidden_states":["T",[2,6,6],"float32"],"encoder_hidden_states":["T",[2,4,8],"float32"],"timestep":["T",[2],"float32",[0.699999988079071,0.30000001192092896]],"timestep_indices":["T",[18],"int64",[0,0,0,0,1,1,1,1,1,1,0,0,0,0,0,0,0,0]],"token_tags":["T",[18],"int64",[1,1,1,1,2,2,2,2,2,2,0,0,0,0,0,0,0,0]],"position_ids":["T",[18,3],"float32"],"video_indices":["T",[8],"int64",[10,11,12,13,14,15,16,17]],"audio_indices":["T",[6],"int64",[4,5,6,7,8,9]],"text_indices":["T",[4],"int64",[0,1,2,3]]}],
    "MiniMaxMusic3Transformer1DModel": ["MiniMaxMusic3Transformer1DModel",{"in_channels":8,"condition_dim":16,"num_layers":2,"num_attention_heads":2,"attention_head_dim":8,"ff_inner_dim":32,"rotary_dim":4,"fourier_embedding_dim":8},{"hidden_states":["T",[1,8,24],"float32"],"encoder_hidden_states":["T",[1,24,16],"float32"],"timestep":["T",[1],"float32",[0.5]]}],
    "MochiTransformer3DModel": ["MochiTransformer3DModel",{"patch_size":2,"num_attention_heads":2,"attention_head_dim":8,"num_layers":2,"pooled_projection_dim":16,"in_channels":4,"out_channels":None,"qk_norm":"rms_norm","text_embed_dim":16,"time_embed_dim":4,"activation_fn":"swiglu","max_sequence_length":16},{"hidden_states":["T",[2,4,2,16,16],"float32"],"encoder_hidden_states":["T",[2,16,16],"float32"],"timestep":["T",[2],"int64",[44,239]],"encoder_attention_mask":["T",[2,16],"bool",[True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True,True]]}],
    "MotifVideoTransformer3DModel": ["MotifVideoTransformer3DModel",{"in_channels":33,"out_channels":16,"num_attention_heads":2,"attention_head_dim":12,"num_layers":1,"num_single_layers":1,"num_decoder_layers":0,"mlp_ratio":4.0,"patch_size":1,"patch_size_t":1,"qk_norm":"rms_norm","norm_type":"layer_norm","text_embed_dim":32,"image_embed_dim":4,"rope_theta":256.0,"rope_axes_dim":[4,4,4],"enable_text_cross_attention_dual":False,"enable_text_cross_attention_single":False},{"hidden_states":["T",[1,33,9,16,16],"float32"],"encoder_hidden_states":["T",[1,12,32],"float32"],"timestep":["T",[1],"int64",[44]]}],
    "NucleusMoEImageTransformer2DModel": ["NucleusMoEImageTransformer2DModel",{"patch_size":2,"in_channels":16,"out_channels":4,"num_layers":2,"attention_head_dim":16,"num_attention_heads":4,"joint_attention_dim":16,"axes_dims_rope":[8,4,4],"moe_enabled":False,"capacity_factors":[8.0,8.0]},{"hidden_states":["T",[1,16,16],"float32"],"encoder_hidden_states":["T",[1,8,16],"float32"],"encoder_hidden_states_mask":["T",[1,8],"int64",[1,1,1,1,1,1,1,1]],"timestep":["T",[1],"float32",[1.0]],"img_shapes":["V",[[1,4,4]]]}],
    "OmniGenTransformer2DModel": ["OmniGenTransformer2DModel",{"hidden_size":16,"num_attention_heads":4,"num_key_value_heads":4,"intermediate_size":32,"num_layers":20,"pad_token_id":0,"vocab_size":1000,"in_channels":4,"time_step_dim":4,"rope_scaling":{"long_factor":[1,2],"short_factor":[1,2]}},{"hidden_states":["T",[2,4,8,8],"float32"],"timestep":["T",[2],"float32",[0.49625658988952637,0.7682217955589294]],"input_ids":["T",[2,24],"int64",[4,9,3,0,3,9,7,3,7,3,1,6,6,9,8,6,6,8,4,3,6,9,1,4,4,1,9,9,9,0,1,2,3,0,5,5,2,9,1,8,8,3,6,9,1,7,3,5]],"input_img_latents":["L",[["T",[1,4,8,8],"float32"]]],"input_image_sizes":["D",{"0":["V",[[0,16]]]}],"attention_mask":["T",[2,41,41],"float32"],"position_ids":["T",[2,41],"int64",[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40]]}],
    "OvisImageTransformer2DModel": ["OvisImageTransformer2DModel",{"patch_size":1,"in_channels":4,"out_channels":4,"num_layers":1,"num_single_layers":1,"attention_head_dim":16,"num_attention_heads":2,"joint_attention_dim":32,"axes_dims_rope":[4,4,8]},{"hidden_states":["T",[1,16,4],"float32"],"encoder_hidden_states":["T",[1,48,32],"float32"],"img_ids":["T",[16,3],"float32"],"txt_ids":["T",[48,3],"float32"],"timestep":["T",[1],"float32",[1.0]]}],
    "PRXTransformer2DModel": ["PRXTransformer2DModel",{"in_channels":16,"patch_size":2,"context_in_dim":1792,"hidden_size":1792,"mlp_ratio":3.5,"num_heads":28,"depth":4,"axes_dim":[32,32],"theta":10000},{"hidden_states":["T",[1,16,16,16],"float32"],"encoder_hidden_states":["T",[1,16,1792],"float32"],"timestep":["T",[1],"float32",[1.0]]}],
    "PixArtTransformer2DModel": ["PixArtTransformer2DModel",{"sample_size":8,"num_layers":1,"patch_size":2,"attention_head_dim":2,"num_attention_heads":2,"in_channels":4,"cross_attention_dim":8,"out_channels":8,"attention_bias":True,"activation_fn":"gelu-approximate","num_embeds_ada_norm":8,"norm_type":"ada_norm_single","norm_elementwise_affine":False,"norm_eps":1e-06,"use_additional_conditions":False,"caption_channels":None},{"hidden_states":["T",[4,4,8,8],"float32"],"timestep":["T",[4],"int64",[44,239,933,760]],"encoder_hidden_states":["T",[4,8,8],"float32"],"added_cond_kwargs":["D",{"aspect_ratio":["V",None],"resolution":["V",None]}]}],
    "PriorTransformer": ["PriorTransformer",{"num_attention_heads":2,"attention_head_dim":4,"num_layers":2,"embedding_dim":8,"num_embeddings":7,"additional_embeddings":4},{"hidden_states":["T",[4,8],"float32"],"timestep":["V",2],"proj_embedding":["T",[4,8],"float32"],"encoder_hidden_states":["T",[4,7,8],"float32"]}],
    "QwenImageTransformer2DModel": ["QwenImageTransformer2DModel",{"patch_size":2,"in_channels":16,"out_channels":4,"num_layers":2,"attention_head_dim":16,"num_attention_heads":4,"joint_attention_dim":16,"guidance_embeds":False,"axes_dims_rope":[8,4,4]},{"hidden_states":["T",[1,16,16],"float32"],"encoder_hidden_states":["T",[1,8,16],"float32"],"encoder_hidden_states_mask":["T",[1,8],"int64",[1,1,1,1,1,1,1,1]],"timestep":["T",[1],"float32",[1.0]],"img_shapes":["V",[[1,4,4]]]}],
    "SD3Transformer2DModel": ["SD3Transformer2DModel",{"sample_size":32,"patch_size":1,"in_channels":4,"num_layers":4,"attention_head_dim":8,"num_attention_heads":4,"caption_projection_dim":32,"joint_attention_dim":32,"pooled_projection_dim":64,"out_channels":4,"pos_embed_max_size":96,"dual_attention_layers":[],"qk_norm":None},{"hidden_states":["T",[2,4,32,32],"float32"],"encoder_hidden_states":["T",[2,154,32],"float32"],"pooled_projections":["T",[2,64],"float32"],"timestep":["T",[2],"int64",[44,239]]}],
    "SD3Transformer2DModel_2": ["SD3Transformer2DModel",{"sample_size":32,"patch_size":1,"in_channels":4,"num_layers":4,"attention_head_dim":8,"num_attention_heads":4,"caption_projection_dim":32,"joint_attention_dim":32,"pooled_projection_dim":64,"out_channels":4,"pos_embed_max_size":96,"dual_attention_layers":[0],"qk_norm":"rms_norm"},{"hidden_states":["T",[2,4,32,32],"float32"],"encoder_hidden_states":["T",[2,154,32],"float32"],"pooled_projections":["T",[2,64],"float32"],"timestep":["T",[2],"int64",[44,239]]}],
    "SanaTransformer2DModel": ["SanaTransformer2DModel",{"patch_size":1,"in_channels":4,"out_channels":4,"num_layers":1,"attention_head_dim":4,"num_attention_heads":2,"num_cross_attention_heads":2,"cross_attention_head_dim":4,"cross_attention_dim":8,"caption_channels":8,"sample_size":32},{"hidden_states":["T",[2,4,32,32],"float32"],"encoder_hidden_states":["T",[2,8,8],"float32"],"timestep":["T",[2],"int64",[44,239]]}],
    "SanaVideoTransformer3DModel": ["SanaVideoTransformer3DModel",{"in_channels":16,"out_channels":16,"num_attention_heads":2,"attention_head_dim":12,"num_layers":2,"num_cross_attention_heads":2,"cross_attention_head_dim":12,"cross_attention_dim":24,"caption_channels":16,"mlp_ratio":2.5,"dropout":0.0,"attention_bias":False,"sample_size":8,"patch_size":[1,2,2],"norm_elementwise_affine":False,"norm_eps":1e-06,"qk_norm":"rms_norm_across_heads","rope_max_seq_len":32},{"hidden_states":["T",[1,16,2,16,16],"float32"],"encoder_hidden_states":["T",[1,12,16],"float32"],"timestep":["T",[1],"int64",[44]]}],
    "SkyReelsV2Transformer3DModel": ["SkyReelsV2Transformer3DModel",{"patch_size":[1,2,2],"num_attention_heads":2,"attention_head_dim":12,"in_channels":4,"out_channels":4,"text_dim":16,"freq_dim":256,"ffn_dim":32,"num_layers":2,"cross_attn_norm":True,"qk_norm":"rms_norm_across_heads","rope_max_seq_len":32},{"hidden_states":["T",[1,4,2,16,16],"float32"],"encoder_hidden_states":["T",[1,12,16],"float32"],"timestep":["T",[1],"int64",[44]]}],
    "StableAudio3DiTModel": ["StableAudio3DiTModel",{"io_channels":8,"patch_size":1,"embed_dim":32,"depth":2,"num_heads":4,"cond_token_dim":16,"global_cond_dim":12,"local_add_cond_dim":5,"timestep_features_dim":16,"ff_mult":2,"num_memory_tokens":3,"use_differential_attention":False},{"hidden_states":["T",[2,8,16],"float32"],"timestep":["T",[2],"float32",[0.00442582368850708,0.7256969809532166]],"encoder_hidden_states":["T",[2,4,16],"float32"],"global_hidden_states":["T",[2,12],"float32"]}],
    "TransformerTemporalModel": ["TransformerTemporalModel",{"num_attention_heads":8,"attention_head_dim":4,"in_channels":4,"num_layers":1,"norm_num_groups":1},{"hidden_states":["T",[2,4,32,32],"float32"],"timestep":["T",[2],"int64",[44,239]]}],
    "UNet1DModel": ["UNet1DModel",{"block_out_channels":[8,8,16,16],"in_channels":14,"out_channels":14,"time_embedding_type":"positional","use_timestep_embedding":True,"flip_sin_to_cos":False,"freq_shift":1.0,"out_block_type":"OutConv1DBlock","mid_block_type":"MidResTemporalBlock1D","down_block_types":["DownResnetBlock1D","DownResnetBlock1D","DownResnetBlock1D","DownResnetBlock1D"],"up_block_types":["UpResnetBlock1D","UpResnetBlock1D","UpResnetBlock1D"],"act_fn":"swish"},{"sample":["T",[4,14,16],"float32"],"timestep":["T",[4],"int64",[10,10,10,10]]}],
    "UNet1DModel_2": ["UNet1DModel",{"in_channels":14,"out_channels":14,"down_block_types":["DownResnetBlock1D","DownResnetBlock1D","DownResnetBlock1D","DownResnetBlock1D"],"up_block_types":[],"out_block_type":"ValueFunction","mid_block_type":"ValueFunctionMidBlock1D","block_out_channels":[32,64,128,256],"layers_per_block":1,"downsample_each_block":True,"use_timestep_embedding":True,"freq_shift":1.0,"flip_sin_to_cos":False,"time_embedding_type":"positional","act_fn":"mish"},{"sample":["T",[4,14,16],"float32"],"timestep":["T",[4],"int64",[10,10,10,10]]}],
    "UNet2DConditionModel": ["UNet2DConditionModel",{"block_out_channels":[4,8],"norm_num_groups":4,"down_block_types":["CrossAttnDownBlock2D","DownBlock2D"],"up_block_types":["UpBlock2D","CrossAttnUpBlock2D"],"cross_attention_dim":8,"attention_head_dim":2,"out_channels":4,"in_channels":4,"layers_per_block":1,"sample_size":16},{"sample":["T",[4,4,16,16],"float32"],"timestep":["T",[1],"int64",[10]],"encoder_hidden_states":["T",[4,4,8],"float32"]}],
    "UNet2DModel": ["UNet2DModel",{"block_out_channels":[4,8],"norm_num_groups":2,"down_block_types":["DownBlock2D","AttnDownBlock2D"],"up_block_types":["AttnUpBlock2D","UpBlock2D"],"attention_head_dim":3,"out_channels":3,"in_channels":3,"layers_per_block":2,"sample_size":32},{"sample":["T",[4,3,32,32],"float32"],"timestep":["T",[1],"int64",[10]]}],
    "UNet2DModel_2": ["UNet2DModel",{"sample_size":32,"in_channels":4,"out_channels":4,"layers_per_block":2,"block_out_channels":[32,64],"attention_head_dim":32,"down_block_types":["DownBlock2D","DownBlock2D"],"up_block_types":["UpBlock2D","UpBlock2D"]},{"sample":["T",[4,4,32,32],"float32"],"timestep":["T",[1],"int64",[10]]}],
    "UNet2DModel_3": ["UNet2DModel",{"block_out_channels":[32,64,64,64],"in_channels":3,"layers_per_block":1,"out_channels":3,"time_embedding_type":"fourier","norm_eps":1e-06,"mid_block_scale_factor":1.4142135623730951,"norm_num_groups":None,"down_block_types":["SkipDownBlock2D","AttnSkipDownBlock2D","SkipDownBlock2D","SkipDownBlock2D"],"up_block_types":["SkipUpBlock2D","SkipUpBlock2D","AttnSkipUpBlock2D","SkipUpBlock2D"]},{"sample":["T",[4,3,32,32],"float32"],"timestep":["T",[4],"int32",[10,10,10,10]]}],
    "UNet3DConditionModel": ["UNet3DConditionModel",{"block_out_channels":[4,8],"norm_num_groups":4,"down_block_types":["CrossAttnDownBlock3D","DownBlock3D"],"up_block_types":["UpBlock3D","CrossAttnUpBlock3D"],"cross_attention_dim":8,"attention_head_dim":2,"out_channels":4,"in_channels":4,"layers_per_block":1,"sample_size":16},{"sample":["T",[4,4,4,16,16],"float32"],"timestep":["T",[1],"int64",[10]],"encoder_hidden_states":["T",[4,4,8],"float32"]}],
    "UNetControlNetXSModel": ["UNetControlNetXSModel",{"sample_size":16,"down_block_types":["DownBlock2D","CrossAttnDownBlock2D"],"up_block_types":["CrossAttnUpBlock2D","UpBlock2D"],"block_out_channels":[4,8],"cross_attention_dim":8,"transformer_layers_per_block":1,"num_attention_heads":2,"norm_num_groups":4,"upcast_attention":False,"ctrl_block_out_channels":[2,4],"ctrl_num_attention_heads":4,"ctrl_max_norm_num_groups":2,"ctrl_conditioning_embedding_out_channels":[2,2]},{"sample":["T",[4,4,16,16],"float32"],"timestep":["T",[1],"int64",[10]],"encoder_hidden_states":["T",[4,4,8],"float32"],"controlnet_cond":["T",[4,3,32,32],"float32"],"conditioning_scale":["V",1]}],
    "UNetMotionModel": ["UNetMotionModel",{"block_out_channels":[16,32],"norm_num_groups":16,"down_block_types":["CrossAttnDownBlockMotion","DownBlockMotion"],"up_block_types":["UpBlockMotion","CrossAttnUpBlockMotion"],"cross_attention_dim":16,"num_attention_heads":2,"out_channels":4,"in_channels":4,"layers_per_block":1,"sample_size":16},{"sample":["T",[4,4,4,16,16],"float32"],"timestep":["T",[1],"int64",[10]],"encoder_hidden_states":["T",[16,4,16],"float32"]}],
    "UNetSpatioTemporalConditionModel": ["UNetSpatioTemporalConditionModel",{"block_out_channels":[32,64],"down_block_types":["CrossAttnDownBlockSpatioTemporal","DownBlockSpatioTemporal"],"up_block_types":["UpBlockSpatioTemporal","CrossAttnUpBlockSpatioTemporal"],"cross_attention_dim":32,"num_attention_heads":8,"out_channels":4,"in_channels":4,"layers_per_block":2,"sample_size":32,"projection_class_embeddings_input_dim":96,"addition_time_embed_dim":32},{"sample":["T",[2,2,4,32,32],"float32"],"timestep":["T",[1],"int64",[10]],"encoder_hidden_states":["T",[2,1,32],"float32"],"added_time_ids":["T",[2,3],"float32",[6.0,127.0,0.019999999552965164,6.0,127.0,0.019999999552965164]]}],
    "VQModel": ["VQModel",{"block_out_channels":[8,16],"norm_num_groups":8,"in_channels":3,"out_channels":3,"down_block_types":["DownEncoderBlock2D","DownEncoderBlock2D"],"up_block_types":["UpDecoderBlock2D","UpDecoderBlock2D"],"latent_channels":3},{"sample":["T",[4,3,32,32],"float32"]}],
    "WanAnimate2Transformer3DModel": ["WanAnimate2Transformer3DModel",{"patch_size":[1,2,2],"text_len":16,"in_dim":36,"dim":128,"ffn_dim":256,"freq_dim":64,"text_dim":32,"out_dim":16,"num_heads":4,"num_layers":2,"cross_attn_norm":True,"use_img_emb":True},{"hidden_states":["L",[["T",[16,2,4,4],"float32"]]],"timestep":["T",[1],"float32",[1.0]],"encoder_hidden_states":["L",[["T",[8,32],"float32"]]],"condition_latents":["L",[["T",[20,2,4,4],"float32"]]],"encoder_hidden_states_image":["T",[1,4,1280],"float32"],"kv_cache":["U","<diffusers.models.transformers.transformer_wan_animate_2.WanAnimate2KVCache obje"],"kv_cache_mode":["V","extract"],"seq_len":["V",8],"offset_grid_sizes":["T",[1,3],"int64",[2,2,2]]}],
    "WanAnimateTransformer3DModel": ["WanAnimateTransformer3DModel",{"patch_size":[1,2,2],"num_attention_heads":2,"attention_head_dim":12,"in_channels":12,"latent_channels":4,"out_channels":4,"text_dim":16,"freq_dim":256,"ffn_dim":32,"num_layers":2,"cross_attn_norm":True,"qk_norm":"rms_norm_across_heads","image_dim":16,"rope_max_seq_len":32,"motion_encoder_channel_sizes":{"4":16,"8":16,"16":16},"motion_encoder_size":16,"motion_style_dim":8,"motion_dim":4,"motion_encoder_dim":16,"face_encoder_hidden_dim":16,"face_encoder_num_heads":2,"inject_face_latents_blocks":2},{"hidden_states":["T",[1,12,21,16,16],"float32"],"timestep":["T",[1],"int64",[44]],"encoder_hidden_states":["T",[1,12,16],"float32"],"encoder_hidden_states_image":["T",[1,12,16],"float32"],"pose_hidden_states":["T",[1,4,20,16,16],"float32"],"face_pixel_values":["T",[1,3,77,16,16],"float32"]}],
    "WanTransformer3DModel": ["WanTransformer3DModel",{"patch_size":[1,2,2],"num_attention_heads":2,"attention_head_dim":12,"in_channels":4,"out_channels":4,"text_dim":16,"freq_dim":256,"ffn_dim":32,"num_layers":2,"cross_attn_norm":True,"qk_norm":"rms_norm_across_heads","rope_max_seq_len":32},{"hidden_states":["T",[1,4,2,16,16],"float32"],"encoder_hidden_states":["T",[1,12,16],"float32"],"timestep":["T",[1],"int64",[44]]}],
    "WanVACETransformer3DModel": ["WanVACETransformer3DModel",{"patch_size":[1,2,2],"num_attention_heads":2,"attention_head_dim":12,"in_channels":16,"out_channels":16,"text_dim":32,"freq_dim":256,"ffn_dim":32,"num_layers":4,"cross_attn_norm":True,"qk_norm":"rms_norm_across_heads","rope_max_seq_len":32,"vace_layers":[0,2],"vace_in_channels":48},{"hidden_states":["T",[1,16,2,16,16],"float32"],"encoder_hidden_states":["T",[1,12,32],"float32"],"control_hidden_states":["T",[1,48,2,16,16],"float32"],"timestep":["T",[1],"int64",[44]]}],
    "ZImageTransformer2DModel": ["ZImageTransformer2DModel",{"all_patch_size":[2],"all_f_patch_size":[1],"in_channels":16,"dim":16,"n_layers":1,"n_refiner_layers":1,"n_heads":1,"n_kv_heads":2,"qk_norm":True,"cap_feat_dim":16,"rope_theta":256.0,"t_scale":1000.0,"axes_dims":[8,4,4],"axes_lens":[256,32,32]},{"x":["L",[["T",[16,1,16,16],"float32"]]],"cap_feats":["L",[["T",[16,16],"float32"]]],"t":["T",[1],"float32",[0.0]]}],
}
