"""Attribution from evidence (issue 53, item 1): a reader claims a file only on what its framework alone
writes (its DISTINCT keys and values, its distinct() structure), and its defaults are asserted only
then. Every reader is run on every other framework's real files (tests/fixtures/configs/real/) and
on the long tail (longtail/, generic/): none may find evidence there, but a reader that gives way to a
more specific one (SUBSUMED_BY: DeepSpeed in a gpt-neox YAML, Composer in LLM Foundry's). Files that
only look like a framework's are read generically: what they say, no default assumed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from attn_doctor.core import diagnose
from attn_doctor.gather import load_facts_file
from attn_doctor.probes.configs import load_with_format, probe_config, recognise
from attn_doctor.probes.configs.readers import READERS, evidence
from attn_doctor.rules.loader import load_recipes

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
REAL = CONFIGS / "real"
FACTS = ROOT / "tests" / "fixtures" / "facts"
# files shipped in a framework's repository that are another framework's (or no framework's) config
SHIPPED_BESIDE = {"llamafactory/ds_z3_config.json": "deepspeed", "ms-swift/zero3.json": "deepspeed", "ms-swift/fsdp2.json": None,
                  "trl/example_config.yaml": None}
FOLDER_TO_READER = {"kohya-sd-scripts": "kohya-sd-scripts"}


def _docs(folder: Path):
    out = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != "SOURCES.toml":
            doc, fmt = load_with_format(path)
            if isinstance(doc, dict):
                out.append((path, doc, fmt))
    return out


def _python_leaves():
    """The real OpenMMLab configs a user trains with (python/EXPECTED.toml's leaves; their _base_ files
    are parts, no framework's config on their own), read with their _base_ chains."""
    import tomllib

    rows = tomllib.loads((PYTHON / "EXPECTED.toml").read_text())["leaf"]
    return [(PYTHON / row["name"], *load_with_format(PYTHON / row["name"])) for row in rows]


PYTHON = CONFIGS / "python"
REAL_DOCS = _docs(REAL) + _python_leaves()
OTHER_DOCS = _docs(CONFIGS / "longtail") + _docs(CONFIGS / "generic")


def _framework(path: Path):
    if path.is_relative_to(PYTHON):
        return "mmengine"
    rel = str(path.relative_to(REAL))
    return SHIPPED_BESIDE.get(rel, rel.split("/")[0]) if rel in SHIPPED_BESIDE else rel.split("/")[0]


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.NAME)
def test_a_reader_finds_no_evidence_in_another_frameworks_files(reader):
    claimed = []
    for path, doc, fmt in REAL_DOCS:
        owner = _framework(path)
        if fmt not in reader.FORMATS or owner == reader.NAME or owner in getattr(reader, "SUBSUMED_BY", ()):
            continue
        found = evidence(reader, doc)
        if found:
            claimed.append((str(path), found))
    assert claimed == [], claimed


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.NAME)
def test_a_reader_has_evidence_in_every_file_of_its_own_framework(reader):
    own = [(p, d, f) for p, d, f in REAL_DOCS if _framework(p) == reader.NAME]
    assert own, f"no real file of {reader.NAME}"
    missing = [str(p) for p, d, f in own if not evidence(reader, d)]
    assert missing == [], missing


def test_no_file_is_claimed_by_two_readers():
    twice = []
    for path, doc, fmt in REAL_DOCS + OTHER_DOCS:
        names = {r.NAME for r in READERS if fmt in r.FORMATS and evidence(r, doc)}
        names = {n for n in names if not any(set(getattr(r, "SUBSUMED_BY", ())) & names for r in READERS if r.NAME == n)}
        if len(names) > 1:
            twice.append((path.name, sorted(names)))
    assert twice == [], twice


def test_a_file_that_only_looks_like_a_framework_s_is_read_for_what_it_says(tmp_path):
    # Composer Trainer arguments at the top, which LLM Foundry writes too, and an fp16 precision: the
    # file's own key is read, and LLM Foundry's amp_bf16 default is never asserted
    cfg = tmp_path / "train.yaml"
    cfg.write_text("max_duration: 10ep\ndevice_train_microbatch_size: 8\nglobal_train_batch_size: 64\nprecision: amp_fp16\n"
                   "model:\n  name: my_model\n")
    config = probe_config(str(cfg), {})
    assert config.kind == "llm-foundry"  # global_train_batch_size is LLM Foundry's TrainConfig's own
    cfg.write_text("max_duration: 10ep\ndevice_train_microbatch_size: 8\nprecision: amp_fp16\nmodel:\n  name: my_model\n")
    config = probe_config(str(cfg), {})
    assert config.kind == "generic", (config.kind, config.why)
    assert "no framework default assumed" in config.why
    assert config.plan["compute_dtype"].value == "float16" and config.plan["compute_dtype"].source == "file"
    assert all(s.source != "default" for s in config.plan.values())


def test_the_issues_false_alarms_do_not_recur():
    """Composer and mosaicml diffusion YAMLs (fp16) were read as LLM Foundry with its bf16 default, an
    error on a T4; a Lightning Hydra YAML was read as Megatron-Bridge with its bf16 default."""
    recipes = load_recipes(None)
    t4 = load_facts_file(FACTS / "t4.json")
    for name, kind in (("composer/diffusion_SD-2-base-256.yaml", "composer"), ("composer/diffusion_mcli_SDXL-base-256.yaml", "composer"),
                       ("composer/resnet50_mild.yaml", "composer"), ("lightning/hydra_example_full.yaml", "lightning"),
                       ("lightning/terratorch_burn_scars.yaml", "lightning")):
        config = probe_config(str(REAL / name), {})
        assert config.kind == kind, (name, config.kind, config.why)
        assert config.plan["compute_dtype"].value in ("float16", "float32"), (name, config.plan)
        t4.configs = [config]
        fired = [r.rule for r in diagnose(t4, recipes).results if r.area == "config" and r.status == "error"]
        assert fired == [], (name, fired)
    # a Lightning + Hydra file whose other sections are everyone's names: Lightning's precision, read as written
    doc = {"trainer": {"_target_": "pytorch_lightning.Trainer", "precision": 16, "max_epochs": 10}, "scheduler": {"step_size": 1},
           "train": {"batch_size": 32}, "optimizer": {"lr": 0.1}, "dataset": {"name": "cifar10"}}
    reader, why = recognise(doc, "yaml")
    assert reader is not None and reader.NAME == "lightning", why
