"""Float32 that breaks the attention path without reaching q/k/v: the attention weights of attention
written out (a float32 mask added to the scores, a softmax asked for float32), and a Linear or
LayerNorm meeting a float32 input (AD608, where a GPU raises; the meta device lets it through)."""
import pytest

from conftest import marker_line, toy_target

TOY = "written_out_toy.py"


def _trace(trace, bug):
    return trace(toy_target(TOY, "build"), factory_kwargs={"bug": bug})


def test_a_float32_mask_added_to_the_scores_is_followed_from_the_weights(trace):
    (f,) = _trace(trace, "mask")["findings"]
    assert f["id"] == "AD601" and f["sink"]["line"] == marker_line(TOY, "PV")
    assert f["sink"]["weights"]["dtype"] == "float32" and f["sink"]["v"]["dtype"] == "bfloat16"
    (entry,) = f["chain"]
    assert entry["line"] == marker_line(TOY, "SCORES") and entry["feeds"] == ["weights"]
    assert entry["operand_origin"]["line"] == marker_line(TOY, "MASK")


def test_a_softmax_asked_for_float32_is_named_where_it_is(trace):
    (f,) = _trace(trace, "softmax")["findings"]
    assert f["id"] == "AD602" and f["kernel_message"] == "expected scalar type Float but found BFloat16"
    (origin,) = f["origins"]
    assert origin["kind"] == "explicit_cast" and origin["line"] == marker_line(TOY, "SOFTMAX")


@pytest.mark.parametrize("bug,op,marker", [("pos_linear", "F.linear", "LINEAR"), ("pos_norm", "F.layer_norm", "NORM")])
def test_a_linear_or_norm_meeting_float32_is_where_the_gpu_raises(trace, bug, op, marker):
    r = _trace(trace, bug)
    (f,) = r["findings"]
    assert f["id"] == "AD608" and f["sink"]["name"] == op and f["sink"]["line"] == marker_line(TOY, marker)
    assert f["chain"][0]["op"] == "Tensor.add"
    assert "on a GPU it raises here, before the attention call" in f["message"]
    # the trace went on in bf16: the attention call after it is judged on its own, and is clean
    assert r["summary"]["sinks"] == 1 and r["sinks"][0]["ok"]


def test_the_clean_block_and_half_input_with_float32_norm_weights_are_clean(trace):
    assert _trace(trace, "none")["findings"] == []
    from attn_doctor.tracing.runs.api import trace as run

    model, x = __import__("written_out_toy").build()
    model.norm.float()  # norms kept in float32 beside a bf16 input: the one mix layer_norm takes
    assert run(model=model, inputs=(x,))["findings"] == []


def test_scores_computed_in_float32_and_cast_back_before_v_are_clean(trace):
    # q and k upcast for the scores, the weights cast to v's dtype: each product has one dtype
    r = _trace(trace, "upcast_scores")
    assert r["summary"]["sinks"] == 1 and r["findings"] == [], r["findings"]


def test_one_float32_value_reaching_two_projections_is_one_finding_with_its_path(trace):
    r = _trace(trace, "pos_two_linears")
    (f,) = r["findings"]  # q's and k's projections: one cause, one finding
    assert f["id"] == "AD608" and f["sink"]["line"] == marker_line(TOY, "LINEAR-Q") and f["count"] == 2
    assert [a["line"] for a in f["also"]] == [marker_line(TOY, "LINEAR-K")]
    assert "the same float32 value also reaches F.linear at" in f["message"]
    (entry,) = f["chain"]
    assert entry["line"] == marker_line(TOY, "POS-2")
    origin = entry["operand_origin"]
    assert origin["kind"] == "created" and origin["line"] == marker_line(TOY, "TABLE")
    # the lines the value went through, nearest its use first: where a fix may cast it back
    assert [p["line"] for p in origin["path"]] == [marker_line(TOY, "TABLE-VIEW"), marker_line(TOY, "TABLE-COS")]


def test_scores_widened_by_a_float32_mask_name_the_mask_and_cast_it_where_it_joins(trace):
    # q and k are bf16: the operand to change is the float32 mask, at the line where it joins the scores
    r = trace(toy_target("mask_added_toy.py", "build"))
    (f,) = r["findings"]
    assert f["id"] == "AD601" and f["chain"][0]["operand"] == "mask"
    assert f["chain"][0]["line"] == marker_line("mask_added_toy.py", "MASK-ADDED")
    assert "+        scores = q @ k.transpose(-1, -2) + mask.to(v.dtype)  # MASK-ADDED" in f["patch"]
    assert "mask" in f["fix"] and "q and k" not in f["fix"]
    # what preflight() says as its remedy is that line, not the rule's "cast q and k back"
    from attn_doctor.findings import _trace_remedies

    (remedy,) = _trace_remedies(f, "mask_added_toy.py:%s" % f["sink"]["line"])
    assert remedy.startswith("at ") and remedy.split(": ", 1)[0].endswith("mask_added_toy.py:%d" % marker_line("mask_added_toy.py", "MASK-ADDED"))
    assert "mask.to(v.dtype)" in remedy


def test_a_boolean_added_to_scores_is_ad624_and_a_boolean_in_a_gate_is_not(trace):
    # the boolean added to q @ k^T is the bug, at its line
    r = trace(toy_target("bool_gate_toy.py", "build"), factory_kwargs={"kind": "scores"})
    (f,) = [f for f in r["findings"] if f["id"] == "AD624"]
    assert f["severity"] == "error" and f["sink"]["line"] == marker_line("bool_gate_toy.py", "BOOL-ADDED")
    # `reset + ~reset * gate` adds a boolean to a float that no product of q and k made: not a mask
    r = trace(toy_target("bool_gate_toy.py", "build"), factory_kwargs={"kind": "gate"})
    assert r["status"] == "ok", r["error"]
    assert not [f for f in r["findings"] if f["id"] == "AD624"], r["findings"]


def test_a_float32_frequency_buffer_cast_down_before_the_product_loses_precision_at_long_positions(trace):
    # transformers keeps inv_freq in float32; casting it (and the positions) to the activations' dtype
    # before the product computes the angles in half all the same. Measured against float64 at 512
    # positions the table is wrong (AD626 at the cos/sin line, the cast named as the line to change)
    r = trace(toy_target("rotary_cast_toy.py", "build"), factory_kwargs={"cast_first": True, "seq": 512})
    (f,) = [f for f in r["findings"] if f["id"] == "AD626"]
    assert f["severity"] == "warning" and f["sink"]["line"] == marker_line("rotary_cast_toy.py", "TRIG"), f
    lines = {o.get("line") for o in f.get("origins") or []}
    assert marker_line("rotary_cast_toy.py", "HALF-ANGLES") in lines, f
    assert "where bfloat16's neighbouring values are" in f["message"] and "the line to change" in f["message"]
    assert not [f for f in r["findings"] if f["id"] == "AD622"], "the measurement replaces the recognised form"
    # at 16 positions the half-precision angles are within a few roundings of float64: measured fine
    r = trace(toy_target("rotary_cast_toy.py", "build"), factory_kwargs={"cast_first": True})
    assert r["status"] == "ok" and not [f for f in r["findings"] if f["id"] in ("AD622", "AD626")], r["findings"]
    # without the shadow, the recognised form of the product in half is said (AD622)
    r = trace(toy_target("rotary_cast_toy.py", "build"), factory_kwargs={"cast_first": True}, shadow=False)
    (f,) = [f for f in r["findings"] if f["id"] == "AD622"]
    assert marker_line("rotary_cast_toy.py", "HALF-ANGLES") in {o.get("line") for o in f.get("origins") or []}
    # the product in float32, the result cast down: no finding
    r = trace(toy_target("rotary_cast_toy.py", "build"), factory_kwargs={"cast_first": False, "seq": 512})
    assert r["status"] == "ok" and not [f for f in r["findings"] if f["id"] in ("AD622", "AD626")], r["findings"]
