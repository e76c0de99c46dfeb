"""The support matrix (recipes/support/matrix.toml): every row cites its source at a release, every
kernel the doctor names has a row, the schema refuses what it does not know, and the tracer's and
check's kernel limits are the matrix's (a changed row changes them)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attn_doctor import support
from attn_doctor.support.table import default_path

MATRIX = support.matrix()
PINNED_REF = re.compile(r"github\.com/[^/]+/[^/]+/(?:blob|tree)/(?P<ref>[^/]+)/")


def test_the_shipped_matrix_loads_and_names_its_file():
    assert MATRIX.path == str(default_path())
    assert len(MATRIX.kernels) >= 25


@pytest.mark.parametrize("kernel", sorted(MATRIX.kernels), ids=str)
def test_every_row_cites_its_source_at_a_release(kernel):
    for row in MATRIX.kernel(kernel).rows:
        assert row.source.startswith("https://"), (kernel, row.source)
        m = PINNED_REF.search(row.source)
        if m:  # code on GitHub: a tag or a commit, never a moving branch
            assert m.group("ref") not in ("main", "master", "HEAD"), (kernel, row.source)
        # and the release (or date) the row was read at, in words
        assert re.search(r"\d", row.read_at), (kernel, row.read_at)


def test_every_kernel_the_doctor_names_has_a_row():
    from attn_doctor.rules.loader import load_recipes
    from attn_doctor.tracing.kernel_choice import sdpa_select
    from attn_doctor.tracing.standins.registry import LIBRARIES

    named = {lib.family for lib in LIBRARIES}  # the libraries the tracer stands in for
    named |= {f"sdpa-{b.replace('_', '-')}" for b in sdpa_select.LABELS}  # SDPA's backends
    named |= {"flex", "fla", "mha", "flash_attention_2", "flash_attention_3"}  # the tracer's other families, check's implementations
    missing = sorted(n for n in named if MATRIX.find(n) is None)
    assert not missing, missing
    # the optional attention libraries explain knows by module (recipes' attention_libraries)
    modules = load_recipes().data["attention_libraries"]
    kernels = {m: MATRIX.find(m) or MATRIX.for_module(m) for m in modules if not m.startswith("vllm_")}
    assert all(kernels.values()), [m for m, k in kernels.items() if k is None]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = '''
[[kernel]]
id = "toy"
name = "a toy kernel"
library = "toy"
platform = "cuda"

[[kernel.row]]
versions = ">=1.2"
archs = ["sm80+"]
dtypes = ["fp16"]
head_dim_max = 128
source = "https://example.org/toy/v1.2/README"
read_at = "toy 1.2"
'''


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (('head_dim_max = 128', 'head_dim_max = 128\nmaximum = 3'), "kernel toy row 1: unknown key maximum"),
        (('archs = ["sm80+"]', 'archs = ["ampere"]'), "'ampere' is no architecture"),
        (('dtypes = ["fp16"]', 'dtypes = ["half"]'), "dtypes must be among"),
        (('source = "https://example.org/toy/v1.2/README"\n', ''), "kernel toy row 1: missing source"),
        (('versions = ">=1.2"', 'versions = "one point two"'), "is no specifier"),
        (('platform = "cuda"', 'platform = "tpu"'), "platform 'tpu'"),
        (('head_dim_max = 128', 'features = { flash = true }'), "unknown feature 'flash'"),
    ],
)
def test_the_schema_refuses_what_it_does_not_know_and_names_the_row(tmp_path, change, words):
    support.load(_write(tmp_path, GOOD))  # the good file loads
    with pytest.raises(support.SupportMatrixError) as exc:
        support.load(_write(tmp_path, GOOD.replace(*change)))
    assert words in str(exc.value) and "matrix.toml" in str(exc.value)


def test_what_a_row_says_and_what_it_leaves_unknown(tmp_path):
    toy = support.load(_write(tmp_path, GOOD)).kernel("toy")
    assert toy.supports_arch(support.arch_of("8.6")) is True and toy.supports_arch(support.arch_of("sm_75")) is False
    assert toy.supports_arch(support.arch_of("gfx942")) is False  # a CUDA kernel lists no AMD target
    assert toy.supports_head_dim(96) is True and toy.supports_head_dim(192) is False
    assert toy.supports_dtype("bf16") is False and toy.supports_dtype("fp16") is True
    assert toy.feature("softcap") == (None, None)  # the row does not say: unknown, never "unsupported"
    assert toy.rows_for("1.1") == []


def test_facts_of_the_shipped_rows_read_from_their_sources():
    fa2 = MATRIX.kernel("flash-attn-2")
    blackwell = support.arch_of("sm_120")
    assert fa2.supports_arch(blackwell, "2.7.2") is False and fa2.supports_arch(blackwell, "2.7.3") is True
    assert fa2.feature("softcap", "2.5.8") == (False, "2.6.0")
    paged = MATRIX.kernel("vllm-paged-attention")
    assert paged.supports_head_dim(72) is False and paged.supports_head_dim(80) is True
    ck = MATRIX.kernel("flash-attn-rocm-ck")
    assert ck.supports_arch(support.arch_of("gfx1100")) is False and ck.supports_arch(support.arch_of("gfx90a")) is True
    assert MATRIX.kernel("xformers-cutlass").supports_arch(support.arch_of("12.0"), "0.0.35") is False


def test_the_tracer_and_check_read_their_limits_from_the_matrix(tmp_path):
    """A changed row changes the tracer's judgement: run it in an interpreter lent the package with a
    matrix whose FlashAttention 2 row says 192 and sm90."""
    from attn_doctor.support.table import _parse_toml
    from attn_doctor.tracing.runs.launch import package_dir, remove_package_dir

    raw = _parse_toml(default_path())
    for k in raw["kernel"]:
        if k["id"] == "flash-attn-2":
            for row in k["row"]:
                row["head_dim_max"], row["archs"] = 192, ["sm90+"]
    folder = package_dir()
    try:
        Path(folder, support.JSON_NAME).write_text(json.dumps(raw), encoding="utf-8")
        code = ("from attn_doctor.tracing.calls import sinks\n"
                "from attn_doctor.rules.checks import config\n"
                "p = sinks.judge('flash_attn2', {'q': 'float16', 'k': 'float16', 'v': 'float16'}, (224, 224), (8, 6))\n"
                "print(sorted(x['id'] for x in p), sinks.FA2_MAX_HEAD_DIM, config._attention_floors()['flash_attention_2'][0])")
        out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=folder), cwd=str(tmp_path),
                             capture_output=True, text=True, timeout=120)
    finally:
        remove_package_dir(folder)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["['AD603',", "'AD605']", "192", "9.0"]
    # and with the shipped matrix: the same call passes both checks
    from attn_doctor.tracing.calls import sinks

    assert sinks.judge("flash_attn2", {"q": "float16", "k": "float16", "v": "float16"}, (224, 224), (8, 6)) == []


def test_the_copy_lent_to_a_traced_interpreter_is_the_shipped_matrix(tmp_path):
    from attn_doctor.support.table import _parse_toml

    copy = support.write_json(tmp_path / support.JSON_NAME)
    assert json.loads(Path(copy).read_text()) == _parse_toml(default_path())
