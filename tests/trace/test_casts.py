"""Casts the trace follows: an explicit ``.float()`` that is never cast back (complex rotary, as in
Meta's LLaMA reference code) is named where it happened; bfloat16 meeting float16 names the stray
half operand; ``type_as`` copying a promoted tensor's dtype leads to that promotion."""
from conftest import marker_line, toy_target

TOY = "cast_toy.py"


def test_a_float_cast_not_cast_back_through_complex_rotary_is_named_at_the_cast(trace):
    (f,) = trace(toy_target(TOY, "build_bug"))["findings"]
    assert f["id"] == "AD602" and f["sink"]["line"] == marker_line(TOY, "SINK")
    (origin,) = f["origins"]
    assert origin["kind"] == "explicit_cast" and origin["op"] == "Tensor.float"
    assert origin["line"] == marker_line(TOY, "FLOAT") and origin["feeds"] == ["q", "k"]
    assert "q/k float32 since Tensor.float at" in f["message"] and "not cast back" in f["message"]


def test_the_rotary_that_casts_back_is_clean(trace):
    r = trace(toy_target(TOY, "build_fixed"))
    assert r["status"] == "ok" and r["findings"] == []


def test_bfloat16_meeting_a_float16_buffer_names_the_float16_operand(trace):
    (f,) = trace(toy_target(TOY, "build_mixed"))["findings"]
    assert f["id"] == "AD601"
    (entry,) = f["chain"]
    assert entry["line"] == marker_line(TOY, "MIXED") and entry["operand"] == "scale"
    assert entry["operand_dtype"] == "float16" and "type promotion of bfloat16 and float16" in entry["reason"]
    assert "float16 operand scale" in f["message"]


def test_type_as_a_float32_buffer_is_named_as_the_cast(trace):
    (f,) = trace(toy_target(TOY, "build_follow"))["findings"]
    (origin,) = f["origins"]
    assert origin["op"] == "Tensor.type_as" and origin["line"] == marker_line(TOY, "FOLLOW")


def test_type_as_a_promoted_tensor_leads_to_that_promotion(trace):
    (f,) = trace(toy_target(TOY, "build_follow_k"))["findings"]
    assert f["id"] == "AD601"
    (entry,) = f["chain"]
    assert entry["line"] == marker_line(TOY, "PROMOTE-K") and sorted(entry["feeds"]) == ["k", "q"]
