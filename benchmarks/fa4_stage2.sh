#!/usr/bin/env bash
# FlashAttention 4 on a GPU machine without network, second of two calls (see fa4_stage1.sh):
# joins the split wheel, checks every wheel's sha256, installs them with
# `pip install --no-index --no-deps --target`, bytecode compiled as pip does by default
# (FA4_NO_COMPILE=1: without, as uv installs) (and attn-doctor's own dependencies from .whl, when
# carried), puts `<target>/nvidia_cutlass_dsl/dsl_packages` on PYTHONPATH (the wheel's .pth file
# is not run in a --target folder), then gathers the FA4 evidence into OUTDIR:
#
#     benchmarks/fa4_stage2.sh [OUTDIR]     (default $OUT, else /tmp/fa4-evidence)
#
#   machine.txt          GPU, torch, triton, flash-attn-4 and the CuTe DSL as imported
#   first-check.txt      the first `check` with FA4 and empty caches, against
#                        `import torch; torch.cuda.init()`, then a second check (results cached)
#                        and a `check --no-cache` (compiled kernels cached, smoke tests run again)
#   gpu-fa4.txt          pytest -m gpu: tests/gpu/test_gpu_fa4.py, test_gpu_flex.py and the CUDA
#                        cases of tests/trace/test_flex_and_compiled.py
#   check.txt/.json      attn-doctor check -v / --json with FA4 installed
#   bench_check.txt      benchmarks/bench_check.py (check against import torch + CUDA init)
#   facts.json           the facts the GPU suite probed
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/fa4-evidence}}
wheels=${FA4_WHEELS:-/root/fa4wheels}
site=${FA4_SITE:-/root/fa4site}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1

big=nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
if [ ! -f "$wheels/$big" ]; then
    [ -f "$wheels/SHA256SUMS" ] || { echo "no $wheels/SHA256SUMS: run benchmarks/fa4_stage1.sh first (.fa4a carried)" >&2; exit 2; }
    cat "$wheels"/nvidia_cutlass_dsl_libs_cu13-4.8.1.whl.part-aa .fa4b/nvidia_cutlass_dsl_libs_cu13-4.8.1.whl.part-ab \
        >"$wheels/$big" || { echo "joining the split wheel failed: carry .fa4b with this call" >&2; exit 2; }
fi
(cd "$wheels" && sha256sum -c SHA256SUMS) >"$out/sha256.txt" 2>&1 || { cat "$out/sha256.txt"; exit 2; }
deps=()
[ -d .whl ] && deps=(.whl/*.whl)  # attn-doctor's own dependencies, where the image lacks them
compile=()
[ -n "${FA4_NO_COMPILE:-}" ] && compile=(--no-compile)
"$py" -m pip install -q --no-index --no-deps "${compile[@]}" --no-cache-dir --upgrade --target "$site" \
    "$wheels"/*.whl "${deps[@]}" >"$out/pip.txt" 2>&1 || { tail -n 20 "$out/pip.txt"; exit 2; }
export PYTHONPATH="$site/nvidia_cutlass_dsl/dsl_packages:$site${PYTHONPATH:+:$PYTHONPATH}"
# for later commands on this machine: `. /root/fa4env.sh` puts the same folders on PYTHONPATH
echo "export PYTHONPATH=$PYTHONPATH" >/root/fa4env.sh
# FA4_INSTALL_ONLY=1: install and stop (another script gathers the evidence with FA4 present)
[ -n "${FA4_INSTALL_ONLY:-}" ] && { echo "FA4 installed in $site; . /root/fa4env.sh"; exit 0; }

{
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv
    "$py" - <<'PY'
import sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)
for name in ("triton", "cutlass", "flash_attn.cute"):
    try:
        mod = __import__(name, fromlist=["_"])
        print(name, getattr(mod, "__version__", "?"), getattr(mod, "__file__", ""))
    except Exception as exc:
        print(name, "does not import:", type(exc).__name__, exc)
PY
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
"$py" -c "import flash_attn.cute" || { echo "flash_attn.cute does not import: stopping" >&2; exit 3; }

echo "== first check with FA4 (empty caches) against import torch + CUDA init"
# The doctor's cache (results) and the user's own cache folder (bytecode, compiled kernels) start empty.
export ATTN_DOCTOR_CACHE_DIR=$(mktemp -d) XDG_CACHE_HOME=$(mktemp -d)
{
    "$py" -c "import torch; torch.cuda.init()"  # the reference's own first run warms the disk: timed the second time
    t0=$(date +%s.%N); "$py" -c "import torch; torch.cuda.init()"; t1=$(date +%s.%N)
    "$py" -m attn_doctor check --json --output "$out/first-check.json" >/dev/null 2>&1; rc=$?; t2=$(date +%s.%N)
    "$py" -m attn_doctor check >/dev/null 2>&1; t3=$(date +%s.%N)
    "$py" -m attn_doctor check --no-cache --json --output "$out/kernels-warm.json" >/dev/null 2>&1; t4=$(date +%s.%N)
    # FA4 as pip installs it, bytecode and all: only the compiled kernels and the results are new
    rm -rf "$XDG_CACHE_HOME/attn-doctor/kernels"; export ATTN_DOCTOR_CACHE_DIR=$(mktemp -d)
    t5=$(date +%s.%N); "$py" -m attn_doctor check --json --output "$out/kernels-cold.json" >/dev/null 2>&1; t6=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v e="$t4" -v f="$t5" -v g="$t6" -v rc="$rc" 'BEGIN {
        printf "import torch; torch.cuda.init(): %.2f s\nfirst check (exit %d): %.2f s = %.2fx\nsecond check (results cached): %.2f s = %.2fx\ncheck --no-cache (kernels cached, tests run again): %.2f s = %.2fx\nfirst check with bytecode kept (kernels and results new): %.2f s = %.2fx\n",
               b - a, rc, c - b, (c - b) / (b - a), d - c, (d - c) / (b - a), e - d, (e - d) / (b - a), g - f, (g - f) / (b - a) }'
    "$py" - "$out/first-check.json" "$out/kernels-warm.json" "$out/kernels-cold.json" <<'PY'
import json, sys
for path in sys.argv[1:]:
    smoke = json.load(open(path))["facts"]["smoke"]
    print(path.rsplit("/", 1)[-1], "smoke groups (s):", smoke.get("group_seconds"))
PY
} 2>&1 | tee "$out/first-check.txt"
unset XDG_CACHE_HOME
unset ATTN_DOCTOR_CACHE_DIR

echo "== FA4, FlexAttention and Inductor GPU tests"
ATTN_DOCTOR_GPU_FACTS_OUT="$out/facts.json" "$py" -m pytest -m gpu -v -s -p no:cacheprovider \
    tests/gpu/test_gpu_fa4.py tests/gpu/test_gpu_flex.py tests/trace/test_flex_and_compiled.py >"$out/gpu-fa4.txt" 2>&1
echo "pytest exit $?"
grep -E "PASSED|FAILED|SKIPPED|ERROR|^FA4|^flex_attention|^Inductor|^compiled" "$out/gpu-fa4.txt" | tail -n 30

echo "== check"
"$py" -m attn_doctor check -v >"$out/check.txt" 2>&1
echo "check exit $?"
"$py" -m attn_doctor check --json --output "$out/check.json" >/dev/null 2>&1
grep -iE "FA4|flash_attn_4|flash-attn-4|FlashAttention 4" "$out/check.txt" | head -n 10

echo "== bench_check"
"$py" benchmarks/bench_check.py --repeat "${REPEAT:-3}" --python "$py" 2>&1 | tee "$out/bench_check.txt"
