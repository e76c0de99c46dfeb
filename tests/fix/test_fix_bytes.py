"""Edits touch only what they change (issue 53, item 8), byte for byte, on every real config file of
the fixtures (tests/fixtures/configs/real/, longtail/, generic/): every remedy each file's reader
offers is written as fix writes it, and the result differs from the file only on the lines of the
keys it sets (the value replaced where it sits, a new key on a line of its own beside its siblings,
a new JSON block or TOML table around it); every other byte (numbers such as 5e8, quotes, comments,
blank lines, key order) stays as written, and the file reads back with exactly the settings asked.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest

from attn_doctor.fix.edits import EditError, apply_settings
from attn_doctor.fix.text_edits import json_set, toml_set
from attn_doctor.probes.configs import probe_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
FILES = sorted(p for folder in ("real", "longtail", "generic") for p in (CONFIGS / folder).rglob("*")
               if p.is_file() and p.suffix.lower() in (".json", ".yaml", ".yml", ".toml"))


def _edits():
    out = []
    for path in FILES:
        config = probe_config(str(path), {})
        for intent, settings in sorted(config.edits.items()):
            if settings:
                out.append(pytest.param(path, intent, settings, id=f"{path.relative_to(CONFIGS)}:{intent}"))
    return out


EDITS = _edits()


def _leaves(settings: dict) -> set[str]:
    return {key.rsplit(".", 1)[-1] for key in settings} | {part for key in settings for part in key.split(".")}


def _only_the_keys_changed(old: str, new: str, settings: dict) -> None:
    leaves = _leaves(settings)
    a, b = old.splitlines(True), new.splitlines(True)
    structural = {"{", "}", "},", "", "[", "]"}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        removed, added = a[i1:i2], b[j1:j2]
        for line in removed:
            # a replaced line is one of an edited key, or the line before a JSON insertion (its comma)
            assert any(leaf in line for leaf in leaves) or line.rstrip().endswith(("}", "]", '"', "e", "0", "1", "2", "3", "4",
                                                                                   "5", "6", "7", "8", "9", "l")), (line, settings)
        for line in added:
            text = line.strip()
            assert any(leaf in line for leaf in leaves) or text in structural or text.startswith("[") or text.rstrip(",") in {
                r.strip().rstrip(",") for r in removed}, (line, settings)
        if tag == "replace" and len(removed) == len(added):
            for before, after in zip(removed, added):
                # the key's indentation and what follows the value (a comment) stay as written
                assert before[: len(before) - len(before.lstrip())] == after[: len(after) - len(after.lstrip())]
                comment = re.search(r"\s#.*", before)
                if comment and any(leaf in before for leaf in leaves):
                    assert after.rstrip("\n").endswith(comment.group().rstrip("\n")), (before, after)


@pytest.mark.parametrize("path, intent, settings", EDITS)
def test_an_edit_changes_only_the_lines_of_its_keys(path, intent, settings):
    old = path.read_bytes()
    try:
        new = apply_settings(path, old, settings)
    except EditError as exc:
        # what cannot be placed safely is said, one line, and nothing is written
        assert "\n" not in str(exc) and "by hand" in str(exc), exc
        pytest.skip(f"by hand: {exc}")
    assert new != old or all(_already(path, key, value) for key, value in settings.items())
    _only_the_keys_changed(old.decode("utf-8"), new.decode("utf-8"), settings)


def _already(path: Path, key: str, value) -> bool:
    from attn_doctor.probes.configs import load_document
    from attn_doctor.probes.configs.plan import get

    return get(load_document(path), key) == value


def test_most_offered_edits_are_written_in_place():
    placed = 0
    for param in EDITS:
        path, _intent, settings = param.values
        try:
            apply_settings(path, path.read_bytes(), settings)
            placed += 1
        except EditError:
            pass
    assert len(EDITS) >= 300 and placed >= 0.9 * len(EDITS), (placed, len(EDITS))


def test_json_numbers_quotes_and_order_stay_as_written():
    text = '{\n  "a": 5e8,\n  "b": {"enabled": true, "x": 1.50},\n  "c": "\\u00e9t\\u00e9",\n  "d": -0.0\n}\n'
    new = json_set(text, {"b.enabled": False, "e.enabled": True})
    assert new == ('{\n  "a": 5e8,\n  "b": {"enabled": false, "x": 1.50},\n  "c": "\\u00e9t\\u00e9",\n  "d": -0.0,\n'
                   '  "e": {\n    "enabled": true\n  }\n}\n'), new
    assert json.loads(new)["a"] == 5e8


def test_toml_values_are_replaced_on_their_line_comments_kept():
    text = ("# torchtitan\n[training]\nmixed_precision_param = 'bfloat16'  # FSDP's param dtype\nsteps = 1_000\n\n"
            "[model]\nconverters = [\"float8\"]  # fp8 linears\nname = \"llama3\"\n")
    new = toml_set(text, {"training.mixed_precision_param": "float32", "model.converters": [], "training.tf32": False})
    assert new == ("# torchtitan\n[training]\nmixed_precision_param = 'float32'  # FSDP's param dtype\nsteps = 1_000\ntf32 = false\n\n"
                   "[model]\nconverters = []  # fp8 linears\nname = \"llama3\"\n"), new
