"""An attention call inside an installed package is reported with the user's frame that reached it
(and the options of that call that chose the mask), and gets no patch to the package's files."""
import textwrap

LIBRARY = '''
import torch
import torch.nn.functional as F


class Attention(torch.nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)

    def forward(self, x, use_causal_mask=False, scale=None, rescale=False):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
        if scale is not None:
            q = q * scale  # LIB-PROMOTE
        if rescale:
            q = q * torch.ones(q.shape[-1], device=x.device)  # LIB-OWN
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril() if use_causal_mask else None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # LIB-SINK
'''

USER = '''
import sys
sys.path.insert(0, {site!r})
import torch
import {name} as minilib


class Model(torch.nn.Module):
    def __init__(self, scale=False, rescale=False):
        super().__init__()
        self.attn = minilib.Attention()
        self.rescale = rescale
        self.register_buffer("scale", torch.ones(16) if scale else None, persistent=False)

    def forward(self, x):
        return self.attn(x, use_causal_mask=True, scale=self.scale, rescale=self.rescale)  # USER-CALL


def build(scale=False, rescale=False):
    m = Model(scale=bool(scale), rescale=bool(rescale)).to(torch.bfloat16)
    if scale:
        m.scale = m.scale.float()
    return m, torch.randn(2, 16, 64, dtype=torch.bfloat16)
'''


def _line(text, marker):
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.rstrip().endswith("# " + marker))


def _write(tmp_path):
    # a package name of its own per test: the traces share this process's imported modules
    name = "minilib_%d" % abs(hash(str(tmp_path)))
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(textwrap.dedent(LIBRARY))
    user = tmp_path / "model.py"
    user.write_text(USER.format(site=str(site), name=name))
    return str(user), str(site / name / "__init__.py")


def test_a_mask_the_library_builds_is_put_at_the_users_call_with_its_option(trace, tmp_path):
    user, lib = _write(tmp_path)
    r = trace(user + ":build")
    (f,) = r["findings"]
    assert f["id"] == "AD610"
    assert f["sink"]["file"] == lib and f["sink"]["line"] == _line(LIBRARY, "LIB-SINK")
    frame = f["sink"]["called_from"]
    assert frame["file"] == user and frame["line"] == _line(USER, "USER-CALL") and frame["library"].startswith("minilib_")
    assert frame["options"] == ["use_causal_mask=True"]
    assert "reached from your code at" in f["message"] and "not is_causal in its code" in f["message"]
    assert f["patch"] is None  # never an edit to an installed package


def test_a_promotion_inside_the_library_keeps_its_line_and_names_the_users_call(trace, tmp_path):
    user, lib = _write(tmp_path)
    r = trace(user + ":build", factory_kwargs={"scale": 1})
    f = next(f for f in r["findings"] if f["id"] == "AD601")
    (entry,) = f["chain"]
    assert entry["file"] == lib and entry["line"] == _line(LIBRARY, "LIB-PROMOTE")
    assert f["sink"]["called_from"]["line"] == _line(USER, "USER-CALL") and f["patch"] is None
    # the wide operand is the user's buffer, handed to the library: the fix may be the user's
    assert "the fix goes into what your code gives it (its dtype) or into the library" in f["message"], f["message"]


def test_a_promotion_the_library_makes_of_its_own_is_the_librarys_to_fix(trace, tmp_path):
    user, lib = _write(tmp_path)
    r = trace(user + ":build", factory_kwargs={"rescale": 1})
    f = next(f for f in r["findings"] if f["id"] == "AD601")
    (entry,) = f["chain"]
    assert entry["line"] == _line(LIBRARY, "LIB-OWN") and entry["operand_origin"]["line"] == _line(LIBRARY, "LIB-OWN")
    assert "the promotion happens in the library's own code, so the fix is the library's: upgrade it, or report it " \
           "upstream" in f["message"] and f["patch"] is None, f["message"]


def test_a_call_in_the_users_own_code_has_no_called_from(trace):
    from conftest import toy_target

    r = trace(toy_target("var_toy.py", "build_fp32"), autocast="bf16")
    assert r["findings"] and all("called_from" not in f["sink"] for f in r["findings"])

