"""`check --distributed`: every rank of a torchrun / srun launch checks itself; rank 0 gathers the fleet.

Built on the launcher and on torch.distributed's TCPStore (the store behind `init_process_group`),
not on NCCL or the GPU, so it works where those are what is broken. No process group is formed
(that would be a barrier of all ranks, which one dead rank hangs); instead a small protocol with
deadlines, under the prefix ``attn-doctor/fleet/<run id>``:

    every rank, at start      append "hello"  "<rank>\\t<local rank>\\t<host>"     (who connected)
    every rank, while checking set "heartbeat/<rank>" "<seconds>\\t<what it is doing>" each second
    every rank, when checked  add "claim/<digest>" 1; the first rank with a digest sets
                              "report/<digest>" (its report, zlib JSON): one full report per
                              distinct digest, never one per rank
                              append "members" (rank, host, digest, exit code, summary: ~300 B)
                              add "count" 1
    a rank whose check cannot run   append "failed" "<rank>\\t<host>\\t<why>"; add "count" 1
    rank 0                    polls "count" until every rank is in or the deadline passes
                              (ATTN_DOCTOR_GATHER_TIMEOUT seconds after its own report), sets
                              "closed", reads "members" and the distinct reports, names the ranks
                              missing (connected or not; a rank whose heartbeat still moves is
                              "still checking after N s", not hung); the CLI prints the report

Exit codes: rank 0 exits with the fleet's code (as check's: 0, 1, 3; 2 for usage); the other ranks
exit 0 once their report is handed over, and 3 when they cannot hand it over (rank 0's store
unreachable, or the fleet report already closed without them). torchrun and srun fail the job step
when any task exits non-zero, so the step fails exactly when the fleet does.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
import zlib
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Optional

import msgspec

from ..options import CheckOptions, expand, host_name
from ..report import EXIT_FINDINGS, EXIT_PROBE_FAILED, Summary
from .aggregate import FleetReport, Member, Problem, aggregate
from .digest import report_digest
from .view import Representatives

GATHER_TIMEOUT_ENV = "ATTN_DOCTOR_GATHER_TIMEOUT"
SLURM_PORT_BASE = 15000  # MASTER_PORT under srun when unset: 15000 + SLURM_JOB_ID % 20000


class LaunchError(Exception):
    """Not under a launcher, or its environment is inconsistent (a usage error, exit 2)."""


class GatherError(Exception):
    """The rendezvous could not be reached or the report not handed over (exit 3)."""


@dataclass(frozen=True)
class Placement:
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    launcher: str  # torchrun | slurm | env
    run_id: str
    agent_store: bool  # torchrun's agent hosts the store; rank 0 is then a client like the others


def detect(env=None) -> Placement:
    """Where this process sits in the launch, from the launcher's standard environment."""
    env = os.environ if env is None else env

    def _int(name: str) -> int:
        try:
            return int(env[name])
        except ValueError:
            raise LaunchError(f"{name}={env[name]!r} is not an integer") from None

    if "RANK" in env and "WORLD_SIZE" in env:
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
        rank, world = _int("RANK"), _int("WORLD_SIZE")
        local = _int("LOCAL_RANK") if env.get("LOCAL_RANK") else 0
        addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
        if not addr or not port:
            raise LaunchError("RANK and WORLD_SIZE are set but MASTER_ADDR / MASTER_PORT are not (torchrun sets all four)")
        port_n = _int("MASTER_PORT")
        run_id = f"{env.get('TORCHELASTIC_RUN_ID', 'env')}/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        agent = env.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    elif "SLURM_PROCID" in env and ("SLURM_NTASKS" in env or "SLURM_NPROCS" in env):
        launcher = "slurm"
        rank = _int("SLURM_PROCID")
        world = _int("SLURM_NTASKS" if "SLURM_NTASKS" in env else "SLURM_NPROCS")
        local = _int("SLURM_LOCALID") if env.get("SLURM_LOCALID") else 0
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
        addr = env.get("MASTER_ADDR") or first_host(nodelist)
        if not addr:
            raise LaunchError("under srun without MASTER_ADDR or SLURM_STEP_NODELIST: cannot tell where rank 0 runs")
        if env.get("MASTER_PORT"):
            port_n = _int("MASTER_PORT")
        elif env.get("SLURM_JOB_ID", "").isdigit():
            port_n = SLURM_PORT_BASE + int(env["SLURM_JOB_ID"]) % 20000
        else:
            raise LaunchError("under srun without MASTER_PORT or SLURM_JOB_ID: set MASTER_PORT")
        run_id = f"slurm-{env.get('SLURM_JOB_ID', '0')}.{env.get('SLURM_STEP_ID', '0')}"
        agent = False
    else:
        raise LaunchError(
            "--distributed needs a launcher: run it under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) "
            "or srun (SLURM_PROCID, SLURM_NTASKS); see examples/onboard-torchrun.sh and examples/onboard-slurm.sh"
        )
    if world < 1 or not 0 <= rank < world:
        raise LaunchError(f"rank {rank} is not within a world of {world}")
    if not 0 < port_n < 65536:
        raise LaunchError(f"MASTER_PORT {port_n} is not a TCP port")
    return Placement(rank, world, local, addr, port_n, launcher, run_id, agent)


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list: 'gpu[003-005,9],cpu1' -> 'gpu003'."""
    m = re.match(r"\s*([^,\[\s]+)(?:\[([^\]]*)\])?", nodelist)
    if not m:
        return ""
    prefix, ranges = m.group(1), m.group(2)
    if ranges is None:
        return prefix
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first


def default_gather_timeout(quick: bool, from_report: bool, probe_timeout: float) -> float:
    value = os.environ.get(GATHER_TIMEOUT_ENV)
    if value:
        try:
            return max(0.1, float(value))
        except ValueError:
            raise LaunchError(f"{GATHER_TIMEOUT_ENV}={value!r} is not a number of seconds") from None
    # The slowest rank may wait out its torch probe's own timeout before it reports.
    return 30.0 if (quick or from_report) else probe_timeout + 30.0


def _import_store():
    """torch.distributed's stores, imported quietly: no c10d retry chatter, no NumPy warning."""
    import warnings

    if "TORCH_CPP_LOG_LEVEL" not in os.environ:
        # The C environment only (os.putenv): not os.environ, so neither the report's env nor the probes see it.
        os.putenv("TORCH_CPP_LOG_LEVEL", "FATAL")
    warnings.filterwarnings("ignore", module=r"torch(\.|$)")
    from torch.distributed import PrefixStore, TCPStore

    return PrefixStore, TCPStore


IMPORT_TIMEOUT_S = 120.0  # importing torch is local work: generous, but never unbounded


HEARTBEAT_S = 1.0  # how often a rank still checking says so (one small store write)


class Connection(threading.Thread):
    """Imports torch.distributed and joins the store in the background while the check runs, then
    keeps a heartbeat there ("heartbeat/<rank>": seconds checking, and what the check is doing)
    until the check is done, so that rank 0 can tell a rank still checking from a hung one."""

    def __init__(self, placement: Placement, host: str, timeout: float):
        super().__init__(name="attn-doctor-fleet-connect", daemon=True)
        self.placement, self.host, self.timeout = placement, host, timeout
        self.store = None
        self.error: Optional[str] = None
        self.imported = threading.Event()
        self.ready = threading.Event()
        self.import_error: Optional[str] = None
        self.phase = "starting"
        self.started = time.monotonic()
        self._beat_stop = threading.Event()

    def run(self) -> None:
        p = self.placement
        try:
            try:
                PrefixStore, TCPStore = _import_store()
            except ImportError as exc:
                self.import_error = f"--distributed needs torch in attn-doctor's own environment ({sys.executable}): {_one_line(exc)}"
                return
            finally:
                self.imported.set()
            base = TCPStore(
                p.master_addr,
                p.master_port,
                None,
                p.rank == 0 and not p.agent_store,
                timeout=timedelta(seconds=self.timeout),
                wait_for_workers=False,
                multi_tenant=True,
            )
            store = PrefixStore(f"attn-doctor/fleet/{p.run_id}", base)
            store.append("hello", f"{p.rank}\t{p.local_rank}\t{self.host}\n")
            self.store = store
        except Exception as exc:  # noqa: BLE001 - reported by the caller, in one line
            self.error = _one_line(exc)
        finally:
            self.ready.set()
        self._heartbeat()

    def _heartbeat(self) -> None:
        if self.store is None:
            return
        key = f"heartbeat/{self.placement.rank}"
        while True:
            try:
                self.store.set(key, f"{time.monotonic() - self.started:.1f}\t{self.phase}"[:300])
            except Exception:  # noqa: BLE001 - the store went away: rank 0 names this rank anyway
                return
            if self._beat_stop.wait(HEARTBEAT_S):
                return

    def stop_heartbeat(self) -> None:
        """The check is over: the heartbeat stops before this thread's store is used elsewhere."""
        self._beat_stop.set()
        if self.ready.is_set() and self.is_alive():
            self.join(HEARTBEAT_S + 5.0)

    def settle(self) -> bool:
        """Wait until the rendezvous succeeded or TCPStore gave up. TCPStore's connect retries with
        backoff and gives up up to about twice its timeout (10 s: 18-21 s), and a process that exits
        while this thread is still inside that C++ call is aborted (SIGABRT) instead of exiting
        with its code: wait for the real outcome, within a bound."""
        return self.ready.wait(2.0 * self.timeout + 15.0)

    def result(self):
        """The store; GatherError when torch.distributed cannot be imported or the rendezvous not reached."""
        p = self.placement
        if not self.imported.wait(IMPORT_TIMEOUT_S):
            raise GatherError(f"importing torch.distributed took over {IMPORT_TIMEOUT_S:.0f} s")
        self.settle()
        self.stop_heartbeat()
        if self.import_error:
            raise GatherError(self.import_error)
        if self.store is None:
            where = "torchrun's store" if p.agent_store else ("hosting" if p.rank == 0 else "rank 0's store")
            why = self.error or f"no answer within {self.timeout:g} s"
            raise GatherError(f"cannot reach the rendezvous ({where} at {p.master_addr}:{p.master_port}): {why}")
        return self.store


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def publish(store, placement: Placement, host: str, doc: dict, digest: str) -> None:
    """Hand this rank's report over (one full report per distinct digest fleet-wide)."""
    try:
        if store.check(["closed"]):
            raise GatherError("rank 0 closed the fleet report before this rank's check finished (raise ATTN_DOCTOR_GATHER_TIMEOUT)")
        if store.add(f"claim/{digest}", 1) == 1:
            store.set(f"report/{digest}", zlib.compress(msgspec.json.encode(doc)))
        member = Member(
            rank=placement.rank,
            local_rank=placement.local_rank,
            host=host,
            digest=digest,
            exit_code=doc.get("exit_code", 0),
            summary=msgspec.convert(doc.get("summary") or {}, Summary),
        )
        store.append("members", msgspec.json.encode(member) + b"\n")
        if store.check(["closed"]):
            raise GatherError("rank 0 closed the fleet report while this rank was handing its report over (raise ATTN_DOCTOR_GATHER_TIMEOUT)")
        store.add("count", 1)
    except GatherError:
        raise
    except Exception as exc:  # noqa: BLE001 - the store went away (rank 0 finished or died)
        raise GatherError(f"handing the report to rank 0 failed: {_one_line(exc)}") from None


def publish_within(store, placement: Placement, host: str, doc: dict, digest: str, timeout: float) -> None:
    """publish, given up after `timeout` seconds: a store whose host is frozen (SIGSTOP, swapping,
    a partition that drops packets) never answers, and TCPStore's own timeout does not bound a
    request once it is sent (measured: `check` waited past 40 s on a store of 3 s). The hand-over
    runs in a thread left behind when it does not return (the process exits normally beside it)."""
    outcome: dict = {}

    def hand_over() -> None:
        try:
            publish(store, placement, host, doc, digest)
            outcome["done"] = True
        except BaseException as exc:  # noqa: BLE001 - carried to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=hand_over, name="attn-doctor-fleet-handover", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        where = "torchrun's store" if placement.agent_store else "rank 0's store"
        raise GatherError(f"{where} at {placement.master_addr}:{placement.master_port} took no report within {timeout:g} s "
                          f"(frozen, overloaded or cut off; raise {GATHER_TIMEOUT_ENV} if it is only slow)")
    if "error" in outcome:
        raise outcome["error"]


def report_failure(store, placement: Placement, host: str, message: str) -> None:
    """A rank whose check cannot run tells rank 0 why, so that rank 0 need not wait it out."""
    try:
        store.append("failed", f"{placement.rank}\t{host}\t{message}".replace("\n", " ") + "\n")
        store.add("count", 1)
    except Exception:  # noqa: BLE001 - best effort: rank 0 names it missing anyway
        pass


def _rank_report(blob: bytes, digest: str) -> bytes:
    """A rank's report as sent (compressed JSON), validated as a report file is (fleet.files):
    inflated to at most REPORT_MAX_BYTES (never a decompression bomb), of the report schema, and
    of the digest it was sent under (recomputed: a report must not stand for another group).
    Returns its JSON."""
    from ..boundary.inputs import REPORT_MAX_BYTES
    from .view import read_report

    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(blob, REPORT_MAX_BYTES + 1)
    except (zlib.error, TypeError) as exc:
        raise ValueError(f"not a compressed report ({_one_line(exc)})") from None
    if len(raw) > REPORT_MAX_BYTES or inflate.unconsumed_tail:
        raise ValueError(f"larger than {REPORT_MAX_BYTES // (1 << 20)} MiB inflated: not a report")
    _, its_digest = read_report(raw)
    if its_digest != digest:
        raise ValueError("its content does not match the digest it was sent under")
    return raw


# What a rank says about itself beside its report (host names, a failure's reason): one line each,
# bounded; a longer one is cut, never believed whole.
MAX_HOST = 255
MAX_REASON = 2000


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _lines(store, key: str) -> list[bytes]:
    if not store.check([key]):
        return []
    return [line for line in store.get(key).split(b"\n") if line.strip()]


class _Stop:
    """SIGTERM (torchrun stops every worker when one dies; it sends SIGKILL 30 s later): remember it
    instead of dying, so that the ranks still hand their reports over and rank 0 reports what is in."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum, frame):
        self.requested = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


# After SIGTERM, rank 0 still waits for ranks about to report: up to STOP_GRACE_S, and no longer
# than STOP_QUIET_S without a new report (torchrun's SIGKILL follows its SIGTERM by 30 s).
STOP_GRACE_S = 5.0
STOP_QUIET_S = 1.5


def gather(store, placement: Placement, *, timeout: float, fail_on: str, progress=None, stop: Optional[_Stop] = None) -> FleetReport:
    """Rank 0: wait for every rank or the deadline, then aggregate what came in."""
    world = placement.world_size
    deadline = time.monotonic() + timeout
    stopped = False
    stop = stop or _Stop()
    delay = 0.005
    last_count, last_change = -1, time.monotonic()
    while True:
        count = store.add("count", 0)
        if count >= world:
            break
        now = time.monotonic()
        if count != last_count:
            last_count, last_change = count, now
        if stop.requested and not stopped:
            stopped = True
            deadline = min(deadline, now + STOP_GRACE_S)
        if now >= deadline or (stopped and now - last_change >= STOP_QUIET_S):
            break
        if progress:
            progress(f"waiting for the other ranks: {count} of {world} reported")
        time.sleep(min(delay, max(0.0, deadline - now)))
        delay = min(delay * 2, 0.1)
    store.set("closed", "1")

    members: dict[int, Member] = {}
    for line in _lines(store, "members"):
        try:
            m = msgspec.json.decode(line, type=Member)
        except msgspec.DecodeError:
            continue
        if m.rank is not None and 0 <= m.rank < world and len(m.digest) <= 128:
            m.host = _bounded(m.host, MAX_HOST)
            members.setdefault(m.rank, m)
    failed: dict[int, tuple[str, str]] = {}
    for line in _lines(store, "failed"):
        parts = line.decode(errors="replace").split("\t", 2)
        if len(parts) == 3 and parts[0].isdigit():
            failed.setdefault(int(parts[0]), (_bounded(parts[1], MAX_HOST), _bounded(parts[2], MAX_REASON)))
    hello: dict[int, str] = {}
    for line in _lines(store, "hello"):
        parts = line.decode(errors="replace").split("\t")
        if len(parts) == 3 and parts[0].isdigit():
            hello.setdefault(int(parts[0]), _bounded(parts[2], MAX_HOST))

    silent = [r for r in range(world) if r in hello and r not in members and r not in failed]
    alive = _still_checking(store, silent) if silent and not stopped else {}

    reports = Representatives()  # kept compressed: rank 0's memory grows by ~7 KB per distinct report
    rejected: dict[str, str] = {}  # digest -> why its report was not taken
    pending = sorted({m.digest for m in members.values()})
    upload_deadline = time.monotonic() + min(2.0, max(timeout, 0.5))
    while pending:
        for digest, blob in _uploads(store, pending).items():
            try:
                reports.keep(digest, _rank_report(blob, digest), compressed=blob)
            except ValueError as exc:
                rejected[digest] = str(exc)
        pending = [d for d in pending if d not in reports and d not in rejected]
        if not pending or time.monotonic() >= upload_deadline:
            break  # an uploader that died mid-upload: its group is shown without its report
        time.sleep(0.02)

    problems = []
    for digest, why in sorted(rejected.items()):
        ranks = sorted(r for r, m in members.items() if m.digest == digest)
        problems.append(Problem(kind="unreadable", rank=ranks[0], host=members[ranks[0]].host,
                                message=f"the report of rank(s) {', '.join(map(str, ranks))} was not taken: {why}"))
    late = " (stopped by the launcher: another rank exited)" if stopped else ""
    for rank in range(world):
        if rank in members:
            continue
        if rank in failed:
            host, why = failed[rank]
            problems.append(Problem(kind="missing", rank=rank, host=host, message=f"rank {rank} on {host}: its check could not run: {why.strip()}"))
        elif rank in hello and rank in alive:
            seconds, phase = alive[rank]
            problems.append(
                Problem(kind="late", rank=rank, host=hello[rank], message=f"rank {rank} on {hello[rank]}: still checking after {seconds:.0f} s ({phase}); not in this report (raise {GATHER_TIMEOUT_ENV}){late}")
            )
        elif rank in hello:
            problems.append(
                Problem(kind="missing", rank=rank, host=hello[rank], message=f"rank {rank} on {hello[rank]} connected but did not report within {timeout:g} s (hung or died during its check){late}")
            )
        else:
            problems.append(Problem(kind="missing", rank=rank, message=f"rank {rank} never reached the rendezvous within {timeout:g} s (not started, or died early){late}"))
    return aggregate(
        list(members.values()),
        reports,
        problems,
        expected=world,
        command="check --distributed",
        launcher=placement.launcher,
        fail_on=fail_on,
    )


def _uploads(store, digests: list[str]) -> dict[str, bytes]:
    """The reports uploaded under `digests` so far: all in one request when all are there (a
    thousand distinct reports are a thousand round trips otherwise), else one by one."""
    keys = [f"report/{d}" for d in digests]
    if len(keys) > 1 and hasattr(store, "multi_get") and store.check(keys):
        return dict(zip(digests, store.multi_get(keys)))
    return {d: store.get(k) for d, k in zip(digests, keys) if store.check([k])}


def _still_checking(store, ranks: list[int]) -> dict[int, tuple[float, str]]:
    """The ranks whose heartbeat moved within a beat and a half: rank -> (seconds checking, doing what)."""

    def beats() -> dict[int, str]:
        out = {}
        for rank in ranks:
            try:
                if store.check([f"heartbeat/{rank}"]):
                    out[rank] = store.get(f"heartbeat/{rank}").decode(errors="replace")
            except Exception:  # noqa: BLE001 - unreadable: not shown as alive
                continue
        return out

    before = beats()
    if not before:
        return {}
    time.sleep(HEARTBEAT_S * 1.5)
    alive = {}
    for rank, value in beats().items():
        if before.get(rank) not in (None, value):
            seconds, _, phase = value.partition("\t")
            try:
                alive[rank] = (float(seconds), phase or "checking")
            except ValueError:
                continue
    return alive


class FleetError(Exception):
    """This rank cannot take part: the message (prefixed with the rank), the exit code, and this
    rank's own report when its check ran (the CLI prints its verdict: it must not be lost with the
    fleet's)."""

    def __init__(self, message: str, code: int, report=None):
        super().__init__(message)
        self.code = code
        self.report = report


def run_distributed_check(options: CheckOptions, progress_factory=None) -> Optional[FleetReport]:
    """One rank of `check --distributed`: this rank's check, through the same run_check as `check`
    ({rank}, {local_rank} and {host} expanded in --from-report and --output; the smoke tests on
    the GPU LOCAL_RANK names), handed over to rank 0. Returns the fleet report on rank 0, None on
    the others; raises FleetError (usage: 2, rendezvous or hand-over: 3). Prints nothing."""
    from ..core import run_check
    from ..gather import FactsFileError
    from ..options import UsageError
    from ..rules.loader import RecipeError

    try:
        placement = detect()
        gather_timeout = default_gather_timeout(options.quick, options.facts_file is not None, options.timeout)
    except LaunchError as exc:
        raise FleetError(str(exc), 2) from None
    host = host_name()
    who = f"rank {placement.rank} ({host})"
    connection = Connection(placement, host, gather_timeout)
    connection.start()  # torch.distributed's import and the rendezvous overlap the probes

    is_reporter = placement.rank == 0
    progress = progress_factory() if is_reporter and progress_factory else None

    def note(message: str) -> None:
        connection.phase = message  # what rank 0 shows for a rank still checking at its deadline
        if progress:
            progress.update(message)

    rank, local = placement.rank, placement.local_rank
    rank_options = replace(
        options,
        facts_file=Path(expand(str(options.facts_file), rank, local)) if options.facts_file is not None else None,
        output=expand(options.output, rank, local) if options.output else None,
        gpu_index=local,  # each rank smoke-tests its own GPU
    )
    stop = _Stop().__enter__()
    try:
        try:
            report = run_check(rank_options, note)
        except (UsageError, FactsFileError, RecipeError) as exc:
            connection.settle()
            connection.stop_heartbeat()
            if connection.store is not None:
                report_failure(connection.store, placement, host, str(exc))
            raise FleetError(f"{who}: {exc}", 2) from None

        doc = msgspec.to_builtins(report)
        # Without the fleet this rank's verdict is all there is: 1 when its own check fails, as
        # check's; else 3, the fleet's report being incomplete without it.
        own_code = EXIT_FINDINGS if report.exit_code == EXIT_FINDINGS else EXIT_PROBE_FAILED
        try:
            note("joining the rendezvous")
            store = connection.result()
            publish_within(store, placement, host, doc, report_digest(doc), gather_timeout)
            if not is_reporter:
                return None
            return gather(store, placement, timeout=gather_timeout, fail_on=options.fail_on, progress=progress.update if progress else None, stop=stop)
        except GatherError as exc:
            raise FleetError(f"{who}: {exc}", own_code, report) from None
        except Exception as exc:  # noqa: BLE001 - torch.distributed raised: one line, exit 3
            raise FleetError(f"{who}: the gather failed: {_one_line(exc)}", own_code, report) from None
    finally:
        connection.stop_heartbeat()
        stop.__exit__()
        if progress:
            progress.stop()
