"""The fleet at scale: hundreds of real reports with hostile ones among them, host names folded
as Slurm writes them, and a fleet view that leaves out exactly what differs per node."""

from __future__ import annotations

import json
import random

import msgspec
import pytest
from fleet_helpers import FACTS, doctor

from attn_doctor.fleet.aggregate import compact_hosts, compact_ranks
from attn_doctor.fleet.digest import VOLATILE_KEYS, fleet_view, flatten, report_digest
from attn_doctor.fleet.view import read_report

N = 240


@pytest.fixture(scope="module")
def report() -> dict:
    proc = doctor("check", "--from-report", str(FACTS / "h100.json"), "--json")
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _timings(doc, out: list) -> list:
    if isinstance(doc, dict):
        for k, v in doc.items():
            if (k == "duration_s" or k.endswith("_ms")) and isinstance(v, (int, float)):
                out.append((doc, k))
            else:
                _timings(v, out)
    elif isinstance(doc, list):
        for v in doc:
            _timings(v, out)
    return out


def _node_report(report: dict, host: str, rng: random.Random) -> bytes:
    """The report as node `host` writes it: its own name, time and timings (no two files alike)."""
    doc = json.loads(json.dumps(report))
    doc["facts"]["platform"]["hostname"] = host
    doc["created"] = f"2026-11-24T10:{rng.randrange(60):02d}:{rng.randrange(60):02d}+00:00"
    for holder, key in _timings(doc, []):
        holder[key] = round(rng.uniform(0.01, 30.0), 3)
    return json.dumps(doc, indent=2).encode()


HOSTILE_HOST = "gpu[1-99999999]\x1b]0;owned\x07\x1b[2J"


def test_hostile_reports_among_many_are_one_line_each_and_the_rest_aggregated(tmp_path, report):
    rng = random.Random(7)
    for i in range(N):
        (tmp_path / f"node{i:03d}.json").write_bytes(_node_report(report, f"node{i:03d}", rng))
    # a node whose host name is a host-list expression full of escapes: a member like any other,
    # its name never expanded nor printed live
    (tmp_path / "odd-name.json").write_bytes(_node_report(report, HOSTILE_HOST, rng))
    deep = json.loads(_node_report(report, "deep", rng))  # free-form findings nested far past the bound
    nested: list = []
    for _ in range(200):
        nested = [nested]
    deep["facts"]["dtype_path"]["findings"] = [{"id": "AD601", "chain": nested}]
    (tmp_path / "deep.json").write_text(json.dumps(deep))
    wrong = json.loads(_node_report(report, "wrong", rng))  # a timing of the wrong type: refused, not aggregated
    wrong["facts"]["probes"][0]["duration_s"] = "soon"
    (tmp_path / "wrong.json").write_text(json.dumps(wrong))
    with open(tmp_path / "huge.json", "wb") as fh:  # past the size bound: refused from its size, never read
        fh.truncate(33 << 20)
    (tmp_path / "foreign.json").write_text('{"schema": "someone/else", "facts": [' + "1," * 100_000 + "1]}")
    # a typed field (the platform) holding 5,000 levels of arrays: its refusal decodes the bytes again
    (tmp_path / "abyss.json").write_text('{"schema": "attn-doctor/report", "schema_version": 1, "facts": {"platform": '
                                         + "[" * 5000 + "]" * 5000 + "}}")

    proc = doctor("fleet", str(tmp_path), "--expect", str(N + 6))
    assert proc.returncode == 3, proc.stderr
    out = proc.stdout
    lines = out.splitlines()
    assert "\x1b" not in out and "\x07" not in out
    bad = {name: [line for line in lines if f"{name}.json: unreadable" in line] for name in ("deep", "wrong", "huge", "foreign", "abyss")}
    assert all(len(found) == 1 for found in bad.values()), (bad, proc.stderr)
    assert "nested deeper than a report is" in bad["abyss"][0]
    assert "nested deeper than 64 levels" in bad["deep"][0]
    assert "invalid report" in bad["wrong"][0] and "duration_s" in bad["wrong"][0]
    assert "larger than the 32 MiB" in bad["huge"][0]
    assert "someone/else" in bad["foreign"][0]
    # the rest is one line: every node, the odd-named one too, folded as Slurm writes them
    (majority,) = [line for line in lines if "agree" in line]
    # the recorded H100's stack meets a known cuDNN bug (AD710): a warning every node shares
    assert majority.startswith(f"[!] {N + 1} reports on node[000-{N - 1:03d}],gpu[1-99999999]")
    assert len(lines) == 1 + 5 + 1 + 1 + 1  # header, the five refused, the majority, the warning they share, the summary
    assert lines[-2].lstrip().startswith("! AD710 ")
    assert lines[-1].startswith(f"{N + 1} reports, all identical, 5 unreadable")

    doc = json.loads(doctor("fleet", str(tmp_path), "--json").stdout)
    (group,) = doc["groups"]
    assert group["size"] == N + 1 and len(group["members"]) == N + 1
    assert set(group["hosts"]) == {f"node{i:03d}" for i in range(N)} | {HOSTILE_HOST}  # --json keeps every host
    assert sorted(p["file"].rsplit("/", 1)[1] for p in doc["problems"]) == ["abyss.json", "deep.json", "foreign.json", "huge.json",
                                                                            "wrong.json"]


def test_odd_groups_one_line_each_with_their_hosts_folded(tmp_path, report):
    rng = random.Random(11)
    old_driver = {12, 13, 14, 15, 133}
    for i in range(200):
        doc = _node_report(report, f"node{i:04d}", rng)
        if i in old_driver:
            doc = doc.replace(b'"driver_version": "580.159.04"', b'"driver_version": "570.86.15"')
        (tmp_path / f"node{i:04d}.json").write_bytes(doc)
    out = doctor("fleet", str(tmp_path)).stdout
    (odd,) = [line for line in out.splitlines() if line.startswith("[!]") and "differ from the majority" in line]
    assert odd.startswith("[!] 5 reports on node[0012-0015,0133] differ from the majority:") and "driver 570.86.15" in odd
    assert "    facts.gpu.driver_version: 580.159.04 -> 570.86.15" in out
    (majority,) = [line for line in out.splitlines() if "agree" in line]
    assert majority.startswith("[!] 195 reports on node[0000-0011,0016-0132,0134-0199] agree (the majority)")


def test_compact_hosts_folds_plain_names_and_never_parses_the_others():
    assert compact_hosts(["node0013", "node0012", "node0133", "node0014", "node0015", "login1"]) == ("login1,node[0012-0015,0133]", 0)
    assert compact_hosts(["gpu-a.cluster", "gpu-b.cluster"]) == ("gpu-a.cluster,gpu-b.cluster", 0)
    text, more = compact_hosts(["n[1-99999999]", "a,b", "node1"])
    assert (text, more) == ("node1,a,b,n[1-99999999]", 0)  # as they are, after the folded ones
    from ClusterShell.NodeSet import NodeSet

    pods = [f"pod-{i:x}z" for i in range(0, 4000, 7)]  # names that fold badly: whole runs up to the width
    text, more = compact_hosts(pods, width=60)
    assert len(text) <= 60 and more == len(pods) - len(NodeSet(text)) > 0
    hosts = [f"node{i:05d}" for i in range(10_000) if i % 1000]
    text, more = compact_hosts(hosts, width=40)
    assert text.startswith("node[00001-00999") and len(text) <= 40 + 20 and more > 0
    assert compact_ranks([5, 0, 1, 2, 7, 8, 10]) == "0-2,5,7-8,10"


def test_a_cut_host_list_says_where_the_rest_is_and_verbose_lists_them_all():
    from ClusterShell.NodeSet import NodeSet

    from attn_doctor.render.fleet_human import _hosts

    hosts = [f"node{i:05d}" for i in range(0, 20_000, 7)]
    cut = _hosts(hosts)
    assert cut.endswith(" more (-v or --json lists them all)") and len(NodeSet(cut.split(" ")[0])) < len(hosts)
    whole = _hosts(hosts, verbose=True)
    assert set(NodeSet(whole)) == set(hosts)


def test_the_view_leaves_out_exactly_what_differs_per_node(report):
    """Every leaf of a real report is in its fleet view unless it is named per node or per run:
    the view is generated from the report's structs, so a field added to them is compared at once."""
    raw = msgspec.json.encode(report)
    view, digest = read_report(raw)
    assert digest == report_digest(report)
    kept = flatten(fleet_view(report))
    envelope = {"schema", "schema_version", "created", "command", "source", "summary", "exit_code"}
    for path in flatten(report):
        top = path.split(".")[0].split("[")[0]
        leaf = path.rsplit(".", 1)[-1].split("[")[0]
        if top in envelope or top == "tool" and path != "tool.version":
            continue
        if top == "results":  # a result: its verdict (status, message) by rule
            continue
        parts = {p.split("[")[0] for p in path.split(".")}
        if parts & VOLATILE_KEYS or leaf.endswith("_ms") or leaf == "index" or path.startswith(("facts.env.", "facts.probes[")):
            continue
        if path == "tool.version":
            assert kept["tool"] == report["tool"]["version"]
            continue
        assert path in kept, path
    results = {k for k in kept if k.startswith("results.")}
    assert results == {f"results.{r['rule']}.{f}" for r in report["results"] for f in ("status", "message")}
