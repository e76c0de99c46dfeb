"""The command line, end to end, in real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "facts"
SCHEMA = json.loads((Path(__file__).parents[1] / "attn_doctor" / "schemas" / "report.schema.json").read_text())


def run(*args: str, env=None, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attn_doctor", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture(scope="module")
def full_json():
    proc = run("check", "--json")
    return proc, json.loads(proc.stdout)


def test_full_check_json_on_this_machine(full_json):
    proc, doc = full_json
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    facts = doc["facts"]
    assert facts["platform"]["python_executable"] == sys.executable
    assert facts["torch"]["status"] == "ok"
    import torch

    assert facts["torch"]["version"] == torch.__version__
    assert facts["torch"]["cxx11_abi"] == bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    assert {p["name"] for p in facts["probes"]} >= {"environment", "gpu", "torch"}
    # The sample forward pass ran in the target interpreter and judged the plain SDPA block clean.
    dtype_path = facts["dtype_path"]
    assert dtype_path["status"] == "ok" and dtype_path["device"] == "cpu"
    samples = {s["name"]: s["status"] for s in dtype_path["samples"]}
    assert samples["sdpa_block"] == "ran"
    assert dtype_path["findings"] == []
    assert proc.returncode == doc["exit_code"]
    if not torch.cuda.is_available():
        statuses = {r["rule"]: r["status"] for r in doc["results"]}
        assert statuses["AD101"] == "warning"  # no GPU, said plainly
        assert facts["gpu"]["devices"] == []


def test_json_never_changes_the_exit_code(full_json):
    proc, doc = full_json
    human = run("check")
    assert human.returncode == proc.returncode


def test_quick_does_not_import_torch():
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "attn_doctor", "check", "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "attn_doctor.cli" in imported  # the measurement works
    assert not any(name == "torch" or name.startswith("torch.") for name in imported)
    doc = json.loads(proc.stdout)
    assert doc["facts"]["quick"] is True
    assert doc["facts"]["torch"]["status"] == "skipped"
    assert "torch" in doc["facts"]["packages"]


def test_human_report_sections():
    proc = run("check", "--quick")
    out = proc.stdout
    for section in ("System:", "GPU:", "PyTorch:", "Attention kernels:", "Libraries:"):
        assert section in out
    assert "Quick mode" in out
    assert f"exit code {proc.returncode}" in out


@pytest.mark.parametrize(
    "fixture, code, expect",
    [
        ("h100", 0, ["NVIDIA H100", "sm90", "bf16 native"]),
        ("t4", 1, ["Tesla T4", "no native bf16", "AD103", "FlashAttention only supports Ampere GPUs or newer."]),
        ("flash-attn-undefined-symbol", 1, ["AD301", "c10::Error::Error", "pip install --force-reinstall"]),
        ("rtx5090", 1, ["AD104", "flash-attn>=2.7.3"]),
        ("torch-missing", 1, ["AD001", "torch is not installed"]),
        ("cpu-only", 0, ["no NVIDIA GPU found", "AD101"]),
    ],
)
def test_from_report(fixture, code, expect):
    proc = run("check", "--from-report", str(FIXTURES / f"{fixture}.json"))
    assert proc.returncode == code, proc.stdout + proc.stderr
    for text in expect:
        assert text in proc.stdout, f"{text!r} not in:\n{proc.stdout}"
    assert "recorded report" in proc.stdout


SECTIONS = {"system": "System", "gpu": "GPU", "torch": "PyTorch", "kernels": "Attention kernels", "libraries": "Libraries",
            "dtype": "Dtype path"}
MARK = {"crashed": "✗", "error": "✗", "warning": "!", "info": "i", "skipped": "-", "pass": "✓"}
WORST_FIRST = ["crashed", "error", "warning", "info", "skipped", "pass"]


@pytest.mark.parametrize("fixture", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_each_section_is_marked_by_its_results_and_says_what_is_true(fixture):
    """A section's mark is the worst status of the results in it (as the JSON report has them): a
    section with an error never shows ✓, nor one whose checks were skipped. A step missing from a
    recorded report says so, or the reason the report recorded; no cause is made up."""
    import attn_doctor

    path = FIXTURES / f"{fixture}.json"
    report = attn_doctor.check(from_report=path)
    proc = run("check", "--from-report", str(path))
    assert proc.returncode == report.exit_code, proc.stderr
    marks = {line[4:].split(":")[0]: line[1] for line in proc.stdout.splitlines() if line[:1] == "[" and line[2:4] == "] "}
    for area, title in SECTIONS.items():
        statuses = [r.status for r in report.results if r.area == area]
        assert statuses, area
        worst = min(statuses, key=WORST_FIRST.index)
        assert marks[title] == MARK[worst], f"{title}: {statuses}\n{proc.stdout}"
    assert "--no-sample" not in proc.stdout and "--no-smoke" not in proc.stdout  # nobody passed them
    dtype_path = report.facts.dtype_path
    if dtype_path.status == "skipped":
        said = f"skipped: {dtype_path.error}" if dtype_path.error else "not recorded in this report"
        assert f"] Dtype path: sample forward pass {said}\n" in proc.stdout, proc.stdout


def test_torch_missing_is_not_a_passed_pytorch_section():
    proc = run("check", "--from-report", str(FIXTURES / "torch-missing.json"))
    assert "AD001" in proc.stdout
    assert "[-] PyTorch: not installed\n" in proc.stdout
    assert "[✓] PyTorch" not in proc.stdout


def test_probed_check_says_which_option_skipped_a_step():
    proc = run("check", "--no-sample", "--no-smoke", "-v")
    assert proc.returncode in (0, 1), proc.stderr
    assert "] Dtype path: sample forward pass skipped: not asked for (--no-sample)\n" in proc.stdout
    assert "AD701 An attention backend fails its smoke test on this GPU: skipped, no smoke tests ran: not asked for (--no-smoke)" in proc.stdout
    assert "AD601 An implicit fp32 promotion reaches the attention kernel: skipped, the sample forward pass did not run: not asked for (--no-sample)" in proc.stdout


def test_report_round_trip(tmp_path):
    out = tmp_path / "{host}.json"
    first = run("check", "--from-report", str(FIXTURES / "t4.json"), "--json", "--output", str(out))
    written = list(tmp_path.glob("*.json"))
    assert len(written) == 1 and "{host}" not in written[0].name
    again = run("check", "--from-report", str(written[0]), "--json")
    a, b = json.loads(first.stdout), json.loads(again.stdout)
    assert a["facts"] == b["facts"]
    assert [(r["rule"], r["status"]) for r in a["results"]] == [(r["rule"], r["status"]) for r in b["results"]]


def test_fail_on_warning():
    assert run("check", "--from-report", str(FIXTURES / "cpu-only.json")).returncode == 0
    assert run("check", "--from-report", str(FIXTURES / "cpu-only.json"), "--fail-on", "warning").returncode == 1


def _one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("attn-doctor: error:")
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0]


def test_bad_input_unknown_flag():
    _one_line_error(run("check", "--bogus"), "--bogus")


def test_bad_input_python_not_an_interpreter(tmp_path):
    text = tmp_path / "python"
    text.write_text("not python\n")
    text.chmod(0o755)
    _one_line_error(run("check", "--python", str(text)), str(text), "not a working Python interpreter")
    _one_line_error(run("check", "--python", str(tmp_path / "missing")), f"--python {tmp_path / 'missing'}: no such file")
    _one_line_error(run("check", "--python", "no-such-python-anywhere"), "no such file, and no no-such-python-anywhere on PATH")


def test_usage_errors_name_the_flags():
    # The command line's messages name its flags (the Python API names its parameters: test_api.py).
    _one_line_error(run("check", "--from-report", str(FIXTURES / "t4.json"), "--quick"),
                    "--from-report diagnoses a recorded report; it cannot be combined with --python or --quick")
    _one_line_error(run("check", "--quick", "--cache-dir", __file__), f"--cache-dir {__file__}: not a folder")


def test_python_given_by_name_is_found_on_path(tmp_path):
    import os

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "trainpython").symlink_to(sys.executable)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = run("check", "--quick", "--json", "--python", "trainpython", env=env)
    assert proc.returncode in (0, 1), proc.stderr
    # the PATH entry itself, not the interpreter its symlink leads to
    assert json.loads(proc.stdout)["facts"]["platform"]["python_executable"] == str(bindir / "trainpython")


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"\x00\x01garbage", "not valid JSON"),
        (b'{"schema": "something/else"}', "not an attn-doctor report"),
        (b'{"hello": 1}', "not an attn-doctor report or facts file"),
        (b'{"schema": "attn-doctor/report", "schema_version": 99, "facts": {}}', "newer than this attn-doctor"),
        (b'{"platform": {"python_version": 3}}', "invalid facts"),
    ],
)
def test_bad_input_facts_file(tmp_path, content, needle):
    path = tmp_path / "report.json"
    path.write_bytes(content)
    _one_line_error(run("check", "--facts", str(path)), needle)


def test_bad_input_invalid_recipe_folder(tmp_path):
    (tmp_path / "x.toml").write_text('[[rule]]\nid = "AD1"\n')
    _one_line_error(run("check", "--recipes", str(tmp_path), "--quick"), "x.toml")


def test_verbose_shows_traceback_for_usage_errors(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("[]")
    proc = run("check", "--facts", str(path), "-v")
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr


def test_rules_list_and_show():
    listing = run("rules")
    assert listing.returncode == 0
    assert "AD301" in listing.stdout and "flash-attn-undefined-symbol" in listing.stdout
    one = run("rules", "flash-attn-undefined-symbol")
    assert one.returncode == 0 and "undefined symbol" in one.stdout and "Remedies" in one.stdout
    missing = run("rules", "AD000")
    _one_line_error(missing, "AD000")


def test_check_schema_is_the_shipped_schema():
    proc = run("check", "--schema")
    assert json.loads(proc.stdout) == SCHEMA


def test_secrets_never_reach_the_report():
    import os

    env = dict(os.environ)
    env.update(
        HF_TOKEN="hf_abcdefghijklmnopqrstuvwxyz012345",
        WANDB_API_KEY="0123456789abcdef0123456789abcdef",
        PIP_INDEX_URL="https://alice:s3cr3tpass@pypi.example.com/simple",
        CUDA_VISIBLE_DEVICES="0,1",
    )
    proc = run("check", "--quick", "--json", env=env)
    text = proc.stdout
    for secret in ("hf_abcdefghijklmnopqrstuvwxyz012345", "0123456789abcdef0123456789abcdef", "s3cr3tpass", "alice"):
        assert secret not in text
    doc = json.loads(text)
    assert doc["facts"]["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert doc["facts"]["env"]["HF_TOKEN"] == "***"


def test_bad_config_file_is_a_note_and_the_rest_of_the_report(tmp_path):
    bad = tmp_path / "train.yaml"
    bad.write_text("model_name_or_path: x\nflash_attn: [\n")  # a YAML that does not parse
    proc = run("check", "--quick", "--config", str(bad))
    alone = run("check", "--quick")
    # the file is not the job: the exit code is the rest's
    assert proc.returncode == alone.returncode and "Traceback" not in proc.stderr, proc.stderr
    assert f"i {bad}: not read: YAML syntax error at line 3" in proc.stdout and "AD512 config-unreadable" in proc.stdout
    assert "[✓] Libraries" in proc.stdout  # the rest of the report is there
    env = dict(__import__("os").environ, ATTN_DOCTOR_STATE_DIR=str(tmp_path / "state"))
    fix = run("fix", "--dry-run", "--quick", "--config", str(bad), env=env)
    _one_line_error(fix, "YAML syntax error at line 3")


def test_fix_refuses_an_unknown_rule_id(tmp_path):
    env = dict(__import__("os").environ, ATTN_DOCTOR_STATE_DIR=str(tmp_path / "state"))
    _one_line_error(run("fix", "--dry-run", "--quick", "--only", "AD999", env=env), "AD999")
    assert run("fix", "--dry-run", "--quick", "--skip", "AD401", env=env).returncode == 0


def test_explain_a_truncated_gzip_log(tmp_path):
    import gzip

    line = "[rank3]: ImportError: /x/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs\n"
    whole = gzip.compress((line * 2000).encode())
    cut = tmp_path / "train.log.gz"
    cut.write_bytes(whole[:300])  # the job died while the log was being written
    proc = run("explain", "--file", str(cut))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # what was read before the cut is explained
    assert "AD301" in proc.stdout and "truncated or corrupt" in proc.stdout
    assert "interrupted" not in proc.stderr


def test_trace_of_a_file_that_is_not_python(tmp_path):
    config = tmp_path / "model.yaml"
    config.write_text("a: 1\n")
    proc = run("trace", f"{config}:build")
    assert proc.returncode == 2 and "is not a Python file" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_trace_python_that_does_not_exist(tmp_path):
    _one_line_error(run("trace", "model.py:build", "--python", str(tmp_path / "nope")), "--python", "no such file")


def test_main_returns_to_its_caller_and_only_the_command_skips_torchs_teardown():
    # main() called from someone's own process (torch imported, as in a training script) exits with
    # SystemExit, which the caller can catch; the attn-doctor process itself (entry) skips the
    # module teardown of the torch it imported, after running the atexit handlers.
    code = ("import atexit, sys, torch\n"
            "atexit.register(print, 'atexit ran', flush=True)\n"
            "from attn_doctor import cli\n"
            "sys.argv = ['attn-doctor', 'rules', '--json']\n"
            "try:\n"
            "    getattr(cli, %r)()\n"
            "except SystemExit as exc:\n"
            "    print('CAUGHT-SYSTEMEXIT', exc.code, flush=True)\n")
    caller = subprocess.run([sys.executable, "-c", code % "main"], capture_output=True, text=True, timeout=120)
    assert caller.returncode == 0 and "CAUGHT-SYSTEMEXIT 0" in caller.stdout and "atexit ran" in caller.stdout, caller.stderr[-2000:]
    command = subprocess.run([sys.executable, "-c", code % "entry"], capture_output=True, text=True, timeout=120)
    assert command.returncode == 0 and "CAUGHT-SYSTEMEXIT" not in command.stdout and "atexit ran" in command.stdout, command.stderr[-2000:]


@pytest.mark.parametrize("flash_attn", ["missing", "error", "ok"])
def test_a_sample_judged_with_the_stand_in_says_so(tmp_path, flash_attn):
    # ✓ means it ran on the real thing: flash_attn_block ran on the stand-in where flash_attn does not import.
    doc = json.loads((FIXTURES / "h100.json").read_text())
    doc["imports"]["flash_attn"] = {"status": flash_attn, "version": "2.8.3" if flash_attn == "ok" else None,
                                    "error": {"type": "ImportError", "message": "libcudart.so.12: cannot open shared "
                                              "object file: No such file or directory"} if flash_attn == "error" else None}
    if flash_attn != "missing":
        doc["packages"]["flash-attn"] = {"version": "2.8.3"}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    proc = run("check", "--from-report", str(path))
    line = next(l for l in proc.stdout.splitlines() if "] Dtype path:" in l)
    words = {"missing": "flash-attn not installed", "error": "flash-attn does not import"}.get(flash_attn)
    if words:
        assert f"flash_attn_block ✓ ({words}: judged with a stand-in)," in line, line
    else:
        assert "flash_attn_block ✓," in line and "stand-in" not in line, line


def test_the_dtype_path_names_the_kernel_at_each_call_site_of_a_sample(tmp_path):
    # A report's kernels are input: shown bounded and without control characters.
    doc = json.loads((FIXTURES / "h100.json").read_text())
    (sample,) = [s for s in doc["dtype_path"]["samples"] if s["name"] == "sdpa_block"]
    sample["kernels"] = [{"name": "cudnn", "label": "SDPA cuDNN", "source": "torch", "for": "this GPU",
                          "file": "attn_doctor/tracing/runs/samples.py", "line": 40, "count": 2},
                         {"name": "math", "label": "SDPA math\x1b[2J", "source": "torch", "for": "this GPU",
                          "file": "attn_doctor/tracing/runs/samples.py", "line": 41, "count": 1}]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    proc = run("check", "--from-report", str(path))
    line = next(l for l in proc.stdout.splitlines() if "] Dtype path:" in l)
    assert "sdpa_block ✓ → SDPA cuDNN ×2, SDPA math[2J" in line and "\x1b" not in proc.stdout, line
