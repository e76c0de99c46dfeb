"""Each training config run for two steps by its framework itself, on a GPU constrained to a target's
compute capability: the proof that a config `attn-doctor fix --gpu TARGET` wrote trains there.

    python benchmarks/trainer_runs/run_two_steps.py --target t4 CONFIG.yaml ... --json out.json

The framework is named by the config's file name (hf_trainer_*, trl_sft_*, trl_dpo_*, accelerate_*,
lightning_*, axolotl_*, llamafactory_*, deepspeed_* for a DeepSpeed JSON config); each config runs in a process of its own, in a temporary folder, with a tiny Llama
(2 layers, hidden 64) built here and a few random token batches: no network. The target's
capability is what the frameworks read (torch.cuda.get_device_capability, get_device_properties'
major/minor, is_bf16_supported without emulation): the checks they run before training (transformers'
TF32 check, Lightning's and accelerate's bf16 checks) see the target GPU, while the kernels run on
the real one. A config passes when both steps ran and every logged loss is finite.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

TARGETS = {"t4": (7, 5), "v100": (7, 0), "a100": (8, 0), "h100": (9, 0)}
VOCAB = 128


def constrain(major: int, minor: int) -> None:
    """What the frameworks read of the GPU, made the target's."""
    import torch

    try:
        # Triton compiles for the GPU it reads through torch: it keeps the real one (the kernels run
        # there), only the frameworks' checks see the target
        from triton.runtime import driver

        real_target = driver.active.get_current_target()
        driver.active.get_current_target = lambda: real_target
    except Exception:  # noqa: BLE001 - no Triton: nothing compiles with it
        pass
    real_props = torch.cuda.get_device_properties

    class Props:
        def __init__(self, props):
            self._props = props

        def __getattr__(self, name):
            if name == "major":
                return major
            if name == "minor":
                return minor
            return getattr(self._props, name)

    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    torch.cuda.get_device_properties = lambda device=None: Props(real_props(torch.cuda.current_device() if device is None else device))
    real_bf16 = torch.cuda.is_bf16_supported

    def is_bf16_supported(including_emulation: bool = True):
        # sm80+ natively; below, torch reports True by emulation unless asked without it
        return real_bf16() if major >= 8 else bool(including_emulation)

    torch.cuda.is_bf16_supported = is_bf16_supported


def tiny_model(dtype=None):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0,
                         bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(config)
    return model.to(dtype) if dtype is not None else model


def tiny_tokenizer(folder: Path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for i in range(4, VOCAB):
        vocab["w%d" % i] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.save_pretrained(folder)
    return fast


def words(n: int, seed: int) -> str:
    import random

    rnd = random.Random(seed)
    return " ".join("w%d" % rnd.randrange(4, VOCAB) for _ in range(n))


def losses_of(history) -> list[float]:
    return [float(h["loss"]) for h in history if "loss" in h]


def run_hf_trainer(path: Path, work: Path) -> dict:
    import torch
    from transformers import HfArgumentParser, Trainer, TrainingArguments

    (args,) = HfArgumentParser(TrainingArguments).parse_yaml_file(str(path))

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(4, VOCAB, (16,), generator=g)
            return {"input_ids": ids, "labels": ids.clone()}

    trainer = Trainer(model=tiny_model(), args=args, train_dataset=Tokens())
    trainer.train()
    return {"losses": losses_of(trainer.state.log_history), "steps": trainer.state.global_step}


def _trl_model_and_data(path: Path, work: Path, config_cls, pairs: bool):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import ModelConfig, ScriptArguments, TrlParser

    # as `trl sft --config FILE` reads it (a key no dataclass has is refused)
    _, args, model_args = TrlParser((ScriptArguments, config_cls, ModelConfig)).parse_args_and_config(["--config", str(path)])
    folder = work / model_args.model_name_or_path
    tok = tiny_tokenizer(folder)
    tiny_model().save_pretrained(folder)
    dtype = getattr(model_args, "dtype", None) or getattr(model_args, "torch_dtype", None)
    kwargs = {} if dtype in (None, "auto") else {"dtype": getattr(__import__("torch"), dtype)}
    model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    if pairs:
        data = Dataset.from_dict({"prompt": [words(6, i) for i in range(8)], "chosen": [words(6, 100 + i) for i in range(8)],
                                  "rejected": [words(6, 200 + i) for i in range(8)]})
    else:
        data = Dataset.from_dict({"text": [words(20, i) for i in range(8)]})
    return args, model, tok, data, str(next(model.parameters()).dtype)


def run_trl_sft(path: Path, work: Path) -> dict:
    from trl import SFTConfig, SFTTrainer

    args, model, tok, data, weights = _trl_model_and_data(path, work, SFTConfig, pairs=False)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    trainer.train()
    return {"losses": losses_of(trainer.state.log_history), "steps": trainer.state.global_step, "weights": weights}


def run_trl_dpo(path: Path, work: Path) -> dict:
    from trl import DPOConfig, DPOTrainer

    args, model, tok, data, weights = _trl_model_and_data(path, work, DPOConfig, pairs=True)
    trainer = DPOTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    trainer.train()
    return {"losses": losses_of(trainer.state.log_history), "steps": trainer.state.global_step, "weights": weights}


def run_accelerate(path: Path, work: Path) -> dict:
    import torch
    import yaml
    from accelerate import Accelerator

    config = yaml.safe_load(path.read_text())
    # what `accelerate launch --config_file` hands the script
    os.environ["ACCELERATE_MIXED_PRECISION"] = str(config.get("mixed_precision", "no"))
    accelerator = Accelerator()
    model = tiny_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model, optimizer = accelerator.prepare(model, optimizer)
    losses = []
    for step in range(2):
        g = torch.Generator().manual_seed(step)
        ids = torch.randint(4, VOCAB, (2, 16), generator=g).to(accelerator.device)
        loss = model(input_ids=ids, labels=ids).loss
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss))
    return {"losses": losses, "steps": 2, "mixed_precision": accelerator.mixed_precision}


def run_lightning(path: Path, work: Path) -> dict:
    import lightning as L
    import torch
    import yaml

    config = yaml.safe_load(path.read_text())
    losses = []

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = tiny_model()

        def training_step(self, batch, _):
            loss = self.model(input_ids=batch, labels=batch).loss
            losses.append(float(loss))
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    data = torch.utils.data.DataLoader(torch.randint(4, VOCAB, (8, 16)), batch_size=2)
    trainer = L.Trainer(default_root_dir=str(work), **config["trainer"])
    trainer.fit(Module(), data)
    return {"losses": losses, "steps": trainer.global_step, "precision": str(trainer.precision)}


def run_deepspeed(path: Path, work: Path) -> dict:
    """The JSON config given to DeepSpeed's own engine (deepspeed.initialize), one process of a
    world of one, the optimizer the training script's (AdamW: the config names none)."""
    import socket

    import deepspeed
    import torch

    config = json.loads(path.read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # what the `deepspeed` launcher sets for each rank
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
    model = tiny_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    losses = []
    for step in range(2):
        g = torch.Generator().manual_seed(step)
        ids = torch.randint(4, VOCAB, (engine.train_micro_batch_size_per_gpu(), 16), generator=g).to(engine.device)
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        engine.step()
        losses.append(float(loss))
    precision = "bf16" if engine.bfloat16_enabled() else "fp16" if engine.fp16_enabled() else "fp32"
    return {"losses": losses, "steps": engine.global_steps, "skipped": engine.skipped_steps, "precision": precision,
            "weights": str(next(engine.module.parameters()).dtype)}


# The frameworks whose trainer is a command line run it in a process of their own: the target's
# capability is made theirs by a sitecustomize on that process's path, before anything imports torch.
_SITECUSTOMIZE = """import os, sys
sys.path.insert(0, {here!r})
from run_two_steps import TARGETS, constrain
constrain(*TARGETS[os.environ["TRAINER_RUNS_TARGET"]])
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "applied"), "w").close()
"""


def _through_cli(run):
    def runner(path: Path, work: Path) -> dict:
        hook = work / "_target"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(here=str(Path(__file__).resolve().parent)))
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)
        out = run(path, work)
        if not (hook / "applied").exists():  # Python prints a failing sitecustomize and goes on: a run on the real GPU
            raise RuntimeError("the target's capability was not applied in the framework's process (sitecustomize)")
        losses = out["losses"]
        if out["returncode"] != 0:
            log = Path(out["log"]).read_text(errors="replace").splitlines()
            # the exception a traceback ends with; not the interpreter's shutdown notices after it
            errors = [line.strip() for line in log if re.match(r"\s*[\w.]*(?:Error|Exception)\b[^:]*:", line)
                      and not line.lstrip().startswith("Exception ignored")]
            raise RuntimeError(errors[-1][:300] if errors else "exit %d: %s" % (out["returncode"], (log or ["no output"])[-1][:200]))
        return {"losses": losses, "steps": len(losses)}
    return runner


def run_axolotl(path: Path, work: Path) -> dict:
    """`python -m axolotl.cli.train CONFIG` (axolotl's own CLI), the config's keys kept, the model,
    data and step count its runner's (cli_frameworks.py)."""
    from cli_frameworks import run_axolotl as run

    return _through_cli(run)(path, work)


def run_llamafactory(path: Path, work: Path) -> dict:
    """`python -m llamafactory.cli train CONFIG` (LLaMA-Factory's own CLI), as run_axolotl."""
    from cli_frameworks import run_llamafactory as run

    return _through_cli(run)(path, work)


RUNNERS = {"axolotl": run_axolotl, "llamafactory": run_llamafactory, "deepspeed": run_deepspeed, "hf_trainer": run_hf_trainer, "trl_sft": run_trl_sft, "trl_dpo": run_trl_dpo, "accelerate": run_accelerate,
           "lightning": run_lightning}


def framework_of(path: Path) -> str:
    return next(k for k in sorted(RUNNERS, key=len, reverse=True) if path.name.startswith(k))


def child(path: Path, target: str) -> dict:
    constrain(*TARGETS[target])
    os.environ["TRAINER_RUNS_TARGET"] = target  # for a framework run by its command line (_through_cli)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            out = RUNNERS[framework_of(path)](path, Path(tmp))
            finite = bool(out["losses"]) and all(math.isfinite(x) for x in out["losses"])
            out["status"] = "ok" if finite and out["steps"] >= 2 else "not finite" if not finite else "fewer steps"
        except BaseException as exc:  # noqa: BLE001 - the framework's refusal is the result
            out = {"status": "raised", "error": "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else ""),
                   "where": traceback.format_exc().strip().splitlines()[-3][:200]}
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="+", type=Path)
    ap.add_argument("--target", choices=sorted(TARGETS), default="t4")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.configs[0].resolve(), args.target)))
        return 0
    rows = []
    for path in args.configs:
        proc = subprocess.run([sys.executable, __file__, "--child", "--target", args.target, str(path.resolve())],
                              capture_output=True, text=True, timeout=600)
        try:
            row = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            row = {"status": "crashed", "error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
        row.update(config=str(path), framework=framework_of(path), target=args.target)
        rows.append(row)
        print("%-10s %-10s %-45s %-10s %s" % (args.target, row["framework"], path.name, row["status"],
                                               row.get("error") or " ".join("%.3f" % x for x in row.get("losses", []))),
              flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
