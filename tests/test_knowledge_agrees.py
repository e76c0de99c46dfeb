"""One piece of knowledge, one verdict: where a fact lives in two places (code and recipe prose, a
condition literal and attn_doctor/facts.py, the probe's classification of an import failure and
the signatures `explain` uses for the same message), the two are held to agree here."""

from __future__ import annotations

import re
import typing

import msgspec
import pytest
from conftest import load_facts
from packaging.version import Version

from attn_doctor.core import diagnose
from attn_doctor.explaining.fixtures import explained_rules, matching_rules
from attn_doctor.facts import BF16_NATIVE_FROM, ErrorKind, ImportResult, bf16_native
from attn_doctor.failures import classify
from attn_doctor.rules.checks.llamafactory_values import llamafactory_flash_attn_intent, llamafactory_flash_attn_values
from attn_doctor.rules.conditions import capability_matches
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()
# rules whose condition is an import-error kind of flash_attn, and whose signatures name the message
KIND_RULES = [r for r in RECIPES.rules if r.when is not None and r.when.import_error.get("flash_attn") and r.signatures]


@pytest.mark.parametrize("rule", KIND_RULES, ids=lambda r: r.id)
def test_messages_a_rule_explains_are_classified_as_the_kind_it_fires_on(rule):
    kinds = rule.when.import_error["flash_attn"]
    for message in rule.signature_fixtures.match:
        last = message.strip().splitlines()[-1]
        error_type, _, text = last.partition(": ")
        assert classify(error_type, text).kind in kinds, f"{rule.id}: {last!r} is classified {classify(error_type, text).kind}"


@pytest.mark.parametrize("module", ["flash_attn_2_cuda", "flash_attn_cuda", "flash_attn_3_cuda", "flash_attn_gpu"])
def test_every_missing_extension_the_probe_reports_is_explained_by_the_same_rule(module):
    message = f"No module named '{module}'"
    kind = classify("ModuleNotFoundError", message).kind
    fired = {r.id for r in KIND_RULES if kind in r.when.import_error["flash_attn"]}
    explained = set(matching_rules(RECIPES.rules, f"ModuleNotFoundError: {message}"))
    assert fired and fired <= explained, (kind, fired, explained)


# ---------------------------------------------------------------- native bf16 from compute capability 8.0

NATIVE_BF16_RULES = [r for r in RECIPES.rules if r.cause == "bf16-unsupported" and "native bf16" in r.title]


def _capability_specs(cond) -> list[str]:
    if cond is None:
        return []
    specs = [cond.capability] if cond.capability else []
    for sub in cond.any:
        specs += _capability_specs(sub)
    return specs + _capability_specs(cond.not_)


def test_the_no_native_bf16_rules_use_the_threshold_of_facts():
    """The condition vocabulary has no named constants: a rule states the capability range as a
    literal, and this holds each such literal to facts.BF16_NATIVE_FROM, by its meaning."""
    assert {"AD102", "AD406"} <= {r.id for r in NATIVE_BF16_RULES}
    major, minor = BF16_NATIVE_FROM
    probes = [f"{major - 1}.0", f"{major - 1}.5", f"{major}.{minor}", f"{major}.{minor + 6}", f"{major + 1}.0", f"{major + 4}.0"]
    for rule in NATIVE_BF16_RULES:
        (spec,) = _capability_specs(rule.when)
        for capability in probes:
            assert capability_matches(capability, spec) == (not bf16_native(capability)), (rule.id, spec, capability)


def test_recipe_prose_states_the_same_bf16_threshold():
    stated = {}
    for rule in RECIPES.rules:
        for text in (rule.title, rule.message or "", rule.explanation or ""):
            for m in re.finditer(r"native from compute capability (\d+)\.(\d+)", " ".join(text.split())):
                stated[rule.id] = (int(m.group(1)), int(m.group(2)))
    assert stated, "no rule states the threshold: the pattern above no longer finds it"
    assert all(v == BF16_NATIVE_FROM for v in stated.values()), stated


# ---------------------------------------------------------------- LLaMA-Factory's flash_attn spellings

_LIST = r"((?:`\w+`(?:,\s*|\s+or\s+|\s+and\s+)?)+)"
_V = r"(\d+\.\d+\.\d+)"


def _words(listed: str) -> set:
    return set(re.findall(r"`(\w+)`", listed))


def _before(version: str) -> str:
    """The last version before `version` that the claims' boundaries can tell apart."""
    major, minor, patch = (int(x) for x in version.split("."))
    return f"{major}.{minor}.{patch - 1}" if patch else f"{major}.{minor - 1}.99"


def _prose() -> dict[str, str]:
    """Rule id -> its text (title, message, explanation, remedies), where it speaks of flash_attn values."""
    out = {}
    for rule in RECIPES.rules:
        parts = [rule.title, rule.message or "", rule.explanation or ""] + [f"{r.summary} {r.detail or ''}" for r in rule.remedies]
        text = " ".join(" ".join(parts).split())
        if "flash_attn" in text and ("LLaMA-Factory" in text or "llamafactory" in text):
            out[rule.id] = text
    return out


def test_llamafactory_flash_attn_prose_agrees_with_the_table():
    """The recipes explain which `flash_attn` values each LLaMA-Factory release accepts; the check
    and `fix` use llamafactory_flash_attn_values(). Every version claim in the prose is held to it."""
    prose = _prose()
    exact, since, upto, checked = [], [], [], {}
    for rule_id, text in prose.items():
        claims = 0
        for m in re.finditer(_LIST + r"\s+in\s+" + _V + r"\s*-\s*" + _V, text):
            exact.append((_words(m.group(1)), m.group(2), m.group(3), rule_id))
            claims += 1
        for m in re.finditer(_LIST + r"\s+from\s+" + _V, text):
            since.append((_words(m.group(1)), m.group(2), rule_id))
            claims += 1
        for m in re.finditer(r"boolean up to (\d+\.\d+)|<= ?(\d+\.\d+)(?:\.x)? the option is a boolean", text):
            upto.append((m.group(1) or m.group(2), rule_id))
            claims += 1
        for m in re.finditer(r"flash_attn: (\w+) \(" + _V + r" and later", text):
            value, version = m.group(1), m.group(2)
            assert value in llamafactory_flash_attn_values(version), (rule_id, value, version)
            assert value not in llamafactory_flash_attn_values(_before(version)), (rule_id, value, version)
            claims += 1
        for m in re.finditer(r"`(\w+)` before " + _V, text):
            assert m.group(1) in llamafactory_flash_attn_values(_before(m.group(2))), (rule_id, m.group(0))
            claims += 1
        for m in re.finditer(r"flash_attn should be ((?:\"\w+\"(?:,\s*|\s+or\s+)?)+)", text):
            quoted = set(re.findall(r"\"(\w+)\"", m.group(1)))
            assert any(quoted == set(llamafactory_flash_attn_values(v)) for v in ("0.7.0", "0.8.3", "0.9.4")), (rule_id, quoted)
            claims += 1
        for m in re.finditer(r"USE_V1=1`?\)? takes " + _LIST, text):
            assert all(llamafactory_flash_attn_intent(w) for w in _words(m.group(1))), (rule_id, m.group(0))
            claims += 1
        checked[rule_id] = claims
    # The prose must still be found: a rewording that escapes these patterns would pass silently.
    assert checked.get("AD450", 0) >= 6 and checked.get("AD503", 0) >= 4 and checked.get("AD502", 0) >= 1, checked

    def stated(version: str) -> set:
        v = Version(version)
        out = set()
        for words, low, high, _ in exact:
            if Version(low) <= v <= Version(high):
                out |= words
        for words, low, _ in since:
            if Version(low) <= v:
                out |= words
        for bound, _ in upto:
            major, minor = (int(x) for x in bound.split("."))
            if v < Version(f"{major}.{minor + 1}"):
                out |= {True, False}
        return out

    boundaries = {b for _, low, high, _ in exact for b in (low, high)} | {low for _, low, _ in since}
    versions = sorted(boundaries | {_before(b) for b in boundaries} | {"0.6.3", "99.0.0"}, key=Version)
    for version in versions:
        assert stated(version) == set(llamafactory_flash_attn_values(version)), (version, stated(version))


# ---------------------------------------------------------------- import failures: the probe and explain

SO = "/opt/venv/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"
IMPORT_FAILURES = [  # (exception type, message) as `import flash_attn` raises them
    ("ImportError", f"{SO}: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"),
    ("ImportError", f"{SO}: undefined symbol: _ZN3c104cuda9SetDeviceEi"),
    ("ModuleNotFoundError", "No module named 'flash_attn_2_cuda'"),
    ("ModuleNotFoundError", "No module named 'flash_attn_gpu'"),
    ("ModuleNotFoundError", "No module named 'flash_attn_3._C'"),
    ("ImportError", "libcudart.so.11.0: cannot open shared object file: No such file or directory"),
    ("ImportError", "libcublasLt.so.13: cannot open shared object file: No such file or directory"),
    ("ImportError", "libc10.so: cannot open shared object file: No such file or directory"),
    ("ImportError", "libtorch_cuda.so: cannot open shared object file: No such file or directory"),
    ("ImportError", "libcuda.so.1: cannot open shared object file: No such file or directory"),
    ("ImportError", f"/lib64/libc.so.6: version `GLIBC_2.32' not found (required by {SO})"),
    ("ImportError", f"/lib64/libc.so.6: GLIBC_2.32' not found (required by {SO})"),
    ("ImportError", f"/lib64/libc.so.6: `GLIBC_2.34' not found (required by {SO})"),
    ("ImportError", f"/usr/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by {SO})"),
    ("ImportError", f"/opt/conda/lib/libstdc++.so.6: version `CXXABI_1.3.13' not found (required by {SO})"),
    ("RuntimeError", "CUDA driver version is insufficient for CUDA runtime version"),
    ("ModuleNotFoundError", "No module named 'flash_attn'"),
    ("AttributeError", "module 'torch.library' has no attribute 'custom_op'"),
]
_BASE = load_facts("flash-attn-undefined-symbol")


def _fired_by(error) -> set:
    """The rules `check` fires because flash_attn's import failed with `error` (None: it imported)."""
    result = ImportResult(status="error", error=error) if error is not None else ImportResult(status="ok", version="2.8.3")
    facts = msgspec.structs.replace(_BASE, imports={**_BASE.imports, "flash_attn": result})
    return {r.rule for r in diagnose(facts, RECIPES, source="facts-file").results if r.status in ("error", "warning")}


@pytest.fixture(scope="module")
def verdicts():
    quiet = _fired_by(None)
    generic = _fired_by(classify("AttributeError", "module 'torch.library' has no attribute 'custom_op'")) - quiet
    out = []
    for error_type, message in IMPORT_FAILURES:
        err = classify(error_type, message)
        fired = _fired_by(err) - quiet
        likely = {rule for rule, how in explained_rules(f"{error_type}: {message}", RECIPES).items() if how != "unlikely"}
        out.append((err.kind, message, fired - generic, likely))
    specific = set().union(*(rules for _, _, rules, _ in out))
    return generic, specific, out


# flash-attn's readings of a loader's line, and the same line's reading for any package: the probe
# knows flash_attn raised it, the bare line does not say so
_FLASH_SPECIALISES = {"AD303": "AD418", "AD304": "AD459"}


def _specialises(rule: str, likely: set, message: str) -> bool:
    """`rule` is flash-attn's reading of a line that names no flash-attn, and explain named the
    general rule of the same cause that `rule` supersedes."""
    general = _FLASH_SPECIALISES.get(rule)
    return (general in likely and "flash_attn" not in message and general in (RECIPES.get(rule).supersedes or ())
            and RECIPES.get(general).cause == RECIPES.get(rule).cause)


def test_every_import_failure_kind_agrees_with_explain(verdicts):
    """A probed import failure and the same text given to `explain` get one cause: the rule that
    `check` fires for the probe's classification is among explain's verdicts; and where the
    probe finds no specific kind, explain names none of the causes those kinds stand for."""
    generic, specific, out = verdicts
    assert len(generic) == 1 and specific, (generic, specific)
    kinds = {kind for kind, _, _, _ in out}
    assert kinds == set(typing.get_args(ErrorKind)), kinds  # every classification is exercised
    for kind, message, fired, likely in out:
        if fired:
            # explain, given the bare line, may name the general rule of the same cause that check's
            # rule specialises (the probe knows flash_attn raised it; the line alone does not say so)
            unmatched = {r for r in fired if r not in likely and not _specialises(r, likely, message)}
            assert not unmatched, (kind, message, fired, likely)
        else:
            assert not likely & specific, (kind, message, likely & specific)
            if kind == "cuda_init":  # no flash-attn rule of its own: explain must still see a driver problem
                assert any(RECIPES.get(r).cause == "driver" for r in likely), (message, likely)


@pytest.mark.parametrize(
    "message, symbol",
    [
        (f"/lib64/libc.so.6: version `GLIBC_2.32' not found (required by {SO})", "GLIBC_2.32"),
        (f"/lib64/libc.so.6: GLIBC_2.32' not found (required by {SO})", "GLIBC_2.32"),  # a launcher ate "version `"
        ("`GLIBC_2.34' not found", "GLIBC_2.34"),
        ("GLIBC_2.28 not found", "GLIBC_2.28"),
        ("version 'GLIBC_2.38' was not found", "GLIBC_2.38"),
    ],
)
def test_glibc_is_recognised_without_the_word_version(message, symbol):
    err = classify("ImportError", message)
    assert (err.kind, err.symbol) == ("glibc", symbol)
    assert err.library == (SO if "required by" in message else None)


@pytest.mark.parametrize("message", ["GLIBC_2.32 found", "checking GLIBC_2.32 ... not found later", "version `GLIBCXX_3.4.30' not found"])
def test_what_is_not_an_old_glibc(message):
    assert classify("ImportError", message).kind == "other"
