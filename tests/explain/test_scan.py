"""The streaming scanner: chunk boundaries, line numbers, both search engines, repeated lines."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from attn_doctor.explaining import scan as scan_mod
from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()
LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
ERROR = b"[rank2]: RuntimeError: FlashAttention only support fp16 and bf16 data type\n"


def _log(n_before: int, n_after: int) -> bytes:
    filler = b"".join(b"{'loss': %d.25, 'epoch': 0.5}\n" % i for i in range(n_before))
    return filler + ERROR + filler[: n_after * 30]


def _report(data: bytes, **kw):
    return explain(io.BytesIO(data), RECIPES, **kw)


@pytest.mark.parametrize("chunk", [64, 1000, 4096, 1 << 20])
@pytest.mark.parametrize("force_regex", [False, True])
def test_line_numbers_and_matches_survive_any_chunk_size(monkeypatch, chunk, force_regex):
    monkeypatch.setattr(scan_mod, "CHUNK", chunk)
    data = _log(300, 50) + b"RuntimeError: FlashAttention only supports Ampere GPUs\nor newer.\n"
    report = _report(data, force_regex=force_regex)
    m = {x.rule: x for x in report.matches}
    assert m["AD604"].evidence[0].line == 301 and m["AD604"].occurrences == 1
    wrapped = data.count(b"\n") - 1
    assert m["AD103"].evidence[0].line == wrapped
    assert report.input.lines == data.count(b"\n")
    assert report.input.engine == ("regex" if force_regex else report.input.engine)


def test_both_engines_agree_on_every_recorded_log():
    for path in sorted(LOGS.glob("*.log")):
        a = explain(path, RECIPES)
        b = explain(path, RECIPES, force_regex=True)
        assert [(m.rule, m.occurrences, m.likelihood) for m in a.matches] == [(m.rule, m.occurrences, m.likelihood) for m in b.matches], path


def test_repeated_warnings_are_counted_and_evidence_is_bounded():
    line = b"[rank%d]: UserWarning: Memory efficient kernel not used because: (Triggered internally at sdp_utils.cpp:859.)\n"
    data = b"".join(line % (i % 8) for i in range(5000))
    m = {x.rule: x for x in _report(data).matches}["AD252"]
    assert m.occurrences == 5000 and len(m.evidence) <= 8 and m.severity == "info"
    assert _report(data).exit_code == 0  # informational only


def test_crlf_and_carriage_return_progress_bars():
    data = b" 10%|#     | 1/10 [00:01<00:09]\r 20%|##    | 2/10\rRuntimeError: No available kernel. Aborting execution.\r\nnext\r\n"
    m = {x.rule: x for x in _report(data).matches}
    assert m["AD253"].evidence[0].text == "RuntimeError: No available kernel. Aborting execution."


def test_versions_in_pip_freeze_collect_env_and_banners():
    data = b"\n".join(
        [
            b"PyTorch version: 2.5.1+cu121",
            b"Libc version: glibc-2.28",
            b"[pip3] triton==3.1.0",
            b"- `transformers` version: 4.44.2",
            b"flash_attn 2.6.3",
            b"GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1234)",
            b"  File \"/opt/venv/lib/python3.10/site-packages/torch/nn/modules/module.py\", line 1532, in _call_impl",
        ]
    )
    v = _report(data).versions
    assert v["torch"] == "2.5.1+cu121" and v["torch_cuda"] == "12.1" and v["glibc"] == "2.28"
    assert v["triton"] == "3.1.0" and v["transformers"] == "4.44.2" and v["flash-attn"] == "2.6.3"
    assert v["gpus"] == "NVIDIA A100-SXM4-80GB (sm80)"


def test_a_version_at_the_end_of_a_sentence_keeps_its_period_out():
    # Unsloth's banner: "Torch: 2.11.0+cu128. CUDA: 7.5."
    v = _report(b"O^O/ \\_/ \\    Torch: 2.11.0+cu128. CUDA: 7.5. CUDA Toolkit: 12.8. Triton: 3.6.0\n").versions
    assert v["torch"] == "2.11.0+cu128" and v["torch_cuda"] == "12.8"
    assert _report(b"torch 2.3.1+cu121.post2\n").versions["torch"] == "2.3.1+cu121.post2"


@pytest.mark.parametrize("force_regex", [False, True])
@pytest.mark.parametrize("text, gpu", [
    (b"RuntimeError: FlashAttention only supports Ampere GPUs or newer. (on my GTX2080 Ti)\n", "GTX2080 Ti (sm75)"),
    (b"Tesla V100S: RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n", "Tesla V100S (sm70)"),
    ("如何在V100s等非Ampere架构的GPU上执行？RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n".encode(), "V100s (sm70)"),
    (b"RuntimeError: FlashAttention only supports Ampere GPUs or newer\ni have 4 2080ti 22Gb\n", "2080ti (sm75)"),
])
def test_a_gpu_named_in_the_text_settles_which_gpu_arch_cause(text, gpu, force_regex):
    """flash-attn's architecture message has two causes, a GPU before Ampere (AD103) and a release
    older than the GPU (AD104): a GPU named anywhere in the text settles it, as a recorded report's
    GPU would, and the other is ruled out with the reason."""
    report = _report(text, force_regex=force_regex)
    assert report.versions["gpus"] == gpu
    found = {m.rule: m.likelihood for m in report.matches}
    assert found == {"AD103": "confirmed", "AD104": "unlikely"}, found
    ruled_out = next(m for m in report.matches if m.rule == "AD104")
    assert "not compute capability >9.0" in ruled_out.likelihood_reason


def test_a_blackwell_gpu_named_in_the_text_rules_out_the_old_gpu_cause():
    report = _report(b"my RTX5090 says: RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n")
    assert {m.rule: m.likelihood for m in report.matches} == {"AD104": "possible", "AD103": "unlikely"}


@pytest.mark.parametrize("line", [
    b"bf16 is only supported on A100+ GPUs",  # xformers: a requirement, not the user's GPU
    b"FP8 requires H100 GPUs",
    b"the FP8 path needs Ada/Hopper GPUs (L40S/H100, GH200)",  # examples of the floor, in a list
    b"run it on a newer GPU, e.g. an H100 or B200",
    b"loading /models/A100-tuned/config.json",
    b"step 5 0x7A100f loss 2.3 (KT4 L4a)",
])
def test_a_gpu_a_message_requires_or_a_path_names_is_no_gpu_here(line):
    assert "gpus" not in _report(line + b"\nRuntimeError: FlashAttention only supports Ampere GPUs or newer.\n").versions
