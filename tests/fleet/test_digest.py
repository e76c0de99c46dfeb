"""The fleet digest, the grouping and the launcher environment, on real recorded facts (in process)."""

from __future__ import annotations

import copy
from pathlib import Path

import msgspec
import pytest

from attn_doctor.core import diagnose
from attn_doctor.gather import load_facts_file
from attn_doctor.fleet.aggregate import aggregate, compact_ranks
from attn_doctor.fleet.digest import differences, fleet_view, report_digest
from attn_doctor.fleet.distributed import LaunchError, detect, first_host
from attn_doctor.fleet.files import member_of
from attn_doctor.rules.loader import load_recipes

FACTS = Path(__file__).parents[1] / "fixtures" / "facts"


@pytest.fixture(scope="module")
def recipes():
    return load_recipes(None)


def report_doc(name: str, recipes) -> dict:
    return msgspec.to_builtins(diagnose(load_facts_file(FACTS / f"{name}.json"), recipes))


def test_what_differs_per_node_is_left_out(recipes):
    a = report_doc("h200", recipes)
    b = copy.deepcopy(a)
    b["created"] = "2030-01-01T00:00:00+00:00"
    b["facts"]["platform"]["hostname"] = "gpu-node-117"
    b["facts"]["env"].update({"RANK": "7", "LOCAL_RANK": "3", "SLURM_PROCID": "7", "CUDA_VISIBLE_DEVICES": "3"})
    for probe in b["facts"]["probes"]:
        probe["duration_s"] += 1.5
    b["facts"]["probes"].reverse()  # finished in another order
    b["facts"]["torch"]["duration_s"] = 99.0
    b["facts"]["gpu"]["devices"][0]["index"] = 3
    b["facts"]["torch"]["devices"][0]["index"] = 3
    b["results"][0]["evidence"] = {"seen": "elsewhere"}
    b["facts"]["smoke"] = {"status": "ok", "results": [{"backend": "sdpa-flash", "dtype": "bfloat16", "status": "ok", "tolerance": 0.02,
                                                        "rel_err": 0.0041, "rel_err_grad": 0.0067, "kernel_ms": 0.21, "total_ms": 180.0}]}
    a["facts"]["smoke"] = copy.deepcopy(b["facts"]["smoke"])
    a["facts"]["smoke"]["results"][0].update(rel_err=0.0039, rel_err_grad=0.0071, kernel_ms=0.19, total_ms=176.5)
    # a rank smoke-tests its own GPU, for as long as it takes, and may reuse local rank 0's samples
    a["facts"]["smoke"].update(device_index=0, group_seconds={"main": 3.1})
    b["facts"]["smoke"].update(device_index=3, group_seconds={"main": 2.7, "cudnn:bfloat16": 2.9})
    b["facts"]["dtype_path"]["cached"] = "2026-11-22T03:40:00+00:00"
    assert report_digest(a) == report_digest(b)
    assert differences(fleet_view(a), fleet_view(b)) == []


@pytest.mark.parametrize(
    "path, value",
    [
        (("facts", "gpu", "driver_version"), "550.54.15"),
        (("facts", "packages", "triton", "version"), "3.5.0"),
        (("facts", "torch", "cxx11_abi"), False),
        (("facts", "env", "NCCL_P2P_DISABLE"), "1"),
        (("tool", "version"), "0.0.9"),
        (("facts", "smoke", "status"), "failed"),
    ],
)
def test_what_must_agree_is_kept(recipes, path, value):
    a = report_doc("h200", recipes)
    b = copy.deepcopy(a)
    node = b
    for key in path[:-1]:
        node = node[key]
    old = node.get(path[-1], "(absent)")
    node[path[-1]] = value
    assert report_digest(a) != report_digest(b)
    diffs = differences(fleet_view(a), fleet_view(b))
    dotted = ".".join(path) if path[0] != "tool" else "tool"
    assert (dotted, old, value) in diffs


def test_majority_grouped_minority_diffed(recipes):
    h200, t4 = report_doc("h200", recipes), report_doc("t4", recipes)
    reports, members = {}, []
    for rank, doc in enumerate([h200, h200, t4, h200]):
        digest = report_digest(doc)
        reports.setdefault(digest, doc)
        m = member_of(doc, digest)
        m.rank, m.host = rank, f"node{rank // 2}"
        members.append(m)
    fleet = aggregate(members, reports, expected=4, command="check --distributed")
    assert [g.majority for g in fleet.groups] == [False, True]  # the odd one out first
    odd, majority = fleet.groups
    assert odd.ranks == [2] and odd.hosts == ["node1"]
    assert majority.ranks == [0, 1, 3] and majority.differences == []
    paths = {d.path: (d.majority, d.value) for d in odd.differences}
    assert paths["facts.gpu.devices[0].name"] == ("NVIDIA H200", "Tesla T4")
    assert paths["results.AD103.status"][1] == "error"
    assert odd.differences[0].path.startswith("facts.gpu.")  # hardware first
    assert {f.rule for f in odd.findings} >= {"AD102", "AD103"}
    assert fleet.exit_code == 1 and fleet.summary.failing == 1 and fleet.summary.differing == 1


def test_compact_ranks():
    assert compact_ranks([5, 0, 1, 2, 7, 8, 10]) == "0-2,5,7-8,10"
    assert compact_ranks([]) == ""


@pytest.mark.parametrize(
    "nodelist, first",
    [("gpu[003-005,9],cpu1", "gpu003"), ("node7", "node7"), ("a1,b2", "a1"), ("dgx-[12,14]", "dgx-12"), ("", "")],
)
def test_first_host_of_a_slurm_nodelist(nodelist, first):
    assert first_host(nodelist) == first


def test_detect_torchrun_and_slurm():
    p = detect({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3", "MASTER_ADDR": "n0", "MASTER_PORT": "29500",
                "TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_USE_AGENT_STORE": "True"})
    assert (p.rank, p.world_size, p.local_rank, p.launcher, p.agent_store) == (3, 8, 3, "torchrun", True)
    s = detect({"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1", "SLURM_STEP_NODELIST": "gpu[010-017]",
                "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0"})
    assert (s.rank, s.world_size, s.local_rank, s.master_addr, s.master_port, s.launcher) == (5, 16, 1, "gpu010", 15000 + 4242, "slurm")
    with pytest.raises(LaunchError, match="needs a launcher"):
        detect({})
    with pytest.raises(LaunchError, match="MASTER_ADDR"):
        detect({"RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(LaunchError, match="not within"):
        detect({"RANK": "4", "WORLD_SIZE": "2", "MASTER_ADDR": "x", "MASTER_PORT": "1"})


def test_a_node_without_torch_is_named_by_that_first(recipes):
    h200, missing = report_doc("h200", recipes), report_doc("torch-missing", recipes)
    reports, members = {}, []
    for rank, doc in enumerate([h200, h200, missing]):
        digest = report_digest(doc)
        reports.setdefault(digest, doc)
        m = member_of(doc, digest)
        m.rank, m.host = rank, "node%d" % rank
        members.append(m)
    odd, _ = aggregate(members, reports, expected=3, command="fleet").groups
    assert odd.differences[0].path == "facts.torch.status" and odd.differences[0].value == "missing"
    assert odd.key_facts["torch_status"] == "missing"
