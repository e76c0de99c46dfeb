#!/usr/bin/env bash
# FlashAttention 4 in the numerics sweep, on a GPU machine where benchmarks/fa4_stage2.sh installed
# it (FA4_INSTALL_ONLY=1 is enough; /root/fa4env.sh puts it on PYTHONPATH):
#
#     benchmarks/fa4_numerics_evidence.sh [OUTDIR]      (default $OUT, else /tmp/fa4-numerics)
#
#   first-check.txt   `check` with FA4 and empty caches (results, Inductor's, FA4's compiled kernels)
#                     against `import torch; torch.cuda.init()`, then the same check again (results
#                     cached); each smoke and numerics group's seconds, and FA4's rows of the sweep
#   first-check.json  that first check's report
#   gpu-tests.txt     the GPU tests this sweep touches: numerics, FA4, the kernel choice's fp32 row
#   table.txt/.json   benchmarks/bench_numerics.py (one seed): library x case x direction
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/fa4-numerics}}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
[ -f /root/fa4env.sh ] && . /root/fa4env.sh
"$py" -c "import flash_attn.cute" || { echo "flash_attn.cute does not import: run benchmarks/fa4_stage2.sh first" >&2; exit 3; }

echo "== first check with FA4 (empty caches) against import torch + CUDA init"
{
    export ATTN_DOCTOR_CACHE_DIR=$(mktemp -d) XDG_CACHE_HOME=$(mktemp -d)
    "$py" -c "import torch; torch.cuda.init()"
    t0=$(date +%s.%N); "$py" -c "import torch; torch.cuda.init()"; t1=$(date +%s.%N)
    "$py" -m attn_doctor check --json --output "$out/first-check.json" >/dev/null 2>&1; rc=$?; t2=$(date +%s.%N)
    "$py" -m attn_doctor check --json --output "$out/second-check.json" >/dev/null 2>&1; rc2=$?; t3=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v rc="$rc" -v rc2="$rc2" 'BEGIN {
        printf "import torch; torch.cuda.init(): %.2f s\nfirst check (exit %d): %.2f s = %.2fx\nsecond check (exit %d, results cached): %.2f s = %.2fx\n",
               b - a, rc, c - b, (c - b) / (b - a), rc2, d - c, (d - c) / (b - a) }'
    "$py" - "$out/first-check.json" "$out/second-check.json" <<'PY'
import json, sys
for path in sys.argv[1:]:
    report = json.load(open(path))
    smoke = report["facts"]["smoke"]
    print(path.rsplit("/", 1)[-1], "cached:", smoke.get("cached"), smoke.get("capability_cached"), "error:", smoke.get("error"))
    print("  group seconds:", smoke.get("group_seconds"))
    for r in smoke.get("numerics") or []:
        if r["backend"] == "flash_attn_4" and r["status"] != "n/a":
            print("  fa4", r["case"], r["status"], r.get("worst"), r.get("error") or "", r.get("directions") or "")
    for r in report["results"]:
        if r["status"] in ("error", "warning"):
            print("  %s %s: %s" % (r["rule"], r["status"], r["message"][:400]))
PY
    unset ATTN_DOCTOR_CACHE_DIR XDG_CACHE_HOME
} 2>&1 | tee "$out/first-check.txt"

echo "== GPU tests"
"$py" -m pytest -m gpu -q -rfE -p no:cacheprovider tests/gpu/test_gpu_numerics.py tests/gpu/test_gpu_fa4.py \
    "tests/gpu/test_gpu_kernel_choice.py::test_trace_on_the_gpu_finds_each_pattern_and_its_cost" >"$out/gpu-tests.txt" 2>&1
echo "pytest exit $?"; tail -n 8 "$out/gpu-tests.txt"

echo "== the sweep's table (one seed)"
"$py" benchmarks/bench_numerics.py --seeds 1 --json "$out/table.json" >"$out/table.txt" 2>&1
echo "bench_numerics exit $?"; grep -iE "flash_attn_4|wrong|err |NaN" "$out/table.txt" | head -n 40
