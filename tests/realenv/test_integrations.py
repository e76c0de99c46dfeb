"""The framework callbacks (attn_doctor/integrations/) inside real training loops on the CPU:
transformers' Trainer and Lightning's Trainer, as released, in the process that trains.

A healthy model trains after the callback passed; a model whose query reaches attention in float32
(or a config asking for FlashAttention 2 where it cannot run) stops with attn_doctor.PreflightError
out of trainer.train() / trainer.fit(), before the first optimizer step."""

from __future__ import annotations

import json
import subprocess

SCRIPT = r'''
import json, sys, tempfile
import torch
import torch.nn as nn
import torch.nn.functional as F
import attn_doctor

framework, case, config = sys.argv[1], sys.argv[2], sys.argv[3] or None
out = {"framework": framework, "case": case}


class Block(nn.Module):
    def __init__(self, dim=32, heads=4, upcast=False):
        super().__init__()
        self.heads, self.upcast = heads, upcast
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if self.upcast:
            q = q.float()  # a careless rotary
        o = F.scaled_dot_product_attention(q, k, v)
        return self.out(o.transpose(1, 2).reshape(b, s, d).to(x.dtype))


def finish(callback, steps):
    result = callback.result
    out.update(steps=steps, ok=None if result is None else result.ok,
               sinks=None if result is None or result.trace is None else result.trace.summary.get("sinks"),
               error=None if callback.error is None else "%s: %s" % (type(callback.error).__name__, callback.error))


class Plain(nn.Module):
    """Not a transformers model: it takes the Trainer's batch (input_ids, labels) as keyword arguments."""

    def __init__(self, upcast=False):
        super().__init__()
        self.embed = nn.Embedding(64, 32)
        self.block = Block(upcast=upcast)
        self.head = nn.Linear(32, 64)

    def forward(self, input_ids, labels=None):
        logits = self.head(self.block(self.embed(input_ids)))
        loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten()) if labels is not None else None
        return {"loss": loss, "logits": logits}


try:
    if framework == "transformers":
        from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments
        from attn_doctor.integrations.transformers import AttnDoctorCallback

        if case.startswith("plain"):
            # bf16 weights, no autocast: a float32 query then meets bf16 k and v at SDPA
            model = Plain(upcast=case == "plain-upcast").to(torch.bfloat16 if case == "plain-upcast" else torch.float32)
        else:
            model = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                                 num_attention_heads=4, num_key_value_heads=2, vocab_size=64,
                                                 max_position_embeddings=32, attn_implementation="sdpa"))
        if case == "raises":  # embeddings wider than the layers: the first step would raise in q_proj
            model.model.embed_tokens = nn.Embedding(64, 48)
        data = [{"input_ids": torch.randint(0, 64, (8,)), "labels": torch.randint(0, 64, (8,))} for _ in range(4)]
        args = TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=2, per_device_train_batch_size=2,
                                 report_to=[], use_cpu=True, bf16=case != "plain-upcast", save_strategy="no",
                                 logging_strategy="no")
        # a bad argument is the doctor's problem: logged, training goes on
        callback = AttnDoctorCallback(quick=True, config=config, timeout=-1 if case == "bad-option" else 120.0)
        trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])
        try:
            trainer.train()
        finally:
            finish(callback, trainer.state.global_step)
    else:
        import lightning as L
        from attn_doctor.integrations.lightning import AttnDoctorCallback

        class Module(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.block = Block(upcast=case.startswith("upcast"))
                if case == "raises":  # a projection that does not fit the input: step 1 would raise
                    self.block.qkv = nn.Linear(48, 96)
                if case != "no-example":  # else: one batch of its own training data
                    self.example_input_array = torch.randn(2, 8, 32)

            def forward(self, x):
                return self.block(x)

            def training_step(self, batch, index):
                return self(batch).pow(2).mean()

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)

        callback = AttnDoctorCallback(quick=True, config=config)
        trainer = L.Trainer(accelerator="cpu", devices=1, precision="bf16-true" if case.endswith("true") else "bf16-mixed", max_steps=2, callbacks=[callback],
                            logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
        try:
            trainer.fit(Module(), torch.utils.data.DataLoader(torch.randn(8, 8, 32), batch_size=2))
        finally:
            finish(callback, trainer.global_step)
    out["raised"] = None
except attn_doctor.PreflightError as exc:
    out["raised"] = "PreflightError"
    out["rules"] = sorted({f.rule for f in exc.findings})
    out["messages"] = [f.message for f in exc.findings]
    out["text"] = str(exc)
print(json.dumps(out))
'''

FA2_CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
              "num_attention_heads": 4, "torch_dtype": "bfloat16", "attn_implementation": "flash_attention_2"}


def train(env, framework, case, config=""):
    proc = subprocess.run([str(env.python), "-c", SCRIPT, framework, case, str(config)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_transformers_trainer_callback(realenv, tmp_path):
    env = realenv.get("integrations")
    clean = train(env, "transformers", "clean")
    assert clean["raised"] is None and clean["ok"] is True and clean["steps"] == 2, clean
    assert clean["sinks"] == 1, clean  # the model was traced: one layer, one attention call
    config = tmp_path / "config.json"
    config.write_text(json.dumps(FA2_CONFIG))
    refused = train(env, "transformers", "fa2-config", config)
    assert refused["raised"] == "PreflightError" and refused["steps"] == 0, refused
    assert "AD505" in refused["rules"], refused
    # a forward pass that raises stops training before step 1, naming the error and the line
    raises = train(env, "transformers", "raises")
    # no example inputs: the doctor made the token ids, so the crash is named by its line, not as AD621
    assert raises["raised"] == "PreflightError" and raises["steps"] == 0 and "trace:forward" in raises["rules"], raises
    (crash,) = [m for m in raises["messages"] if "training stops there" in m]
    assert "RuntimeError: " in crash and "modeling_llama.py:" in crash, crash


def test_transformers_callback_with_a_plain_module_traces_a_batch_of_the_trainers_data(realenv):
    env = realenv.get("integrations")
    clean = train(env, "transformers", "plain")
    assert clean["raised"] is None and clean["steps"] == 2 and clean["error"] is None, clean
    assert clean["ok"] is True and clean["sinks"] == 1, clean  # traced on the Trainer's own batch
    upcast = train(env, "transformers", "plain-upcast")
    assert upcast["raised"] == "PreflightError" and upcast["steps"] == 0, upcast
    assert upcast["ok"] is False, upcast  # the outcome is kept on the callback when it raised too
    # each finding of the error says its fix
    assert "fix: " in upcast["text"] and [r for r in upcast["rules"] if r.startswith("AD6")], upcast["text"]


def test_a_problem_of_the_doctor_itself_does_not_stop_training(realenv):
    env = realenv.get("integrations")
    bad = train(env, "transformers", "bad-option")
    assert bad["raised"] is None and bad["steps"] == 2, bad
    assert bad["error"] == "UsageError: timeout must be a positive number of seconds, not -1", bad


def test_lightning_callback(realenv):
    env = realenv.get("integrations")
    clean = train(env, "lightning", "clean")
    assert clean["raised"] is None and clean["ok"] is True and clean["steps"] == 2 and clean["sinks"] == 1, clean
    # a float32 query under bf16 autocast is fine: SDPA is on autocast's list and casts its inputs
    mixed = train(env, "lightning", "upcast-mixed")
    assert mixed["raised"] is None and mixed["ok"] is True and mixed["steps"] == 2, mixed
    # the same model in bf16-true (no autocast): mixed q/k/v dtypes reach SDPA, which would raise
    true = train(env, "lightning", "upcast-true")
    assert true["raised"] == "PreflightError" and true["steps"] == 0, true
    assert [r for r in true["rules"] if r.startswith("AD6")], true  # found by the trace
    # no example_input_array: the first element of one batch of its training dataloader
    batch = train(env, "lightning", "no-example")
    assert batch["raised"] is None and batch["ok"] is True and batch["sinks"] == 1 and batch["error"] is None, repr(batch)
    raises = train(env, "lightning", "raises")
    assert raises["raised"] == "PreflightError" and raises["steps"] == 0 and "AD621" in raises["rules"], raises
    (crash,) = [m for m in raises["messages"] if "training stops there" in m]
    assert "RuntimeError: " in crash and "the forward pass raised at " in crash, crash


def test_the_python_api_pages_callback_examples_run_as_written(realenv, tmp_path):
    """docs/python-api.md's callback examples (a transformers model, a plain module in the Trainer,
    a LightningModule), pasted into a file and run in an environment with the frameworks, as a new
    user would; each ends by printing True."""
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"
    blocks = [b for b in re.findall(r"^<!-- runs -->\n```python\n(.*?)^```", page.read_text(encoding="utf-8"),
                                    re.S | re.M) if "integrations" in b]
    assert len(blocks) == 3, "the page's callback examples: the Trainer with a transformers model and with a " \
                             "plain module, and Lightning"
    env = realenv.get("integrations")
    for block in blocks:
        script = tmp_path / "example.py"
        script.write_text(block, encoding="utf-8")
        proc = subprocess.run([str(env.python), str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, block + "\n--- stderr:\n" + proc.stderr[-3000:]
        assert proc.stdout.rstrip().splitlines()[-1].startswith("True"), proc.stdout
