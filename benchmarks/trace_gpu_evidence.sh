#!/usr/bin/env bash
# The trace's evidence on a GPU node, in parts that each fit one call of a few minutes:
#
#     benchmarks/trace_gpu_evidence.sh OUTDIR gpu      # the GPU tests of the trace, a DPO-like padded
#                                                      # batch at 768 and 704, `--device cuda --train`
#                                                      # over a stratified sample of architectures, and
#                                                      # check's numerics sweep beside them
#     benchmarks/trace_gpu_evidence.sh OUTDIR meta     # every architecture, traced on meta, all cores
#     benchmarks/trace_gpu_evidence.sh OUTDIR inject   # the bug classes injected into real modeling files
#
# PYTHON (default python3) must have torch, transformers and attn-doctor's dependencies importable.
set -uo pipefail
out=${1:?usage: benchmarks/trace_gpu_evidence.sh OUTDIR gpu|meta|inject}
part=${2:?usage: benchmarks/trace_gpu_evidence.sh OUTDIR gpu|meta|inject}
py=${PYTHON:-python3}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's attn_doctor, for the benchmarks' workers
workers=$(nproc)
{
    nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
    "$py" -c 'import torch, transformers; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), "transformers", transformers.__version__)'
    echo "cores $workers"
} >"$out/machine-$part.txt" 2>&1
cat "$out/machine-$part.txt"

case "$part" in
gpu)
    echo "== GPU tests of the trace"
    timeout 300 "$py" -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_padding.py tests/gpu/test_gpu_trace.py \
        >"$out/gpu-tests.txt" 2>&1
    echo "pytest exit $?"; tail -n 6 "$out/gpu-tests.txt"
    echo "== a DPO-like padded batch, as a user reads it"
    for seq in 768 704; do
        echo "--- seq $seq" >>"$out/dpo.txt"
        timeout 120 "$py" -m attn_doctor trace tests/trace/toys/dpo_toy.py:build -a seq=$seq --device cuda --train \
            >>"$out/dpo.txt" 2>&1
        echo "exit $?" >>"$out/dpo.txt"
    done
    grep -E "^(---|exit|✗|!|i |✓)" "$out/dpo.txt" | cut -c1-300
    echo "== --device cuda --train over a stratified sample"
    OPEN_WORLD_TIMEOUT=150 timeout 330 "$py" benchmarks/open_world_trace.py --device cuda --train --sample 24 --seed 52 \
        --dtypes bf16 --workers 8 --out "$out/open_world_cuda.jsonl" >"$out/open_world_cuda.txt" 2>/dev/null
    head -n 14 "$out/open_world_cuda.txt"
    echo "== check's numerics sweep beside it"
    timeout 200 "$py" -m attn_doctor check -v >"$out/check.txt" 2>&1
    echo "check exit $?"; grep -E "numerics|AD70" "$out/check.txt" | cut -c1-300 | head -n 8
    ;;
meta)
    # PART=I/N: the I-th of N interleaved parts of the architectures (the sweep with the float64
    # shadow does not fit one call of a few minutes)
    OPEN_WORLD_TIMEOUT=120 timeout ${PART_LIMIT:-560} "$py" benchmarks/open_world_trace.py --workers "$workers" \
        ${PART:+--part "$PART"} --out "$out/open_world${PART:+-${PART%/*}}.jsonl" >"$out/open_world.txt" 2>"$out/open_world.err"
    echo "exit $?"; head -n 16 "$out/open_world.txt"; tail -n 1 "$out/open_world.txt"
    ;;
inject)
    BUG_INJECTION_TIMEOUT=200 timeout ${PART_LIMIT:-560} "$py" benchmarks/bug_injection.py --workers "$workers" \
        --out "$out/bug_injection.jsonl" >"$out/bug_injection.txt" 2>"$out/bug_injection.err"
    echo "exit $?"; head -n 16 "$out/bug_injection.txt"; tail -n 1 "$out/bug_injection.txt"
    ;;
esac
