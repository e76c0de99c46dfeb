"""Masks judged by where they come from (tracing/kernel_choice/masks.py, fallbacks.py): a causal mask is AD610
wherever it was made (a buffer made at construction too, on meta); a mask made from the batch, a
sliding window, a learned or position bias are never told to become is_causal=True: AD616 (a note)
names what forces the mask-reading kernel and what skips the work instead."""
import pytest
import torch

from attn_doctor.tracing.kernel_choice import masks
from attn_doctor.tracing.runs.mode import activate
from attn_doctor.tracing.dtype_path.tracer import Tracer
from conftest import marker_line, toy_target

TOY = "mask_toy.py"
DEVICES = ["meta", "cpu"]


def _only(report):
    assert report["status"] == "ok", report["error"]
    return [(f["id"], f["severity"]) for f in report["findings"]]


@pytest.mark.parametrize("device", DEVICES)
def test_a_causal_buffer_made_in_init_is_the_causal_mask_on_meta_too(trace, device):
    r = trace(toy_target(TOY, "build"), factory_kwargs={"kind": "buffer"}, device=device, capability=(9, 0))
    assert _only(r) == [("AD610", "warning")]
    (f,) = r["findings"]
    assert f["sink"]["line"] == marker_line(TOY, "SINK-BUFFER")
    assert "is_causal=True" in f["patch"]
    assert r["sinks"][0]["mask"]["kind"] == "causal"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("padded", [False, True])
def test_a_mask_made_from_the_batch_is_never_is_causal(trace, device, padded):
    r = trace(toy_target(TOY, "build"), factory_kwargs={"kind": "padding", "padded": padded}, device=device,
              capability=(9, 0))
    ids = _only(r)
    assert "AD610" not in {i for i, _ in ids}
    assert all(f["patch"] is None or "is_causal" not in f["patch"] for f in r["findings"])
    assert r["sinks"][0]["mask"]["from_batch"] == "input[0]"
    if padded and device == "cpu":
        assert ids == []  # a padding mask the model needs: nothing to say
    elif not padded:  # equal to the causal mask on this example only: a note that says so
        (f,) = r["findings"]
        assert (f["id"], f["severity"]) == ("AD616", "info")
        assert "made from the batch (from input[0])" in f["message"]
        assert "where a batch has no padding, is_causal=True (no mask) does the same; with padding keep the mask" in (
            f["message"])
        assert r["exit_code"] == 0


@pytest.mark.parametrize("device", DEVICES)
def test_a_sliding_window_is_named_with_its_alternatives(trace, device):
    r = trace(toy_target(TOY, "build"), factory_kwargs={"kind": "window"}, device=device, capability=(9, 0))
    (f,) = r["findings"]
    assert (f["id"], f["severity"]) == ("AD616", "info") and f["patch"] is None
    assert "sliding-window causal mask (each query sees its 4 latest keys" in f["message"]
    assert "window_size=(3, 0)" in f["message"] and "create_block_mask" in f["message"]
    assert "is_causal" not in f["message"]
    assert r["sinks"][0]["mask"]["window"] == 4


@pytest.mark.parametrize("device", DEVICES)
def test_a_learned_bias_is_named_by_its_parameter(trace, device):
    r = trace(toy_target(TOY, "build"), factory_kwargs={"kind": "learned"}, device=device, capability=(9, 0))
    (f,) = r["findings"]
    assert (f["id"], f["severity"]) == ("AD616", "info")
    assert "computed from parameter rel (a learned bias)" in f["message"] and "score_mod" in f["message"]
    assert "is_causal" not in f["message"]


def test_a_position_bias_is_named_by_its_buffer(trace):
    r = trace(toy_target(TOY, "build"), factory_kwargs={"kind": "alibi"}, device="cpu", capability=(9, 0))
    (f,) = r["findings"]
    assert (f["id"], f["severity"]) == ("AD616", "info")
    assert "position bias computed from buffer slopes" in f["message"] and "alibi_slopes" in f["message"]


def test_notes_do_not_fail_the_trace_nor_count_as_warnings(trace):
    r = trace(toy_target(TOY, "build"), factory_kwargs={"kind": "window"}, capability=(9, 0))
    assert r["exit_code"] == 0 and r["summary"]["warnings"] == 0 and r["summary"]["notes"] == 1
    assert r["sinks"][0]["ok"] is True


T, W = 8, 3


def _built():
    tracer = Tracer()
    made = {}
    with activate(tracer), torch.device("meta"):
        i = torch.arange(T)[:, None]
        j = torch.arange(T)[None, :]
        d = i - j
        made["arange causal"] = j <= i
        made["arange shifted"] = j < i
        made["arange window"] = (d >= 0) & (d < W)
        made["triu keyword"] = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        made["tril then triu"] = torch.ones(T, T, dtype=torch.bool).tril().triu(-(W - 1))
        made["additive window"] = torch.zeros(T, T).masked_fill(~((d >= 0) & (d < W)), float("-inf"))
        made["local"] = (i - j).abs() <= 2
        made["upper"] = torch.ones(T, T, dtype=torch.bool).triu()
        made["bottom right"] = j <= i + 2
    return tracer, made


@pytest.mark.parametrize("name,kind,band", [
    ("arange causal", "causal", (None, 0)), ("arange shifted", "band", (None, -1)),
    ("arange window", "window", (-2, 0)), ("triu keyword", "causal", (None, 0)),
    ("tril then triu", "window", (-2, 0)), ("additive window", "window", (-2, 0)), ("local", "local", (-2, 2)),
    ("upper", "band", (0, None)), ("bottom right", "band", (None, 2)),
])
def test_patterns_on_meta(name, kind, band):
    tracer, made = _built()
    verdict = masks.classify(tracer.masks, made[name], T, T, tracer)
    assert (verdict["kind"], (verdict["lo"], verdict["hi"])) == (kind, band)


def test_values_on_cpu_read_a_band_and_a_per_batch_mask():
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    window = causal & ~torch.ones(6, 6, dtype=torch.bool).tril(-3)
    assert masks.classify(None, window, 6, 6)["kind"] == "window"
    per_batch = torch.stack([causal, causal.clone()])
    per_batch[1, :, 0] = False
    assert masks.classify(None, per_batch, 6, 6)["kind"] == "varies"
    bias = torch.zeros(6, 6).masked_fill(~causal, float("-inf")) + torch.arange(6.0)
    assert masks.classify(None, bias, 6, 6)["kind"] == "bias"
