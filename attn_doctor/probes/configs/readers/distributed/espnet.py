"""An ESPnet2 training YAML (`--config conf/train_*.yaml`; espnet2/train/trainer.py, espnet2/tasks/abs_task.py).

- `use_amp` (false by default): the trainer autocasts (torch.cuda.amp.autocast) with a GradScaler. The
  autocast dtype is not a key: bf16 wherever `torch.cuda.is_bf16_supported()` (torch >= 1.10), which is
  Ampere and newer, and V100 / T4 too from torch 2.3 (there by emulation); fp16 elsewhere.
- `train_dtype` ("float32" by default; float16, bfloat16, float64): the model is moved to it before
  training (`model.to(dtype=getattr(torch, args.train_dtype))`): its weights, and with use_amp off its
  math.
- The encoders' and decoders' own attention switches (`encoder_conf.use_flash_attn`, layer types) are
  the model's, read by each module: said not understood here.
"""

from __future__ import annotations

from ...plan import Reading, dtype_of, truthy

NAME = "espnet"
LABEL = "ESPnet"
FORMATS = ("yaml",)
MARKERS = {"encoder": 1, "encoder_conf": 2, "decoder_conf": 2, "frontend_conf": 2, "specaug_conf": 3, "model_conf": 1,
           "batch_bins": 3, "batch_type": 2, "accum_grad": 1, "keep_nbest_models": 3, "best_model_criterion": 3,
           "use_amp": 2, "optim_conf": 1, "scheduler_conf": 1, "tts_conf": 2, "num_att_plot": 3}
# ESPnet2's own trainer options (abs_task.py's argument parser): no other framework spells them so
DISTINCT = ("best_model_criterion", "keep_nbest_models", "nbest_averaging_interval", "num_att_plot", "batch_bins",
            "specaug_conf", "train_dtype")

_TRAIN_DTYPES = ("float16", "bfloat16", "float32", "float64")


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    r.understood("use_amp", "train_dtype")
    raw_dtype = doc.get("train_dtype")
    train = str(raw_dtype).strip().lower() if raw_dtype is not None else None
    if train is not None and train not in _TRAIN_DTYPES:
        r.refused["train_dtype"] = f"train_dtype must be one of {', '.join(_TRAIN_DTYPES)} (ESPnet's abs_task.py), not {raw_dtype!r}"
        train = None
    if train is not None:
        r.set("param_dtype", dtype_of(train) or train, key="train_dtype", raw=raw_dtype,
              note="ESPnet moves the model to it before training")
    else:
        r.default("param_dtype", "float32", "train_dtype defaults to float32")
    amp = truthy(doc.get("use_amp"))
    if amp:
        r.set("compute_dtype", "bfloat16", key="use_amp", raw=doc.get("use_amp"),
              note="ESPnet's trainer autocasts to bf16 wherever torch.cuda.is_bf16_supported() (Ampere and newer; "
                   "V100 and T4 too from torch 2.3, by emulation), else fp16; no key chooses between them")
        r.set("loss_scaling", True, source="default", note="use_amp adds a GradScaler")
    elif train is not None:
        r.set("compute_dtype", r.plan["param_dtype"].value, key="train_dtype", raw=raw_dtype,
              note="use_amp is off: the model computes in train_dtype")
    else:
        r.default("compute_dtype", "float32", "use_amp defaults to false: float32, no autocast")
    r.settings = {k: v for k, v in (("use_amp", doc.get("use_amp")), ("train_dtype", raw_dtype)) if v is not None}
    if amp:
        r.edits["precision=fp32"] = {"use_amp": False}
    return r
