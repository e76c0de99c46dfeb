"""Every rule fires on its trigger fixtures and stays quiet on its pass fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from attn_doctor.diagnosis.fixtures import check_rule_fixtures
from attn_doctor.explaining.fixtures import check_signature_fixtures
from attn_doctor.rules.fixtures import build_facts
from attn_doctor.rules.loader import RecipeError, load_recipes

RECIPES = load_recipes(signatures=True)  # the shipped recipes, every signature compiled and validated
FIXTURES = Path(__file__).parent / "fixtures" / "facts"


@pytest.mark.parametrize("rule", RECIPES.rules, ids=lambda r: f"{r.id}-{r.name}")
def test_rule_fixtures(rule):
    failures = check_rule_fixtures(rule, RECIPES, FIXTURES, signature_fixtures=check_signature_fixtures)
    assert not failures, "\n".join(str(f) for f in failures)


def test_a_signature_only_rule_is_not_passed_unchecked():
    # Its log snippets are checked by explain (above the rules): without that checker, a failure.
    rule = next(r for r in RECIPES.rules if r.when is None)
    assert [f.got for f in check_rule_fixtures(rule, RECIPES, FIXTURES)] == ["not checked"]


def test_ids_and_names_are_stable_shapes():
    for rule in RECIPES.rules:
        assert rule.id.startswith("AD") and rule.id[2:].isdigit() and len(rule.id) == 5, rule.id
        assert rule.name == rule.name.lower() and " " not in rule.name, rule.name
        assert rule.explanation.strip() and rule.title.strip()


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_recorded_fixtures_load(path):
    facts = build_facts(path.stem, FIXTURES)
    assert facts.platform.python_version


def test_fixture_runner_catches_a_rule_that_does_not_fire(tmp_path):
    # The runner itself must be able to fail: a rule whose condition can never hold.
    (tmp_path / "bad.toml").write_text(
        """
[[rule]]
id = "AD999"
name = "never"
area = "system"
severity = "error"
title = "t"
message = "m"
explanation = "e"
when = { version = { "torch" = "<0.1" } }
pass = "torch is not older than 0.1"
[rule.fixtures]
trigger = ["h100"]
pass = ["cpu-only"]
"""
    )
    recipes = load_recipes(tmp_path)
    failures = check_rule_fixtures(recipes.rules[0], recipes, FIXTURES)
    assert [f.expected for f in failures] == ["trigger"]


def test_fixture_with_misspelt_fact_is_refused(tmp_path):
    (tmp_path / "r.toml").write_text(
        """
[[rule]]
id = "AD998"
name = "typo"
area = "system"
severity = "error"
title = "t"
message = "m"
explanation = "e"
when = { torch = ["missing"] }
pass = "torch is installed"
[rule.fixtures]
trigger = [{ base = "h100", set = { "torch.statuss" = "missing" } }]
pass = ["h100"]
"""
    )
    recipes = load_recipes(tmp_path)
    failures = check_rule_fixtures(recipes.rules[0], recipes, FIXTURES)
    assert failures and "not a fact" in failures[0].detail


@pytest.mark.parametrize(
    "body, message",
    [
        ('[[rule]]\nid = "AD1"\n', "Object missing required field"),
        ("not = toml = at all", "not valid TOML"),
        (
            '[[rule]]\nid="AD900"\nname="x"\narea="gpu"\nseverity="fatal"\ntitle="t"\nmessage="m"\nexplanation="e"\nwhen={}\n',
            "Invalid enum value 'fatal'",
        ),
        (
            '[[rule]]\nid="AD900"\nname="x"\narea="gpu"\nseverity="error"\ntitle="t"\nmessage="m"\nexplanation="e"\nwhen={ versions = {} }\n',
            "unknown field `versions`",
        ),
        (
            '[[rule]]\nid="AD900"\nname="x"\narea="gpu"\nseverity="error"\ntitle="t"\nmessage="m"\nexplanation="e"\nwhen={ version = { torch = "~=banana" } }\n',
            "invalid version specifier",
        ),
        (
            '[[rule]]\nid="AD900"\nname="x"\narea="gpu"\nseverity="error"\ntitle="t"\nmessage="m"\nexplanation="e"\nwhen={ check = "no_such_check" }\n',
            "unknown check 'no_such_check'",
        ),
    ],
)
def test_invalid_recipes_are_named(tmp_path, body, message):
    (tmp_path / "broken.toml").write_text(body)
    with pytest.raises(RecipeError) as err:
        load_recipes(tmp_path)
    assert "broken.toml" in str(err.value)
    assert message in str(err.value)


def test_a_rule_with_a_condition_says_what_holds_when_it_passes(tmp_path):
    (tmp_path / "r.toml").write_text(
        """
[[rule]]
id = "AD997"
name = "silent-pass"
area = "system"
severity = "error"
title = "PyTorch is not installed"
message = "m"
explanation = "e"
when = { torch = ["missing"] }
"""
    )
    with pytest.raises(RecipeError, match="needs `pass`"):
        load_recipes(tmp_path)


def test_passing_checks_read_true():
    # -v lists passing checks by what holds, not by the problem's title
    from attn_doctor.core import diagnose

    report = diagnose(build_facts("h100", FIXTURES), RECIPES)
    passed = {r.rule: r.message for r in report.results if r.status == "pass"}
    assert passed["AD001"].startswith("torch 2.11.0") and passed["AD001"].endswith("is installed")
    assert passed["AD101"] == "an NVIDIA GPU is present: NVIDIA H100 80GB HBM3 (sm90)"
    assert all(passed.values())



# Lines a log can hold (binary dumps, progress bars, base64, one long path) at the size the scanner
# keeps around a hit (LINE_WINDOW bytes each side, neighbours joined for wrapped messages).
_HOSTILE = ["x" * 20000, "a1_" * 7000, " ".join(["word"] * 4000), "/".join(["abc"] * 5000), "." * 20000,
            "ab cd" * 4000, "-" * 20000, "0" * 20000, ":" * 20000, "'" * 20000, "sm_" * 7000]


@pytest.mark.parametrize("rule", [r for r in RECIPES.rules if r.signatures], ids=lambda r: r.id)
def test_signatures_search_long_lines_in_linear_time(rule):
    # A pattern that opens with an unanchored `\w+` or `[...]+` restarts at every character of a
    # long run and costs O(n^2): seconds per line, so a 25-line log took minutes. Anchor its start
    # (`\b`, a look-behind) or bound it. Linear patterns take < 30 ms here; quadratic ones took 0.5-3 s.
    import re
    import time

    for sig in rule.signatures:
        pattern = sig if isinstance(sig, str) else sig.pattern
        regex = re.compile(pattern)
        for line in _HOSTILE:
            start = time.perf_counter()
            regex.search(line)
            took = time.perf_counter() - start
            assert took < 0.25, f"{rule.id} {pattern!r} took {took:.2f} s on {line[:9]!r}... ({len(line)} chars)"


def test_shipped_signatures_are_validated_here_and_skipped_on_the_check_path(monkeypatch):
    # check does not compile explain's signatures (~0.3 s); this suite validates the shipped ones
    # (RECIPES above), and a folder someone names (--recipes DIR) is validated whole.
    from attn_doctor.rules import signatures
    from attn_doctor.rules.loader import default_recipes_dir

    compiled = []
    real = signatures.compile_signature
    monkeypatch.setattr(signatures, "compile_signature", lambda *a: compiled.append(a) or real(*a))
    load_recipes()
    assert compiled == []
    load_recipes(default_recipes_dir())
    assert len(compiled) >= len([r for r in RECIPES.rules if r.signatures])


def _named_checks(cond) -> set:
    if cond is None:
        return set()
    names = {cond.check} if cond.check else set()
    for sub in [*cond.any, cond.not_]:
        names |= _named_checks(sub)
    return names


def test_each_check_is_registered_once_from_its_area_and_named_by_a_recipe():
    from attn_doctor.rules.checks import AREAS, CHECKS

    listed = [fn for area in AREAS for fn in area.CHECKS]
    assert len(listed) == len(CHECKS), "two areas register a check of the same name"
    for area in AREAS:
        for fn in area.CHECKS:
            assert fn.__module__ == area.__name__, f"{area.__name__} registers {fn.__name__} from {fn.__module__}"
    named = set().union(*(_named_checks(rule.when) for rule in RECIPES.rules))
    assert named == set(CHECKS)


def test_an_unknown_check_inside_not_is_named_with_every_known_check(tmp_path):
    from attn_doctor.rules.checks import CHECKS

    (tmp_path / "broken.toml").write_text(
        '[[rule]]\nid="AD900"\nname="x"\narea="gpu"\nseverity="error"\ntitle="t"\nmessage="m"\nexplanation="e"\n'
        'when={ gpu = "present", not = { check = "no_such_check" } }\n'
    )
    with pytest.raises(RecipeError) as err:
        load_recipes(tmp_path)
    assert f"unknown check 'no_such_check' (known: {', '.join(sorted(CHECKS))})" in str(err.value)


def test_the_parsed_recipes_are_kept_for_the_next_load_and_only_for_the_same_files(tmp_path, monkeypatch):
    """A load keeps tomllib's parse in the user's private cache folder; the next load of the same files takes it
    (a kept copy edited by hand shows through), an edited recipe file is parsed again, and a kept
    copy that others can write, or that is corrupt, is not read."""
    import os
    import shutil

    import msgspec

    from attn_doctor.rules import loader

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))  # the user's own cache folder
    monkeypatch.setenv("ATTN_DOCTOR_CACHE_DIR", str(tmp_path / "shared"))  # a shared one: never used for this
    recipes = tmp_path / "recipes"
    shutil.copytree(loader.default_recipes_dir(), recipes)
    first = loader.load_recipes(recipes, signatures=False)
    kept = tmp_path / "home-cache" / "attn-doctor" / "recipes" / loader.PARSED_FILE
    assert not (tmp_path / "shared").exists()
    assert kept.is_file() and kept.stat().st_mode & 0o077 == 0
    doc = msgspec.msgpack.decode(kept.read_bytes())
    rule = first.rules[0]
    source = first.sources[rule.id].name
    (entry,) = [r for r in doc["data"][source]["rule"] if r["id"] == rule.id]
    entry["title"] = "taken from the kept parse"
    kept.write_bytes(msgspec.msgpack.encode(doc))
    assert loader.load_recipes(recipes, signatures=False).get(rule.id).title == "taken from the kept parse"

    os.chmod(kept, 0o666)  # others may write it: not read
    assert loader.load_recipes(recipes, signatures=False).get(rule.id).title == rule.title
    kept.write_bytes(b"\x92not msgpack at all")  # corrupt: not read
    os.chmod(kept, 0o600)
    assert loader.load_recipes(recipes, signatures=False).get(rule.id).title == rule.title

    path = recipes / source  # an edited recipe is parsed again (and kept again)
    text = path.read_text()
    path.write_text(text.replace(f'title = "{rule.title}"', 'title = "edited in the file"', 1))
    assert loader.load_recipes(recipes, signatures=False).get(rule.id).title == "edited in the file"
    assert loader.load_recipes(recipes, signatures=False).get(rule.id).title == "edited in the file"


# Lines every healthy training log is made of: a signature any of whose anchors is in them is searched with its full expression on every such line (a bare "inf" is in every INFO
# line: explain took 2.35 s on bench_explain's 104 MB log where it takes 0.55 s).
_HEALTHY = [
    "[2026-11-22 10:01:03,123] INFO [trainer.py:3] step 3 loss 2.31 lr 1e-4 grad_norm 0.84 throughput 1573.8 tokens/s mem 61.2GiB",
    "{'loss': 2.3125, 'grad_norm': 1.0398, 'learning_rate': 1.9e-05, 'epoch': 0.12}",
    "Epoch 1/3: 100%|██████████| 500/500 [02:13<00:00,  3.75it/s, loss=2.31, v_num=0]",
    "INFO:root:Saving checkpoint to /ckpt/step_1000",
    "[rank0]: 2026-11-22 10:01:03 - INFO - train - iteration 1000/5000 | consumed samples 64000 | elapsed time per iteration (ms): 812.3",
]


def test_no_signature_is_searched_on_the_lines_of_a_healthy_training_log():
    from attn_doctor.rules.signatures import compile_rules

    lines = [line.lower() for line in _HEALTHY]
    woken = [(sig.pattern[:60], [a for a in sig.anchors if any(a.lower() in line for line in lines)])
             for sig in compile_rules(RECIPES.rules)]
    assert [w for w in woken if w[1]] == []
