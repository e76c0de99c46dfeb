"""The trace names the line a user changes, on model bugs whose fix lies elsewhere than the line
that fails (toys/the_line_toy.py), traced for real on meta through the API and the CLI."""
import os

import pytest

from conftest import TOYS, cli, marker_line, toy_target

TOY = "the_line_toy.py"
PATH = os.path.join(TOYS, TOY)


def _only(report, rid):
    found = [f for f in report["findings"] if f["id"] == rid]
    assert len(found) == 1, report["findings"]
    return found[0]


def test_a_dtype_held_in_a_variable_is_traced_to_the_line_that_chose_it(trace):
    r = trace(toy_target(TOY, "build_cache"), dtype="bf16")
    f = _only(r, "AD602")
    (origin,) = [o for o in f["origins"] if "k" in o["feeds"]]
    assert origin["line"] == marker_line(TOY, "MADE") and origin["kind"] == "created"
    # passed as an argument: followed into the caller, where a test of the device chose it
    decided = origin["decided"]
    assert (decided["file"], decided["line"]) == (PATH, marker_line(TOY, "DECIDED")) and decided["test"], decided
    assert "its dtype is chosen at" in f["message"] and ":%d by a condition" % marker_line(TOY, "DECIDED") in f["message"]


def test_a_mask_of_the_wrong_rank_names_its_maker(trace):
    r = trace(toy_target(TOY, "build_padded"), dtype="bf16")
    f = _only(r, "AD607")
    assert "does not broadcast" in f["message"] and "one axis short" in f["message"]
    # every operand with its dtype and shape, the mask among them: the one that does not fit is named
    said = f["message"].split(" raised (", 1)[1].split("):", 1)[0]
    assert said.startswith("q bfloat16 [") and ", attn_mask bool [" in said, said
    (origin,) = f["origins"]
    assert origin["line"] == marker_line(TOY, "MASK-MAKER") and origin["feeds"] == ["attn_mask"]
    assert origin["called_by"] and origin["called_by"][0]["source"] == "mask = padding_mask(lengths, t)"


def test_five_d_qkv_is_a_kernel_finding_that_agrees_with_the_kernel_line(trace):
    r = trace(toy_target(TOY, "build_five_d"), dtype="bf16", capability=(9, 0))
    f = _only(r, "AD618")
    assert f["severity"] == "warning" and "5-D" in f["message"] and "flatten(0, 1)" in f["message"]
    (sink,) = {(s["file"], s["line"]): s for s in r["sinks"]}.values()
    # the finding's kernels are the kernel line's: the same choice, never two answers
    assert sink["kernel"]["name"] == "math" and f["sink"]["line"] == marker_line(TOY, "FIVE-D")
    assert "runs its math kernel" in f["message"]


def test_an_fp16_models_scores_promoted_by_a_float32_mask_are_named(trace):
    r = trace(toy_target(TOY, "build_eager_masked"))
    f = _only(r, "AD620")
    assert "softmax runs in float32, not the model's float16" in f["message"]
    assert f["chain"] and f["chain"][0]["line"] == marker_line(TOY, "PROMOTES")


def test_a_mask_that_masks_nothing_says_pass_no_mask(trace):
    r = trace(toy_target(TOY, "build_all_true"), dtype="bf16")
    f = _only(r, "AD619")
    assert "masks nothing" in f["message"] and "attn_mask argument dropped" in f["message"]
    assert "+        return F.scaled_dot_product_attention(q, k, v, attn_mask=None)" in (f.get("patch") or "")


def test_no_frame_of_the_doctor_in_a_report():
    code, out, err = cli(toy_target(TOY, "build_cache"), "--dtype", "bf16", "--json")
    assert code == 1, err
    assert "attn_doctor" + os.sep not in out.replace(PATH, ""), out
    assert "typer" not in out and "click" not in out
