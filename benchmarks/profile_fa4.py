"""Where a first FlashAttention 4 / FlexAttention call's time goes on a GPU node, in fresh
processes (what `check` pays): FA4's import, the JIT compile of each (dtype, pass), the same with
its persistent kernel caches cold and then warm, both dtypes compiling in parallel processes, and
flex_attention / an Inductor-compiled attention block cold and warm. A diagnosis aid for the
first-check figure of bench_check.py; every row is a median of fresh processes, reported beside
`import torch; torch.cuda.init()` measured in the same run.

    python benchmarks/profile_fa4.py [--python PATH] [--repeat 1] [--only fa4,flex,groups]

`groups` runs check's torch probe (its import probes and smoke groups, as `check` starts them)
with FA4's tests in one process or one per dtype, with and without the compiled flex_attention
test, each with an empty kernel cache: what the split and the compile test cost a first check.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # attn_doctor from a checkout

REF = "import torch; torch.cuda.init()"

FA4 = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch
torch.cuda.init()
t1 = time.perf_counter()
from flash_attn.cute import flash_attn_func
t2 = time.perf_counter()
out = {"torch_s": t1 - t0, "import_s": t2 - t1}
for name in sys.argv[1].split(","):
    dtype = getattr(torch, name)
    q, k, v = (torch.randn(2, 256, 4, 128, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    t = time.perf_counter()
    o = flash_attn_func(q, k, v, causal=True)
    o = o[0] if isinstance(o, tuple) else o
    torch.cuda.synchronize()
    out[name + "_fwd_s"] = time.perf_counter() - t
    t = time.perf_counter()
    o.float().sum().backward()
    torch.cuda.synchronize()
    out[name + "_bwd_s"] = time.perf_counter() - t
print(json.dumps(out))
"""

FLEX = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
torch.cuda.init()
from torch.nn.attention.flex_attention import flex_attention
t1 = time.perf_counter()
compiled = torch.compile(flex_attention) if sys.argv[1] == "compiled" else flex_attention
g = torch.Generator().manual_seed(0)
x = [torch.randn(2, 4, 256, 64, generator=g) for _ in range(3)]
q, k, v = (t.to("cuda", torch.bfloat16).requires_grad_(True) for t in x)
t = time.perf_counter()
o = compiled(q, k, v)
torch.cuda.synchronize()
fwd = time.perf_counter() - t
t = time.perf_counter()
o.float().sum().backward()
torch.cuda.synchronize()
bwd = time.perf_counter() - t
ref = torch.nn.functional.scaled_dot_product_attention(*(t.double() for t in x))
err = float((o.double().cpu() - ref).norm() / ref.norm())
print(json.dumps({"import_s": t1 - t0, "fwd_s": fwd, "bwd_s": bwd, "rel_err": err}))
"""

BLOCK = r"""
import json, time
import torch
torch.cuda.init()
t = time.perf_counter()
def block(x, w):
    q, k, v = (x @ w).chunk(3, dim=-1)
    q, k, v = (t.unflatten(-1, (4, 64)).transpose(1, 2) for t in (q, k, v))
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
f = torch.compile(block)
x = torch.randn(2, 128, 256, device="cuda", dtype=torch.bfloat16)
w = torch.randn(256, 768, device="cuda", dtype=torch.bfloat16)
f(x, w); torch.cuda.synchronize()
print(json.dumps({"compile_s": time.perf_counter() - t}))
"""


def run(py, code, args=(), env=None):
    started = time.perf_counter()
    proc = subprocess.run([py, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - started
    if proc.returncode:
        return {"wall_s": wall, "error": (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1][:300]}
    try:
        doc = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        doc = {}
    doc["wall_s"] = wall
    return doc


def fa4_env(base, cache=None):
    env = dict(base)
    scratch = tempfile.mkdtemp(prefix="fa4-dsl-")
    env["CUTE_DSL_CACHE_DIR"] = cache + "/dsl" if cache else scratch
    if cache:
        env["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] = "1"
        env["FLASH_ATTENTION_CUTE_DSL_CACHE_DIR"] = cache + "/fa4"
    else:
        env.pop("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", None)
    return env


def show(label, rows, ref):
    keys = sorted({k for r in rows for k in r if k.endswith("_s")})
    med = {k: statistics.median(r[k] for r in rows if k in r) for k in keys if any(k in r for r in rows)}
    errors = [r["error"] for r in rows if "error" in r]
    parts = ["%s %.2f s" % (k[:-2], v) for k, v in med.items()]
    extra = ["rel_err %.2g" % rows[0]["rel_err"]] if "rel_err" in rows[0] else []
    wall = med.get("wall_s")
    ratio = " = %.2fx" % (wall / ref) if wall and ref else ""
    print("%-46s %s%s%s" % (label, ", ".join(parts + extra), ratio, ("  ERROR " + errors[0]) if errors else ""))
    return med


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="fa4,flex,groups")
    args = ap.parse_args(argv)
    py, n, only = args.python, args.repeat, set(args.only.split(","))
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    ref = show("import torch; torch.cuda.init()", [run(py, REF, env=base) for _ in range(max(n, 3))], None)["wall_s"]
    if "fa4" in only:
        show("FA4 cold, one process, fp16+bf16", [run(py, FA4, ["float16,bfloat16"], fa4_env(base)) for _ in range(n)], ref)
        show("FA4 cold, bf16 only", [run(py, FA4, ["bfloat16"], fa4_env(base)) for _ in range(n)], ref)
        rows = []
        for _ in range(n):  # the two dtypes in parallel processes, as split smoke groups run
            envs = [fa4_env(base) for _ in range(2)]
            started = time.perf_counter()
            procs = [subprocess.Popen([py, "-c", FA4, d], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for d, e in zip(("float16", "bfloat16"), envs)]
            codes = [p.wait() for p in procs]
            rows.append({"wall_s": time.perf_counter() - started} if not any(codes) else {"wall_s": 0, "error": "exit %s" % codes})
        show("FA4 cold, fp16 | bf16 in parallel processes", rows, ref)
        for _ in range(n):
            cache = tempfile.mkdtemp(prefix="fa4-cache-")
            show("FA4 persistent caches: first (fills them)", [run(py, FA4, ["float16,bfloat16"], fa4_env(base, cache))], ref)
            show("FA4 persistent caches: second (warm)", [run(py, FA4, ["float16,bfloat16"], fa4_env(base, cache))], ref)
            dsl_only = fa4_env(base, cache)
            dsl_only.pop("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED")
            show("FA4 CuTe DSL cache warm, FA4's own cache off", [run(py, FA4, ["float16,bfloat16"], dsl_only)], ref)
    if "flex" in only:
        show("flex_attention eager", [run(py, FLEX, ["eager"], base) for _ in range(n)], ref)
        inductor = dict(base, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="inductor-"))
        show("flex_attention compiled, Inductor cache cold", [run(py, FLEX, ["compiled"], inductor)], ref)
        show("flex_attention compiled, Inductor cache warm", [run(py, FLEX, ["compiled"], inductor) for _ in range(n)], ref)
        one = dict(base, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="inductor-"), TORCHINDUCTOR_COMPILE_THREADS="1")
        show("flex compiled, cold, one compile thread", [run(py, FLEX, ["compiled"], one)], ref)
        show("flex compiled, warm, one compile thread", [run(py, FLEX, ["compiled"], one) for _ in range(n)], ref)
        block = dict(base, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="inductor-"))
        show("Inductor attention block, cold", [run(py, BLOCK, (), block)], ref)
        show("Inductor attention block, warm", [run(py, BLOCK, (), block) for _ in range(n)], ref)
    if "groups" in only:
        splits = {
            "FA4 one process": ["main", "cudnn:bfloat16", "lib:flash_attn_4"],
            "FA4 a process per dtype": ["main", "cudnn:bfloat16", "lib:flash_attn_4:float16", "lib:flash_attn_4:bfloat16"],
            "FA4 one process + compiled flex": ["main", "cudnn:bfloat16", "lib:flash_attn_4", "compile:flex-compiled"],
            "FA4 per dtype + compiled flex": ["main", "cudnn:bfloat16", "lib:flash_attn_4:float16", "lib:flash_attn_4:bfloat16",
                                              "compile:flex-compiled"],
        }
        probe_groups(py, splits["FA4 one process"])  # bytecode warm, as on a node's later checks
        for _ in range(n):
            for label, groups in splits.items():
                show("torch probe, " + label, [probe_groups(py, groups)], ref)
    return 0


def probe_groups(py, groups):
    """check's torch probe with these smoke groups and an empty kernel cache: its wall time and
    each group's."""
    from attn_doctor.facts import BF16_NATIVE_FROM, MODULE_DISTRIBUTIONS
    from attn_doctor.bytecode import private_pycache
    from attn_doctor.probes.runner import BUILDS_CHILD_SCRIPT, GPU_CHILD_SCRIPT, start_child

    gpu = {"script": str(GPU_CHILD_SCRIPT), "smoke": True, "capability": None, "index": 0, "shapes": [],
           "bf16_native_from": list(BF16_NATIVE_FROM), "groups": groups, "kernel_cache": tempfile.mkdtemp(prefix="kernels-")}
    args = ["torch", "--targets", json.dumps(MODULE_DISTRIBUTIONS), "--builds", json.dumps({"script": str(BUILDS_CHILD_SCRIPT)}),
            "--gpu", json.dumps(gpu)]
    started = time.perf_counter()
    try:
        folder = private_pycache()[0]  # where check's probes keep the bytecode of a target without its own
        data = start_child(py, args, {"PYTHONPYCACHEPREFIX": folder} if folder else None).result(300)
    except Exception as exc:  # noqa: BLE001 - a benchmark row, not a crash
        return {"wall_s": time.perf_counter() - started, "error": str(exc)[:200]}
    row = {"wall_s": time.perf_counter() - started}
    for group, raw in (data.get("smoke") or {}).items():
        if isinstance(raw.get("duration_s"), (int, float)):
            row[group.replace(":", " ") + "_s"] = raw["duration_s"]
        if raw.get("status") != "ok":
            row["error"] = "%s: %s" % (group, raw.get("status"))
    return row


if __name__ == "__main__":
    sys.exit(main())
