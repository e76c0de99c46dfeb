"""The fleet gather inside a training job's own torch.distributed process group (the Python API's
preflight): every rank hands its report to rank 0, which builds the fleet report and tells every
rank the verdict, so that all ranks stop (or go on) together.

The same protocol as `check --distributed` (distributed.py: hello, one full report per distinct
digest, members, count, closed), on the process group's own store under a prefix of its own:
init_process_group has already joined every rank to that store, and no collective runs, so a broken
NCCL (what the doctor may be diagnosing) cannot hang it. Every wait has a deadline.

    rank 0, after gathering   set "verdict"  {"exit_code", "failing_ranks", "message"}
    the other ranks           wait for "verdict" (its deadline: rank 0's gather deadline + 30 s)
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Optional

import msgspec

from ..options import host_name
from ..report import EXIT_FINDINGS, Report
from .aggregate import FleetReport, member_fails
from .digest import report_digest
from .distributed import GatherError, Placement, default_gather_timeout, gather, publish_within, report_failure

VERDICT_GRACE_S = 30.0  # the other ranks wait this much longer than rank 0's own gather deadline

# Every rank calls preflight in the same order (as it calls collectives), so the n-th call of each
# rank meets the others' n-th call under one prefix.
_CALLS = itertools.count()


@dataclass(frozen=True)
class Outcome:
    rank: int
    fleet: Optional[FleetReport]  # rank 0 only
    fleet_failed: bool  # the fleet's verdict under fail_on (every rank learns it from rank 0)
    message: str  # rank 0's one-line verdict: which ranks fail
    note: Optional[str] = None  # why the fleet view is missing (the store failed): said, never raised


def gather_in_process_group(report: Report, *, fail_on: str, quick: bool, timeout: float) -> Outcome:
    import torch.distributed as dist
    from torch.distributed import PrefixStore

    rank, world = dist.get_rank(), dist.get_world_size()
    call = next(_CALLS)
    try:
        base = dist.distributed_c10d._get_default_store()  # private since torch 1.x, present through 2.13
    except Exception as exc:  # noqa: BLE001 - a torch without it: each rank judges itself
        return Outcome(rank, None, False, "", note=f"the process group's store is not reachable ({exc}); "
                                                   "each rank judged itself only")
    store = PrefixStore(f"attn-doctor/preflight/{call}", base)
    gather_timeout = default_gather_timeout(quick, False, timeout)
    placement = Placement(rank=rank, world_size=world, local_rank=_int_env("LOCAL_RANK"),
                          master_addr=os.environ.get("MASTER_ADDR", ""), master_port=_int_env("MASTER_PORT"),
                          launcher=_launcher(), run_id=str(call), agent_store=False)
    host = host_name()
    doc = msgspec.to_builtins(report)
    try:
        store.append("hello", f"{rank}\t{placement.local_rank}\t{host}\n")
        publish_within(store, placement, host, doc, report_digest(doc), gather_timeout)
    except GatherError as exc:
        report_failure(store, placement, host, str(exc))
        return Outcome(rank, None, False, "", note=f"could not hand the report to rank 0: {exc}")
    if rank == 0:
        fleet = gather(store, placement, timeout=gather_timeout, fail_on=fail_on)
        failing = sorted(r for g in fleet.groups for m in g.members
                         if member_fails(m.summary, fail_on) for r in ([m.rank] if m.rank is not None else []))
        failed = fleet.exit_code == EXIT_FINDINGS
        message = f"rank{'s' if len(failing) != 1 else ''} {', '.join(map(str, failing))} fail" if failing else "no rank fails"
        store.set("verdict", json.dumps({"exit_code": fleet.exit_code, "failing_ranks": failing, "message": message}))
        return Outcome(rank, fleet, failed, message)
    try:
        store.wait(["verdict"], timedelta(seconds=gather_timeout + VERDICT_GRACE_S))
        verdict = json.loads(store.get("verdict"))
    except Exception as exc:  # noqa: BLE001 - rank 0 died or hung: this rank's own verdict stands
        return Outcome(rank, None, False, "", note=f"no verdict from rank 0 ({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}); "
                                                   "this rank judged itself only")
    return Outcome(rank, None, verdict.get("exit_code") == EXIT_FINDINGS, str(verdict.get("message", "")))


def _int_env(name: str) -> int:
    try:
        return int(os.environ.get(name, "0"))
    except ValueError:
        return 0


def _launcher() -> str:
    if "TORCHELASTIC_RUN_ID" in os.environ:
        return "torchrun"
    if "SLURM_PROCID" in os.environ:
        return "slurm"
    return "env"
