"""Hardening: private files stay private, every file input has a bound, and each flag either
does something or is refused. Everything through the real CLI in a subprocess, on real files,
FIFOs and character devices."""

from __future__ import annotations


import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FACTS = REPO / "tests" / "fixtures" / "facts"
CONFIGS = REPO / "tests" / "fixtures" / "configs"
T4 = str(FACTS / "t4.json")


def cli(*args, state=None, env_extra=None, timeout=60, stdin=subprocess.DEVNULL, input=None, cwd=None):
    env = dict(os.environ, COLUMNS="200")
    if state is not None:
        env["ATTN_DOCTOR_STATE_DIR"] = str(state)
    env.update(env_extra or {})
    kw = {"input": input} if input is not None else {"stdin": stdin}
    return subprocess.run(
        [sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd, **kw
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


PROGRESS_LINE = re.compile(r"^attn-doctor: (?!error: ).* \(\d+ s\)$")


def one_line_usage_error(proc, code=2):
    """The documented shape of bad input: exit `code`, one line on stderr, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    # a slow stage (importing torch on a busy machine) may have said how far it got, on its own line
    lines = [line for line in proc.stderr.strip().splitlines() if not PROGRESS_LINE.match(line)]
    assert len(lines) == 1 and lines[0].startswith("attn-doctor: error: "), proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    return lines[0]


def config_finding(proc, path):
    """The documented shape of a --config file that cannot be read. check: one AD512 note that names
    the file and the reason in plain words, the rest of the report printed, no traceback, and an exit
    code that is the job's other findings' (the note alone never fails the check). fix: a usage
    error (exit 2), one line naming the file and the reason: it cannot change a file it cannot read.
    Returns the line."""
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    if proc.returncode == 2:
        line = one_line_usage_error(proc)
        assert "fix cannot change a file it cannot read" in line and str(path)[:40] in line, line
        return line
    assert proc.returncode in (0, 1), (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert proc.stdout.count("AD512 config-unreadable") == 1, proc.stdout[-3000:]
    assert "System:" in proc.stdout and "GPU" in proc.stdout  # every other section is there too
    lines = [line for line in proc.stdout.splitlines() if str(path)[:60] in line and "not judged" in line]
    assert len(lines) == 1 and lines[0].lstrip().startswith("i ") and ": not read: " in lines[0], proc.stdout[-3000:]
    assert "file read" not in next(line for line in proc.stdout.splitlines() if "Configs:" in line)
    return lines[0]


# ---------------------------------------------------------------- 1. private files stay private


def test_fix_journal_is_private_and_copies_keep_the_source_mode(tmp_path):
    state = tmp_path / "state"
    secret = tmp_path / "train_secret.yaml"
    shutil.copyfile(CONFIGS / "llamafactory_lora_bf16.yaml", secret)
    with open(secret, "a") as fh:
        fh.write("hub_token: hf_abcdefghijklmnopqrstuvwxyz0123456789\n")
    os.chmod(secret, 0o600)
    shared = tmp_path / "ds.json"
    shutil.copyfile(CONFIGS / "deepspeed_z2_bf16.json", shared)
    os.chmod(shared, 0o644)
    old = os.umask(0o022)  # the usual umask: what a careless copy would get
    try:
        proc = cli("fix", "--from-report", T4, "--config", str(secret), "--config", str(shared), "--yes", "--json", state=state, timeout=120)
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)["run"]
    run_dir = state / "runs" / run
    assert mode(state) == 0o700 and mode(state / "runs") == 0o700
    assert mode(run_dir) == 0o700 and mode(run_dir / "files") == 0o700
    assert mode(state / "lock") == 0o600 and mode(run_dir / "journal.json") == 0o600
    journal = json.loads((run_dir / "journal.json").read_text())
    backups = {Path(e["path"]).name: run_dir / "files" / e["backup"] for e in journal["files"]}
    assert set(backups) == {"train_secret.yaml", "ds.json"}
    assert mode(backups["train_secret.yaml"]) == 0o600  # the token stays readable by its owner only
    assert b"hf_abcdefghij" in backups["train_secret.yaml"].read_bytes()
    assert mode(backups["ds.json"]) == 0o644  # the source's mode, not wider and not narrower
    # and undo still restores them byte for byte with their modes
    undo = cli("fix", "--undo", state=state)
    assert undo.returncode == 0, undo.stderr
    assert mode(secret) == 0o600 and "hub_token" in secret.read_text()


def test_journal_copy_is_never_wider_than_its_source(tmp_path):
    from attn_doctor.fix.journal import Journal

    root = tmp_path / "state"
    journal = Journal.create(root, sys.executable, "probed", ["fix"])
    for i, source_mode in enumerate((0o600, 0o640, 0o400, 0o755, 0o666)):
        f = tmp_path / f"f{i}"
        f.write_text("x")
        os.chmod(f, source_mode)
        entry = journal.snapshot_file(f)
        copy = journal.dir / "files" / entry["backup"]
        assert mode(copy) & ~source_mode == 0, (oct(source_mode), oct(mode(copy)))  # never wider
        assert mode(copy) == source_mode & 0o755  # its own bits, less write for others
        assert entry["mode"] == source_mode  # what undo puts back


def test_state_runs_folder_of_an_older_version_is_narrowed(tmp_path):
    from attn_doctor.fix.journal import Lock

    state = tmp_path / "state"
    (state / "runs" / "20260101-000000-abcd" / "files").mkdir(parents=True)
    os.chmod(state / "runs", 0o755)
    (state / "lock").touch()
    os.chmod(state / "lock", 0o644)
    with Lock(state):
        pass
    assert mode(state / "runs") == 0o700 and mode(state / "lock") == 0o600


# ---------------------------------------------------------------- 4. flags: used or refused


def test_fix_undo_of_an_unknown_run_is_a_usage_error(tmp_path):
    line = one_line_usage_error(cli("fix", "--undo", "NOSUCHRUN", state=tmp_path / "state"))
    assert "no fix run 'NOSUCHRUN'" in line


@pytest.mark.parametrize("extra", [["--dry-run"], ["--config", "x.yaml"], ["--only", "AD401"], ["--quick"]])
def test_fix_undo_refuses_options_it_would_ignore(tmp_path, extra):
    # --undo --dry-run used to undo for real
    line = one_line_usage_error(cli("fix", "--undo", *extra, state=tmp_path / "state"))
    assert extra[0] in line


def test_fix_history_refuses_undo(tmp_path):
    line = one_line_usage_error(cli("fix", "--history", "--undo", state=tmp_path / "state"))
    assert "--history does not take --undo" in line


@pytest.mark.parametrize("extra", [["AD301"], ["--recipes", str(REPO / "recipes")]])
def test_rules_schema_refuses_what_it_would_ignore(extra):
    line = one_line_usage_error(cli("rules", "--schema", *extra))
    assert "--schema" in line
    ok = cli("rules", "--schema")
    assert ok.returncode == 0 and json.loads(ok.stdout)["title"].startswith("attn-doctor rules")


# ---------------------------------------------------------------- 2. every file input has a bound

BOMB_YAML = "".join(
    [
        "model_name_or_path: x\n",
        'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n',
        *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)),
        "flash_attn: *a8\n",
    ]
)

# Each command that reads a file, as (argv before the path, argv after it).
READERS = {
    "check --from-report": (["check", "--from-report"], []),
    "check --facts": (["check", "--facts"], []),
    "fleet": (["fleet"], []),
    "check --config": (["check", "--quick", "--config"], []),
    "fix --config": (["fix", "--from-report", T4, "--dry-run", "--config"], []),
    "explain --file": (["explain", "--file"], []),
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    fifo = d / "report.json"
    os.mkfifo(fifo)  # nobody ever writes: opening it for reading blocks forever
    deep = d / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    deep_obj = d / "deep_obj.json"
    deep_obj.write_text('{"a":' * 5_000 + "1" + "}" * 5_000)
    deep_yaml = d / "deep.yaml"
    deep_yaml.write_text("model_name_or_path: x\nflash_attn: " + "[" * 5_000 + "]" * 5_000 + "\n")
    nested_yaml = d / "nested.yaml"  # block style, not flow: 200 levels of indentation
    nested_yaml.write_text("model_name_or_path: x\n" + "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v: 1\n")
    bomb = d / "bomb.yaml"
    bomb.write_text(BOMB_YAML)
    huge = d / "huge.json"
    with open(huge, "wb") as fh:  # sparse: 40 MiB that take no disk
        fh.truncate(40 << 20)
    huge_yaml = d / "huge.yaml"
    huge_yaml.write_text("model_name_or_path: x\n" + "".join(f"key_{i}: value_{i}\n" for i in range(80_000)))
    return {
        "fifo": fifo, "zero": Path("/dev/zero"), "deep": deep, "deep_obj": deep_obj, "deep_yaml": deep_yaml,
        "nested_yaml": nested_yaml, "bomb": bomb, "huge": huge, "huge_yaml": huge_yaml, "folder": d,
        "long": d / ("x" * 5000),
    }


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("kind,needle", [
    ("fifo", "a FIFO (named pipe), not a regular file"),
    ("zero", "a character device, not a regular file"),
    ("long", "File name too long"),
])
def test_inputs_that_never_end_are_refused_at_once(hostile, tmp_path, reader, kind, needle):
    before, after = READERS[reader]
    started = time.monotonic()
    proc = cli(*before, str(hostile[kind]), *after, state=tmp_path / "state", timeout=30)
    # a config that cannot be read is a finding, and the rest of the report; any other input: a usage error
    line = config_finding(proc, hostile[kind]) if reader.endswith("--config") else one_line_usage_error(proc)
    assert needle in line
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("reader", ["check --from-report", "fleet", "check --config", "fix --config"])
@pytest.mark.parametrize("kind", ["deep", "deep_obj"])
def test_deeply_nested_json_is_one_line_not_a_recursion_error(hostile, tmp_path, reader, kind):
    before, after = READERS[reader]
    proc = cli(*before, str(hostile[kind]), *after, state=tmp_path / "state")
    line = config_finding(proc, hostile[kind]) if reader.endswith("--config") else one_line_usage_error(proc)
    if reader == "fleet" and kind == "deep":
        # fleet decodes a report as its typed view: an array, however deep, is refused at its first byte
        assert "not a JSON object" in line
    else:
        assert "nested deeper than 64 levels" in line


@pytest.mark.parametrize("kind,needle", [
    ("deep_yaml", "nested deeper than 64 levels"),
    ("nested_yaml", "nested deeper than 64 levels"),
    ("bomb", "values once its aliases are expanded"),
    ("huge_yaml", "larger than the 1 MiB this input accepts"),
])
def test_yaml_configs_are_bounded(hostile, kind, needle):
    started = time.monotonic()
    line = config_finding(cli("check", "--quick", "--config", str(hostile[kind])), hostile[kind])
    assert needle in line
    assert time.monotonic() - started < 20


def test_yaml_that_refers_to_itself_is_refused(tmp_path):
    cfg = tmp_path / "loop.yaml"
    cfg.write_text("model_name_or_path: x\nflash_attn: &loop [1, *loop]\n")
    line = config_finding(cli("check", "--quick", "--config", str(cfg)), cfg)
    assert "contains itself" in line


@pytest.mark.parametrize("reader", ["check --from-report", "fleet"])
def test_reports_larger_than_the_bound_are_refused_unread(hostile, reader):
    before, after = READERS[reader]
    line = one_line_usage_error(cli(*before, str(hostile["huge"]), *after))
    assert "40 MiB, larger than the 32 MiB this input accepts" in line


def test_json_config_with_a_huge_integer_is_a_finding(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "llama", "head_dim": ' + "9" * 5000 + "}")
    line = config_finding(cli("check", "--quick", "--config", str(cfg)), cfg)
    assert "not a usable JSON config" in line


def test_config_from_stdin_is_refused_plainly():
    line = config_finding(cli("check", "--quick", "--config", "-"), "-:")
    assert "'-' (stdin) is not accepted here" in line


def test_fleet_folder_skips_what_is_not_a_regular_file(hostile, tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    os.mkfifo(folder / "stuck.json")
    (folder / "dev.json").symlink_to("/dev/zero")
    good = cli("check", "--from-report", T4, "--json")
    (folder / "t4.json").write_text(good.stdout)
    proc = cli("fleet", str(folder), "--json", timeout=30)
    assert proc.returncode == 1, proc.stderr  # the T4 report has errors; nothing blocked
    assert json.loads(proc.stdout)["summary"]["received"] == 1


def test_report_from_stdin_still_works():
    report = cli("check", "--from-report", T4, "--json").stdout
    for path in ("-", "/dev/stdin"):
        proc = cli("check", "--from-report", path, "--json", input=report)
        assert proc.returncode == 1, proc.stderr
        assert json.loads(proc.stdout)["facts"]["gpu"]["devices"][0]["name"] == "Tesla T4"
    endless = subprocess.Popen(["yes", "["], stdout=subprocess.PIPE)
    try:
        proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--from-report", "-"], stdin=endless.stdout,
                              capture_output=True, text=True, timeout=60)
    finally:
        endless.kill()
        endless.wait()
    assert "more than the 32 MiB this input accepts" in one_line_usage_error(proc)


def test_explain_streams_stdin_and_dev_stdin_but_refuses_devices(hostile):
    message = "RuntimeError: FlashAttention only support fp16 and bf16 data type\n"
    for args in (["-"], ["--file", "-"], ["--file", "/dev/stdin"]):
        proc = cli("explain", *args, "--json", input=message * 3)
        assert proc.returncode == 1, (args, proc.stderr)
        assert json.loads(proc.stdout)["matches"][0]["rule"] == "AD604"
    # a regular log of any size is still read, streamed (no size bound)
    assert cli("explain", "--file", str(hostile["huge"])).returncode == 0


# trace: bad input is the same one line as everywhere else, on stderr, and flags are used or refused

TOY = str(REPO / "tests" / "trace" / "toys" / "healthy_toy.py")


@pytest.mark.parametrize("args,needle", [
    ([], "give exactly one of MODULE:FACTORY or --hf PATH"),
    (["no_such_module_xyz:build"], "no module named 'no_such_module_xyz'"),
    (["TOY:build_bf16", "--attn-implementation", "eager"], "--attn-implementation goes with --hf"),
    (["TOY:build_bf16", "--json", "--patch"], "give one of --json"),
    (["TOY:build_bf16", "--dtype", "int8"], "--dtype must be one of"),
    (["TOY:no_such_factory"], "has no attribute 'no_such_factory'"),
])
def test_trace_usage_errors_are_one_line(args, needle):
    proc = cli("trace", *[a.replace("TOY", TOY) for a in args], timeout=120)
    line = one_line_usage_error(proc)
    assert needle in line
    assert proc.stdout == ""  # no half-rendered report before the error


# ---------------------------------------------------------------- 5. probe output stays off the terminal

CHATTY_XFORMERS = '''
import sys, warnings
print("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:", file=sys.stderr)
print("    PyTorch 2.10.0+cu128 with CUDA 1208 (you have 2.13.0+cpu)", file=sys.stderr)
print("    token for the mirror: hf_abcdefghijklmnopqrstuvwxyz0123", file=sys.stderr)
print("chatter on stdout at import")
warnings.warn("xformers: a UserWarning at import")
__version__ = "0.0.35"
'''


@pytest.fixture(scope="module")
def chatty_site(tmp_path_factory):
    site = tmp_path_factory.mktemp("chatty")
    (site / "xformers").mkdir()
    (site / "xformers" / "__init__.py").write_text(CHATTY_XFORMERS)
    (site / "xformers" / "ops.py").write_text("")
    return site


def test_third_party_warnings_go_to_the_report_not_the_terminal(chatty_site, tmp_path):
    import importlib.util

    env = {"PYTHONPATH": str(chatty_site), "ATTN_DOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    proc = cli("check", "--no-sample", "--json", env_extra=env, timeout=180)
    assert proc.returncode in (0, 1), proc.stderr
    assert "XFORMERS" not in proc.stderr and "UserWarning" not in proc.stderr and "NumPy" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    assert report["facts"]["imports"]["xformers"]["status"] == "ok"
    torch_probe = next(p for p in report["facts"]["probes"] if p["name"] == "torch")
    printed = torch_probe["stderr"]["import:xformers"]
    assert "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions" in printed
    assert "xformers: a UserWarning at import" in printed and "chatter on stdout at import" in printed
    assert "hf_abcdefghij" not in printed and "***" in printed  # redacted like the environment
    if importlib.util.find_spec("numpy") is None:
        # the real torch of this environment, imported by the probe without numpy beside it
        assert "Failed to initialize NumPy" in torch_probe["stderr"]["torch"]
    # -v shows it, under the process that printed it; the plain report does not
    verbose = cli("check", "--no-sample", "-v", env_extra=env, timeout=180)
    assert "import:xformers printed (kept off your terminal):" in verbose.stdout
    assert "WARNING[XFORMERS]" in verbose.stdout and "WARNING[XFORMERS]" not in verbose.stderr
    plain = cli("check", "--no-sample", env_extra=env, timeout=180)
    assert "WARNING[XFORMERS]" not in plain.stdout + plain.stderr


@pytest.mark.parametrize("path,value", [
    (("gpu", "devices", 0, "capability"), ""),  # AD105 parsed it: ValueError, a crashed check
    (("torch", "devices", 0, "capability"), "sm75"),
    (("dtype_path", "capability"), "9" * 5000),
])
def test_report_with_a_capability_the_rules_cannot_read_is_refused(tmp_path, path, value):
    doc = json.loads((FACTS / "t4.json").read_text())
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    report = tmp_path / "edited.json"
    report.write_text(json.dumps(doc))
    line = one_line_usage_error(cli("check", "--from-report", str(report)))
    assert "capability" in line and "matching regex" in line


def test_report_with_a_sample_summary_the_renderer_cannot_add_is_refused(tmp_path):
    doc = json.loads((FACTS / "dtype-promotion.json").read_text())
    doc["dtype_path"]["samples"][0]["summary"]["errors"] = "1"
    report = tmp_path / "edited.json"
    report.write_text(json.dumps(doc))
    line = one_line_usage_error(cli("check", "--from-report", str(report)))
    assert "summary" in line


def test_report_with_a_loose_tracer_finding_is_judged_not_crashed(tmp_path):
    # the tracer's findings stay loose JSON; a `sink` that is not an object crashed AD601's check
    doc = json.loads((FACTS / "dtype-promotion.json").read_text())
    doc["dtype_path"]["findings"][0]["sink"] = True
    report = tmp_path / "edited.json"
    report.write_text(json.dumps(doc))
    proc = cli("check", "--from-report", str(report), "--json")
    results = {r["rule"]: r["status"] for r in json.loads(proc.stdout)["results"]}
    assert results["AD601"] == "error" and "crashed" not in results.values()


def test_fix_on_a_flow_style_yaml_says_edit_by_hand(tmp_path):
    # found by tests/fuzz: the in-place edit ate the closing brace, and the read-back's YAML error
    # escaped as an internal error
    cfg = tmp_path / "train.yaml"
    text = "{model_name_or_path: x, finetuning_type: lora, flash_attn: fa2, bf16: true}\n"  # LLaMA-Factory's keys
    cfg.write_text(text)
    proc = cli("fix", "--from-report", T4, "--config", str(cfg), "--dry-run", state=tmp_path / "state")
    assert proc.returncode == 0, proc.stderr
    assert "a flow-style mapping on one line ({key: value, ...}); edit it by hand" in proc.stdout
    assert cfg.read_text() == text
