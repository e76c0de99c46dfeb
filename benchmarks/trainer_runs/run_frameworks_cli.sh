#!/usr/bin/env bash
# axolotl and LLaMA-Factory configs, before and after `fix --gpu TARGET`, run for two steps on a GPU machine
# without network: their wheels carried in .whl-axl and .whl-lf (README.md), installed apart (their pins
# differ), each fixed config run only where fix changed it. Results in $OUT. Usage: run_frameworks_cli.sh t4|v100
set -u
T=$1
pip install -q --no-index --no-deps --target /tmp/site-axl .whl-axl/*.whl 2>&1 | tail -2
pip install -q --no-index --no-deps --target /tmp/site-lf .whl-lf/*.whl 2>&1 | tail -2
cd benchmarks/trainer_runs
for fw in axolotl llamafactory; do
  site=/tmp/site-axl; [ $fw = llamafactory ] && site=/tmp/site-lf
  after=()
  for f in fixed/$T/${fw}_*.yaml; do cmp -s "$f" "configs/$(basename $f)" || after+=("$f"); done
  PYTHONPATH=$site timeout 280 python3 run_two_steps.py --target $T configs/${fw}_*.yaml --json $OUT/before_${fw}_$T.json
  [ ${#after[@]} -gt 0 ] && PYTHONPATH=$site timeout 200 python3 run_two_steps.py --target $T "${after[@]}" --json $OUT/after_${fw}_$T.json
done
ls $OUT
