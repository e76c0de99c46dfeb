"""The float64 shadow: precision faults found by measurement in spellings no rule was written for,
each at the line to change, and their fixed twins clean; traced for real through the API, on meta
(the shadow then runs on CPU afterwards) and on CPU (it runs with the trace)."""
import os
import subprocess
import sys

import pytest
import torch

from conftest import REPO, marker_line, toy_target

TOY = "shadow_toy.py"


def _ids(report, *ids):
    return [f for f in report["findings"] if f["id"] in ids]


def _places(finding):
    out = {finding["sink"].get("line")}
    for entry in list(finding.get("origins") or ()) + list(finding.get("chain") or ()):
        out.add(entry.get("line"))
    return out


@pytest.mark.parametrize("device", ["meta", "cpu"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_timestep_table_made_in_half_is_measured_at_its_lines(trace, device, dtype):
    r = trace(toy_target(TOY, "build_timestep"), factory_kwargs={"dtype": dtype}, device=device)
    (f,) = _ids(r, "AD626")
    assert f["severity"] == "warning" and f["sink"]["line"] == marker_line(TOY, "TIMESTEP-TRIG"), f
    assert {marker_line(TOY, "TIMESTEP-FREQS"), marker_line(TOY, "TIMESTEP-ANGLES")} <= _places(f), f
    assert "off float64" in f["message"] and "the line to change" in f["message"], f["message"]
    assert r["exit_code"] == 0  # a warning: it raises nowhere
    fixed = trace(toy_target(TOY, "build_timestep"), factory_kwargs={"dtype": dtype, "fixed": True}, device=device)
    assert fixed["status"] == "ok" and not _ids(fixed, "AD626", "AD627", "AD622"), fixed["findings"]


def test_a_table_cached_in_half_when_the_model_is_built_is_measured_there(trace):
    r = trace(toy_target(TOY, "build_cached"))
    (f,) = _ids(r, "AD626")
    assert f["sink"]["line"] == marker_line(TOY, "CACHED-TRIG") and "when the model was built" in f["message"], f
    assert {marker_line(TOY, "CACHED-POSITIONS"), marker_line(TOY, "CACHED-ANGLES")} <= _places(f), f
    assert "and so do Tensor.sin" in f["message"]  # the table's cos and sin: one cause, one finding
    fixed = trace(toy_target(TOY, "build_cached"), factory_kwargs={"fixed": True})
    assert not _ids(fixed, "AD626", "AD627"), fixed["findings"]


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_scores_that_overflow_float16_are_an_error_at_the_product(trace, train):
    # the NaN reaches the results through the output projection's dropout: the identity in eval,
    # a drawn mask in training; the float64 twin passes through it as the values do
    r = trace(toy_target(TOY, "build_scores"), train=train)
    (f,) = _ids(r, "AD627")
    assert f["severity"] == "error" and f["sink"]["line"] == marker_line(TOY, "SCORES"), f
    assert "float16 holds 65504" in f["message"] and r["exit_code"] == 1, f["message"]
    fixed = trace(toy_target(TOY, "build_scores"), factory_kwargs={"fixed": True})
    assert not _ids(fixed, "AD626", "AD627"), fixed["findings"]
    assert any("float16 values reach" in n for n in fixed["notes"]), fixed["notes"]  # the headroom, said


@pytest.mark.parametrize("spelling,marker", [("float", "NUMBERS-FLOAT"), ("type_as", "NUMBERS-TYPE-AS"),
                                             ("sdpa", "NUMBERS-SDPA")])
def test_a_mask_of_ones_and_zeros_added_as_numbers_masks_nothing(trace, spelling, marker):
    r = trace(toy_target(TOY, "build_numbers"), factory_kwargs={"spelling": spelling})
    (f,) = _ids(r, "AD624")
    assert f["severity"] == "error" and marker_line(TOY, marker) in _places(f), f
    assert "nothing is masked" in f["message"]


def test_an_additive_mask_done_right_is_clean(trace):
    r = trace(toy_target(TOY, "build_numbers"), factory_kwargs={"spelling": "additive"})
    assert r["status"] == "ok" and not _ids(r, "AD624", "AD626", "AD627"), r["findings"]


def test_scores_the_code_upcasts_itself_before_the_softmax_are_no_warning(trace):
    r = trace(toy_target(TOY, "build_upcast"))
    assert r["status"] == "ok" and not _ids(r, "AD620"), r["findings"]


@pytest.mark.parametrize("train", [False, True])
def test_writes_in_place_and_dropout_keep_the_shadow_in_step(trace, train):
    r = trace(toy_target(TOY, "build_writes"), device="cpu", train=train)
    assert r["status"] == "ok" and not _ids(r, "AD626", "AD627"), r["findings"]


def test_no_shadow_says_the_recognised_form_instead(trace):
    r = trace(toy_target(TOY, "build_cached"), shadow=False)
    assert not _ids(r, "AD626") and not any("float64" in n for n in r["notes"])


def test_the_python_api_measures_a_live_model_on_a_cpu_copy():
    import attn_doctor

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "toys"))
    try:
        import shadow_toy
    finally:
        sys.path.pop(0)
    model, inputs = shadow_toy.build_timestep()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    report = attn_doctor.trace(model, inputs)
    assert [f["id"] for f in report.findings if f["id"] == "AD626"] == ["AD626"]
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the model is untouched
    assert not [f for f in attn_doctor.trace(model, inputs, shadow=False).findings if f["id"] == "AD626"]


def test_a_model_too_large_for_the_shadow_is_said_not_measured(tmp_path):
    env = dict(os.environ, ATTN_DOCTOR_SHADOW_LIMIT="1000", PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "trace", toy_target(TOY, "build_timestep"), "--json"],
                          capture_output=True, text=True, env=env, timeout=600)
    import json

    report = json.loads(proc.stdout)
    assert not _ids(report, "AD626")
    assert any(n.startswith("precision was not measured: the model has") for n in report["notes"]), report["notes"]


def test_a_factory_or_forward_that_meta_cannot_run_is_traced_on_cpu(trace, tmp_path):
    from conftest import write_module

    path = write_module(tmp_path, "meta_limits.py", """
        import torch
        import torch.nn.functional as F

        class A(torch.nn.Module):
            def __init__(self, item):
                super().__init__()
                self.qkv = torch.nn.Linear(32, 96)
                self.heads = int(torch.tensor(4).item()) if item else 4

            def forward(self, x):
                b, n, d = x.shape
                q, k, v = self.qkv(x).view(b, n, 3, self.heads, 8).permute(2, 0, 3, 1, 4)
                q = q.type(k.type())
                return F.scaled_dot_product_attention(q, k, v)

        def build(item=True):
            return A(item).to(torch.bfloat16), (torch.randn(2, 16, 32, dtype=torch.bfloat16),)
        """)
    r = trace(path + ":build")
    assert r["status"] == "ok" and r["device"] == "cpu" and r["summary"]["sinks"] == 1, r.get("error")
    assert any(n.startswith("the factory does data-dependent Python") for n in r["notes"]), r["notes"]
    r = trace(path + ":build", factory_kwargs={"item": False})
    assert r["status"] == "ok" and r["device"] == "cpu", r.get("error")
    assert any("x.type(y.type())" in n and "retried on CPU" in n for n in r["notes"]), r["notes"]


def test_a_forward_too_large_to_measure_in_seconds_is_said_and_measured_when_asked(monkeypatch, trace):
    from attn_doctor.tracing.runs import shadow_pass

    monkeypatch.setattr(shadow_pass, "SHADOW_ELEMENTS", 1000.0)
    r = trace(toy_target(TOY, "build_timestep"))
    assert not _ids(r, "AD626") and r["summary"]["elements"] > 1000, r["summary"]
    assert any(n.startswith("precision was not measured: the forward pass reads") for n in r["notes"]), r["notes"]
    r = trace(toy_target(TOY, "build_timestep"), shadow=True)
    assert _ids(r, "AD626") and not any(n.startswith("precision was not measured") for n in r["notes"])


def test_an_additive_mask_of_small_whole_numbers_masks_nothing(trace):
    r = trace(toy_target(TOY, "build_regions"))
    (f,) = _ids(r, "AD624")
    assert f["sink"]["line"] == marker_line(TOY, "REGIONS-ADDED") and "small whole numbers, -2 to 2" in f["message"]
    assert marker_line(TOY, "REGION-DIFFERENCES") in _places(f), f
    assert not _ids(trace(toy_target(TOY, "build_regions"), factory_kwargs={"filled": True}), "AD624")


def test_an_inf_that_only_masks_is_no_finding_but_one_that_makes_nan_is(trace):
    r = trace(toy_target(TOY, "build_min_mask"))
    assert r["status"] == "ok" and not _ids(r, "AD627"), r["findings"]
    r = trace(toy_target(TOY, "build_min_mask"), factory_kwargs={"whole_row": True})
    (f,) = _ids(r, "AD627")
    assert f["sink"]["line"] == marker_line(TOY, "MIN-MASK") and "NaN" in f["message"], f["message"]
