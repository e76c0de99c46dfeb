"""Python configs read statically (attn_doctor/probes/configs/pyconfig.py): mmengine's `_base_` merge and
`read_base()` imports, as Config.fromfile reads them, without importing or running anything; what
cannot be evaluated so is said, never guessed; the real OpenMMLab configs of the fixtures (with their
_base_ chains, tests/fixtures/configs/python/) read as their EXPECTED.toml says, on the CLI too."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attn_doctor.probes.configs import ConfigReadError, load_with_format, probe_config
from attn_doctor.probes.configs.pyconfig import NotEvaluated

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / "tests" / "fixtures" / "configs" / "python"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_a_config_that_would_run_code_is_read_without_running_it(tmp_path):
    ran = tmp_path / "ran"
    leaf = write(tmp_path, "leaf.py", f"""
        import os
        open({str(ran)!r}, "w").write("opened")
        os.system("touch {ran}-system")
        exec("open({str(ran)!r} + '-exec', 'w')")
        x = __import__("os").system("touch {ran}-import")
        work_dir = os.environ.get("WORK_DIR", "/tmp")
        optim_wrapper = dict(type="AmpOptimWrapper", dtype=get_dtype(), optimizer=dict(type="AdamW", lr=1e-4))
        default_hooks = dict(logger=dict(type="LoggerHook"))
        for i in range(3):
            lr = i
        """)
    doc, fmt = load_with_format(leaf)
    assert fmt == "python"
    assert not list(tmp_path.glob("ran*")), "the config ran"
    assert isinstance(doc["work_dir"], NotEvaluated) and isinstance(doc["x"], NotEvaluated)
    assert isinstance(doc["lr"], NotEvaluated) and "for at line" in doc["lr"]
    assert doc["optim_wrapper"]["optimizer"] == {"type": "AdamW", "lr": 1e-4}
    config = probe_config(str(leaf))
    # the dtype it could not evaluate is said with its expression, and no dtype is guessed for it
    assert config.kind == "mmengine" and "compute_dtype" not in config.plan
    assert "optim_wrapper.dtype (not evaluated: get_dtype())" in config.unread
    assert "without running it" in config.why and "not evaluated" in config.why


def test_base_files_merge_as_mmengine_merges_them(tmp_path):
    write(tmp_path, "_base_/schedule.py", """
        optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.02, momentum=0.9), clip_grad=None)
        train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=12)
        """)
    write(tmp_path, "_base_/runtime.py", """
        default_scope = 'mmdet'
        default_hooks = dict(logger=dict(type='LoggerHook', interval=50), checkpoint=dict(type='CheckpointHook'))
        base_lr = 0.004
        """)
    leaf = write(tmp_path, "models/leaf.py", """
        _base_ = ['../_base_/schedule.py', '../_base_/runtime.py']
        optim_wrapper = dict(type='AmpOptimWrapper', dtype='bfloat16', optimizer=dict(lr={{_base_.base_lr}}))
        default_hooks = dict(logger=dict(_delete_=True, type='TextLoggerHook'))
        train_cfg = dict(max_epochs=2 * 12)
        """)
    doc, _fmt = load_with_format(leaf)
    # the child's dict merged key by key into the base's; _delete_ replaces; {{_base_.x}} is the base's value
    assert doc["optim_wrapper"] == {"type": "AmpOptimWrapper", "dtype": "bfloat16", "clip_grad": None,
                                    "optimizer": {"type": "SGD", "lr": 0.004, "momentum": 0.9}}
    assert doc["default_hooks"] == {"logger": {"type": "TextLoggerHook"}, "checkpoint": {"type": "CheckpointHook"}}
    assert doc["train_cfg"] == {"type": "EpochBasedTrainLoop", "max_epochs": 24}
    assert doc.files[0] == str(leaf) and len(doc.files) == 3
    config = probe_config(str(leaf))
    assert config.kind == "mmengine"
    assert {k: v.value for k, v in config.plan.items()} == {"compute_dtype": "bfloat16", "param_dtype": "float32",
                                                             "loss_scaling": True}
    assert "its 2 _base_ files" in config.why


def test_read_base_imports_are_the_files_variables_and_a_reassignment_replaces(tmp_path):
    write(tmp_path, "configs/_base_/schedule.py", """
        from mmengine.optim import OptimWrapper
        optim_wrapper = dict(type=OptimWrapper, optimizer=dict(lr=0.1))
        env_cfg = dict(dist_cfg=dict(backend='nccl'))
        """)
    leaf = write(tmp_path, "configs/det/leaf.py", """
        from mmengine.config import read_base
        from mmengine.optim import AmpOptimWrapper
        import torch
        with read_base():
            from .._base_.schedule import *
        optim_wrapper.update(dict(type=AmpOptimWrapper, dtype=torch.float16))
        model = dict(type='X')
        model['backbone'] = dict(attn_type='flash')
        """)
    doc, _fmt = load_with_format(leaf)
    assert doc["optim_wrapper"] == {"type": "AmpOptimWrapper", "dtype": "torch.float16", "optimizer": {"lr": 0.1}}
    assert doc["model"] == {"type": "X", "backbone": {"attn_type": "flash"}}
    assert "AmpOptimWrapper" not in doc and "torch" not in doc  # imported names are not settings
    config = probe_config(str(leaf))
    assert config.kind == "mmengine" and config.plan["compute_dtype"].value == "float16"


@pytest.mark.parametrize("files, leaf, said", [
    ({"a.py": "_base_ = 'b.py'\n", "b.py": "_base_ = 'a.py'\n"}, "a.py", "is its own base"),
    ({"a.py": "_base_ = 'b.yaml'\n"}, "a.py", "is not a Python config"),
    ({"a.py": "optim_wrapper = dict(type='AmpOptimWrapper'\n"}, "a.py", "Python syntax error in a.py at line 1"),
    ({"a.py": "_base_ = base_list()\n"}, "a.py", "_base_ is not a file name or a list of them"),
])
def test_a_base_that_cannot_be_read_is_said_in_one_line(tmp_path, files, leaf, said):
    for name, text in files.items():
        write(tmp_path, name, text)
    with pytest.raises(ConfigReadError) as err:
        load_with_format(tmp_path / leaf)
    assert said in str(err.value) and "\n" not in str(err.value)
    config = probe_config(str(tmp_path / leaf))
    assert config.status == "error" and said in config.error


def test_a_leaf_whose_bases_are_not_there_is_read_from_its_own_keys_and_says_so(tmp_path):
    """A leaf copied without its repository's _base_ folder: its keys override the bases', so they
    decide what they set; nothing only a base could set is assumed (no framework default)."""
    write(tmp_path, "leaf.py", "_base_ = ['../_base_/models/llama.py', '../_base_/default_runtime.py']\n"
          "optim_wrapper = dict(type='AmpOptimWrapper', dtype='bfloat16', optimizer=dict(type='AdamW', lr=1e-4))\n")
    doc, _fmt = load_with_format(tmp_path / "leaf.py")
    assert doc.missing_bases == ["../_base_/models/llama.py", "../_base_/default_runtime.py"]
    config = probe_config(str(tmp_path / "leaf.py"))
    assert config.status == "ok" and config.kind == "mmengine" and config.plan["compute_dtype"].value == "bfloat16"
    assert "are not there: read from its own keys, no default assumed" in config.why
    assert all(setting.source != "default" for setting in config.plan.values())
    # a wrapper without a type may be a missing base's AmpOptimWrapper (mmengine merges the leaf into
    # it): no precision is concluded from the type's absence
    untyped_text = ("optim_wrapper = dict(optimizer=dict(lr=0.01))\n"
                    "default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=1))\n")
    write(tmp_path, "untyped.py", "_base_ = ['../_base_/schedules/amp.py']\n" + untyped_text)
    untyped = probe_config(str(tmp_path / "untyped.py"))
    assert untyped.kind == "mmengine" and "compute_dtype" not in untyped.plan, untyped
    write(tmp_path, "whole.py", untyped_text)  # no base named: the file is the whole config, and says fp32
    assert probe_config(str(tmp_path / "whole.py")).plan["compute_dtype"].value == "float32"
    # with the bases there, the framework's defaults are asserted as before
    write(tmp_path.parent / "_base_" / "models", "llama.py", "model = dict(type='LLaMA')\n")
    write(tmp_path.parent / "_base_", "default_runtime.py", "default_scope = 'mmengine'\n")
    config = probe_config(str(tmp_path / "leaf.py"))
    assert "not there" not in config.why and any(setting.source == "default" for setting in config.plan.values())


def test_a_chain_deeper_than_the_bound_and_huge_arithmetic_are_refused_not_followed(tmp_path):
    for i in range(40):
        write(tmp_path, f"c{i}.py", f"_base_ = 'c{i + 1}.py'\n")
    write(tmp_path, "c40.py", "x = 1\n")
    with pytest.raises(ConfigReadError, match="nest deeper than"):
        load_with_format(tmp_path / "c0.py")
    big = write(tmp_path, "big.py", "x = 10 ** 100000\ny = 'a' * 10 ** 9\nz = [0] * 10 ** 9\n")
    doc, _fmt = load_with_format(big)
    assert all(isinstance(doc[k], NotEvaluated) for k in "xyz")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(list("abx_=()[]{}.,:*'\"0123456789 \n+-") + [
    "dict(", "_base_", "_base_ = 'fuzz.py'\n", "{{_base_.a}}", "with read_base():\n    from .fuzz import *\n", "**",
    "_delete_=True", ".update(", "[0]", "\nx = ", "\ny['k'] = ", "\nif a:\n    b = 1\n"]), max_size=60).map("".join))
def test_any_text_is_read_or_refused_in_one_line(tmp_path, text):
    path = tmp_path / "fuzz.py"
    path.write_text(text)
    try:
        doc, _fmt = load_with_format(path)
    except ConfigReadError as exc:
        assert "\n" not in str(exc)
        return
    json.dumps(doc, default=str)  # plain data


# ---------------------------------------------------------------- the real OpenMMLab configs

def _expected():
    path = PYTHON / "EXPECTED.toml"
    return tomllib.loads(path.read_text())["leaf"] if path.exists() else []


@pytest.mark.parametrize("row", _expected(), ids=lambda r: r["name"])
def test_real_openmmlab_configs_read_as_the_framework_reads_them(row):
    config = probe_config(str(PYTHON / row["name"]))
    assert config.status == "ok", config.error
    if not row.get("static", True):
        # a value set by code: said as not evaluated, never guessed
        assert any("not evaluated" in u for u in config.unread) or "compute_dtype" not in config.plan, config
        return
    assert config.kind == "mmengine", (config.kind, config.why)
    assert config.plan["compute_dtype"].value == row["compute_dtype"], config.plan
    assert bool(config.plan.get("loss_scaling") and config.plan["loss_scaling"].value) == row["loss_scaling"]
    # a value the framework refuses when it builds the wrapper (mmagic's integer loss_scale): said as AD511 will
    refused = " | ".join(config.refused.values())
    assert (row["build_error"].split(": ", 1)[1] in refused) if row.get("build_error") else not refused, refused


def test_every_real_python_config_has_its_source():
    sources = tomllib.loads((PYTHON / "SOURCES.toml").read_text())["file"]
    names = {s["name"] for s in sources}
    on_disk = {str(p.relative_to(PYTHON)) for p in PYTHON.rglob("*.py")}
    assert names == on_disk
    for source in sources:
        assert source["url"] == f"https://github.com/{source['repo']}/blob/{source['commit']}/{source['path']}", source
    assert {row["name"] for row in _expected()} == {s["name"] for s in sources if s.get("leaf")}


def test_the_cli_says_the_remedy_for_the_command_line_and_fix_leaves_the_file_as_it_was(tmp_path):
    write(tmp_path, "_base_/schedule.py", "optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW'))\n")
    leaf = write(tmp_path, "leaf.py", """
        _base_ = ['_base_/schedule.py']
        # bf16 autocast
        import torch
        from mmengine.optim import AmpOptimWrapper
        optim_wrapper = dict(type=AmpOptimWrapper, dtype=torch.bfloat16, clip_grad=make_clip())
        default_hooks = dict(logger=dict(type='LoggerHook'))
        """)
    before = leaf.read_bytes()
    check = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--gpu", "t4", "--no-sample", "-c", str(leaf),
                            "--json"], capture_output=True, text=True, timeout=120)
    report = json.loads(check.stdout)
    found = [r for r in report["results"] if r["rule"] == "AD501"]
    assert found and "--cfg-options optim_wrapper.dtype=float16" in json.dumps(found[0]["remedies"]), found
    fix = subprocess.run([sys.executable, "-m", "attn_doctor", "fix", "--gpu", "t4", "--no-sample", "-c", str(leaf), "--yes"],
                         capture_output=True, text=True, timeout=120)
    assert "never edited or run" in fix.stdout + fix.stderr, fix.stdout + fix.stderr
    assert leaf.read_bytes() == before
    assert "Traceback" not in fix.stderr
