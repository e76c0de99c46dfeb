"""The catalogue's reader of Python sources (benchmarks/catalogue/extract_python.py), run as its
users run it, on a source written the way torch writes its own checks; and explain's reading of a
short paste whose lines carry no error or warning word."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import load_recipes

ROOT = Path(__file__).resolve().parents[2]
EXTRACT = ROOT / "benchmarks" / "catalogue" / "extract_python.py"

# the shape of torch 2.11-2.13's _warn_unsupported_code: a list of lines, appended to in two branches
SOURCE = textwrap.dedent('''
    import warnings

    def warn_unsupported(device_index, name, device_cc, code_ccs, releases):
        lines = [
            f"Found GPU{device_index} {name} which is of compute capability (CC) {device_cc // 10}.{device_cc % 10}.",
            "The following list shows the CCs this version of PyTorch was built for:",
        ] + [f"- {cc // 10}.{cc % 10}" for cc in code_ccs]
        if releases:
            lines.append(f"Your installed torch=={releases[0]} does not include kernels for this GPU.")
        else:
            lines.append("No published PyTorch CUDA builds support this GPU.")
        warnings.warn("\\n".join(lines), stacklevel=2)

    def not_a_list(parts):
        warnings.warn("\\n".join(parts))
''')


def _sites(tmp_path: Path) -> list[dict]:
    pkg = tmp_path / "src" / "torch" / "cuda"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(SOURCE)
    out = tmp_path / "sites.jsonl"
    subprocess.run([sys.executable, str(EXTRACT), "--library", "torch", "--version", "9.9", "--root", str(tmp_path / "src"),
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=120)
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_a_message_joined_from_a_list_of_lines_is_one_site_per_line(tmp_path):
    sites = _sites(tmp_path)
    joined = [s for s in sites if s["function"] == "warn_unsupported"]
    texts = [s["text"] for s in joined]
    assert texts == [
        "Found GPU{} {} which is of compute capability (CC) {}.{}.",
        "The following list shows the CCs this version of PyTorch was built for:",
        "- {}.{}",
        "Your installed torch=={} does not include kernels for this GPU.",
        "No published PyTorch CUDA builds support this GPU.",
    ]
    assert all(s["line"] == joined[0]["line"] and "joined by newlines" in s["via"] for s in joined)
    # a list the function does not build (a parameter) stays one unreadable site
    other = [s for s in sites if s["function"] == "not_a_list"]
    assert len(other) == 1 and other[0]["unreadable"]


def test_modules_read_for_their_notices_only_keep_no_cause(tmp_path):
    # a model's own modules: a refusal in the stack's words, a warning in them, a raise outside them
    pkg = tmp_path / "src" / "lib" / "models"
    pkg.mkdir(parents=True)
    (pkg / "modeling.py").write_text(textwrap.dedent('''
        import logging
        logger = logging.getLogger(__name__)

        def forward(x, dtype):
            if dtype != "fp16":
                raise ValueError("FlashAttention only supports fp16 and bf16 dtypes in this model")
            logger.warning("sdpa attention does not support output_attentions, falling back to eager attention")
            if x is None:
                raise ValueError("The input of this pipeline step is empty, give it a list of strings")
    '''))
    out = tmp_path / "sites.jsonl"
    subprocess.run([sys.executable, str(EXTRACT), "--library", "lib", "--version", "1", "--root", str(tmp_path / "src"),
                    "--notices-only", "read for its notices only", "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=120)
    sites = {s["text"]: s for s in map(json.loads, out.read_text().splitlines())}
    assert not any(t.startswith("FlashAttention only supports") for t in sites)  # the in-scope raise is dropped
    warning = sites["sdpa attention does not support output_attentions, falling back to eager attention"]
    assert warning["scope"] == "out" and warning["scope_why"].startswith("read for its notices only; by its words: ")
    assert sites["The input of this pipeline step is empty, give it a list of strings"]["scope"] == "out"


def test_notices_printed_through_helpers_called_by_bare_name_are_sites(tmp_path):
    # Lightning's rank-zero helpers; torch's warn_once(msg), FlexAttention's _warn_once(warning_id, message)
    # (by position and by keyword) and torch._logging's warning_once(logger, msg, *args)
    pkg = tmp_path / "src" / "lib"
    pkg.mkdir(parents=True)
    (pkg / "trainer.py").write_text(textwrap.dedent('''
        from lightning_utilities import rank_zero_info, rank_zero_warn
        from torch._logging import warning_once
        from torch._utils import warn_once

        def setup(name, used, log):
            rank_zero_info(f"GPU available: {used}, used: {used}")
            rank_zero_warn(f"The {name!r} does not have many workers which may be a bottleneck.")
            warn_once("key is not understood by this config")
            _warn_once("deprecated_return_lse", "return_lse is deprecated and will be removed", FutureWarning)
            _warn_once(warning_id="flex_attention_performance", message="flex_attention called without torch.compile()")
            warning_once(log, "Profiler function %s will be ignored", name)
            print("Not a site: printed, not a notice")
    '''))
    out = tmp_path / "sites.jsonl"
    subprocess.run([sys.executable, str(EXTRACT), "--library", "lib", "--version", "1", "--root", str(tmp_path / "src"),
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=120)
    sites = {s["text"]: (s["kind"], s["exception"]) for s in map(json.loads, out.read_text().splitlines())}
    assert sites == {
        "GPU available: {}, used: {}": ("log", "INFO"),
        "The {} does not have many workers which may be a bottleneck.": ("warn", "UserWarning"),
        "key is not understood by this config": ("warn", "UserWarning"),
        "return_lse is deprecated and will be removed": ("warn", "UserWarning"),
        "flex_attention called without torch.compile()": ("warn", "UserWarning"),
        "Profiler function {} will be ignored": ("log", "WARNING"),
    }


RECIPES = load_recipes()


def _harmless(text: str) -> list[bool]:
    return [m.harmless for m in explain(io.BytesIO(text.encode()), RECIPES, kind="stdin").matches]


def test_a_short_paste_without_error_words_is_still_read_as_a_library_message():
    # an issue's title: the first sentence of DeepSpeed's loss-scale notice (logged at INFO)
    assert _harmless("[deepspeed] fp16 dynamic loss scale overflow!\n")[:1] == [True]


def test_a_long_log_is_not_read_line_by_line_for_words_without_error_words():
    # the same line deep in a long log is one of many ordinary lines: only lines with an error or a
    # warning word are tried against the catalogue there
    log = "".join(f"step {i} loss 1.{i:03d}\n" for i in range(60)) + "[deepspeed] fp16 dynamic loss scale overflow!\n"
    assert _harmless(log) == []


def test_pythons_own_messages_are_read_from_libpython_and_none_is_shipped_as_a_librarys(monkeypatch):
    """The catalogue leaves out a library's copy of a message Python itself raises (Triton's code
    generator re-raising "not enough values to unpack"): the messages are read from libpython (here
    the running interpreter's, checked against the shipped list), and no shipped entry reads one."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "catalogue"))
    import sysconfig

    import python_messages

    from attn_doctor.explaining import catalogue as cat
    from attn_doctor.rules.loader import default_recipes_dir

    shipped_messages = set(python_messages.messages())
    assert ("not enough values to unpack (expected ", ", got ", ")") in shipped_messages
    libpython = Path(sysconfig.get_config_var("LIBDIR") or "") / (sysconfig.get_config_var("LDLIBRARY") or "")
    if libpython.suffix == ".so" and libpython.is_file() and libpython.name in python_messages.read_from():
        here = python_messages.read(libpython)
        assert ("not enough values to unpack (expected ", ", got ", ")") in here
        assert len(here & shipped_messages) > 0.9 * len(here)  # the shipped list holds this Python's
    shipped = cat.Catalogue.load(default_recipes_dir() / cat.CATALOGUE_NAME)
    read = [(line, hit.entry.rule) for line in python_messages.lines()
            if (hit := shipped.match(line)) is not None and hit.complete and hit.entry.family != "harmless"]
    assert read == [], read[:5]
    report = explain(io.BytesIO(b"ValueError: not enough values to unpack (expected 2, got 1)\n"), load_recipes(), kind="text")
    assert not [m for m in report.matches if not m.harmless and m.likelihood != "unlikely"]
