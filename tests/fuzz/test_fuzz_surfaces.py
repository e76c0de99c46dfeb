"""The input surfaces the other fuzz modules do not cover, each with depth, size, encoding and type
attacks: TOML configs (torchtune, torchtitan, LitGPT read TOML), configs nested thousands of levels
deep, cache entries (a shared folder others write to), the reports ranks upload for
`check --distributed` (compressed JSON on the store), and recipe folders (`--recipes DIR`). Each bad
input is one line of its own kind (a config error, an entry read as absent, a ValueError naming
the rank's upload, a RecipeError); nothing else may raise."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_doctor import cache
from attn_doctor.fleet.distributed import _rank_report
from attn_doctor.rules.loader import RecipeError, load_recipes

from .conftest import fuzz_settings
from .strategies import TEXT, json_values
from .test_fuzz_configs import judge

# ---------------------------------------------------------------- hostile documents

DEPTHS = st.sampled_from([1, 50, 999, 1000, 1001, 5000, 100_000])


def nested_json(depth: int, leaf: str = "1") -> str:
    return '{"a":' * depth + leaf + "}" * depth


def nested_list(depth: int) -> str:
    return "[" * depth + "]" * depth


@st.composite
def toml_docs(draw):
    """TOML text: real keys with hostile values, deep inline tables and arrays, long strings,
    duplicate keys, and bytes that are not UTF-8."""
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        key = draw(st.sampled_from(["dtype", "mixed_precision_param", "attn_implementation", "precision", "model.name",
                                    "training.mixed_precision_param", "compile", "flash_attn", "bf16"]))
        value = draw(st.one_of(
            st.sampled_from(['"bfloat16"', '"float32"', "true", "1e400", "nan", '"\\u0000"', "[", "{a = 1", "'''",
                             '"' + "x" * 10_000 + '"', "0x80", "1979-05-27T07:32:00Z"]),
            st.integers(1, 3000).map(lambda d: "[" * d + "]" * d),
            st.integers(1, 3000).map(lambda d: "{a = " * d + "1" + "}" * d),
            TEXT.map(json.dumps),
        ))
        lines.append(f"{key} = {value}")
    if draw(st.booleans()):
        lines.insert(0, draw(st.sampled_from(["[training]", "[model]", "[[job]]", "[a.b.c]", "[", "[]"])))
    text = "\n".join(lines).encode("utf-8", "surrogatepass")
    return text + draw(st.sampled_from([b"", b"\n", b"\xff\xfe", b"\x00", b"\xc3("]))


@fuzz_settings(150)
@given(toml_docs(), st.sampled_from(["t4", "h100", "cpu-only"]))
def test_toml_configs(work, data, machine):
    judge(work, data, ".toml", machine)


@fuzz_settings(20)
@given(DEPTHS, st.sampled_from([".json", ".yaml", ".toml"]))
def test_configs_nested_deep(work, depth, suffix):
    text = {".json": nested_json(depth), ".yaml": nested_list(depth), ".toml": "a = " + nested_list(depth)}[suffix]
    judge(work, text.encode(), suffix)


# ---------------------------------------------------------------- cache entries


@fuzz_settings(150)
@given(st.one_of(
    st.binary(max_size=3000),
    json_values(20).map(lambda v: json.dumps(v).encode()),
    DEPTHS.map(lambda d: nested_json(d).encode()),
    DEPTHS.map(lambda d: nested_list(d).encode()),
    st.sampled_from([b"\xef\xbb\xbf{}", "{\"a\": \"\udcff\"}".encode("utf-8", "surrogatepass"), b"{" * 10, b"null"]),
))
def test_cache_entries_are_read_or_set_aside_never_raise(work, data):
    path = work / "entry.json"
    path.write_bytes(data)
    doc, owner, why = cache._read_bounded(path)
    assert (doc is None) == (why is not None), (doc, why)
    assert doc is None or isinstance(doc, dict)
    assert why is None or "\n" not in why


# ---------------------------------------------------------------- ranks' uploads


@fuzz_settings(150)
@given(st.one_of(
    st.binary(max_size=2000),
    json_values(20).map(lambda v: zlib.compress(json.dumps(v).encode())),
    DEPTHS.map(lambda d: zlib.compress(nested_json(d).encode())),
    DEPTHS.map(lambda d: zlib.compress(('{"schema": "attn-doctor/report", "facts": ' + nested_list(d) + "}").encode())),
    st.integers(1, 64).map(lambda mib: zlib.compress(b" " * (mib << 20), 9)),  # a bomb, inflated past the bound
), TEXT)
def test_a_ranks_upload_is_a_report_or_one_value_error(data, digest):
    try:
        _rank_report(data, digest)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc), str(exc)


# ---------------------------------------------------------------- recipe folders


@fuzz_settings(60)
@given(st.one_of(
    st.binary(max_size=1500),
    toml_docs(),
    DEPTHS.map(lambda d: ("[[rule]]\nid = \"AD999\"\nwhen = " + "{ all = [" * d + "]}" * d).encode()),
    st.sampled_from([b"[[rule]]\nid = 1\n", b"[[rule]]\n", b"rule = 3\n", b"[[rule]]\nid = \"AD999\"\nseverity = \"boom\"\n"]),
))
def test_a_recipe_folder_loads_or_is_one_recipe_error(work, data):
    folder = work / "recipes"
    folder.mkdir(exist_ok=True)
    (folder / "mine.toml").write_bytes(data)
    try:
        load_recipes(folder)
    except RecipeError as exc:
        assert str(exc) and "\n" not in str(exc).strip(), str(exc)


# ---------------------------------------------------------------- the same, through the CLI


def test_the_cli_says_a_deep_recipe_file_in_one_line_and_a_deep_cache_entry_costs_nothing(tmp_path):
    import os
    import subprocess
    import sys

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "mine.toml").write_text("a = " + nested_list(100_000))
    env = dict(os.environ, ATTN_DOCTOR_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--quick", "--recipes", str(recipes)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and proc.stderr.strip() == "attn-doctor: error: mine.toml: nested too deep to be a recipe"
    # every entry of a shared cache folder replaced by a hostile one: the check runs, computes again
    cache_root = tmp_path / "cache"
    first = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--json", "--cache-dir", str(cache_root),
                            "--no-smoke"], capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode in (0, 1), first.stderr
    entries = [p for p in cache_root.rglob("*.json") if p.is_file()]
    assert entries
    for entry in entries:
        entry.write_text(nested_json(100_000))
    again = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--json", "--cache-dir", str(cache_root),
                            "--no-smoke"], capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode in (0, 1) and "Traceback" not in again.stderr, again.stderr[-2000:]
    assert json.loads(again.stdout)["facts"]["dtype_path"]["status"] == "ok"
