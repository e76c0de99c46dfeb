"""Where the compiled `flex_attention` test's time goes, on a GPU node, cold: each variant in a fresh
process with empty Inductor and triton caches (what a new package set pays), against `import torch;
torch.cuda.init()` measured in the same run.

    python benchmarks/profile_compile.py [--python PATH] [--repeat 1] [--profile OUTDIR]

Variants: the smoke test's shape and a small one (one block: the least that still runs the
template), forward + backward and forward alone, the two run side by side in two processes (the
floor when they overlap), and the small one again with the caches it filled (what is left when
nothing compiles: Dynamo's trace, AOTAutograd, the imports). --profile writes a cProfile of the
small cold variant, by cumulative and own time, to OUTDIR.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch
phases = {"import_torch": time.perf_counter() - t0}
mark = time.perf_counter(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
phases["cuda_init"] = time.perf_counter() - mark
mark = time.perf_counter()
from torch.nn.attention.flex_attention import flex_attention
import torch._dynamo, torch._inductor.compile_fx  # noqa: F401 - what the first compiled call imports
phases["import_compile_stack"] = time.perf_counter() - mark
shape, backward = tuple(json.loads(sys.argv[1])), sys.argv[2] == "1"
options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
compiled = torch.compile(flex_attention)
def causal(score, b, h, q_idx, kv_idx):
    return torch.where(q_idx >= kv_idx, score, -float("inf"))
q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=backward) for _ in range(3))
mark = time.perf_counter()
if backward:
    out = compiled(q, k, v, score_mod=causal, kernel_options=options)
else:
    with torch.no_grad():
        out = compiled(q, k, v, score_mod=causal, kernel_options=options)
torch.cuda.synchronize()
phases["first_forward"] = time.perf_counter() - mark
if backward:
    mark = time.perf_counter()
    out.float().sum().backward()
    torch.cuda.synchronize()
    phases["first_backward"] = time.perf_counter() - mark
phases["total"] = time.perf_counter() - t0
try:
    from torch._dynamo.utils import compile_times
    phases["compile_times"] = compile_times(repr="str", aggregate=True)[-2000:]
except Exception as exc:  # noqa: BLE001
    phases["compile_times"] = repr(exc)
print(json.dumps(phases))
"""

REFERENCE = "import torch; torch.cuda.init()"


# The least kernel the template makes: small tiles, no software pipelining (compiles faster).
TINY = {"num_stages": 1, "num_warps": 4, "BLOCK_M": 32, "BLOCK_N": 32,
        "bwd_BLOCK_M1": 32, "bwd_BLOCK_N1": 32, "bwd_BLOCK_M2": 32, "bwd_BLOCK_N2": 32}


def run(py: str, args: list[str], caches: str, profile: str = "", threads: str = "1") -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(caches, "inductor"),
               TRITON_CACHE_DIR=os.path.join(caches, "triton"), TORCHINDUCTOR_COMPILE_THREADS=threads)
    if not threads:
        env.pop("TORCHINDUCTOR_COMPILE_THREADS")
    argv = [py, "-W", "ignore"] + (["-m", "cProfile", "-o", profile] if profile else []) + ["-c", CHILD] + args
    if profile:  # cProfile runs a file, not -c
        script = os.path.join(caches, "child.py")
        with open(script, "w") as fh:
            fh.write(CHILD)
        argv = [py, "-W", "ignore", "-m", "cProfile", "-o", profile, script] + args
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        out = {"error": (proc.stderr or proc.stdout)[-600:]}
    out["wall"] = wall
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--profile", default="")
    args = ap.parse_args()
    py = args.python
    root = tempfile.mkdtemp(prefix="attn-doctor-compile-")
    try:
        subprocess.run([py, "-c", REFERENCE], check=False)  # warm the page cache
        refs = []
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run([py, "-c", REFERENCE], check=False)
            refs.append(time.perf_counter() - t)
        ref = statistics.median(refs)
        print(f"import torch; torch.cuda.init(): {ref:.2f} s (median of 3)")
        smoke, small = [2, 4, 256, 128], [1, 1, 128, 16]
        rows = []
        stages1 = {"num_stages": 1}
        variants = (("smoke shape, fwd+bwd", smoke, "1", None, "1"), ("small, fwd+bwd", small, "1", None, "1"),
                    ("small, tiny kernel, fwd+bwd", small, "1", TINY, "1"), ("small, num_stages=1, fwd+bwd", small, "1", stages1, "1"),
                    ("small, fwd only", small, "0", None, "1"), ("small, compile worker pool", small, "1", None, ""),
                    ("small, tiny kernel, pool", small, "1", TINY, ""))
        for label, shape, bwd, options, threads in variants:
            for i in range(args.repeat):
                caches = tempfile.mkdtemp(dir=root)
                rows.append((label, run(py, [json.dumps(shape), bwd, json.dumps(options)], caches, threads=threads)))
        # the tiny one again with the caches it filled
        caches = tempfile.mkdtemp(dir=root)
        run(py, [json.dumps(small), "1", json.dumps(TINY)], caches)
        rows.append(("small, tiny, caches warm", run(py, [json.dumps(small), "1", json.dumps(TINY)], caches)))
        # forward alone and forward + backward in two processes at once, each with empty caches
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=root) as a, tempfile.TemporaryDirectory(dir=root) as b:
            envs = [dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(c, "i"), TRITON_CACHE_DIR=os.path.join(c, "t"),
                         TORCHINDUCTOR_COMPILE_THREADS="1") for c in (a, b)]
            # the default forward kernel alone, beside a tiny forward with the default backward kernel
            tiny_fwd = {"fwd_num_stages": 1, "fwd_BLOCK_M": 32, "fwd_BLOCK_N": 32}
            procs = [subprocess.Popen([py, "-W", "ignore", "-c", CHILD, json.dumps(small), bwd, json.dumps(opts)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                     for bwd, opts, env in (("0", None, envs[0]), ("1", tiny_fwd, envs[1]))]
            outs = [p.communicate()[0] for p in procs]
        both = time.perf_counter() - start
        print(f"{'variant':32} {'wall':>6} {'ratio':>6}  phases (s)")
        for label, out in rows:
            phases = " ".join(f"{k}={v:.2f}" for k, v in out.items() if isinstance(v, float) and k != "wall")
            print(f"{label:32} {out['wall']:6.2f} {out['wall'] / ref:5.2f}x  {phases}{'  ' + out['error'] if 'error' in out else ''}")
        print(f"{'fwd | tiny fwd+bwd side by side':32} {both:6.2f} {both / ref:5.2f}x")
        for text in outs:
            try:
                out = json.loads(text.strip().splitlines()[-1])
                print("  side by side:", " ".join(f"{k}={v:.2f}" for k, v in out.items() if isinstance(v, float)))
            except (ValueError, IndexError):
                print("  side by side: no answer")
        if args.profile:
            os.makedirs(args.profile, exist_ok=True)
            caches = tempfile.mkdtemp(dir=root)
            stats_file = os.path.join(args.profile, "compile.prof")
            run(py, [json.dumps(small), "1"], caches, profile=stats_file)
            import pstats

            for order in ("cumulative", "tottime"):
                with open(os.path.join(args.profile, f"compile-{order}.txt"), "w") as fh:
                    pstats.Stats(stats_file, stream=fh).sort_stats(order).print_stats(70)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
