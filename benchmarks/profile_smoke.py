"""Where `check`'s time goes on a GPU node: the smoke groups phase by phase, cuDNN's first-call
cost, concurrent CUDA start-up, and the sample forward pass (what its cold path imports and
costs). A diagnosis aid for bench_check.py's GPU figure.

    python benchmarks/profile_smoke.py [--python PATH] [--repeat 2] [--only ref,split,cudnn,concurrent,sample,imports]

Every experiment runs in fresh processes of the target interpreter (what `check` pays).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this script's own imports of attn_doctor, from a checkout
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

# One torch probe (torch_probe.collect_torch) as `check` starts it, with the smoke split given.
SPLIT = r"""
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, %(root)r)
from attn_doctor.facts import BF16_NATIVE_FROM
from attn_doctor.probes.target import torch_probe
import torch
t_import = time.perf_counter() - t0
groups = json.loads(sys.argv[1])
gpu = {"script": %(script)r, "smoke": bool(groups), "capability": "%%d.%%d" %% (9, 0), "index": 0,
       "bf16_native_from": list(BF16_NATIVE_FROM)}
if groups:
    gpu["groups"] = groups
modules = json.loads(sys.argv[2])
torch_probe.IMPORT_TARGETS.update(json.loads(sys.argv[3]))
t1 = time.perf_counter()
out = torch_probe.collect_torch(modules, None, gpu)
report = {"import_s": round(t_import, 3), "forks_s": round(time.perf_counter() - t1, 3),
          "imports": {m: r.get("duration_s") for m, r in out["imports"].items()},
          "cuda_s": out["cuda"].get("duration_s"), "groups": {}}
for name, g in (out.get("smoke") or {}).items():
    report["groups"][name] = {"duration_s": g.get("duration_s"), "phases": g.get("phases"),
        "backends": {r["dtype"][:4] + ":" + r["backend"]: r.get("total_ms") for r in g.get("results", [])}}
print(json.dumps(report))
"""

# cuDNN attention's first calls, forward and backward apart, per dtype, in one fresh fork.
CUDNN = r"""
import json, os, time
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
F = torch.nn.functional
res = {}
t = time.perf_counter(); torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
res["cuda_init_s"] = round(time.perf_counter() - t, 3)
for shape in ((2, 4, 256, 128), (1, 2, 64, 64)):
    for dtype in (torch.bfloat16, torch.float16):
        q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
        key = "%s %s" % (str(dtype)[6:], "x".join(map(str, shape)))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            for label in ("fwd1", "fwd2", "fwd+bwd1", "fwd+bwd2"):
                t = time.perf_counter()
                if label.startswith("fwd+bwd"):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
                else:
                    with torch.no_grad():
                        F.scaled_dot_product_attention(q, k, v, is_causal=True)
                torch.cuda.synchronize()
                res[key + " " + label] = round(time.perf_counter() - t, 3)
print(json.dumps(res))
"""

# n forks of one torch process initialising CUDA at once, each also running one cuDNN bf16 call.
CONCURRENT = r"""
import json, os, sys, time
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
def job(cudnn):
    s = time.perf_counter(); torch.cuda.init(); x = torch.ones(4, device="cuda"); torch.cuda.synchronize()
    init = time.perf_counter() - s
    if cudnn:
        q = torch.randn(2, 4, 256, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
        torch.cuda.synchronize()
    return [round(init, 3), round(time.perf_counter() - s, 3)]
out = {}
for cudnn in (False, True):
    for n in (1, 2, 3, 4):
        r, w = os.pipe(); pids = []
        s = time.perf_counter()
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                os.write(w, (json.dumps(job(cudnn)) + "\n").encode()); os._exit(0)
            pids.append(pid)
        for p in pids:
            os.waitpid(p, 0)
        os.close(w)
        data = [json.loads(x) for x in os.read(r, 100000).decode().split("\n") if x]
        out["%s x%d" % ("init+cudnn" if cudnn else "init", n)] = {"per_fork": data, "wall": round(time.perf_counter() - s, 3)}
print(json.dumps(out))
"""


# The sample forward pass as its child runs it: torch, then each sample in turn in this process
# (the child forks one per sample), with what each one imported.
SAMPLE = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
out = {"torch_s": round(time.perf_counter() - t0, 3), "samples": {}}
sys.path.insert(0, %(root)r)
from attn_doctor.tracing.runs.samples import run_sample_forward, sample_table
HEAVY = ("transformers", "sympy", "torch._dynamo", "torch._inductor", "torch.distributed", "torch.onnx", "sklearn", "scipy",
         "numpy", "pandas", "PIL", "torchvision", "jinja2", "huggingface_hub", "tokenizers", "safetensors", "x_transformers", "fla", "triton")
for name, _needs, _build in sample_table():
    before = set(sys.modules)
    t = time.perf_counter()
    res = run_sample_forward(device="cpu", dtype="bf16", capability=(9, 0), samples=[name])
    new = {m for m in set(sys.modules) - before if sys.modules.get(m) is not None}  # None: hidden from the sample
    out["samples"][name] = {"s": round(time.perf_counter() - t, 3), "status": res["samples"][0]["status"], "modules": len(new),
                            "heavy": {k: n for k in HEAVY if (n := sum(1 for m in new if m == k or m.startswith(k + ".")))}}
print(json.dumps(out))
"""


# transformers' import after torch's, as the transformers sample does it (samples.py's lean import),
# apart: with cProfile's heaviest transformers / importlib.metadata / huggingface_hub functions, the
# number of installed distributions (transformers' availability checks read their metadata) and
# what importlib.metadata.packages_distributions() costs on its own.
IMPORTS = r"""
import json, sys, time, cProfile, pstats, io
sys.path.insert(0, %(root)r)
mode = sys.argv[1]  # whole | sample | profile
%(load_child)s
sample_probe = importlib.import_module("attn_doctor_child.sample_probe")  # standalone, as check runs it
from attn_doctor.tracing.runs import samples
t0 = time.perf_counter()
prefetch = sample_probe.start_distributions_prefetch() if mode == "sample" else None
import torch
t1 = time.perf_counter()
distributions = sample_probe.finish_distributions_prefetch(prefetch) if mode == "sample" else None
t2 = time.perf_counter()
samples._lean_transformers_import(distributions)
pr = cProfile.Profile() if mode == "profile" else None
if pr: pr.enable()
if mode == "sample":  # as the sample does it: the prefetched table, Llama's modules alone
    samples._import_llama()
else:  # transformers' own way
    import transformers.models.llama.modeling_llama
if pr: pr.disable()
t3 = time.perf_counter()
out = {"torch_s": round(t1 - t0, 3), "prefetch_wait_s": round(t2 - t1, 3), "transformers_s": round(t3 - t2, 3)}
if pr:
    import importlib.metadata as md
    t = time.perf_counter(); n = len(list(md.distributions())); out["distributions"] = [n, round(time.perf_counter() - t, 3)]
    t = time.perf_counter(); md.packages_distributions(); out["packages_distributions_s"] = round(time.perf_counter() - t, 3)
    st = pstats.Stats(pr)
    rows = []
    for (fname, line, func), (cc, nc, tt, ct, callers) in st.stats.items():
        short = fname.split("site-packages/")[-1]
        rows.append((ct, tt, nc, "%%s:%%d(%%s)" %% (short, line, func)))
    keep = ("transformers/", "importlib/metadata", "huggingface_hub", "importlib_metadata")
    out["cumulative"] = [[round(c, 3), round(t, 3), n, w] for c, t, n, w in sorted(rows, reverse=True) if any(k in w for k in keep)][:40]
    out["tottime"] = [[round(t, 3), round(c, 3), n, w] for c, t, n, w in sorted(rows, key=lambda r: -r[1])][:25]
print(json.dumps(out))
"""


def importtime(python: str, code: str, top: int = 12, depth: int = 0) -> list[tuple[float, str]]:
    """The slowest imports (cumulative) below transformers' and the samples' own, from -X importtime."""
    proc = subprocess.run([python, "-X", "importtime", "-c", code], capture_output=True, text=True, env=ENV, check=False)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            parts = line[len("import time:"):].split("|")
            name = parts[2]
            level = (len(name) - len(name.lstrip())) // 2
            rows.append((int(parts[1]) / 1e6, level, name.strip()))
    # what each top-level import of the run costs, torch's first
    if depth:  # the tree down to that depth, in import order, as -X importtime prints it
        return [(c, "  " * d + n) for c, d, n in reversed(rows) if d <= depth and c > 0.04][:top]
    return sorted(((c, n) for c, d, n in rows if d == 0 and c > 0.05), reverse=True)[:top]


def run_py(python: str, code: str, *args: str) -> dict:
    proc = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, env=ENV, check=False)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1:] or ["exit %d" % proc.returncode]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", default="ref,split,cudnn,concurrent")
    args = parser.parse_args()
    only = set(args.only.split(","))
    script = str(ROOT / "attn_doctor" / "probes" / "target" / "gpu_child.py")
    if "ref" in only:
        init = "import torch; torch.cuda.init()"
        times = [wall([args.python, "-W", "ignore", "-c", init]) for _ in range(args.repeat + 1)][1:]
        print(f"import torch + CUDA init: median {statistics.median(times):.3f} s {[round(t, 3) for t in times]}", flush=True)
    if "split" in only:
        code = SPLIT % {"root": str(ROOT), "script": script}
        # what `check` asks its torch probe to import (it passes this table with --targets)
        from attn_doctor.facts import MODULE_DISTRIBUTIONS

        for modules in ([], list(MODULE_DISTRIBUTIONS)):
            for groups in ([], ["main"], ["main", "cudnn:bfloat16"], ["main", "cudnn:bfloat16", "cudnn:float16"]):
                for _ in range(args.repeat):
                    rep = run_py(args.python, code, json.dumps(groups), json.dumps(modules),
                                 json.dumps(MODULE_DISTRIBUTIONS))
                    print(f"split {groups} imports={bool(modules)}: {json.dumps(rep)}", flush=True)
    if "cudnn" in only:
        print("cudnn first calls:", json.dumps(run_py(args.python, CUDNN)), flush=True)
    if "concurrent" in only:
        print("concurrent forks:", json.dumps(run_py(args.python, CONCURRENT)), flush=True)
    if "imports" in only:
        from attn_doctor.probes.runner import child_package_source

        code = IMPORTS % {"root": str(ROOT), "load_child": child_package_source()}
        for _ in range(args.repeat):
            print("transformers' own import after torch:", json.dumps(run_py(args.python, code, "whole")), flush=True)
            print("  as the sample imports it:      ", json.dumps(run_py(args.python, code, "sample")), flush=True)
        rep = run_py(args.python, code, "profile")
        print("under cProfile:", json.dumps({k: v for k, v in rep.items() if k not in ("cumulative", "tottime")}), flush=True)
        for key in ("cumulative", "tottime"):
            print(f"heaviest by {key} (cumulative s, own s, calls, function):", flush=True)
            for row in rep.get(key, []):
                print("  ", *row, flush=True)
        rows = importtime(args.python, code.replace("sys.argv[1]", "'whole'"), top=80, depth=6)
        print("-X importtime, below transformers (cumulative s, depth, module):", flush=True)
        for seconds, name in rows:
            print(f"  {seconds:6.2f}  {name}", flush=True)
    if "sample" in only:
        code = SAMPLE % {"root": str(ROOT)}
        bytecode = run_py(args.python, "import json, glob, os, torch; d = os.path.dirname(torch.__file__); "
                                       "print(json.dumps({'torch_bytecode': bool(glob.glob(os.path.join(glob.escape(d), '__pycache__', '__init__.*.pyc')))}))")
        print("sample pass:", json.dumps(bytecode), flush=True)
        for _ in range(args.repeat):
            print("sample pass:", json.dumps(run_py(args.python, code)), flush=True)
        print("sample pass, slowest top-level imports (cumulative s):", flush=True)
        for seconds, name in importtime(args.python, code):
            print(f"  {seconds:6.2f}  {name}", flush=True)


if __name__ == "__main__":
    main()
