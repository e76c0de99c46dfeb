"""The gather of `check --distributed` with many ranks on one machine: a real torch.distributed
TCPStore hosted by "rank 0" (this process) and R clients, each its own store connection, handing
over a real report through the same code a rank runs (fleet.distributed.publish), then rank 0's
gather and aggregation (fleet.distributed.gather), as `check --distributed` does after its check.

    python benchmarks/bench_fleet_gather.py [--ranks 256,1024] [--workers 16] [--repeat 3]

The reports are real: `check --from-report tests/fixtures/facts/h100.json --json` (63 KB as
printed), each rank's with its own host name, rank and timings, so each rank computes its digest
as a real one does; three odd groups (5, 20 and 12 ranks) make 4 distinct configurations, so 4
reports are uploaded in full (zlib) and the other ranks send a ~300 B member line. The worst case,
every rank's report distinct (a package version of its own: one full upload per rank, one group
per rank compared in full on rank 0), runs at the smallest size as the last row.

The clients run in --workers processes (a rank's own process would hold one connection; here each
worker holds its share, all connected before the clock starts, as real ranks connect while they
check). Timed, from the moment every client may go: every rank's digest and hand-over, rank 0's
wait for the count, its reads of the members and the distinct reports, and the aggregate. Printed:
the time, the time per report, rank 0's share (after the count is complete), the bytes rank 0
read, and the growth against the smallest size (linear: the ratio of the sizes).
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this script's own imports of attn_doctor, from a checkout
FACTS = ROOT / "tests" / "fixtures" / "facts" / "h100.json"
ODD = {"old-driver": 5, "other-triton": 20, "other-transformers": 12}
# TCPStore (both backends) resolves each client's address as it connects, in the server's one event
# loop: where reverse DNS does not answer (this sandbox: a 5 s stall every ~25 connections) a
# thousand clients take minutes to connect. Untimed, but bounded here.
CONNECT_LIMIT_S = 1500


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reports() -> dict[str, dict]:
    """The majority's report and each odd group's, from the real facts file through check."""
    import tempfile

    facts = msgspec.json.decode(FACTS.read_bytes())
    changes = {
        "majority": lambda f: None,
        "old-driver": lambda f: f["gpu"].update(driver_version="570.86.15"),
        "other-triton": lambda f: f["packages"]["triton"].update(version="3.5.0"),
        "other-transformers": lambda f: f["packages"]["transformers"].update(version="5.16.0"),
    }
    out = {}
    with tempfile.TemporaryDirectory(prefix="attn-doctor-gather-") as work:
        for name, change in changes.items():
            changed = copy.deepcopy(facts)
            change(changed)
            path = Path(work, f"{name}.json")
            path.write_bytes(msgspec.json.encode(changed))
            proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--from-report", str(path), "--json"],
                                  capture_output=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
            out[name] = msgspec.json.decode(proc.stdout)
    return out


def _which(rank: int, world: int) -> str:
    start = 1
    for name, count in ODD.items():
        spread = max(1, (world - 1) // count)
        if rank >= start and (rank - start) % spread == 0 and (rank - start) // spread < count:
            return name
        start += 1
    return "majority"


def _rank_doc(reports: dict, rank: int, world: int, distinct: bool) -> dict:
    doc = copy.deepcopy(reports[_which(rank, world)])
    facts = doc["facts"]
    facts["platform"]["hostname"] = f"gpu-node-{rank // 8:04d}"
    facts["env"].update(RANK=str(rank), LOCAL_RANK=str(rank % 8), WORLD_SIZE=str(world))
    for probe in facts["probes"]:
        probe["duration_s"] = round(probe["duration_s"] * (1 + (rank % 97) / 100), 3)
    if distinct:  # a package of its own version on every rank: every report its own group
        facts["packages"]["einops"] = {"version": f"0.{rank}.0", "installer": "pip", "url": None}
    return doc


def worker(port: int, ranks: list[int], world: int, distinct: bool, reports: dict) -> None:
    """Some ranks: connect (each its own client), say hello, wait for the go, hand the report over."""
    import faulthandler

    faulthandler.enable()  # a client that crashes says where
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
    from torch.distributed import PrefixStore, TCPStore

    from attn_doctor.fleet.digest import report_digest
    from attn_doctor.fleet.distributed import Placement, publish

    stores = {}
    for rank in ranks:
        base = TCPStore("127.0.0.1", port, None, False, timeout=timedelta(seconds=300), wait_for_workers=False)
        store = PrefixStore("attn-doctor/fleet/bench", base)
        host = f"gpu-node-{rank // 8:04d}"
        store.append("hello", f"{rank}\t{rank % 8}\t{host}\n")
        stores[rank] = (store, host)
    docs = {rank: _rank_doc(reports, rank, world, distinct) for rank in ranks}  # the check's result, made before the clock
    first = stores[ranks[0]][0]
    first.add("bench/connected", len(ranks))
    first.wait(["bench/go"])
    for rank in ranks:
        store, host = stores[rank]
        placement = Placement(rank=rank, world_size=world, local_rank=rank % 8, master_addr="127.0.0.1", master_port=port,
                              launcher="torchrun", run_id="bench", agent_store=False)
        publish(store, placement, host, docs[rank], report_digest(docs[rank]))
    # Stay until rank 0 is done: sixteen processes tearing torch down on two cores would be timed as
    # rank 0's work (on a cluster each rank exits on its own node).
    first.wait(["bench/done"])


class Watched:
    """Rank 0's store as gather uses it, counting the bytes it reads and noting when the count is complete."""

    def __init__(self, store, world: int):
        self.store, self.world, self.read, self.complete = store, world, 0, None

    def get(self, key):
        value = self.store.get(key)
        self.read += len(value)
        return value

    def multi_get(self, keys):
        values = self.store.multi_get(keys)
        self.read += sum(len(v) for v in values)
        return values

    def add(self, key, n):
        value = self.store.add(key, n)
        if key == "count" and value >= self.world and self.complete is None:
            self.complete = time.perf_counter()  # every rank is in: rank 0's own share starts
        return value

    def __getattr__(self, name):
        return getattr(self.store, name)


def one_gather(world: int, workers: int, distinct: bool, reports: dict) -> dict:
    from torch.distributed import PrefixStore, TCPStore

    from attn_doctor.fleet.distributed import Placement, gather

    port = _port()
    base = TCPStore("127.0.0.1", port, None, True, timeout=timedelta(seconds=300), wait_for_workers=False, multi_tenant=True)
    store = PrefixStore("attn-doctor/fleet/bench", base)
    ctx = multiprocessing.get_context("spawn")
    shares = [list(range(w, world, workers)) for w in range(workers)]
    procs = [ctx.Process(target=worker, args=(port, share, world, distinct, reports)) for share in shares if share]
    spawned = time.perf_counter()
    for p in procs:
        p.start()
    while store.add("bench/connected", 0) < world:
        if time.perf_counter() - spawned > CONNECT_LIMIT_S:
            for p in procs:
                p.kill()
            raise SystemExit(f"the clients were not all connected after {CONNECT_LIMIT_S} s (TCPStore resolves each "
                             "client's address on connect: is reverse DNS answering?)")
        dead = [p.exitcode for p in procs if p.exitcode is not None]
        if dead:  # a client process that died before connecting would leave this loop waiting forever
            for p in procs:
                p.kill()
            raise SystemExit(f"{len(dead)} client process(es) died before connecting (exit {dead[0]}): see their output above")
        time.sleep(0.05)
    connected = time.perf_counter() - spawned
    watched = Watched(store, world)
    placement = Placement(rank=0, world_size=world, local_rank=0, master_addr="127.0.0.1", master_port=port,
                          launcher="torchrun", run_id="bench", agent_store=False)
    start = time.perf_counter()
    store.set("bench/go", "1")
    fleet = gather(watched, placement, timeout=600, fail_on="error")
    end = time.perf_counter()
    store.set("bench/done", "1")
    for p in procs:
        p.join()
    assert fleet.summary.received == world, fleet.summary
    assert not fleet.problems, fleet.problems[:3]
    return {"seconds": end - start, "rank0": end - (watched.complete or end), "bytes": watched.read, "groups": fleet.summary.groups,
            "connect": connected}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="256,1024")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one gather of this many ranks, in this process
    parser.add_argument("--distinct", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reports", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        reports = msgspec.json.decode(Path(args.reports).read_bytes())
        print(msgspec.json.encode(one_gather(args.one, args.workers, args.distinct, reports)).decode())
        return
    sizes = sorted(int(s) for s in args.ranks.split(","))
    reports = _reports()
    import tempfile

    saved = tempfile.NamedTemporaryFile(prefix="attn-doctor-gather-", suffix=".json", delete=False)
    saved.write(msgspec.json.encode(reports))
    saved.close()

    def fresh(n: int, distinct: bool) -> dict:
        """One gather in a fresh process: a TCPStore server left behind by an earlier one (its
        threads, its sockets) must not weigh on the next; a store that stops answering is stopped."""
        argv = [sys.executable, __file__, "--one", str(n), "--workers", str(args.workers), "--reports", saved.name]
        proc = subprocess.run(argv + (["--distinct"] if distinct else []), capture_output=True, text=True, timeout=CONNECT_LIMIT_S + 600)
        if proc.returncode:
            raise SystemExit(f"{n} ranks: exit {proc.returncode}: {proc.stderr[-800:]}")
        return msgspec.json.decode(proc.stdout.strip().splitlines()[-1])

    size = len(msgspec.json.format(msgspec.json.encode(reports["majority"]), indent=2)) + 1
    print(f"report: {FACTS.relative_to(ROOT)} through check --from-report --json, {size:,} B; odd groups: "
          + ", ".join(f"{k} x{v}" for k, v in ODD.items()) + f"; {args.workers} client processes, {os.cpu_count()} CPUs, "
          f"median of {args.repeat}")
    rows = [(n, False) for n in sizes] + [(sizes[0], True)]
    results = {}
    for n, distinct in rows:
        runs = [fresh(n, distinct) for _ in range(args.repeat)]
        results[(n, distinct)] = med = {k: statistics.median(r[k] for r in runs) for k in ("seconds", "rank0", "bytes", "groups", "connect")}
        label = f"{n:,} ranks" + (", every report distinct" if distinct else "")
        print(f"  {label:<34} {med['seconds']:6.2f} s  {med['seconds'] / n * 1e3:6.2f} ms per report   "
              f"rank 0 after the count {med['rank0']:5.2f} s   rank 0 read {med['bytes'] / 1e6:6.2f} MB   {med['groups']:.0f} groups   "
              f"(untimed: clients started and connected in {med['connect']:.0f} s)")
    base = results[(sizes[0], False)]["seconds"]
    print(f"\ngrowth against {sizes[0]:,} ranks (linear: the ratio of the sizes)")
    for n in sizes:
        print(f"  {n:>6,}: {results[(n, False)]['seconds'] / base:5.2f}x the time for {n / sizes[0]:4.1f}x the ranks")
    worst = results[(sizes[0], True)]["seconds"]
    print(f"every report distinct at {sizes[0]:,} ranks: {worst / base:5.2f}x the time of 4 configurations")
    os.unlink(saved.name)


if __name__ == "__main__":
    main()
