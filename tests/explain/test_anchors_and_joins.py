"""How a signature reaches a line: a stated anchor in place of a common word, no join over lines for
a short message whose anchor most log lines hold, no join into a line that starts a message of its
own, and evidence as the line was written (its spacing and punctuation kept)."""

from __future__ import annotations

import io

import pytest

from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import load_recipes
from attn_doctor.rules.model import Signature
from attn_doctor.rules.signatures import SignatureError, compile_signature

RECIPES = load_recipes()


def _explain(text: str):
    return explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="text")


def test_a_stated_anchor_replaces_the_patterns_own_and_must_be_one_of_its_literals():
    sig = compile_signature("AD660", Signature(pattern=r"\bloss is nan\b", anchors=["nan"], join=False))
    assert sig.anchors == ["nan"] and not sig.joinable
    with pytest.raises(SignatureError):
        compile_signature("AD660", Signature(pattern=r"\bloss is nan\b", anchors=["inf"]))


def test_loss_lines_of_a_training_log_are_not_each_tried_as_a_wrapped_message(monkeypatch):
    from attn_doctor.explaining import scan as scan_mod

    joins = []
    original = scan_mod.Scanner._joined
    monkeypatch.setattr(scan_mod.Scanner, "_joined", lambda self, *a: joins.append(a[-2]) or original(self, *a))
    log = "".join("{'loss': 0.%04d, 'grad_norm': 3.9, 'learning_rate': 1.9e-05, 'epoch': 0.0}\n" % i for i in range(500))
    report = _explain("--fp16 run\n" + log + "step 501: loss is nan\n")
    assert [m.rule for m in report.matches][:1] == ["AD660"]
    assert not [t for t in joins if t.startswith("{'loss'")], joins[:3]


def test_a_line_that_starts_an_exception_is_never_joined_into_the_previous_message():
    # Transformer Engine's assertion after the line that asserted: one message, one occurrence
    text = (" assert fp8_available, reason_for_no_fp8\n"
            "AssertionError: Device compute capability 8.9 or higher required for FP8 execution.\n")
    (match,) = [m for m in _explain(text).matches if m.rule == "AD111"]
    assert [e.line for e in match.evidence] == [2]


def test_evidence_keeps_the_line_as_written():
    text = "ptxas /tmp/x, line 523; error   : Feature '.bf16' requires .target sm_80 or higher\n"
    match = _explain(text).matches[0]
    assert "error   : Feature" in match.evidence[0].text


def test_anchors_are_kept_for_the_next_run_and_expressions_compiled_only_when_met(tmp_path, monkeypatch):
    """Finding the anchors parses every expression: they are kept in the user's private cache, keyed by
    the signatures' text, and the next run compiles only the expressions a line's anchors call for. A
    kept copy that does not fit (edited, truncated, another recipe set) is not used: all compiled again."""
    import msgspec

    from attn_doctor.explaining import scan
    from attn_doctor.rules.loader import read_kept
    from attn_doctor.rules.signatures import LazyPattern, compile_rules, signatures_key

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    sig_rules = [r for r in load_recipes().rules if r.signatures]
    text = "RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n"
    first = scan.compiled_signatures(sig_rules)
    assert not any(isinstance(s.regex, LazyPattern) for s in first)  # nothing kept yet: compiled and checked
    kept = tmp_path / "home-cache" / "attn-doctor" / "recipes" / scan.ANCHORS_FILE
    assert kept.is_file() and kept.stat().st_mode & 0o077 == 0
    second = scan.compiled_signatures(sig_rules)
    assert all(isinstance(s.regex, LazyPattern) for s in second)
    assert [(s.anchors, s.context_anchors) for s in first] == [(s.anchors, s.context_anchors) for s in second]
    fresh = load_recipes()
    report = explain(io.BytesIO(text.encode()), fresh, kind="text")
    assert [m.rule for m in report.matches][:1] == [m.rule for m in _explain(text).matches][:1] == ["AD103"]
    _, scanner = fresh.__dict__["_explain_scanners"][False]
    met = [s for s in scanner.signatures if s.regex._compiled is not None]
    assert 0 < len(met) < len(scanner.signatures) // 4, len(met)
    # a kept copy whose entries do not fit these signatures: ignored
    doc = msgspec.msgpack.decode(kept.read_bytes())
    doc["data"]["anchors"] = doc["data"]["anchors"][:-1]
    kept.write_bytes(msgspec.msgpack.encode(doc))
    assert not any(isinstance(s.regex, LazyPattern) for s in compile_rules(sig_rules, read_kept(
        scan.ANCHORS_FILE, signatures_key(sig_rules))))
    # another set of signatures (a rule edited) has another key
    assert signatures_key(sig_rules[1:]) != signatures_key(sig_rules)
