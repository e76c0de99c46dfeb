"""An OpenMMLab Python config (mmengine, and mmcv 1.x before it: mmdetection, mmsegmentation,
mmpretrain, mmpose, mmagic, ...), read statically with its `_base_` chain (pyconfig.py).

- `optim_wrapper.type` (mmengine/optim/optimizer/): `OptimWrapper` trains in fp32;
  `AmpOptimWrapper` runs torch.autocast in its `dtype` ("float16" / "bfloat16"; None, the default,
  is autocast's own default on CUDA: float16) over fp32 weights, always with a GradScaler
  (`loss_scale`, "dynamic" by default), also under bf16; `ApexOptimWrapper` is NVIDIA apex's amp
  (fp16, `opt_level` O1 by default). The `--amp` flag of the projects' tools/train.py turns
  `OptimWrapper` into `AmpOptimWrapper` at launch: the file alone says fp32 then.
- FlexibleRunner's `strategy`: DeepSpeedStrategy's `fp16` / `bf16` blocks (DeepSpeed's own
  meaning: an fp16/bf16 copy of the model, fp32 master weights), FSDPStrategy's
  `mixed_precision` (`param_dtype`, `reduce_dtype`), ColossalAIStrategy's `mixed_precision`.
- mmcv 1.x: `fp16 = dict(loss_scale=...)` is Fp16OptimizerHook: fp16 autocast with loss scaling.
A Python config is never edited: the remedies are said, for the user to write.
"""

from __future__ import annotations

from ...plan import Reading, dtype_of, get, truthy
from . import deepspeed

NAME = "mmengine"
LABEL = "MMEngine (OpenMMLab)"
FORMATS = ("python",)
MARKERS = {"optim_wrapper": 3, "default_scope": 3, "default_hooks": 3, "env_cfg": 2, "train_cfg": 2, "param_scheduler": 2,
           "train_dataloader": 2, "log_processor": 2, "visualizer": 1, "model": 1, "optimizer_config": 2, "lr_config": 2,
           "checkpoint_config": 2, "log_config": 2, "runner": 1, "fp16": 1, "strategy": 1}
_WRAPPERS = ("OptimWrapper", "AmpOptimWrapper", "ApexOptimWrapper", "OptimWrapperDict", "DeepSpeedOptimWrapper",
             "mmengine.optim.OptimWrapper", "mmengine.optim.AmpOptimWrapper", "mmengine.optim.ApexOptimWrapper")
# What only an OpenMMLab config holds: mmengine's runner sections, mmcv 1.x's hooks and runners.
DISTINCT = ("default_hooks.checkpoint", "default_hooks.logger", "log_processor.window_size", "env_cfg.dist_cfg",
            ("optim_wrapper.type", _WRAPPERS), "optimizer_config.grad_clip", "checkpoint_config.interval",
            "log_config.hooks", ("runner.type", ("EpochBasedRunner", "IterBasedRunner")))

_AUTOCAST_DEFAULT = ("AmpOptimWrapper's dtype is None unless set: torch.autocast's default on CUDA, float16 "
                     "(mmengine/optim/optimizer/amp_optimizer_wrapper.py)")


def _name(value) -> str:
    """A `type=` as its class name ('AmpOptimWrapper', AmpOptimWrapper, mmengine.optim.AmpOptimWrapper)."""
    return str(value).rsplit(".", 1)[-1] if isinstance(value, str) else ""


def _wrappers(wrapper: dict) -> list[tuple[str, dict]]:
    """(dotted key, wrapper) for each optimizer wrapper the config builds: the one, or each of a
    MultiOptimWrapperConstructor's (a GAN's generator and discriminator)."""
    if "type" in wrapper or "optimizer" in wrapper:
        return [("optim_wrapper", wrapper)]
    return [(f"optim_wrapper.{k}", v) for k, v in wrapper.items()
            if isinstance(v, dict) and ("type" in v or "optimizer" in v)]


def _loss_scale_refusal(value) -> str:
    """AmpOptimWrapper's TypeError for a loss_scale it does not take ('dynamic', a float, a dict)."""
    if value == "dynamic" or isinstance(value, dict) or (isinstance(value, float) and not isinstance(value, bool)):
        return ""
    return f'loss_scale must be of type float, dict, or "dynamic", but got {value}'


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    wrapper = doc.get("optim_wrapper") if isinstance(doc.get("optim_wrapper"), dict) else None
    strategy = doc.get("strategy") if isinstance(doc.get("strategy"), dict) else None
    wrappers = _wrappers(wrapper) if wrapper is not None else []
    for key, _w in wrappers:
        r.understood(f"{key}.type", f"{key}.dtype", f"{key}.loss_scale", f"{key}.opt_level")
    r.understood("strategy.type", "strategy.fp16", "strategy.bf16", "strategy.mixed_precision", "strategy.amp")
    amp = [(key, w) for key, w in wrappers if _name(w.get("type")) == "AmpOptimWrapper"]
    apex = [(key, w) for key, w in wrappers if _name(w.get("type")) == "ApexOptimWrapper"]
    kind = _name(strategy.get("type")) if strategy is not None else ""
    if kind == "FSDPStrategy":
        r.set("distributed", "fsdp", key="strategy.type", raw=kind)
    if kind in ("DeepSpeedStrategy", "ColossalAIStrategy") or (kind == "FSDPStrategy" and strategy.get("mixed_precision")):
        _strategy(r, strategy)
    elif amp:
        key, w = amp[0]
        raw = w.get("dtype")
        dtype = dtype_of(raw) if raw is not None else "float16"
        if raw is not None and dtype is None:
            r.read.discard(f"{key}.dtype")  # not a dtype attn-doctor knows (or not evaluated): said as not understood
        else:
            r.set("compute_dtype", dtype, key=f"{key}.dtype" if raw is not None else f"{key}.type",
                  raw=raw if raw is not None else w.get("type"),
                  note="torch.autocast over fp32 weights" if raw is not None else _AUTOCAST_DEFAULT)
        r.set("param_dtype", "float32", source="default", note="AmpOptimWrapper keeps the weights in fp32 (autocast)")
        r.set("loss_scaling", True, key=f"{key}.loss_scale" if "loss_scale" in w else f"{key}.type",
              raw=w["loss_scale"] if "loss_scale" in w else w.get("type"),
              note="AmpOptimWrapper always builds a GradScaler (loss_scale 'dynamic' unless set)")
        for k, each in amp:
            refusal = _loss_scale_refusal(each.get("loss_scale", "dynamic"))
            if refusal:
                r.refused[f"{k}.loss_scale"] = refusal
    elif apex:
        key, w = apex[0]
        r.set("compute_dtype", "float16", key=f"{key}.type", raw=w.get("type"),
              note="NVIDIA apex amp (opt_level %s)" % w.get("opt_level", "O1"))
        r.set("loss_scaling", True, key=f"{key}.type", raw=w.get("type"), note="apex amp scales the loss")
    elif wrapper is None and isinstance(doc.get("fp16"), dict):
        # mmcv 1.x (no optim_wrapper): Fp16OptimizerHook. mmengine's Runner never reads this key.
        r.understood("fp16")
        r.set("compute_dtype", "float16", key="fp16", raw=str(doc["fp16"]),
              note="mmcv's Fp16OptimizerHook: fp16 autocast with loss scaling")
        r.set("param_dtype", "float32", source="default", note="the hook keeps fp32 master weights")
        r.set("loss_scaling", True, key="fp16.loss_scale" if "loss_scale" in doc["fp16"] else "fp16",
              raw=doc["fp16"]["loss_scale"] if "loss_scale" in doc["fp16"] else str(doc["fp16"]))
    elif (wrappers or "optimizer" in doc or "optimizer_config" in doc) and not (
            getattr(ctx, "partial", False) and "type" not in (wrappers[0][1] if wrappers else {})):
        # (with its _base_ files missing, a wrapper without a type may be a base's AmpOptimWrapper: unknown)
        key, w = wrappers[0] if wrappers else ("optimizer", {})
        r.set("compute_dtype", "float32", key=f"{key}.type" if "type" in w else key, raw=w.get("type") or "OptimWrapper",
              note="no mixed precision in the file (an optim_wrapper without a type is OptimWrapper; the projects' "
                   "tools/train.py --amp turns on AmpOptimWrapper, float16)")
        r.set("param_dtype", "float32", source="default", note="the weights in fp32")
    if amp and kind in ("", "FSDPStrategy") and len(wrappers) == 1:
        r.edits["precision=fp16"] = {"optim_wrapper.dtype": "float16"}
        r.edits["precision=bf16"] = {"optim_wrapper.dtype": "bfloat16"}
        r.edits["precision=fp32"] = {"optim_wrapper.type": "OptimWrapper"}
    first = amp[0][1] if amp else (wrappers[0][1] if wrappers else {})
    r.settings = {k: v for k, v in (("optim_wrapper.type", _name(first.get("type")) or None),
                                    ("optim_wrapper.dtype", first.get("dtype"))) if v is not None}
    return r


def _strategy(r: Reading, strategy: dict) -> None:
    kind = _name(strategy.get("type"))
    if kind == "DeepSpeedStrategy":
        for block, dtype in (("bf16", "bfloat16"), ("fp16", "float16")):
            if truthy(get(strategy, f"{block}.enabled")):
                r.set("compute_dtype", dtype, key=f"strategy.{block}.enabled", raw=True,
                      note="DeepSpeed runs a %s copy of the model" % block)
                r.set("param_dtype", "float32", source="default", note="DeepSpeed's optimizer keeps fp32 master weights")
                if block == "fp16":
                    r.set("loss_scaling", True, key="strategy.fp16.enabled", note="DeepSpeed's fp16 scales the loss")
                break
        # DeepSpeed's own refusal of both blocks on (its reader's pairs), under the strategy's key
        r.exclusive({"strategy": strategy}, tuple((tuple(f"strategy.{k}" for k in keys), message)
                                                  for keys, message in deepspeed.EXCLUSIVE))
        r.set("distributed", "deepspeed", key="strategy.type", raw=kind)
    elif kind == "FSDPStrategy":
        mp = strategy.get("mixed_precision")
        param = dtype_of(mp.get("param_dtype")) if isinstance(mp, dict) else dtype_of(mp)
        if param:
            r.set("compute_dtype", param, key="strategy.mixed_precision", raw=str(mp), note="FSDP's MixedPrecision")
            r.set("param_dtype", "float32", source="default", note="FSDP keeps the sharded fp32 weights")
        if isinstance(mp, dict) and dtype_of(mp.get("reduce_dtype")):
            r.set("reduce_dtype", dtype_of(mp.get("reduce_dtype")), key="strategy.mixed_precision.reduce_dtype",
                  raw=mp.get("reduce_dtype"))
    elif kind == "ColossalAIStrategy":
        mp = strategy.get("mixed_precision")
        if dtype_of(mp):
            r.set("compute_dtype", dtype_of(mp), key="strategy.mixed_precision", raw=mp)
            if dtype_of(mp) == "float16":
                r.set("loss_scaling", True, key="strategy.mixed_precision", raw=mp)
