"""Tensors the model's construction made and the trace never saw being made (a KV cache or a
rotary table kept as a plain attribute, which module.to() leaves as it was made) are named by
their attribute and the line that made them, on meta too."""
import pytest

from conftest import marker_line, toy_target

TOY = "kv_cache_toy.py"


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_a_float32_kv_cache_attribute_is_named_where_it_was_allocated(trace, device):
    (f,) = trace(toy_target(TOY, "build"), device=device)["findings"]
    assert f["id"] == "AD602" and f["sink"]["line"] == marker_line(TOY, "SINK")
    origins = {o["name"]: o for o in f["origins"]}
    assert set(origins) == {"cache.k", "cache.v"}
    assert origins["cache.k"]["kind"] == "attribute" and origins["cache.k"]["line"] == marker_line(TOY, "CACHE-K")
    assert origins["cache.v"]["line"] == marker_line(TOY, "CACHE-V") and origins["cache.v"]["op"] == "torch.zeros"
    assert "k float32 from attribute cache.k, made by torch.zeros at" in f["message"]


def test_the_cache_allocated_in_the_models_dtype_is_clean(trace):
    r = trace(toy_target(TOY, "build"), factory_kwargs={"fixed": 1})
    assert r["status"] == "ok" and r["findings"] == []
