#!/usr/bin/env bash
# attn-doctor onboarding for a Slurm allocation: one task per GPU on every node checks its own GPU
# and environment; task 0 prints one fleet report (odd nodes first) and the step fails when any
# task fails, before the multi-day job starts.
#
# In the batch script, as the first step (before `srun python train.py`):
#
#   #SBATCH --nodes=64 --gpus-per-node=8 --ntasks-per-node=8
#   examples/onboard-slurm.sh || exit 1
#   examples/onboard-slurm.sh --python /opt/train-venv/bin/python || exit 1   # extra args go to `check`
#
# Settings (environment):
#   ATTN_DOCTOR_FAIL_ON   error | warning (default warning)
#   ATTN_DOCTOR_REPORTS   a folder on a shared file system: every task also writes its report there
#   ATTN_DOCTOR_PER_NODE  1 = one task per node instead of one per GPU (NVML still sees every GPU)
#   ATTN_DOCTOR_OFFLINE   1 = tasks cannot reach each other (no TCP between nodes): every node writes
#                         ATTN_DOCTOR_REPORTS/{host}.json and `attn-doctor fleet` aggregates them
#   ATTN_DOCTOR_GATHER_TIMEOUT  seconds task 0 waits for the others after its own check
#   DOCTOR_PYTHON         the interpreter with attn-doctor (and torch, for the gather); default python3
#   MASTER_ADDR / MASTER_PORT   where task 0 listens (default: the first node; 15000 + job id % 20000)
#
# Exit status: the fleet's code (0 pass, 1 errors or --fail-on warnings, 3 a task missing or a
# probe that could not run): srun returns the largest task exit code, and only task 0 returns it.
set -uo pipefail

: "${SLURM_JOB_ID:?run this inside a Slurm allocation (sbatch or salloc)}"
DOCTOR_PYTHON=${DOCTOR_PYTHON:-python3}
FAIL_ON=${ATTN_DOCTOR_FAIL_ON:-warning}
NODES=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}

if [[ "${ATTN_DOCTOR_PER_NODE:-0}" == 1 || "${ATTN_DOCTOR_OFFLINE:-0}" == 1 ]]; then
    tasks=(--nodes "$NODES" --ntasks "$NODES" --ntasks-per-node 1)
else
    per_node=${SLURM_GPUS_ON_NODE:-${SLURM_NTASKS_PER_NODE:-1}}
    tasks=(--nodes "$NODES" --ntasks $((NODES * per_node)) --ntasks-per-node "$per_node")
fi

if [[ "${ATTN_DOCTOR_OFFLINE:-0}" == 1 ]]; then
    reports=${ATTN_DOCTOR_REPORTS:?ATTN_DOCTOR_OFFLINE needs ATTN_DOCTOR_REPORTS on a shared file system}
    mkdir -p "$reports"
    # Each node's own verdict does not stop the step: the fleet report below decides.
    srun "${tasks[@]}" --kill-on-bad-exit=0 "$DOCTOR_PYTHON" -m attn_doctor check --json --output "$reports/{host}.json" "$@" >/dev/null
    exec "$DOCTOR_PYTHON" -m attn_doctor fleet "$reports" --expect "$NODES" --fail-on "$FAIL_ON"
fi

if [[ -z "${MASTER_ADDR:-}" ]]; then
    MASTER_ADDR=$(scontrol show hostnames "${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}}" 2>/dev/null | head -n 1)
fi
export MASTER_ADDR MASTER_PORT=${MASTER_PORT:-$((15000 + SLURM_JOB_ID % 20000))}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

args=(check --distributed --fail-on "$FAIL_ON")
if [[ -n "${ATTN_DOCTOR_REPORTS:-}" ]]; then
    mkdir -p "$ATTN_DOCTOR_REPORTS"
    args+=(--output "$ATTN_DOCTOR_REPORTS/{host}-rank{rank}.json")
fi
# --kill-on-bad-exit=0: a task that fails must not take task 0 (the reporter) down with it.
srun "${tasks[@]}" --kill-on-bad-exit=0 "$DOCTOR_PYTHON" -m attn_doctor "${args[@]}" "$@"
