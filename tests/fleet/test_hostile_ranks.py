"""What ranks send to rank 0 is outside data: validated, bounded and inert when printed.

Rank 0's gather reads a real torch TCPStore; the "ranks" here write to it what a broken or hostile
rank could (the store takes any bytes from anyone who can reach the port): a decompression bomb,
a report that is no report, one sent under another group's digest, endless host names and
failure reasons carrying escape sequences.
"""

from __future__ import annotations

import zlib
from datetime import timedelta

import msgspec
import pytest

from attn_doctor.core import diagnose
from attn_doctor.gather import load_facts_file
from attn_doctor.fleet.aggregate import Member
from attn_doctor.fleet.digest import report_digest
from attn_doctor.fleet.distributed import MAX_HOST, MAX_REASON, Placement, gather
from attn_doctor.render.fleet_human import render_fleet
from attn_doctor.rules.loader import load_recipes
from fleet_helpers import FACTS, free_port

torch_distributed = pytest.importorskip("torch.distributed")

HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202e[reverse]"


def _report(name: str = "h100") -> dict:
    return msgspec.to_builtins(diagnose(load_facts_file(FACTS / f"{name}.json"), load_recipes(), source="facts-file"))


def _member(rank: int, digest: str, host: str = "node") -> bytes:
    return msgspec.json.encode(Member(rank=rank, local_rank=rank, host=host, digest=digest)) + b"\n"


def test_rank_0_takes_only_whole_reports_and_bounded_words_from_the_ranks():
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", free_port(), None, True, timeout=timedelta(seconds=10))
    good = _report("h100")
    good_digest = report_digest(good)
    store.set(f"report/{good_digest}", zlib.compress(msgspec.json.encode(good)))
    store.append("members", _member(0, good_digest))
    # rank 1: a decompression bomb (64 KiB that inflates to 64 MiB; 1 GiB costs only the test more time)
    bomb = zlib.compressobj(9)
    blob = b"".join(bomb.compress(b"\0" * (1 << 20)) for _ in range(64)) + bomb.flush()
    store.set("report/bomb", blob)
    store.append("members", _member(1, "bomb"))
    # rank 2: another report sent under the good one's digest is not believed; under its own
    # made-up digest neither; rank 3: a JSON object that is no report
    other = _report("t4")
    store.set("report/lie", zlib.compress(msgspec.json.encode(other)))
    store.append("members", _member(2, "lie"))
    store.set("report/junk", zlib.compress(b'{"schema": "attn-doctor/report", "schema_version": 1, "facts": 5}'))
    store.append("members", _member(3, "junk"))
    # rank 4: failed, with a reason and a host name far beyond any real one, full of escapes
    store.append("failed", f"4\t{HOSTILE * 1000}\t{HOSTILE * 10000}\n")
    store.add("count", 5)
    placement = Placement(rank=0, world_size=5, local_rank=0, master_addr="127.0.0.1", master_port=0, launcher="torchrun",
                          run_id="t", agent_store=False)
    fleet = gather(store, placement, timeout=5.0, fail_on="error")

    unreadable = {p.rank: p.message for p in fleet.problems if p.kind == "unreadable"}
    assert "larger than 32 MiB inflated" in unreadable[1]
    assert "does not match the digest it was sent under" in unreadable[2]
    assert "invalid report" in unreadable[3]
    assert 0 not in unreadable
    missing = next(p for p in fleet.problems if p.rank == 4)
    assert len(missing.host) <= MAX_HOST + 3 and len(missing.message) <= MAX_HOST + MAX_REASON + 100
    # printed inert: nothing of what the ranks sent reaches the terminal as an escape
    from fuzz.inert import assert_inert

    for verbose in (False, True):
        assert_inert(lambda console: render_fleet(fleet, console, verbose=verbose))
