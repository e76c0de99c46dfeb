#!/usr/bin/env bash
# FlashAttention 4 on a GPU machine without network, first of two calls. A call carries at most
# 64 MiB and nvidia-cutlass-dsl-libs-cu13's wheel is 92 MB, so the wheels come in two folders
# (ignored by git): .fa4a (every other wheel, the first half of that one and SHA256SUMS) in this
# call, .fa4b (its second half) in the next, which runs benchmarks/fa4_stage2.sh. This call only
# keeps .fa4a's files where the next call finds them (the machine stays warm between the two).
#
#     benchmarks/fa4_stage1.sh [WHEEL_DIR]        (default /root/fa4wheels)
#
# The wheels, for Python 3.12 / manylinux_2_28 x86_64 (pip download --no-deps --only-binary=:all:):
# flash-attn-4 4.0.0b36, nvidia-cutlass-dsl 4.8.1 (+ -libs-base, -libs-core, -libs-cu13),
# quack-kernels 0.6.5, apache-tvm-ffi 0.1.15.post2, torch-c-dlpack-ext 0.1.5; then
# `split -b 46M` of the -libs-cu13 wheel into NAME.whl.part-aa (.fa4a) and NAME.whl.part-ab (.fa4b).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-/root/fa4wheels}
[ -f .fa4a/SHA256SUMS ] || { echo "no .fa4a/SHA256SUMS: carry .fa4a with this call" >&2; exit 2; }
mkdir -p "$dest"
cp -f .fa4a/* "$dest"/
ls -l "$dest"
echo "stage 1 done: $(ls "$dest" | wc -l) files in $dest; next: benchmarks/fa4_stage2.sh with .fa4b carried"
