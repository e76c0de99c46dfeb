#!/usr/bin/env bash
# axolotl and LLaMA-Factory configs, before and after `fix --gpu TARGET`, run for two steps on a GPU machine
# without network: their wheels carried in .whl-axl and .whl-lf (README.md), installed apart (their pins
# differ), each fixed config run only where fix changed it. Results in $OUT. Usage: run_frameworks_cli.sh t4|v100
set -u
shopt -s nullglob
T=$1
status=0
pip install -q --no-index --no-deps --target /tmp/site-axl .whl-axl/*.whl 2>&1 | tail -2
pip install -q --no-index --no-deps --target /tmp/site-lf .whl-lf/*.whl 2>&1 | tail -2
cd benchmarks/trainer_runs
for fw in axolotl llamafactory; do
  site=/tmp/site-axl; [ $fw = llamafactory ] && site=/tmp/site-lf
  after=()
  for f in fixed/$T/${fw}_*.yaml; do cmp -s "$f" "configs/$(basename $f)" || after+=("$f"); done
  # before: a crash is a result (check's errors); after: every config fix changed must train
  PYTHONPATH=$site python3 run_two_steps.py --target $T configs/${fw}_*.yaml --json $OUT/before_${fw}_$T.json
  if [ ${#after[@]} -gt 0 ]; then
    PYTHONPATH=$site python3 run_two_steps.py --target $T "${after[@]}" --json $OUT/after_${fw}_$T.json || status=1
  fi
done
exit $status
