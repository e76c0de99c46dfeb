"""Fuzzing `explain`: the line normaliser and the streaming scanner, through the whole core and
both renderers. Inputs are built from what real logs are made of (launcher and logger prefixes,
ANSI colours, the rules' own signature fixtures cut anywhere, version lines, traceback frames,
lines wrapped or gigantic, gzip cut short, UTF-16) plus plain random bytes."""

from __future__ import annotations

import codecs
import gzip
import io
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from attn_doctor.explaining.core import explain
from attn_doctor.rules.signatures import normalise
from attn_doctor.render.explain_human import render
from attn_doctor.rules.loader import load_recipes

from .conftest import fuzz_settings

RECIPES = load_recipes()
LOGS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
MESSAGES = sorted({m for rule in RECIPES.rules for m in rule.signature_fixtures.match}) or ["RuntimeError: x"]
REAL_LINES = sorted({line for p in LOGS_DIR.glob("*.log") for line in p.read_text(errors="replace").splitlines() if line.strip()})

PREFIXES = st.sampled_from([
    "", "[rank3]: ", "[rank0]:[W1122 10:00:00.000 ProcessGroupNCCL.cpp:1] ", "0: ", "7: ", "(pid=1234) ",
    "(RayWorkerWrapper pid=99, ip=10.0.0.1) ", "E1122 12:00:00.123456 1234 file.cc:12] ", "W1122 ",
    "2024-01-01 12:00:00,123 - INFO - ", "[2024-01-01 12:00:00] [ERROR] ", "ERROR:root:", "> ", ">", "│ ", "| ",
    "\x1b[31m", "\x1b[1;31mE\x1b[0m ", "\x1b[", "\x1b]0;title\x07", "    ", "\t", "[rank", "[rank3]:" * 8,
])
VERSION_LINES = st.sampled_from([
    "torch==2.5.1+cu121", "flash-attn==2.6.3", "flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp310-cp310-linux_x86_64.whl",
    "PyTorch version: 2.5.1+cu121", "CUDA used to build PyTorch: 12.1", "GPU 0: Tesla T4", "GPU 0: NVIDIA H100 80GB HBM3",
    "| NVIDIA-SMI 535.183.01             Driver Version: 535.183.01   CUDA Version: 12.2     |",
    "transformers==4.46.1", "triton==2.1.0", "Python version: 3.10.12", "Is CUDA available: True",
    "torch 2.99999999999999999999.1", "triton==", "GPU 0: " + "X" * 500, "compute capability 99.99",
])
FRAMES = st.sampled_from([
    'Traceback (most recent call last):', '  File "/opt/venv/lib/python3.10/site-packages/flash_attn/flash_attn_interface.py", line 91, in _flash_attn_forward',
    "    out, q, k, v, out_padded, softmax_lse, S_dmask, rng_state = flash_attn_cuda.fwd(",
    '  File "/x/site-packages/xformers/ops/fmha/__init__.py", line 1, in memory_efficient_attention', '  File "', "  File",
    "    ^^^^^^^^^^", "The above exception was the direct cause of the following exception:",
])


@st.composite
def cut(draw, text: str) -> str:
    """A message cut short or at the front, or wrapped over two lines, as terminals and log
    collectors do."""
    how = draw(st.sampled_from(["whole", "head", "tail", "wrap", "case"]))
    if how == "whole" or not text:
        return text
    i = draw(st.integers(0, len(text)))
    if how == "head":
        return text[:i]
    if how == "tail":
        return text[i:]
    if how == "wrap":
        return text[:i] + "\n" + text[i:]
    return text.swapcase()


@st.composite
def log_lines(draw):
    kind = draw(st.sampled_from(["message", "message", "real", "version", "frame", "random", "huge"]))
    if kind == "message":
        body = draw(cut(draw(st.sampled_from(MESSAGES))))
    elif kind == "real":
        body = draw(st.sampled_from(REAL_LINES)) if REAL_LINES else ""
    elif kind == "version":
        body = draw(VERSION_LINES)
    elif kind == "frame":
        body = draw(FRAMES)
    elif kind == "huge":
        body = draw(st.sampled_from(MESSAGES)) * draw(st.integers(1, 40)) + "x" * draw(st.sampled_from([0, 5000, 70000]))
    else:
        body = draw(st.text(max_size=80))
    return draw(PREFIXES) + body


@st.composite
def logs(draw) -> bytes:
    lines = draw(st.lists(log_lines(), min_size=0, max_size=25))
    newline = draw(st.sampled_from(["\n", "\r\n", "\r", "\n\n"]))
    text = newline.join(lines) + draw(st.sampled_from(["", newline]))
    data = text.encode("utf-8", "surrogatepass")
    wrap = draw(st.sampled_from(["plain", "plain", "plain", "gzip", "gzip-cut", "utf16", "nul", "latin1"]))
    if wrap == "gzip":
        data = gzip.compress(data)
    elif wrap == "gzip-cut":
        data = gzip.compress(data)
        data = data[: draw(st.integers(0, len(data)))]
    elif wrap == "utf16":
        data = codecs.BOM_UTF16_LE + text.encode("utf-16-le", "surrogatepass")
    elif wrap == "nul":
        data = data.replace(b" ", b"\x00")
    elif wrap == "latin1":
        data = text.encode("latin-1", "replace")
    return data


def run_explain(data: bytes, kind: str) -> None:
    report = explain(io.BytesIO(data), RECIPES, kind=kind, path="fuzz.log" if kind == "file" else None)
    assert report.exit_code in (0, 1)
    for verbose in (False, True):
        render(report, Console(file=io.StringIO(), width=100, highlight=False), verbose=verbose)
    msgspec.json.encode(report)


@fuzz_settings(250)
@given(logs(), st.sampled_from(["file", "stdin", "text"]))
def test_logs_made_of_real_parts(data, kind):
    run_explain(data, kind)


@fuzz_settings(120)
@given(st.binary(max_size=3000), st.sampled_from(["file", "text"]))
def test_any_bytes(data, kind):
    run_explain(data, kind)


@fuzz_settings(400)
@given(st.one_of(log_lines(), st.text(max_size=200)))
def test_normalise_any_line(line):
    out = normalise(line)
    # at most one character more per character: a full-width colon or comma becomes ": " or ", "
    assert isinstance(out, str) and len(out) <= 2 * len(line)
    assert normalise("训练 ，但loss一直为nan") == "训练, 但loss一直为nan"
