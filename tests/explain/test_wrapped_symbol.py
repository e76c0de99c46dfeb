"""An undefined symbol a terminal wrapped inside its mangled name is joined again, and where the text
cannot tell which side of the C++ ABI is off, both causes are offered with what decides them."""

from __future__ import annotations

import io

import pytest

from attn_doctor.explaining.core import explain
from attn_doctor.facts import Facts, TorchInfo
from attn_doctor.failures import demangle, explain_undefined_symbol, rejoined_symbol
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()
LIB = "/opt/conda/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so"
CXX11 = "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
OLD = "_ZN3c105ErrorC2ENS_14SourceLocationESs"

needs_demangler = pytest.mark.skipif(demangle("_ZN3c104cuda9SetDeviceEi") is None, reason="no C++ demangler here")


def _match(text: str, live=None):
    report = explain(io.BytesIO(text.encode()), RECIPES, kind="text", live=live)
    return next(m for m in report.matches if m.rule == "AD301")


@needs_demangler
def test_the_walk_through_line_wrapped_by_the_terminal_demangles_whole():
    m = _match(f"ImportError: {LIB}: undefined symbol: _ZN3c104cuda9SetDevi\nceEi\n")
    assert m.captures["symbol"] == "_ZN3c104cuda9SetDeviceEi"
    assert m.captures["demangled"] == "c10::cuda::SetDevice(int)"
    assert m.message.startswith("import flash_attn fails: undefined symbol c10::cuda::SetDevice(int);")
    assert m.evidence[0].text.endswith("_ZN3c104cuda9SetDeviceEi")
    # no std::string in it: the name is the same under both ABIs, so the ABI is ruled out, and said why
    assert "different torch release" in m.captures["side"] and "same under both C++ ABIs" in m.captures["side"]


@needs_demangler
def test_a_name_cut_twice_is_joined_over_two_lines_and_both_sides_are_offered_without_a_torch():
    text = f"ImportError: {LIB}: undefined symbol: {CXX11[:60]}\n{CXX11[60:80]}\n{CXX11[80:]}\nTraceback (most recent call last):\n"
    m = _match(text)
    assert m.captures["symbol"] == CXX11
    side = m.captures["side"]
    assert "either" in side and "different torch release" in side and "C++11 ABI (cxx11abiTRUE)" in side
    assert "--check --python" in side and "_GLIBCXX_USE_CXX11_ABI" in side


@needs_demangler
def test_a_whole_symbol_is_not_extended_by_the_word_on_the_next_line():
    # lower-case letters are builtin types: "done" after a whole name would demangle as parameters
    m = _match(f"ImportError: {LIB}: undefined symbol: _ZN3c104cuda9SetDeviceEi\ndone\n")
    assert m.captures["symbol"] == "_ZN3c104cuda9SetDeviceEi"
    assert rejoined_symbol("_ZN3c104cuda9SetDeviceEi", ["done"]) is None


@needs_demangler
def test_a_cut_name_whose_next_line_is_no_tail_stays_cut_and_is_not_called_demangled():
    m = _match(f"ImportError: {LIB}: undefined symbol: _ZN3c104cuda9SetDevi\nKilled by signal 9 at step 4\n")
    assert m.captures["symbol"] == "_ZN3c104cuda9SetDevi"
    assert "demangled" not in m.captures
    assert "undefined symbol _ZN3c104cuda9SetDevi;" in m.message


def test_without_a_demangler_a_length_prefix_that_runs_past_the_end_proves_the_cut(monkeypatch):
    from attn_doctor import failures

    monkeypatch.setattr(failures, "demangle", lambda symbol: None)
    assert failures.rejoined_symbol("_ZN3c104cuda9SetDevi", ["ceEi"]) == ("_ZN3c104cuda9SetDeviceEi", 1)
    assert failures.rejoined_symbol("_ZN3c104cuda9SetDeviceEi", ["ceEi"]) is None  # nothing shows a cut
    # and with nothing to read the name, the ABI is not ruled out
    assert "either" in failures.explain_undefined_symbol("_ZN3c104cuda9SetDeviceEi", None)


@needs_demangler
@pytest.mark.parametrize(("torch_abi", "expected"), [(True, "different torch release"), (False, "this torch uses the old ABI")])
def test_the_probed_torch_decides_the_side(torch_abi, expected):
    # what `explain --check --python PY` brings: that torch's ABI, probed
    live = Facts()
    live.torch = TorchInfo(version="2.13.0", cxx11_abi=torch_abi)
    m = _match(f"ImportError: {LIB}: undefined symbol: {CXX11}\n", live=live)
    assert expected in m.captures["side"] and "either" not in m.captures["side"]


def test_the_side_is_stated_only_where_it_can_be_told():
    assert "either" in explain_undefined_symbol(OLD, None) and "old pre-C++11 ABI" in explain_undefined_symbol(OLD, None)
    assert "either" not in explain_undefined_symbol(OLD, True)
