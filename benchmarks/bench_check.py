"""`check`'s wall time against `import torch; torch.cuda.init()` (and `check --quick` against
`python -m torch.utils.collect_env`), measured in the same run, fresh processes, medians.

Each condition is what a real node meets:

| condition | what is cached | target |
|---|---|---|
| cold: a new package set on a new cluster | nothing (empty result cache, empty user cache) | <= 3.0x |
| reboot: a node's first check after a reboot, another node having checked the stack | the stack's results and the sample verdict in the shared cache; no node results (this boot's); empty user cache | <= 2.0x |
| cached: a repeated check | everything | <= 1.0x |
| (new package set, user cache warm) | bytecode and compiled kernels only | shown |
| check --quick | | <= 0.08x collect_env |
| cold, against the compiled flex_attention test alone (`--flex`) | nothing | <= 1.1x |

"first line" is the time until the report's first line is on a terminal (a pty), for a cold and a
cached check: the streamed report's header comes before any probe answers.

    python benchmarks/bench_check.py [--repeat 3] [--python PATH] [--compile-target] [--quick-only] [--flex]
                                     [--cold-only] [--source DIR]

--cold-only times only the reference, the cold check (and with --flex the flex test alone); --source
runs the check of another checkout of attn-doctor (DIR holds its attn_doctor/), to set two versions
side by side on the same machine in one run.

--compile-target byte-compiles the target's torch, triton, transformers and attention libraries
where they lie, as pip leaves them (an image built with PYTHONDONTWRITEBYTECODE, or by uv, has
none; a check then compiles them into the user's cache, which the cold rows start without).
Commands alternate, so drifting machine load hits all of them alike.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# As installed for a user: bytecode caches are written and used.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
INIT = "import torch; torch.cuda.init() if torch.cuda.is_available() else None"
COMPILED = ("torch", "triton", "transformers", "flash_attn", "flash_attn_interface", "xformers", "fla", "cutlass", "quack",
            "attn_doctor", "typer", "rich", "click", "msgspec", "ruamel", "platformdirs", "filelock", "packaging", "sympy",
            "huggingface_hub", "safetensors", "tokenizers", "jinja2", "networkx", "fsspec", "pygments", "markdown_it")

TARGETS = {"cold": 3.0, "reboot": 2.0, "cached": 1.0}
# The compiled flex_attention test alone, in a fresh process with empty kernel caches: the floor of a
# cold check on a node with triton (Inductor's compile), which the numerics sweep should hide behind.
FLEX_ALONE = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from attn_doctor.facts import BF16_NATIVE_FROM
from attn_doctor.probes.target.torch_probe import _load_file_module
gc = _load_file_module("gc", os.path.join(sys.argv[1], "attn_doctor", "probes", "target", "gpu_child.py"))
gc.BF16_NATIVE_FROM = tuple(BF16_NATIVE_FROM)
out = gc.run_smoke_group("compile:flex-compiled", 0, ["main", "compile:flex-compiled"], [], os.path.join(os.environ["XDG_CACHE_HOME"], "kernels"))
sys.exit(0 if out.get("status") == "ok" else 1)
"""
FLEX_TARGET = 1.1
# With FlashAttention 4 installed its numerics compile beside the flex test (a kernel per head dim).
FLEX_TARGET_FA4 = 1.2
HAS_FA4 = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('flash_attn.cute') else 1)"


class Folders:
    """The warm folders one untimed check filled, and a fresh copy of what each condition starts with."""

    def __init__(self, root: str):
        self.root = root
        self.warm_cache = os.path.join(root, "warm", "cache")
        self.warm_home = os.path.join(root, "warm", "home")

    def env_for(self, condition: str) -> tuple[dict, str | None]:
        if condition == "cached":
            return dict(ENV, ATTN_DOCTOR_CACHE_DIR=self.warm_cache, XDG_CACHE_HOME=self.warm_home), None
        run = tempfile.mkdtemp(dir=self.root)
        cache, home = os.path.join(run, "cache"), os.path.join(run, "home")
        if condition == "reboot" and os.path.isdir(self.warm_cache):
            shutil.copytree(self.warm_cache, cache, symlinks=True)
        if condition == "reboot":
            shutil.rmtree(os.path.join(cache, "node"), ignore_errors=True)  # no entry for this boot
        if condition == "newset" and os.path.isdir(self.warm_home):  # (nothing there where the target has its bytecode and no GPU)
            shutil.copytree(self.warm_home, home, symlinks=True)
        return dict(ENV, ATTN_DOCTOR_CACHE_DIR=cache, XDG_CACHE_HOME=home), run


# Where `python -m attn_doctor` runs (--source): its folder is first on sys.path.
CWD = None


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env, cwd=CWD)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return elapsed


def first_line(argv: list[str], env: dict, marker: bytes = b"attn-doctor") -> float:
    """Seconds until `marker` is on the terminal, and the command is then left to finish."""
    master, slave = pty.openpty()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=dict(env, TERM="xterm-256color"), cwd=CWD)
    os.close(slave)
    seen, at = b"", None
    try:
        while proc.poll() is None or select.select([master], [], [], 0)[0]:
            if select.select([master], [], [], 0.01)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                seen += chunk
                if at is None and marker in seen:
                    at = time.perf_counter() - start
    finally:
        proc.wait()
        os.close(master)
    return at if at is not None else float("nan")


def compile_target(python: str) -> None:
    script = ("import compileall, importlib.util, os, sys\n"
              "for name in sys.argv[1:]:\n"
              "    spec = importlib.util.find_spec(name)\n"
              "    if spec and spec.submodule_search_locations:\n"
              "        for folder in spec.submodule_search_locations:\n"
              "            compileall.compile_dir(folder, quiet=1, workers=0)\n")
    start = time.perf_counter()
    subprocess.run([python, "-c", script, *COMPILED], check=False, env=ENV, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    print(f"byte-compiled the target's libraries as pip does ({time.perf_counter() - start:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--python", default=sys.executable, help="interpreter that has torch (reference and target)")
    parser.add_argument("--compile-target", action="store_true", help="byte-compile the target's libraries first, as pip does")
    parser.add_argument("--quick-only", action="store_true", help="only collect_env and check --quick")
    parser.add_argument("--core", action="store_true", help="only the conditions with a target (no shown-only rows)")
    parser.add_argument("--flex", action="store_true", help="also time the compiled flex_attention test alone, cold (needs triton and a GPU)")
    parser.add_argument("--cold-only", action="store_true", help="only the reference, the cold check and (--flex) the flex test alone")
    parser.add_argument("--source", help="a checkout of attn-doctor whose check is timed (default: this one)")
    args = parser.parse_args()
    if args.source:
        global CWD
        CWD = os.path.abspath(args.source)
        if not os.path.isfile(os.path.join(CWD, "attn_doctor", "__main__.py")):
            parser.error(f"--source {args.source}: no attn_doctor/__main__.py there")
    root = tempfile.mkdtemp(prefix="attn-doctor-bench-")
    try:
        run(args, Folders(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(args, folders: Folders) -> None:
    if args.compile_target:
        compile_target(args.python)
    check = [sys.executable, "-m", "attn_doctor", "check", "--python", args.python]
    commands = {
        "collect_env": ([args.python, "-W", "ignore", "-m", "torch.utils.collect_env"], None),
        "torch+init": ([args.python, "-W", "ignore", "-c", INIT], None),
        "check --quick": (check + ["--quick", "--json"], "cached"),
    }
    if args.cold_only:
        del commands["collect_env"], commands["check --quick"]
        commands["cold"] = (check + ["--json"], "cold")
    elif not args.quick_only:
        commands.update({
            "cold": (check + ["--json"], "cold"),
            "reboot": (check + ["--json"], "reboot"),
            "cached": (check + ["--json"], "cached"),
        })
        if not args.core:
            commands.update({
                "(new package set, user cache warm)": (check + ["--json"], "newset"),
                "(check --no-smoke, cold)": (check + ["--json", "--no-smoke"], "cold"),
            })
    if args.flex and not args.quick_only:
        commands["flex test alone, cold"] = ([args.python, "-c", FLEX_ALONE, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))], "cold")
    # The warm folders: one check fills them (and the page cache), untimed.
    warm = dict(ENV, ATTN_DOCTOR_CACHE_DIR=folders.warm_cache, XDG_CACHE_HOME=folders.warm_home)
    timed(check + ["--json"], warm)
    for argv, _condition in commands.values():
        timed(argv, warm)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    firsts: dict[str, list[float]] = {} if args.cold_only else {"cold": [], "cached": []}
    for _ in range(args.repeat):
        for name, (argv, condition) in commands.items():
            env, scratch = folders.env_for(condition) if condition else (ENV, None)
            samples[name].append(timed(argv, env))
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
        if not args.quick_only:
            for condition in firsts:
                env, scratch = folders.env_for(condition)
                firsts[condition].append(first_line(check, env))
                if scratch:
                    shutil.rmtree(scratch, ignore_errors=True)
    ref = statistics.median(samples["torch+init"])
    collect = statistics.median(samples["collect_env"]) if "collect_env" in samples else float("nan")
    print(f"target {args.python}; check of {CWD or 'this checkout'}; {os.cpu_count()} CPUs; median of {args.repeat} fresh processes")
    print(f"{'condition':38} {'median s':>9} {'min s':>7} {'ratio':>8}  {'target':>8}")
    for name, values in samples.items():
        med = statistics.median(values)
        if name in ("collect_env", "torch+init"):
            print(f"{name + ' (reference)':38} {med:9.3f} {min(values):7.3f}")
            continue
        base, label, target = (collect, "collect_env", 0.08) if name == "check --quick" else (ref, "torch+init", TARGETS.get(name))
        verdict = "" if target is None else ("ok" if med / base <= target else "MISSED")
        goal = f"<= {target:.2f}" if target else ""
        print(f"{name:38} {med:9.3f} {min(values):7.3f} {med / base:7.3f}x  {goal:>8} {verdict}  ({label})")
    for condition, values in firsts.items():
        if values:
            print(f"{'first line on a terminal, ' + condition:38} {statistics.median(values):9.3f} {min(values):7.3f}")
    if samples.get("flex test alone, cold"):
        flex = statistics.median(samples["flex test alone, cold"])
        cold = statistics.median(samples["cold"])
        fa4 = subprocess.run([args.python, "-c", HAS_FA4], check=False, env=ENV).returncode == 0
        target = FLEX_TARGET_FA4 if fa4 else FLEX_TARGET
        verdict = "ok" if cold / flex <= target else "MISSED"
        print(f"{'cold check / flex test alone':38} {cold / flex:9.3f}x  <= {target:.2f} {verdict}"
              + ("  (FlashAttention 4 installed)" if fa4 else ""))
    if not args.quick_only:
        sweep(check, folders)


def sweep(check: list[str], folders: Folders) -> None:
    """Where a cold check's processes spent their time: the numerics sweep's groups beside the others."""
    import json

    env, scratch = folders.env_for("cold")
    out = os.path.join(scratch, "report.json")
    start = time.perf_counter()
    subprocess.run(check + ["--json", "--output", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False, cwd=CWD)
    wall = time.perf_counter() - start
    try:
        facts = json.load(open(out))["facts"]
        smoke = facts["smoke"]
    except (OSError, ValueError, KeyError):
        print("(no report from the cold check to read the groups' times from)")
        return
    finally:
        pass
    groups = smoke.get("group_seconds") or {}
    numerics = {g: t for g, t in groups.items() if g.startswith("num:")}
    if numerics:
        print(f"numerics sweep, one cold check: {len(smoke.get('numerics') or [])} results; its processes "
              + ", ".join(f"{g} {t:.2f} s" for g, t in numerics.items())
              + f"; beside them: " + ", ".join(f"{g} {t:.2f} s" for g, t in groups.items() if not g.startswith("num:")))
    # The check's timeline: its probes run side by side (the torch probe's imports, then its groups)
    probes = ", ".join(f"{p.get('name')} {p.get('duration_s')}" for p in facts.get("probes") or [] if isinstance(p, dict))
    imports = ", ".join(f"{m} {r.get('duration_s')}" for m, r in (facts.get("imports") or {}).items()
                        if isinstance(r, dict) and r.get("duration_s") is not None)
    print(f"that cold check: {wall:.2f} s; its probes (s): {probes}; torch imported in {(facts.get('torch') or {}).get('duration_s')} s; "
          f"the libraries' imports (s): {imports or 'none'}")
    print("the phases of each process (s):")
    for group, phases in sorted((smoke.get("group_phases") or {}).items()):
        print(f"  {group:32} {groups.get(group, float('nan')):6.2f}  " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
