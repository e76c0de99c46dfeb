"""Fuzzing the config parsers (`--config`: LLaMA-Factory YAML, a model's config.json, accelerate,
DeepSpeed): the reader and kind detection, the checks that judge them against a machine, the
attention shapes given to the smoke probe, and the plan `fix --dry-run` would show. A config that
cannot be used is a ConfigFile with status "error" and a one-line reason; nothing may raise."""

from __future__ import annotations

import io
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from ruamel.yaml import YAML

from attn_doctor.core import diagnose
from attn_doctor.gather import load_facts_file
from attn_doctor.fix.plan import Options, build_plan
from attn_doctor.probes.configs import attention_shapes, probe_config
from attn_doctor.render.human import render
from attn_doctor.schemas import to_json
from attn_doctor.rules.loader import load_recipes

from .conftest import fuzz_settings
from .strategies import SCALARS, TEXT, dumps, json_values

FACTS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
CONFIGS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
RECIPES = load_recipes()
MACHINES = {name: load_facts_file(FACTS_DIR / f"{name}.json") for name in ("t4", "h100", "cpu-only")}

# The keys each kind is detected from and judged on.
KEYS = [
    "model_name_or_path", "stage", "finetuning_type", "flash_attn", "bf16", "fp16", "pure_bf16", "template", "dataset",
    "model_type", "architectures", "torch_dtype", "dtype", "attn_implementation", "_attn_implementation", "head_dim",
    "hidden_size", "num_attention_heads", "text_config", "compute_environment", "distributed_type", "mixed_precision",
    "num_processes", "use_cpu", "zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu", "bfloat16",
    "enabled",
]
KEY = st.one_of(st.sampled_from(KEYS), TEXT)
VALUE = st.one_of(
    SCALARS,
    json_values(8),
    st.dictionaries(st.sampled_from(["enabled", "head_dim", "hidden_size", "num_attention_heads", "torch_dtype"]), SCALARS, max_size=3),
)
DOCS = st.dictionaries(KEY, VALUE, max_size=8)

# YAML 1.1 spellings that mean something else than they look (booleans, octal, sexagesimal,
# timestamps, tags, anchors) and text that is not YAML at all.
RAW_YAML_VALUES = st.one_of(
    st.sampled_from([
        "off", "On", "YES", "n", "y", "~", "null", "0x80", "0o17", "017", "1_000", "1:30", "190:20:30", "2024-01-01",
        "2001-12-14t21:59:43.10-05:00", ".nan", ".inf", "-.inf", "!!binary aGk=", "!!timestamp 2001-12-14", "!!str 128",
        "!!int 128", "!!float 1", "!!python/object:os.system", "!!set {a, b}", "!!omap [a: 1]", "&a fa2", "*a", "*nosuch",
        "[1, 2", "{a: 1}", "{a: 1", '"unterminated', "'a''b'", '"\\0\\x00\\uffff"', "|\n  block\n  text", ">-\n  folded",
        "? complex\n: key", "- a\n- b", "%YAML 1.2", "---", "...", "\t", "@reserved", "`backtick", "a: b: c",
        "[[[[[[[[[[]]]]]]]]]]", "&x [*x]", "!<tag:yaml.org,2002:str> x", "!!merge <<", "<<: *a",
    ]),
    st.text(max_size=30).filter(lambda s: "\n" not in s),
)


@st.composite
def raw_yaml(draw):
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        key = draw(st.one_of(st.sampled_from(KEYS), st.text(max_size=12).filter(lambda s: "\n" not in s)))
        lines.append(f"{key}: {draw(RAW_YAML_VALUES)}")
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


def _yaml_text(doc) -> str:
    stream = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.dump(doc, stream)
    return stream.getvalue()


def judge(work: Path, data: bytes, suffix: str, machine: str = "t4") -> None:
    path = work / f"config{suffix}"
    path.write_bytes(data)
    config = probe_config(str(path))
    if config.status == "error":
        assert config.error and "\n" not in config.error, config.error
    else:
        msgspec.json.encode(config)  # the settings must serialise into the report
    attention_shapes([config])
    for name in (machine,):
        facts = msgspec.structs.replace(MACHINES[name], configs=[config])
        report = diagnose(facts, RECIPES, source="facts-file")
        crashed = [(r.rule, (r.traceback or "").strip().splitlines()[-1:]) for r in report.results if r.status == "crashed"]
        assert not crashed, (name, crashed)
        render(report, Console(file=io.StringIO(), width=100, highlight=False), verbose=True)
        msgspec.json.decode(to_json(report))
        if config.status == "ok":
            build_plan(report, Options(), RECIPES.data)  # fix --dry-run: reads the file, plans edits


@fuzz_settings(120)
@given(DOCS, st.sampled_from([".json", ".yaml", ".yml"]), st.sampled_from(sorted(MACHINES)))
def test_structured_configs(work, doc, suffix, machine):
    if suffix == ".json":
        text = dumps(doc)
    else:
        try:
            text = _yaml_text(doc)
        except Exception:  # noqa: BLE001 - what the dumper cannot write, no user file holds either
            text = dumps(doc)  # JSON is YAML too
    judge(work, text.encode("utf-8", "surrogatepass"), suffix, machine)


@fuzz_settings(150)
@given(raw_yaml(), st.sampled_from(sorted(MACHINES)))
def test_raw_yaml_text(work, text, machine):
    judge(work, text.encode("utf-8"), ".yaml", machine)


@fuzz_settings(80)
@given(st.binary(max_size=600), st.sampled_from([".json", ".yaml"]))
def test_any_bytes(work, data, suffix):
    judge(work, data, suffix)


# every YAML and JSON config the tests hold, the real ones of each framework too (fixtures/configs/real/<framework>/)
REAL_AND_WRITTEN = sorted(str(p.relative_to(CONFIGS_DIR)) for p in CONFIGS_DIR.rglob("*") if p.suffix in (".json", ".yaml", ".yml"))


@fuzz_settings(100)
@given(st.sampled_from(REAL_AND_WRITTEN), st.lists(st.tuples(KEY, VALUE), min_size=1, max_size=4))
def test_real_configs_with_values_replaced(work, name, replacements):
    """The real fixtures (comments, key order, a DeepSpeed block) with keys set to anything."""
    source = CONFIGS_DIR / name
    if source.suffix == ".json":
        import json

        try:
            doc = json.loads(source.read_text())
        except ValueError:  # a harvested template with shell placeholders, JSON with comments: no values to set
            return
        for key, value in replacements:
            doc[key] = value
        judge(work, dumps(doc).encode(), ".json")
    else:
        yaml = YAML()  # round trip: the comments stay
        yaml.allow_duplicate_keys = True  # a real file may repeat a key (the doctor reads the last, as PyYAML does)
        try:
            doc = yaml.load(source.read_text())
        except Exception:  # noqa: BLE001 - a harvested file with a syntax error: no values to set
            return
        if not isinstance(doc, dict):
            return
        for key, value in replacements:
            doc[key] = value
        stream = io.StringIO()
        try:
            yaml.dump(doc, stream)
        except Exception:  # noqa: BLE001 - not writable as YAML: not a file a user can have
            return
        judge(work, stream.getvalue().encode("utf-8", "surrogatepass"), source.suffix)
