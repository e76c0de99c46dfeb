"""Benchmark of the dtype tracer (issue 3). Prints measurements and ratios against references
measured in the same run; it is not a timed test.

1. 7B Llama-shaped model (32 layers, hidden 4096, 32 heads, MLP 11008, vocab 32000, seq 2048) on
   meta, built and traced in a fresh process (bf16 autocast emulated): wall time and peak RSS,
   against the budget (10 s, 1 GB) and against the same build + untraced forward in another fresh
   process.
2. Tracer overhead: traced / untraced forward of the same model on the same device, CPU (real
   compute, a small Llama) and meta (the 7B; pure Python dispatch, so the worst case).
3. `attn-doctor trace --hf` of a 2-layer, 64-wide transformers Llama in an environment with
   transformers (--python; a uv install has no bytecode of its own, so this is where the doctor's
   bytecode cache counts), the whole command, against importing torch and transformers' Llama in
   that interpreter with its bytecode (beside the sources, or where the doctor keeps it; target
   <= 1.5x), and against building the same model from its config and running one forward in plain
   Python there (target <= 1.5x with the float64 shadow, which builds and runs it once more on CPU;
   <= 1.0x with --no-shadow: the trace, its inputs' plain dry run included, costs no more).
   Interleaved runs, median; the first trace, which compiles into the cache, is untimed.

    python benchmarks/bench_trace.py                               # [1] and [2], full
    python benchmarks/bench_trace.py --quick                       # smaller shapes, for a smoke run
    python benchmarks/bench_trace.py --hf-python PATH [--repeat 5] # [3] only: PATH has torch and transformers
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG = dict(layers=32, hidden=4096, heads=32, mlp=11008, vocab=32000, seq=2048)
SMALL_CPU = dict(layers=4, hidden=512, heads=8, mlp=1376, vocab=4096, seq=256)


def build_llama(layers, hidden, heads, mlp, vocab, seq):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            dtype = x.dtype
            x = x.float()
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
            return self.weight * x.to(dtype)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.h, self.d = heads, hidden // heads
            self.q_proj = nn.Linear(hidden, hidden, bias=False)
            self.k_proj = nn.Linear(hidden, hidden, bias=False)
            self.v_proj = nn.Linear(hidden, hidden, bias=False)
            self.o_proj = nn.Linear(hidden, hidden, bias=False)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, self.h, self.d).transpose(1, 2)
            k = self.k_proj(x).view(b, s, self.h, self.d).transpose(1, 2)
            v = self.v_proj(x).view(b, s, self.h, self.d).transpose(1, 2)
            q = q * cos + torch.cat((-q[..., self.d // 2:], q[..., : self.d // 2]), -1) * sin
            k = k * cos + torch.cat((-k[..., self.d // 2:], k[..., : self.d // 2]), -1) * sin
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o_proj(o.transpose(1, 2).reshape(b, s, -1))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(hidden), RMSNorm(hidden)
            self.self_attn = Attention()
            self.gate_proj = nn.Linear(hidden, mlp, bias=False)
            self.up_proj = nn.Linear(hidden, mlp, bias=False)
            self.down_proj = nn.Linear(mlp, hidden, bias=False)

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            h = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, hidden)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.norm = RMSNorm(hidden)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)
            d = hidden // heads
            self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)), persistent=False)

        def forward(self, ids):
            x = self.embed_tokens(ids)
            t = torch.arange(ids.shape[1], device=ids.device, dtype=torch.float32)
            emb = torch.outer(t, self.inv_freq.float())
            emb = torch.cat((emb, emb), -1)
            cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
            for layer in self.layers:
                x = layer(x, cos, sin)
            return self.lm_head(self.norm(x))

    return Llama(), torch.zeros(1, seq, dtype=torch.long)


def _rss_mb():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(mode, shape):
    """One fresh process: import torch, build on meta, forward (traced or not)."""
    t0 = time.perf_counter()
    import torch

    t_import = time.perf_counter() - t0
    sys.path.insert(0, REPO)
    from attn_doctor.tracing.runs.api import trace

    t1 = time.perf_counter()
    with torch.device("meta"):
        model, ids = build_llama(**shape)
    if mode == "traced":
        report = trace(model=model, inputs=ids, autocast="bf16", device="meta")
        assert report["status"] == "ok", report["error"]
        info = {"sinks": report["summary"]["sinks"], "findings": len(report["findings"]),
                "ops": report["summary"]["ops"]}
    else:
        with torch.device("meta"), torch.no_grad():
            model(ids.to("meta"))
        info = {}
    elapsed = time.perf_counter() - t1
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps(dict(info, mode=mode, build_and_run_s=elapsed, import_s=t_import, peak_rss_mb=_rss_mb(),
                          params=params)))


def fresh(mode, shape):
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", mode, json.dumps(shape)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = time.perf_counter() - start
    return out


def overhead(shape, device, repeats):
    import torch

    sys.path.insert(0, REPO)
    from attn_doctor.tracing.runs.mode import activate
    from attn_doctor.tracing.dtype_path.tracer import Tracer

    torch.manual_seed(0)
    with torch.device(device):
        model, ids = build_llama(**shape)
    ids = ids.to(device)
    model.eval()

    def plain():
        with torch.device(device), torch.no_grad():
            return model(ids)

    def traced():
        tracer = Tracer()
        tracer.label_model(model)
        with torch.device(device), torch.no_grad(), activate(tracer):
            return model(ids)

    plain(), traced()  # warm up
    a, b = [], []
    for _ in range(repeats):  # interleaved, so drift hits both
        t = time.perf_counter()
        plain()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        traced()
        b.append(time.perf_counter() - t)
    return statistics.median(a), statistics.median(b)


HF_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
            "max_position_embeddings": 128}


def hf_trace(python, repeat):
    import tempfile

    sys.path.insert(0, REPO)
    from attn_doctor.probes import trace_bytecode_env

    folder = tempfile.mkdtemp(prefix="bench-trace-")
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(HF_LLAMA, fh)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    # the reference imports with the bytecode the trace's imports get: the target's own, else the cache's
    ref_env = dict(env, **trace_bytecode_env(python))
    if "PYTHONPYCACHEPREFIX" in ref_env:
        ref_env.pop("PYTHONDONTWRITEBYTECODE", None)
    plain = ("import torch, transformers\n"
             "config = transformers.AutoConfig.from_pretrained(%r)\n"
             "with torch.device('meta'):\n"
             "    model = transformers.LlamaForCausalLM._from_config(config)\n"
             "with torch.no_grad(), torch.device('meta'):\n"
             "    model(input_ids=torch.zeros(1, 16, dtype=torch.long))\n" % folder)
    commands = {
        "import torch + transformers Llama": ([python, "-c", "import torch, transformers.models.llama.modeling_llama"],
                                              ref_env),
        "plain: build it + one forward": ([python, "-c", plain], ref_env),
        "attn-doctor trace --hf (2 layers)": ([sys.executable, "-m", "attn_doctor", "trace", "--hf", folder, "--python",
                                               python, "--json"], env),
        "the same, --no-shadow": ([sys.executable, "-m", "attn_doctor", "trace", "--hf", folder, "--python", python,
                                   "--json", "--no-shadow"], env),
    }

    def wall(argv, run_env):
        t = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=run_env, cwd=REPO)
        if proc.returncode not in (0, 1):
            raise SystemExit("%s exited %d: %s" % (" ".join(argv), proc.returncode, (proc.stderr + proc.stdout)[-2000:]))
        return time.perf_counter() - t

    print("\n[3] trace --hf of a 2-layer transformers Llama in %s, median of %d (interleaved)" % (python, repeat))
    print("  bytecode for the trace's imports: %s" % (ref_env.get("PYTHONPYCACHEPREFIX") or "beside the sources"))
    for argv, run_env in commands.values():  # untimed: fills the cache and the page cache
        wall(argv, run_env)
    samples = {name: [] for name in commands}
    for _ in range(repeat):
        for name, (argv, run_env) in commands.items():
            samples[name].append(wall(argv, run_env))
    ref = statistics.median(samples["import torch + transformers Llama"])
    for name, values in samples.items():
        med = statistics.median(values)
        print("  %-36s median %6.2fs  min %6.2fs  %5.2fx" % (name, med, min(values), med / ref))
    ratio = statistics.median(samples["attn-doctor trace --hf (2 layers)"]) / ref
    print("  trace / import: %.2fx (target <= 1.5x) %s" % (ratio, "ok" if ratio <= 1.5 else "MISSED"))
    plain = statistics.median(samples["plain: build it + one forward"])
    plain_ratio = statistics.median(samples["attn-doctor trace --hf (2 layers)"]) / plain
    print("  trace with its float64 shadow / (plain build + one forward): %.2fx (target <= 1.5x) %s" % (
        plain_ratio, "ok" if plain_ratio <= 1.5 else "MISSED"))
    bare = statistics.median(samples["the same, --no-shadow"]) / plain
    print("  trace --no-shadow / (plain build + one forward): %.2fx (target <= 1.0x) %s" % (
        bare, "ok" if bare <= 1.0 else "MISSED"))


def main(argv):
    if argv and argv[0] == "--child":
        return child(argv[1], json.loads(argv[2]))
    if "--hf-python" in argv:
        repeat = int(argv[argv.index("--repeat") + 1]) if "--repeat" in argv else 5
        return hf_trace(argv[argv.index("--hf-python") + 1], repeat)
    quick = "--quick" in argv
    big = dict(BIG, layers=4) if quick else BIG
    print("cpu cores: %d, python %s" % (os.cpu_count() or 0, sys.version.split()[0]))
    print("\n[1] %d-layer Llama-shaped model on meta (hidden %d, seq %d), fresh process each" % (
        big["layers"], big["hidden"], big["seq"]))
    ref = fresh("plain", big)
    run = fresh("traced", big)
    print("  params: %.2fB; sinks %d, findings %d, ops traced %d" % (run["params"] / 1e9, run["sinks"], run["findings"],
                                                                      run["ops"]))
    print("  untraced build+forward: %.2fs   peak RSS %.0f MB   (torch import %.2fs, whole process %.2fs)" % (
        ref["build_and_run_s"], ref["peak_rss_mb"], ref["import_s"], ref["process_wall_s"]))
    print("  traced   build+trace:   %.2fs   peak RSS %.0f MB   (torch import %.2fs, whole process %.2fs)" % (
        run["build_and_run_s"], run["peak_rss_mb"], run["import_s"], run["process_wall_s"]))
    print("  ratio traced/untraced: time %.2fx, peak RSS %.2fx" % (
        run["build_and_run_s"] / ref["build_and_run_s"], run["peak_rss_mb"] / ref["peak_rss_mb"]))
    print("  budget: whole process %.2fs of 10s (%.0f%%), peak RSS %.0f of 1024 MB (%.0f%%)" % (
        run["process_wall_s"], 100 * run["process_wall_s"] / 10, run["peak_rss_mb"], 100 * run["peak_rss_mb"] / 1024))

    print("\n[2] tracer overhead: traced / untraced forward, same model, same device (median)")
    small = dict(SMALL_CPU, layers=2, seq=128) if quick else SMALL_CPU
    p, t = overhead(small, "cpu", 3 if quick else 7)
    print("  cpu  (%d layers, hidden %d, seq %d): untraced %.1f ms, traced %.1f ms, ratio %.2fx (target <= 1.5x)" % (
        small["layers"], small["hidden"], small["seq"], p * 1e3, t * 1e3, t / p))
    p, t = overhead(big, "meta", 3)
    print("  meta (%d layers, hidden %d, seq %d): untraced %.1f ms, traced %.1f ms, ratio %.2fx "
          "(no compute on meta: pure per-op Python cost)" % (big["layers"], big["hidden"], big["seq"], p * 1e3,
                                                             t * 1e3, t / p))


if __name__ == "__main__":
    main(sys.argv[1:])
