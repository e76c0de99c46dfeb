"""CUDA autocast's policy is the installed torch's, not a copy of one release (tracing/calls/policy.py).

The hand-written table was read from torch 2.11; the installed torch's own op lists
(torch/testing/_internal/autocast_test_lists.py, read as text) are laid over it. These tests run
under whatever torch is installed, CI's newest-torch run included: a release that moves an op
between autocast's lists fails here (the table is updated and tagged), not for a user.
"""
import os

import pytest
import torch

from attn_doctor.tracing.calls import policy
from conftest import marker_line, toy_target

INSTALLED = policy.installed_lists(os.path.dirname(torch.__file__))
# Ops a torch release after the table's (policy.TABLE_TORCH) moved onto a list, with that release.
MOVED_SINCE_THE_TABLE = {"rms_norm": "2.12"}


def test_the_installed_torch_says_its_policy():
    assert INSTALLED is not None, "this torch ships no autocast_test_lists.py: the table alone is applied"
    assert {"layer_norm", "softmax", "exp"} <= INSTALLED["fp32"] and {"mm", "bmm", "linear"} <= INSTALLED["lower"]


def test_the_table_does_not_contradict_the_installed_torch():
    # An op the table puts in one list that this torch puts in another is a release that moved it.
    contradictions = {name for cat, names in (("fp32", policy.FLOAT32), ("lower", policy.LOWER_PRECISION), ("promote", policy.PROMOTE))
                      for name in names for other in ("fp32", "lower", "promote") if other != cat and name in INSTALLED[other]}
    assert not contradictions, f"torch {torch.__version__} moved {sorted(contradictions)} to another autocast list: update policy.py"
    new = {name for cat, names in (("fp32", policy.FLOAT32), ("lower", policy.LOWER_PRECISION), ("promote", policy.PROMOTE))
           for name in INSTALLED[cat] - names}
    unknown = {name for name in new if name not in MOVED_SINCE_THE_TABLE}
    assert not unknown, (f"torch {torch.__version__} lists {sorted(unknown)} on autocast's lists, which the table (read from torch "
                         f"{policy.TABLE_TORCH}) does not: add them to MOVED_SINCE_THE_TABLE with the release, or to the table")


def test_the_policy_in_force_is_the_installed_torchs():
    for category in ("lower", "fp32", "promote"):
        for name in INSTALLED[category]:
            assert policy.policy_for(name) == category, (name, category)


def test_rms_norm_follows_the_installed_torch():
    expected = "fp32" if "rms_norm" in INSTALLED["fp32"] else None
    assert policy.policy_for("rms_norm") == expected
    major_minor = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    assert (expected == "fp32") == (major_minor >= (2, 12))


def test_a_qk_rms_norm_before_flash_attn_is_found_where_this_torch_promotes_it():
    from attn_doctor.tracing.runs.api import trace

    report = trace(toy_target("rmsnorm_toy.py", "build"), autocast="bf16", device="meta")
    routes = {r["name"]: r for r in report.get("routes") or ()}
    findings = routes["standin"]["findings"] if "standin" in routes else report["findings"]
    if policy.policy_for("rms_norm") == "fp32":
        assert [f["id"] for f in findings] == ["AD601"], findings
        assert [e["line"] for e in findings[0]["chain"]] == [marker_line("rmsnorm_toy.py", "PROMOTE-Q"),
                                                              marker_line("rmsnorm_toy.py", "PROMOTE-K")]
    else:
        assert not [f for f in findings if f["id"] == "AD601"], findings
