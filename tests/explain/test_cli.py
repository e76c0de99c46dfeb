"""`attn-doctor explain` end to end, in real subprocesses, on recorded logs and hostile input."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def run(*args: str, input: bytes | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attn_doctor", "explain", *args],
        input=input if input is not None else b"",
        capture_output=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def schema():
    proc = run("--schema")
    assert proc.returncode == 0
    return json.loads(proc.stdout)


def explain_json(*args, schema=None, **kw):
    proc = run(*args, "--json", **kw)
    doc = json.loads(proc.stdout)
    if schema is not None:
        jsonschema.Draft202012Validator(schema).validate(doc)
    assert doc["exit_code"] == proc.returncode
    return proc, doc


def by_rule(doc):
    return {m["rule"]: m for m in doc["matches"]}


def test_t4_llamafactory_log_names_the_gpu_cause_and_rules_out_the_other(schema):
    proc, doc = explain_json("--file", str(LOGS / "t4-llamafactory.log"), schema=schema)
    assert proc.returncode == 1
    m = by_rule(doc)
    assert m["AD103"]["likelihood"] == "confirmed" and m["AD103"]["cause"] == "gpu-arch"
    assert m["AD104"]["likelihood"] == "unlikely" and "sm75" in m["AD104"]["likelihood_reason"]
    assert m["AD406"]["likelihood"] == "confirmed"
    assert m["AD650"]["harmless"] and not m["AD650"]["remedies"]
    assert m["AD103"]["evidence"][0] == {"line": 14, "text": "RuntimeError: FlashAttention only supports Ampere GPUs or newer."}
    assert doc["versions"]["flash-attn"] == "2.6.3" and "Tesla T4 (sm75)" in doc["versions"]["gpus"]
    assert any(r["kind"] == "config" and r["value"] == "sdpa" for r in m["AD103"]["remedies"])


def test_undefined_symbol_is_demangled_and_the_abi_side_named(schema):
    _, doc = explain_json("-f", str(LOGS / "undefined-symbol.log"), schema=schema)
    m = by_rule(doc)["AD301"]
    assert m["captures"]["demangled"] == "c10::Error::Error(c10::SourceLocation, std::string)"
    assert "old pre-C++11 ABI" in m["captures"]["side"] and "this torch uses the C++11 ABI" in m["captures"]["side"]
    assert m["captures"]["wheel"] == "flash_attn-2.7.2.post1+cu12torch2.6cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"
    assert m["remedies"][0]["requirement"] == "flash-attn==2.7.2.post1" and m["remedies"][0]["reinstall"]
    assert "--no-build-isolation" in m["commands"][0]


def test_x_transformers_context_and_version_confirm_the_library_bug():
    _, doc = explain_json("-f", str(LOGS / "x-transformers.log"))
    m = by_rule(doc)
    assert m["AD401"]["likelihood"] == "confirmed" and m["AD401"]["captures"]["value_dtype"] == "c10::BFloat16"
    # one cause, one finding: the line the release explains is not also the generic promotion's
    assert "AD601" not in m and m["AD401"]["cause"] == "version-pair"
    assert any(r.get("requirement") == "x-transformers>=1.30.2" for r in m["AD401"]["remedies"])


def test_harmless_only_exits_zero_and_says_so():
    proc = run("--file", str(LOGS / "windows-harmless.log"))
    out = proc.stdout.decode()
    assert proc.returncode == 0
    assert "harmless: This torch build has no SDPA flash kernel" in out


def test_nothing_matched_is_said_plainly_with_candidates():
    proc, doc = explain_json("--file", str(LOGS / "unmatched.log"))
    assert proc.returncode == 0 and doc["matches"] == []
    assert doc["candidates"] and doc["candidates"][0]["rule"] == "AD604"
    human = run("--file", str(LOGS / "unmatched.log")).stdout.decode()
    assert "No known failure signature matched." in human and "Closest known messages" in human


def test_text_argument_and_stdin_give_the_same_answer():
    message = "[rank0]: RuntimeError: FlashAttention only support fp16 and bf16 data type"
    _, from_text = explain_json(message)
    _, from_stdin = explain_json("-", input=message.encode())
    # one message, two causes: an fp32 model first, the promotion in a half-precision model second,
    # each with the trace command that tells them apart
    assert [m["rule"] for m in from_text["matches"]] == [m["rule"] for m in from_stdin["matches"]] == ["AD604", "AD601"]
    assert all("attn-doctor trace MODULE:FACTORY" in " ".join(m["notes"]) for m in from_text["matches"])
    assert from_stdin["input"]["source"] == "stdin"
    _, in_bf16 = explain_json("autocast: bf16\n" + message)
    assert [m["rule"] for m in in_bf16["matches"]] == ["AD601", "AD604"]


def test_gzip_and_utf16_logs_are_decoded(tmp_path):
    text = (LOGS / "t4-llamafactory.log").read_text()
    gz = tmp_path / "train.log.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    u16 = tmp_path / "train-ps.log"
    u16.write_bytes(text.encode("utf-16"))
    for path, note in ((gz, "gzip"), (u16, "UTF-16")):
        _, doc = explain_json("-f", str(path))
        assert "AD103" in by_rule(doc), path
        assert any(note in n for n in doc["notes"])


@pytest.mark.parametrize(
    "content, note",
    [
        (b"", "the input is empty"),
        (bytes(range(256)) * 400, "looks binary"),
        (b"caf\xe9 \xff\xfe broken\nRuntimeError: FlashAttention only supports Ampere GPUs or newer.\n", "not valid UTF-8"),
    ],
)
def test_hostile_input_gives_a_note_not_a_crash(tmp_path, content, note):
    path = tmp_path / "in.log"
    path.write_bytes(content)
    proc, doc = explain_json("--file", str(path))
    assert proc.returncode in (0, 1) and not proc.stderr
    assert any(note in n for n in doc["notes"]), doc["notes"]
    human = run("--file", str(path))
    assert b"Traceback" not in human.stderr and human.returncode == proc.returncode


def test_gigantic_single_line_is_read_in_windows(tmp_path):
    path = tmp_path / "one-line.log"
    filler = b"x" * (20 << 20)
    path.write_bytes(filler + b" RuntimeError: No available kernel. Aborting execution. " + filler)
    proc, doc = explain_json("--file", str(path), timeout=60)
    assert proc.returncode == 1 and by_rule(doc)["AD253"]["evidence"][0]["line"] == 1
    assert len(by_rule(doc)["AD253"]["evidence"][0]["text"]) < 1000


@pytest.mark.parametrize(
    "args, message",
    [
        (("--file", "/no/such/log"), "no such file"),
        (("--file", "/tmp"), "a folder"),
        (("text", "--file", "/etc/hostname"), "give the input once"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args, message):
    proc = run(*args)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err.startswith("attn-doctor: error:") and message in err and err.count("\n") == 1


def test_stdin_from_a_terminal_is_refused_not_waited_on():
    # A pseudo-terminal on stdin: the command must refuse at once instead of hanging.
    import os
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "attn_doctor", "explain", "-"], stdin=slave, capture_output=True, timeout=30)
        # no input at all (a piped stdin would be read: tests/test_cli_habits.py)
        bare = subprocess.run([sys.executable, "-m", "attn_doctor", "explain"], stdin=slave, capture_output=True, timeout=30)
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 2 and b"stdin is a terminal" in proc.stderr
    assert bare.returncode == 2 and b"nothing to explain" in bare.stderr and bare.stderr.count(b"\n") == 1


def test_check_probes_this_environment(schema):
    # This machine has no GPU and no flash-attn: the GPU-architecture causes are not present here.
    proc, doc = explain_json("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "--check", schema=schema, timeout=300)
    assert doc["checked"] is True
    m = by_rule(doc)
    assert m["AD103"]["live"]["status"] == "absent"
    _, sig_only = explain_json("ModuleNotFoundError: No module named 'flash_attn'", "--check", timeout=300)
    assert by_rule(sig_only)["AD350"]["live"]["status"] == "unknown"


def test_help_teaches_with_examples():
    proc = run("-h")
    out = proc.stdout.decode()
    assert proc.returncode == 0
    assert "attn-doctor explain --file" in out and "Exit codes" in out and "| attn-doctor explain -" in out


def test_rules_shows_signatures_and_lists_signature_only_rules():
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "rules", "AD650"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "Error signatures" in proc.stdout and "dype" in proc.stdout
