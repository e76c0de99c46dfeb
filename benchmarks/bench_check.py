"""`check` wall time against `python -m torch.utils.collect_env`, measured in the same run.

Targets: `check --quick` <= 0.12x and tiers 1-2 (`check --no-sample --no-smoke`) <= 1.0x
collect_env; the whole `check` (with the sample forward pass and, on a GPU node, the smoke tests)
against importing torch and initialising CUDA (on a CPU machine the reference is the torch
import): a node's first check, with an empty cache, <= 2.0x; a repeated check, whose sample
verdict is cached, <= 1.3x.

    python benchmarks/bench_check.py [--repeat 5] [--python PATH] [--quick-only] [--target-without-bytecode]

--quick-only measures only the reference and `check --quick` (a minute instead of ten).

--target-without-bytecode: the target was installed without bytecode (uv's default, `pip install
--no-compile`) and stays so, as a read-only site-packages does: the reference rows keep their
bytecode in a folder of this run (PYTHONPYCACHEPREFIX) instead of writing it beside the target's
sources, after which a check would find it there and no longer compile anything itself.

Rows in parentheses are shown for comparison, not targets: what the cold check's sample pass
cannot avoid (transformers' import after torch's), and the cold check with its bytecode cache
kept (only differs where the target has no bytecode of its own: a uv install).

Each command runs as a fresh process (what a user or an onboarding script pays), alternating
between commands so that drifting machine load hits all of them alike; the median is reported.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import statistics
import subprocess
import sys
import time


# As installed for a user: bytecode caches are written and used.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


# Whether the target's libraries carry bytecode (a uv install does not, unless told to): without
# it every probe process compiles them, which the cold rows pay and the cache then keeps.
BYTECODE = """
import glob, importlib.util, os
out = []
for name in ("torch", "transformers"):
    spec = importlib.util.find_spec(name)
    if spec and spec.submodule_search_locations:
        folder = list(spec.submodule_search_locations)[0]
        pyc = glob.glob(os.path.join(glob.escape(folder), "__pycache__", "__init__.*.pyc"))
        out.append("%s %s bytecode" % (name, "with" if pyc else "WITHOUT"))
print(", ".join(out))
"""
REFERENCE_ENV: dict = {}  # with --target-without-bytecode: the reference rows' environment
WARM_BYTECODE = None  # this run's folder, whose bytecode (home/attn-doctor/pycache) the "verdict only" cold rows reuse


def wall(argv: list[str]) -> float:
    env = REFERENCE_ENV if REFERENCE_ENV and "attn_doctor" not in argv else ENV
    cold = None
    if argv[-1] in ("--cold", "--cold-verdict"):  # an empty cache: the sample forward pass computed afresh
        cold = folder = tempfile.mkdtemp(prefix="attn-doctor-cold-")
        # The user's own cache folder (XDG_CACHE_HOME) holds the bytecode, the cache folder the
        # verdicts: both empty for a cold check; "verdict only" starts with this run's bytecode.
        # (and cache/pycache, where earlier versions kept it: the bench measures those too)
        home = os.path.join(folder, "home")
        for kept in (os.path.join("home", "attn-doctor", "pycache"), os.path.join("cache", "pycache")):
            warm = os.path.join(WARM_BYTECODE or "", kept)
            if argv[-1] == "--cold-verdict" and WARM_BYTECODE and os.path.isdir(warm):
                shutil.copytree(warm, os.path.join(folder, kept))
        argv = argv[:-1]
        env = dict(ENV, ATTN_DOCTOR_CACHE_DIR=os.path.join(folder, "cache"), XDG_CACHE_HOME=home)
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    elapsed = time.perf_counter() - start
    if cold:
        shutil.rmtree(cold, ignore_errors=True)  # a cold run's folder (its bytecode: hundreds of MB) serves once
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--python", default=sys.executable, help="interpreter that has torch (reference and target)")
    parser.add_argument("--quick-only", action="store_true", help="only collect_env and check --quick")
    parser.add_argument("--target-without-bytecode", action="store_true",
                        help="keep the target's site-packages free of bytecode (the reference rows compile into a folder of this run)")
    args = parser.parse_args()
    import atexit

    # Every folder this run makes (cold caches, bytecode: hundreds of MB each) is inside one, removed at exit.
    tempfile.tempdir = tempfile.mkdtemp(prefix="attn-doctor-bench-")
    atexit.register(shutil.rmtree, tempfile.tempdir, True)

    init = "import torch; torch.cuda.init() if torch.cuda.is_available() else None"
    commands = {
        "collect_env (reference)": [args.python, "-W", "ignore", "-m", "torch.utils.collect_env"],
        "torch import + CUDA init": [args.python, "-W", "ignore", "-c", init],
        "check --quick": [sys.executable, "-m", "attn_doctor", "check", "--quick", "--json", "--python", args.python],
        "check (tiers 1-2)": [
            sys.executable, "-m", "attn_doctor", "check", "--no-sample", "--no-smoke", "--json", "--python", args.python,
        ],
        "check (whole)": [sys.executable, "-m", "attn_doctor", "check", "--json", "--python", args.python],
        "check (whole, cold cache)": [sys.executable, "-m", "attn_doctor", "check", "--json", "--python", args.python, "--cold"],
        "(cold verdict, bytecode kept)": [sys.executable, "-m", "attn_doctor", "check", "--json", "--python", args.python, "--cold-verdict"],
    }
    if args.quick_only:
        commands = {name: commands[name] for name in ("collect_env (reference)", "check --quick")}
    global WARM_BYTECODE

    WARM_BYTECODE = tempfile.mkdtemp(prefix="attn-doctor-bench-")
    # "whole": this run's own cache folder, and its own user cache folder for the bytecode
    os.environ["ATTN_DOCTOR_CACHE_DIR"] = ENV["ATTN_DOCTOR_CACHE_DIR"] = os.path.join(WARM_BYTECODE, "cache")
    os.environ["XDG_CACHE_HOME"] = ENV["XDG_CACHE_HOME"] = os.path.join(WARM_BYTECODE, "home")
    probe = subprocess.run([args.python, "-c", "import importlib.util as u; print(u.find_spec('transformers') is not None)"],
                           capture_output=True, text=True, check=False)
    if probe.stdout.strip() == "True" and not args.quick_only:
        # What the cold check's transformers sample cannot avoid: transformers' own import (after
        # torch's, which the sample's process inherits). Shown for comparison, not a target.
        commands["(transformers Llama import)"] = [
            args.python, "-W", "ignore", "-c", "import torch, transformers.models.llama.modeling_llama"]
    if args.target_without_bytecode:
        REFERENCE_ENV.update(ENV, PYTHONPYCACHEPREFIX=os.path.join(WARM_BYTECODE, "reference-pycache"))
    facts = subprocess.run([args.python, "-c", BYTECODE], capture_output=True, text=True, check=False, env=ENV).stdout.strip()
    print(f"target {args.python}: {facts or 'torch not found'}; {os.cpu_count()} CPUs, median of {args.repeat}")
    for argv in commands.values():  # warm the page cache once, untimed
        wall(argv)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, argv in commands.items():
            samples[name].append(wall(argv))

    collect = statistics.median(samples["collect_env (reference)"])
    torch_init = statistics.median(samples.get("torch import + CUDA init") or [float("nan")])
    # name -> (reference name, reference seconds, target ratio)
    targets = {
        "check --quick": ("collect_env", collect, 0.12),
        "check (tiers 1-2)": ("collect_env", collect, 1.0),
        "check (whole)": ("torch+init", torch_init, 1.3),
        "check (whole, cold cache)": ("torch+init", torch_init, 2.0),
    }
    print(f"{'command':28} {'median s':>9} {'min s':>7}   {'ratio':>20} {'target':>8}")
    # "whole" reuses the sample forward verdict cached by the warm-up run (a repeated check on a
    # node); "cold cache" computes it every time with an empty cache (a node's first check).
    for name, values in samples.items():
        med = statistics.median(values)
        line = f"{name:28} {med:9.3f} {min(values):7.3f}"
        if name in targets:
            ref_name, ref, target = targets[name]
            verdict = "ok" if med / ref <= target else "MISSED"
            line += f"   {med / ref:7.3f}x {ref_name:>11} {'<= %.2f' % target:>8} {verdict}"
        elif name.startswith("("):
            line += f"   {med / torch_init:7.3f}x  torch+init"
        print(line)


if __name__ == "__main__":
    main()
