"""The habits users bring from pip, pytest and brew doctor: one flag vocabulary across commands,
check --only/--skip, explain reading a piped stdin, a one-line Ctrl-C, errors that point at the
place. Real subprocesses, real signals."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "facts"
COMMANDS = ("check", "explain", "trace", "fix", "fleet", "rules")


def run(*args, input=None, cwd=None, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, input=input,
                          cwd=cwd, env=env, timeout=timeout)


PROGRESS_LINE = re.compile(r"^attn-doctor: .* \(\d+ s\)$")


def _without_progress(stderr):
    """stderr's lines but the progress a trace writes to a pipe once it has run a couple of seconds
    (`attn-doctor: importing ./slow.py (3 s)`): what the command said besides how far it got."""
    return [line for line in stderr.strip().splitlines() if not PROGRESS_LINE.match(line)]


def _help(command):
    proc = run(command, "-h")
    assert proc.returncode == 0
    return proc.stdout


# ---------------------------------------------------------------- 1. one flag vocabulary


def test_version_short_and_long():
    for flag in ("-V", "--version"):
        proc = run(flag)
        assert proc.returncode == 0 and proc.stdout.startswith("attn-doctor ")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_spells_the_shared_flags_alike(command):
    text = _help(command)
    assert "-q, --quiet" in text and "--no-color" in text
    assert "--json" in text and "--schema" in text
    if command != "rules":
        assert "-v, --verbose" in text
    if command in ("check", "explain", "trace", "fix"):
        assert "-p, --python PATH" in text
    if command in ("check", "trace"):
        assert "--capability MAJOR.MINOR" in text
    assert "-q, --quick" not in text  # -q is quiet everywhere, as in pip, pytest and uv


def test_quiet_is_the_summary_line_only():
    loud = run("check", "--from-report", str(FIXTURES / "t4.json"))
    quiet = run("check", "--from-report", str(FIXTURES / "t4.json"), "-q")
    assert quiet.returncode == loud.returncode == 1
    # each problem's one line (which rule failed), then the summary line; nothing else
    lines = quiet.stdout.splitlines()
    assert lines[-1] == loud.stdout.splitlines()[-1]
    report = json.loads(run("check", "--from-report", str(FIXTURES / "t4.json"), "--json").stdout)
    failed = [r for r in report["results"] if r["status"] in ("error", "warning")]
    assert lines[:-1] == sorted(["%s %s %s: %s" % ("✗" if r["status"] == "error" else "!", r["rule"], r["name"], r["title"])
                                 for r in failed], key=lambda line: not line.startswith("✗"))
    assert any(line.startswith("✗ AD103") for line in lines)  # the error the T4 report holds
    assert "exit code 1" in quiet.stdout
    explained = run("explain", "-q", "RuntimeError: FlashAttention only supports Ampere GPUs or newer.")
    assert len(explained.stdout.splitlines()) == 1 and "(exit code 1)" in explained.stdout


def test_quiet_still_prints_errors():
    proc = run("check", "-q", "--only", "AD9999")
    assert proc.returncode == 2 and proc.stdout == "" and "attn-doctor: error:" in proc.stderr


def test_quiet_and_verbose_together_is_a_usage_error():
    proc = run("check", "-q", "-v", "--from-report", str(FIXTURES / "t4.json"))
    assert proc.returncode == 2 and "-q/--quiet or -v/--verbose" in proc.stderr


def test_no_color_even_where_colour_is_forced():
    env = dict(os.environ, FORCE_COLOR="1")
    env.pop("NO_COLOR", None)
    coloured = run("check", "--from-report", str(FIXTURES / "t4.json"), env=env)
    assert "\x1b[" in coloured.stdout  # the measurement works: FORCE_COLOR colours a pipe
    plain = run("check", "--from-report", str(FIXTURES / "t4.json"), "--no-color", env=env)
    assert "\x1b[" not in plain.stdout and plain.stdout


def test_trace_takes_p_and_check_takes_major_minor():
    proc = run("trace", "-p", "/nonexistent/python", "x:y")
    assert proc.returncode == 2 and "/nonexistent/python" in proc.stderr


# ---------------------------------------------------------------- 3. check --only / --skip


def test_check_only_and_skip():
    t4 = str(FIXTURES / "t4.json")
    full = json.loads(run("check", "--from-report", t4, "--json").stdout)
    failing = [r["rule"] for r in full["results"] if r["status"] == "error"]
    assert failing
    only = json.loads(run("check", "--from-report", t4, "--json", "--only", failing[0]).stdout)
    assert [r["rule"] for r in only["results"]] == [failing[0]] and only["exit_code"] == 1
    skipped = json.loads(run("check", "--from-report", t4, "--json", *[a for r in failing for a in ("--skip", r)]).stdout)
    assert not {r["rule"] for r in skipped["results"]} & set(failing)
    assert skipped["exit_code"] == 0 and len(skipped["results"]) == len(full["results"]) - len(failing)


def test_check_only_by_name_and_unknown_ids_suggest():
    t4 = str(FIXTURES / "t4.json")
    named = json.loads(run("check", "--from-report", t4, "--json", "--only", "flash-attn-undefined-symbol").stdout)
    assert [r["name"] for r in named["results"]] == ["flash-attn-undefined-symbol"]
    typo = run("check", "--from-report", t4, "--only", "flash-attn-undefined-symbl")
    assert typo.returncode == 2 and len(typo.stderr.strip().splitlines()) == 1
    assert "did you mean flash-attn-undefined-symbol" in typo.stderr
    skip = run("check", "--from-report", t4, "--skip", "AD30l")
    assert skip.returncode == 2 and "--skip AD30l: no such rule" in skip.stderr


# ---------------------------------------------------------------- 4. explain reads a piped stdin


def test_explain_reads_a_piped_stdin():
    proc = run("explain", "--json", input="RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["input"]["source"] == "stdin" and doc["matches"]


def test_explain_empty_input_is_one_line():
    proc = run("explain", input="")
    assert proc.returncode == 0
    assert proc.stdout.strip().splitlines() == ["Nothing to explain: the input is empty  (exit code 0)"]


# ---------------------------------------------------------------- 5. Ctrl-C: one line, exit 130


def _start(*args, cwd=None, stdin=subprocess.DEVNULL):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    # a child of a non-interactive shell may start with SIGINT ignored; Ctrl-C reaches a shell's
    # foreground job with the default handler
    return subprocess.Popen([sys.executable, "-m", "attn_doctor", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=stdin, cwd=cwd, env=env, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(condition, proc, limit=60.0):
    deadline = time.monotonic() + limit
    while not condition():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the command never reached the point to interrupt"
        time.sleep(0.05)


def _children(pid):
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def _interrupt(proc):
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc to see the probe start")
def test_ctrl_c_during_check_probes():
    proc = _start("check", "--no-cache")
    _wait_for(lambda: _children(proc.pid), proc)  # a probe child runs: the doctor waits on it
    code, out, err = _interrupt(proc)
    assert code == 130 and out == ""
    assert err.strip().splitlines() == ["attn-doctor: check interrupted; nothing was changed"]


@pytest.mark.skipif(not Path("/proc/self/wchan").exists(), reason="reads /proc to see the read start")
def test_ctrl_c_during_explain_reading_stdin():
    proc = _start("explain", stdin=subprocess.PIPE)
    _wait_for(lambda: "pipe" in Path(f"/proc/{proc.pid}/wchan").read_text(), proc)
    code, out, err = _interrupt(proc)
    assert code == 130 and out == ""
    assert err.strip().splitlines() == ["attn-doctor: explain interrupted; nothing was changed"]


def test_ctrl_c_during_a_trace_factory(tmp_path):
    marker = tmp_path / "building"
    (tmp_path / "slow.py").write_text(textwrap.dedent(f"""
        import time
        def build(device="meta"):
            open({str(marker)!r}, "w").close()
            time.sleep(120)
    """))
    proc = _start("trace", "./slow.py:build", cwd=tmp_path)
    _wait_for(marker.exists, proc, limit=120)
    code, out, err = _interrupt(proc)
    # not "the factory raised KeyboardInterrupt": the user stopped it
    assert code == 130 and out == ""
    assert _without_progress(err) == ["attn-doctor: trace interrupted; nothing was changed"]


# ---------------------------------------------------------------- 6. errors that point


def test_trace_names_the_users_file_and_suggests_the_factory(tmp_path):
    (tmp_path / "mymodel.py").write_text("def build(device='meta'):\n    pass\n\ndef helper():\n    pass\n")
    proc = run("trace", "./mymodel.py:biuld", cwd=tmp_path)
    assert proc.returncode == 2
    assert _without_progress(proc.stderr) == ["attn-doctor: error: ./mymodel.py has no attribute 'biuld'; did you mean 'build'?"]
    assert "attn_doctor_target" not in proc.stderr


@pytest.mark.parametrize("args,said", [
    (("./nothere.py:build",), "no such file: ./nothere.py"),
    (("--hf", "./nothere"), "--hf ./nothere: no such file or folder"),
])
def test_trace_of_a_missing_file_answers_before_torch_is_imported(tmp_path, args, said):
    # a torch that cannot be imported on the path: the answer must come before any import of it
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise SystemExit('torch was imported')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["PYTHONPATH"] = os.pathsep.join([str(fake)] + [p for p in (env.get("PYTHONPATH") or "").split(os.pathsep) if p])
    proc = run("trace", *args, cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "attn-doctor: error: " + said


def test_a_long_trace_says_how_far_it_got_on_a_pipe_too(tmp_path):
    # stderr a pipe (a job's log, `| tee`): no spinner, but a line per stage once it ran a couple of seconds
    (tmp_path / "slow.py").write_text(textwrap.dedent("""
        import time
        import torch
        import torch.nn.functional as F

        class Attn(torch.nn.Module):
            def forward(self, x):
                return F.scaled_dot_product_attention(x, x, x)

        def build():
            time.sleep(3)
            return Attn(), torch.randn(1, 2, 8, 16)
        """))
    proc = run("trace", "./slow.py:build", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    progress = [line for line in proc.stderr.splitlines() if PROGRESS_LINE.match(line)]
    assert progress and any("building the model" in line or "tracing" in line for line in progress), proc.stderr
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr  # lines, not a spinner's redraws
    assert "no dtype problems" in proc.stdout


def test_trace_hf_without_transformers_points_at_python(tmp_path):
    pytest.importorskip("torch")
    try:
        import transformers  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("transformers is installed in the doctor's environment")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    proc = run("trace", "--hf", str(tmp_path), env=env)
    assert proc.returncode == 3
    assert "--hf needs transformers" in proc.stdout and "--python" in proc.stdout


def test_yaml_error_names_line_column_and_the_line(tmp_path):
    bad = tmp_path / "train_lora.yaml"
    bad.write_text("# LLaMA-Factory\nmodel_name_or_path: x\nbf16: true\nflash_attn: fa2: yes\n")
    proc = run("check", "--quick", "--config", str(bad))
    assert proc.returncode in (0, 1)  # a note of the report, the rest judged
    assert (f"i {bad}: not read: YAML syntax error at line 4, column 16: flash_attn: fa2: yes (mapping values are not allowed "
            "here). Its settings were not judged") in proc.stdout


def test_json_errors_name_line_column_and_the_line(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{\n  "model_type": "llama",\n  "hidden_size": 64,,\n}\n')
    proc = run("check", "--quick", "--config", str(bad))
    assert 'not read: JSON syntax error at line 3, column 21: "hidden_size": 64,, (' in proc.stdout
    report = tmp_path / "report.json"
    report.write_text('{"schema": "attn-doctor/report",\n "facts": {\x1b[31m}}\n')
    proc = run("check", "--from-report", str(report))
    assert proc.returncode == 2 and "not valid JSON at line 2, column 12: " in proc.stderr
    assert "\x1b" not in proc.stderr  # the offending line is shown inert


# ---------------------------------------------------------------- 8. trace: check's bytecode cache, progress


def test_trace_imports_torch_with_the_bytecode_cache_check_uses(tmp_path, monkeypatch):
    # A stand-in torch without bytecode (as a uv install has none) that records how it is imported.
    lib = tmp_path / "lib" / "torch"
    lib.mkdir(parents=True)
    record = tmp_path / "imports.txt"
    (lib / "__init__.py").write_text(
        "import os, sys\n"
        "with open(os.environ['RECORD'], 'a') as fh:\n"
        "    fh.write(repr((sys.pycache_prefix, sys.dont_write_bytecode, os.environ.get('PYTHONPYCACHEPREFIX'))) + '\\n')\n"
        "raise ImportError('a stand-in torch')\n")
    (tmp_path / "m.py").write_text("def build(device='meta'):\n    pass\n")
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPYCACHEPREFIX")}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))  # the user's private bytecode folder
    env.update(PYTHONPATH=str(tmp_path / "lib"), RECORD=str(record), ATTN_DOCTOR_CACHE_DIR=str(cache),
               PYTHONDONTWRITEBYTECODE="1", XDG_CACHE_HOME=str(tmp_path / "home"))
    here = run("trace", "./m.py:build", cwd=tmp_path, env=env)
    child = run("trace", "./m.py:build", "-p", sys.executable, cwd=tmp_path, env=env)
    assert here.returncode == child.returncode == 3 and "torch does not import" in here.stdout + child.stdout
    from attn_doctor.probes import _bytecode_env

    prefix = _bytecode_env({"modules": {"torch": {"origin": str(lib)}}, "bytecode": {"torch": "missing"}})[0]["PYTHONPYCACHEPREFIX"]
    assert not prefix.startswith(str(cache))  # never in the (possibly shared) cache folder
    assert record.read_text().splitlines() == [repr((prefix, False, prefix))] * 2  # in this process, and in the child


def _on_a_terminal(*args, cwd):
    import pty
    import threading

    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    proc = subprocess.Popen([sys.executable, "-m", "attn_doctor", *args], stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(slave)
    seen = []

    def drain():
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    out, _ = proc.communicate(timeout=240)
    reader.join(timeout=10)
    os.close(master)
    return proc.returncode, out.decode(), b"".join(seen).decode(errors="replace")


def test_trace_shows_progress_on_a_terminal_only(tmp_path):
    (tmp_path / "block.py").write_text(textwrap.dedent("""
        import torch
        import torch.nn.functional as F

        class Block(torch.nn.Module):
            def forward(self, x):
                return F.scaled_dot_product_attention(x, x, x)

        def build(device="meta"):
            return Block(), torch.zeros(1, 2, 8, 16, device=device)
    """))
    code, out, err = _on_a_terminal("trace", "./block.py:build", cwd=tmp_path)
    assert code == 0 and "attention call" in out
    assert "importing torch" in err  # the spinner on stderr, a terminal
    code, out, err = _on_a_terminal("trace", "./block.py:build", "--json", cwd=tmp_path)
    assert code == 0 and json.loads(out)["status"] == "ok"
    assert "importing" not in err and "tracing" not in err


# ---------------------------------------------------------------- 9. check --quick imports only what it prints


def test_quick_json_imports_no_renderer_and_compiles_no_signature():
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "attn_doctor", "check", "--quick", "--json"],
                          capture_output=True, text=True, timeout=120)
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "attn_doctor.core" in imported and json.loads(proc.stdout)["facts"]["quick"] is True
    # rich is for the human report; explain's signatures (~0.3 s of regular expressions) for explain
    assert not {name for name in imported if name == "rich" or name.startswith("rich.")}
    assert "attn_doctor.rules.signatures" not in imported


def test_a_reader_that_stops_early_is_not_errors_found():
    # `attn-doctor rules | head -1`: the writer meets a closed pipe; exit 141 (128 + SIGPIPE), as a
    # shell reports such a writer (0 where everything was written first): never 1 ("errors found")
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "attn_doctor", "rules"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line: every write meets a closed pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and "Traceback" not in err, err


def test_the_command_list_gives_each_commands_first_sentence_whole():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "attn_doctor", "-h"], capture_output=True, text=True, timeout=60,
                         env={**__import__("os").environ, "COLUMNS": "100"}).stdout
    listing = out.split("Commands:", 1)[1]
    assert "..." not in listing and "…" not in listing, listing
    assert "Probe this machine and a Python environment, and print a diagnosis with remedies." in " ".join(listing.split())


def test_trace_where_torch_is_missing_says_how_to_name_the_training_environment(tmp_path):
    import subprocess
    import sys

    venv = tmp_path / "doctor-only"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (tmp_path / "m.py").write_text("def build(device='meta'):\n    pass\n")
    proc = run("trace", "./m.py:build", "-p", str(venv / "bin" / "python"), cwd=tmp_path)
    assert proc.returncode == 3
    assert "torch does not import: ModuleNotFoundError: No module named 'torch'" in proc.stdout
    assert f"the trace runs in {venv}/bin/python: name the training environment's interpreter with --python PATH" in proc.stdout
