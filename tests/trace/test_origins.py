"""The line a float32 operand got its width at, where the walk back has more than one way to go."""
import pytest

from conftest import marker_line, toy_target

TOY = "origins_toy.py"


def _lines(finding):
    out = set()
    for e in finding.get("chain") or ():
        out.add(e.get("line"))
        out.add((e.get("operand_origin") or {}).get("line"))
    for o in finding.get("origins") or ():
        out.add(o.get("line"))
    return out


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_an_explicit_cast_to_float32_of_a_float32_tensor_is_the_line_that_keeps_it_wide(trace, device):
    # the table was float32 already; the line that casts it to float32 instead of x.dtype is the fix
    r = trace(toy_target(TOY, "build"), factory_kwargs={"case": "kept"}, device=device, shadow=False)
    (f,) = [f for f in r["findings"] if f["severity"] == "error"]
    assert marker_line(TOY, "KEEPS-WIDE") in _lines(f), f


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_an_empty_placeholder_joined_by_cat_is_not_the_origin(trace, device):
    r = trace(toy_target(TOY, "build"), factory_kwargs={"case": "cat"}, device=device, shadow=False)
    (f,) = [f for f in r["findings"] if f["severity"] == "error"]
    assert marker_line(TOY, "MADE-WIDE") in _lines(f) and "torch.tensor" not in f["message"], f["message"]


@pytest.mark.parametrize("case,marker", [("buffer", "INDEX-FLOAT"), ("positions", "POSITIONS-HALF")])
def test_a_floating_index_is_walked_back_to_the_line_that_made_it_floating(trace, case, marker):
    r = trace(toy_target(TOY, "build_indexed"), factory_kwargs={"case": case}, shadow=False)
    (f,) = [f for f in r["findings"] if f["id"] == "AD621"]
    assert "must be long" in f["message"] and marker_line(TOY, marker) in _lines(f), f["message"]


def test_a_crash_meta_lets_through_is_found_by_the_cpu_run(trace, tmp_path):
    from conftest import write_module

    path = write_module(tmp_path, "float_mask.py", """
        import torch
        import torch.nn.functional as F

        class A(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = torch.nn.Linear(32, 96)

            def forward(self, x, pad):
                b, n, d = x.shape
                q, k, v = self.qkv(x).view(b, n, 3, 4, 8).permute(2, 0, 3, 1, 4)
                padding = pad.float()  # FLOAT-MASK
                mask = torch.ones(n, n, dtype=torch.bool).tril() & padding[:, None, None, :]
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

        def build():
            return A().to(torch.bfloat16), (torch.randn(2, 16, 32, dtype=torch.bfloat16), torch.ones(2, 16, dtype=torch.bool))
        """)
    r = trace(path + ":build")  # meta's bitwise_and takes a float mask; CPU and GPU refuse it
    (f,) = [f for f in r["findings"] if f["id"] == "AD621"]
    assert "not implemented for 'Float'" in f["message"] and "Tensor.float at" in f["message"], f["message"]
    assert r["exit_code"] == 1 and any("where meta let it through" in n for n in r["notes"]), r["notes"]


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_a_fill_value_chosen_in_a_variable_names_the_line_that_chose_it(trace, device):
    r = trace(toy_target(TOY, "build_chosen_fill"), device=device, shadow=False)
    (f,) = [f for f in r["findings"] if f["id"] == "AD623"]
    assert f["sink"]["line"] == marker_line(TOY, "FILL-USED") and marker_line(TOY, "FILL-CHOSEN") in _lines(f), f
    assert "the value is chosen at" in f["message"] and "torch.finfo(sim.dtype).min" in (f.get("patch") or ""), f
