#!/usr/bin/env bash
# attn-doctor onboarding under torchrun: every GPU rank checks its own GPU and environment, rank 0
# prints one fleet report (odd ranks and hosts first) and the step fails when any rank fails.
#
# Drop it in front of the training command of a job (or into the job's prolog step):
#
#   examples/onboard-torchrun.sh || exit 1            # one node, one rank per GPU
#   NNODES=4 NODE_RANK=$NODE_RANK MASTER_ADDR=node01 examples/onboard-torchrun.sh   # on each of 4 nodes
#   examples/onboard-torchrun.sh --python /opt/train-venv/bin/python   # extra args go to `check`
#
# Settings (environment):
#   ATTN_DOCTOR_FAIL_ON   error | warning (default warning: onboarding is strict)
#   ATTN_DOCTOR_REPORTS   a folder: every rank also writes its own report there ({host}-rank{rank}.json)
#   ATTN_DOCTOR_GATHER_TIMEOUT  seconds rank 0 waits for the others after its own check
#                               (default: the torch probe's --timeout + 30; --quick / --from-report: 30)
#   DOCTOR_PYTHON         the interpreter that has attn-doctor and torch (default: python3)
#   NPROC_PER_NODE        ranks per node (default: the number of GPUs nvidia-smi lists, at least 1)
#   NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT   for several nodes (static rendezvous, as torchrun)
#
# Exit status: 0 when the fleet passes; non-zero otherwise (torchrun turns rank 0's 1 or 3 into 1;
# the report's last line says the fleet's own code). Ranks that die or hang are named as missing.
set -euo pipefail

DOCTOR_PYTHON=${DOCTOR_PYTHON:-python3}
FAIL_ON=${ATTN_DOCTOR_FAIL_ON:-warning}
if [[ -z "${NPROC_PER_NODE:-}" ]]; then
    NPROC_PER_NODE=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    [[ "$NPROC_PER_NODE" -ge 1 ]] || NPROC_PER_NODE=1
fi

args=(check --distributed --fail-on "$FAIL_ON")
if [[ -n "${ATTN_DOCTOR_REPORTS:-}" ]]; then
    mkdir -p "$ATTN_DOCTOR_REPORTS"
    args+=(--output "$ATTN_DOCTOR_REPORTS/{host}-rank{rank}.json")
fi

launch=(--nproc_per_node "$NPROC_PER_NODE")
if [[ "${NNODES:-1}" -gt 1 ]]; then
    launch+=(--nnodes "$NNODES" --node_rank "${NODE_RANK:?NODE_RANK is needed with NNODES > 1}"
             --master_addr "${MASTER_ADDR:?MASTER_ADDR is needed with NNODES > 1}" --master_port "${MASTER_PORT:-29500}")
else
    launch+=(--standalone)
fi

# OMP_NUM_THREADS: the doctor needs one thread per rank (and torchrun stops asking).
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} exec "$DOCTOR_PYTHON" -m torch.distributed.run "${launch[@]}" \
    -m attn_doctor "${args[@]}" "$@"
