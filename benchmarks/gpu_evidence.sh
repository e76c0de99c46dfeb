#!/usr/bin/env bash
# The GPU evidence in one go, on a node with an NVIDIA GPU and the environment to diagnose:
#
#     benchmarks/gpu_evidence.sh OUTDIR [PYTHON]
#
# OUTDIR receives: machine.txt (GPU, driver, torch), gpu-suite.txt (`pytest -m gpu`, every test
# that needs a GPU), facts.json (the facts the suite probed: a recorded fixture for the CPU tests),
# check.txt / check.json (`attn-doctor check -v` and its JSON report), bench_check.txt (check's
# wall time against `import torch; torch.cuda.init()` in the same run), bench_smoke.txt (each
# smoke test against a bare call of its backend) and profile.txt (where the smoke groups' time
# goes). PYTHON (default python3) must have torch and attn-doctor's dependencies importable.
# XFORMERS_WHEEL=FILE also checks an environment with that xformers wheel beside the node's torch
# (a venv whose .pth file adds PYTHON's own site-packages: --system-site-packages would give the
# base interpreter's, without torch, when PYTHON is itself a venv): xformers-check.txt / .json
# (AD312 names the build it expected).
set -uo pipefail
out=${1:?usage: benchmarks/gpu_evidence.sh OUTDIR [PYTHON]}
py=${2:-python3}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export PYTHONUNBUFFERED=1

{
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv
    "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
    nproc
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

echo "== GPU suite"
# GPU_SUITE_ARGS: more pytest arguments (e.g. "--timeout 240 --deselect tests/gpu/test_gpu_fla.py")
ATTN_DOCTOR_GPU_FACTS_OUT="$out/facts.json" "$py" -m pytest -m gpu -v -p no:cacheprovider ${GPU_SUITE_ARGS:-} tests >"$out/gpu-suite.txt" 2>&1
echo "pytest exit $?"
tail -n 15 "$out/gpu-suite.txt"

echo "== check"
"$py" -m attn_doctor check -v >"$out/check.txt" 2>&1
echo "check exit $?"
"$py" -m attn_doctor check --json --output "$out/check.json" >/dev/null 2>&1
tail -n 4 "$out/check.txt"

echo "== the smoke results' cache: a second check reuses the first one's entry (written by this user)"
cache=$(mktemp -d)
ATTN_DOCTOR_CACHE_DIR="$cache" "$py" -m attn_doctor check --json --output "$out/cache-1.json" >/dev/null 2>&1
ATTN_DOCTOR_CACHE_DIR="$cache" "$py" -m attn_doctor check --json -v --output "$out/cache-2.json" >/dev/null 2>&1
"$py" - "$out/cache-1.json" "$out/cache-2.json" <<'PY' | tee "$out/cache.txt"
import json, sys
for path in sys.argv[1:]:
    facts = json.load(open(path))["facts"]
    print(path.rsplit("/", 1)[-1], "smoke:", facts["smoke"].get("status"), "cached:", facts["smoke"].get("cached"),
          "| sample cached:", facts["dtype_path"].get("cached"))
PY
rm -f "$out/cache-1.json" "$out/cache-2.json"

if [ -n "${XFORMERS_WHEEL:-}" ]; then
    echo "== xformers wheel beside this torch: $XFORMERS_WHEEL"
    xv=$(mktemp -d)/xv
    "$py" -m venv "$xv" && "$py" -c 'import site; print("\n".join(site.getsitepackages()))' \
        >"$("$xv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/node-packages.pth" \
        && "$xv/bin/python" -m pip install -q --no-deps --no-index "$XFORMERS_WHEEL"
    "$xv/bin/python" -c 'import torch; print("xformers venv: torch", torch.__version__)' 
    "$py" -m attn_doctor check -v --python "$xv/bin/python" --no-smoke >"$out/xformers-check.txt" 2>&1
    echo "check exit $?"
    "$py" -m attn_doctor check --json --python "$xv/bin/python" --no-smoke >"$out/xformers-check.json" 2>/dev/null
    grep -A3 "AD312\|Attention kernels" "$out/xformers-check.txt" | head -n 12
fi

echo "== bench_check"
"$py" benchmarks/bench_check.py --repeat "${REPEAT:-5}" --python "$py" --flex 2>&1 | tee "$out/bench_check.txt"
echo "== bench_numerics"
"$py" benchmarks/bench_numerics.py --seeds 3 2>&1 | tee "$out/bench_numerics.txt"
echo "== bench_smoke"
"$py" benchmarks/bench_smoke.py 2>&1 | tee "$out/bench_smoke.txt"
echo "== profile_smoke"
"$py" benchmarks/profile_smoke.py --python "$py" --repeat 1 >"$out/profile.txt" 2>&1
tail -n 3 "$out/profile.txt"
