#!/usr/bin/env bash
# The configs `attn-doctor fix` writes for each target GPU: configs/*.yaml and *.json copied to fixed/<target>/
# and fixed there (--quick: the packages of this machine are not the job's), each fix's output kept
# beside it (.log). Then, on a GPU: run_two_steps.py runs each one for two steps.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DOCTOR="${ATTN_DOCTOR:-attn-doctor}"
for target in t4 v100; do
  mkdir -p "$HERE/fixed/$target"
  for f in "$HERE"/configs/*.yaml "$HERE"/configs/*.json; do
    out="$HERE/fixed/$target/$(basename "$f")"
    cp "$f" "$out"
    "$DOCTOR" fix --quick --no-sample --gpu "$target" -c "$out" --yes > "$out.log" 2>&1 || echo "fix exit $? for $out" >> "$out.log"
  done
done
