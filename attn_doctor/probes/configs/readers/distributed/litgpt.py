"""A LitGPT config (`litgpt finetune ... --config x.yaml`; litgpt/utils.py, config_hub/), read by Lightning's
precision plugins (lightning/fabric/connector.py, _PRECISION_INPUT); a LightningCLI or Hydra Lightning
config is lightning.py's.

`precision`: "32-true", "16-mixed" / "bf16-mixed" (autocast over fp32 weights; 16-mixed with a
GradScaler), "16-true" / "bf16-true" (the weights in that dtype, no fp32 copy), "64-true",
"transformer-engine" (fp8 through Transformer Engine, bf16 weights) / "transformer-engine-float16";
the legacy 16, 32, 64, "bf16", "16" are still taken (16 = 16-mixed, "bf16" = bf16-mixed). Without it
LitGPT picks get_default_supported_precision(training=True): bf16-mixed where
torch.cuda.is_bf16_supported() — True by emulation on sm70/sm75 — else 16-mixed.
"""

from __future__ import annotations

from ...plan import Reading

NAME = "litgpt"
LABEL = "LitGPT"
FORMATS = ("yaml", "json")
MARKERS = {"checkpoint_dir": 2, "out_dir": 2, "precision": 2, "initial_checkpoint_dir": 3, "logger_name": 3, "tokenizer_dir": 2,
           "devices": 1, "num_nodes": 1, "train": 1, "eval": 1, "data": 1, "model_name": 1, "quantize": 1, "resume": 1,
           "model_config": 1, "trainer": 2, "seed_everything": 3, "ckpt_path": 1, "lora_r": 1}
# LitGPT's CLI arguments (litgpt/finetune, pretrain): a LightningCLI or Hydra config is lightning.py's.
DISTINCT = ("initial_checkpoint_dir", "logger_name", "tokenizer_dir", "checkpoint_dir")
_PRECISIONS = {
    "32-true": ("float32", "float32"), "32": ("float32", "float32"),
    "16-mixed": ("float16", "float32"), "16": ("float16", "float32"),
    "bf16-mixed": ("bfloat16", "float32"), "bf16": ("bfloat16", "float32"),
    "16-true": ("float16", "float16"), "bf16-true": ("bfloat16", "bfloat16"),
    "64-true": ("float64", "float64"), "64": ("float64", "float64"),
    "transformer-engine": ("bfloat16", "bfloat16"), "transformer-engine-float16": ("float16", "float16"),
}
DEFAULT = ("LitGPT's default precision (get_default_supported_precision): bf16-mixed where torch.cuda.is_bf16_supported(), "
           "True by emulation before Ampere, else 16-mixed")


def recognise_extra(doc: dict) -> int:
    trainer = doc.get("trainer")
    return 2 if isinstance(trainer, dict) and "precision" in trainer else 0


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    trainer = doc.get("trainer") if isinstance(doc.get("trainer"), dict) else None
    key, raw = ("trainer.precision", trainer.get("precision")) if trainer is not None and "precision" in trainer else \
        ("precision", doc.get("precision"))
    r.understood("precision", "trainer.precision", "compile", "quantize")
    if raw is None:
        r.set("compute_dtype", "bfloat16", source="default", raw="bf16-mixed", note=DEFAULT)
        r.set("param_dtype", "float32", source="default", note="bf16-mixed keeps the weights in fp32")
    else:
        read_precision(r, key, raw)
    r.edits.update(precision_edits(key if raw is not None else ("precision" if trainer is None else "trainer.precision"),
                                   raw, r.plan.get("fp8") is not None))
    r.settings = {"precision": raw} if raw is not None else {}
    return r


def read_precision(r: Reading, key: str, raw) -> None:
    """A Lightning precision value (`16-mixed`, `bf16-true`, `transformer-engine`, the legacy 16 / 32)
    at `key`, as Lightning's connector reads it; a value it refuses, in its own words."""
    text = str(raw).strip().lower()
    compute, params = _PRECISIONS.get(text, ("invalid", None))
    r.set("compute_dtype", compute, key=key, raw=raw)
    if params:
        r.set("param_dtype", params, key=key, raw=raw, note="true: the weights in it, no fp32 copy" if "true" in text else None)
    if compute == "invalid":
        r.refused[key] = (f"Precision {raw!r} is invalid. Allowed precision values: ('transformer-engine', "
                          "'transformer-engine-float16', '16-true', '16-mixed', 'bf16-true', 'bf16-mixed', '32-true', "
                          "'64-true', 64, 32, 16, '64', '32', '16', 'bf16')")
    if text.startswith("16"):
        r.set("loss_scaling", text.endswith("mixed") or text == "16", key=key, raw=raw)
    if text.startswith("transformer-engine"):
        r.set("fp8", True, key=key, raw=raw, note="Lightning's TransformerEnginePrecision: fp8 matrix multiplies")
        r.set("fp8_backend", "te", key=key, raw=raw)


def precision_edits(key: str, raw, fp8: bool) -> dict[str, dict[str, object]]:
    """Each remedy as a Lightning precision value at `key` (`precision` or `trainer.precision`), in the
    file's style: the legacy integers (16, 32) stay integers. fp16 is always 16-mixed: fp16 weights
    without a GradScaler (16-true) are no remedy for a full fine-tune; fp8 off keeps the dtype
    Transformer Engine computed in."""
    legacy = isinstance(raw, int) and not isinstance(raw, bool)
    text = str(raw).strip().lower() if raw is not None else ""
    edits = {"precision=fp16": {key: 16 if legacy else "16-mixed"}, "precision=fp32": {key: 32 if legacy else "32-true"},
             "precision=bf16": {key: "bf16-mixed"}}
    if fp8:
        edits["fp8=off"] = {key: "16-mixed" if text == "transformer-engine-float16" else "bf16-mixed"}
    return edits
