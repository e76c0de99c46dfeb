"""A Lightning Trainer config outside LitGPT and NeMo: a LightningCLI YAML (`python main.py fit -c x.yaml`,
jsonargparse: `seed_everything`, `trainer:`, `model: {class_path, init_args}`) or a Hydra config whose
`trainer._target_` is Lightning's Trainer (the lightning-hydra-template and projects built on it).

`trainer.precision` takes Lightning's values (lightning/fabric/connector.py _PRECISION_INPUT): "32-true",
"16-mixed" / "bf16-mixed" (autocast over fp32 weights; 16-mixed with a GradScaler), "16-true" /
"bf16-true" (the weights in that dtype), "64-true", "transformer-engine" (fp8, bf16 weights) /
"transformer-engine-float16"; the legacy 16, 32, 64, "bf16" still go (16 = 16-mixed). Without it the
Trainer runs "32-true" (Trainer(precision=None) resolves to 32-true in Lightning 2; 32 in 1.x): no
autocast. That default is asserted only for a file that is a Lightning Trainer config beyond doubt
(the evidence below); NeMo's configs, whose trainer block is Lightning's too, are NeMo's reader's.
"""

from __future__ import annotations

from ...plan import Reading
from .litgpt import precision_edits, read_precision

NAME = "lightning"
LABEL = "Lightning"
FORMATS = ("yaml", "json")
MARKERS = {"trainer": 1, "seed_everything": 2, "ckpt_path": 1, "model": 1, "data": 1, "optimizer": 1, "lr_scheduler": 1,
           "datamodule": 1, "callbacks": 1}
SUBSUMED_BY = ("nemo", "litgpt")
_TRAINERS = ("pytorch_lightning.Trainer", "pytorch_lightning.trainer.Trainer", "pytorch_lightning.trainer.trainer.Trainer",
             "lightning.pytorch.Trainer", "lightning.pytorch.trainer.Trainer", "lightning.pytorch.trainer.trainer.Trainer",
             "lightning.Trainer", "pl.Trainer")
DEFAULT = "Lightning's Trainer(precision=None) runs 32-true (lightning/fabric/connector.py): no autocast"


def distinct(doc: dict) -> list[str]:
    trainer = doc.get("trainer")
    if not isinstance(trainer, dict):
        return []
    target = str(trainer.get("_target_", ""))
    if target in _TRAINERS:
        return [f"trainer._target_: {target}"]
    cli = [f"{k}.class_path" for k in ("model", "data") if isinstance(doc.get(k), dict) and "class_path" in doc[k]]
    if "seed_everything" in doc:
        cli.insert(0, "seed_everything")
    return cli


def recognise_extra(doc: dict) -> int:
    return 4 * len(distinct(doc))


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    trainer = doc.get("trainer") if isinstance(doc.get("trainer"), dict) else {}
    key, raw = "trainer.precision", trainer.get("precision")
    r.understood("trainer.precision", "trainer.plugins")
    if raw is None:
        r.set("compute_dtype", "float32", source="default", raw="32-true", note=DEFAULT)
        r.set("param_dtype", "float32", source="default", note="32-true keeps the weights in fp32")
    else:
        read_precision(r, key, raw)
    strategy = trainer.get("strategy")
    if isinstance(strategy, str) and strategy.split("_")[0] in ("fsdp", "deepspeed", "ddp"):
        r.set("distributed", strategy.split("_")[0], key="trainer.strategy", raw=strategy)
        r.understood("trainer.strategy")
    r.edits.update(precision_edits(key, raw, r.plan.get("fp8") is not None))
    r.settings = {"trainer.precision": raw} if raw is not None else {}
    return r
