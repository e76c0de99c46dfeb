"""fix interrupted at a spread of moments, for real: the doctor in its own process group, a real pip
in a real venv, SIGINT / SIGTERM / SIGKILL to the whole group as a terminal or a batch system sends
them. Every time, `pip freeze` ends as it began, no `~` stash folder remains, and the doctor's last
line says what happened. (The CUDA-torch variant is in tests/realenv/test_fix_interrupt.py.)

ATTN_DOCTOR_INTERRUPT_TRIES=SIGINT=10,SIGTERM=5,SIGKILL=10 runs the issue's full counts."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jsonschema
import pytest

from attn_doctor import schemas

from attn_doctor.probes.target import inventory

from .conftest import CONFIGS, FACTS, make_wheel, offline_env
from helpers.interrupt import counts, installer_seconds, interrupt_once, spread, stash_folders, table, wait_for_installer

# Enough files that pip's copy takes a while: a kill lands mid-copy, where pip leaves its stash.
FILES = 500


@pytest.fixture(scope="module")
def heavy_wheelhouse(tmp_path_factory):
    d = tmp_path_factory.mktemp("heavy-wheelhouse")
    for version in ("1.30.1", "1.30.2"):
        files = {"x_transformers/__init__.py": f"__version__ = {version!r}\n"}
        files.update({f"x_transformers/part{i // 100}/m{i}.py": f"X = {i}  # {version}\n" + "#" * 200 + "\n" for i in range(FILES)})
        files.update({f"x_transformers/part{i // 100}/__init__.py": "" for i in range(0, FILES, 100)})
        make_wheel(d, "x-transformers", version, files)
    return d


@pytest.fixture(scope="module")
def heavy_venv(base_venv, tmp_path_factory, heavy_wheelhouse):
    d = tmp_path_factory.mktemp("interrupt") / "venv"
    shutil.copytree(base_venv, d, symlinks=True)
    subprocess.run([str(d / "bin" / "python"), "-m", "pip", "install", "-q", "x-transformers==1.30.1"], check=True, timeout=300,
                   env=offline_env(heavy_wheelhouse))
    return d


def _doctor(*args):
    return [sys.executable, "-m", "attn_doctor", *args]


def _recover(argv, env):
    """After a SIGKILL: `argv` (fix --undo, or the next fix, which restores an interrupted run first).
    A kill that landed after the run closed its journal (pip done, checks re-run: `applied`) found
    nothing interrupted: that run is complete and `fix --undo` is what takes it back."""
    history = json.loads(subprocess.run(_doctor("fix", "--history", "--json"), env=env, capture_output=True, text=True).stdout)["history"]
    killed = history[-1] if history else None
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if killed and killed["status"] == "applied" and "--undo" not in argv:
        undo = subprocess.run(_doctor("fix", "--undo", killed["id"]), env=env, capture_output=True, text=True, timeout=300)
        done = subprocess.CompletedProcess(done.args, undo.returncode, done.stdout + undo.stdout, done.stderr + undo.stderr)
    return done


def test_pip_step_interrupted_at_a_spread_of_moments_always_ends_as_it_began(heavy_venv, heavy_wheelhouse, tmp_path):
    py = str(heavy_venv / "bin" / "python")
    state = tmp_path / "state"
    # a TMPDIR of its own: whatever a killed pip leaves there is seen (and must be gone)
    (tmp_path / "tmp").mkdir()
    env = dict(offline_env(heavy_wheelhouse), ATTN_DOCTOR_STATE_DIR=str(state), COLUMNS="200", TMPDIR=str(tmp_path / "tmp"))
    before = subprocess.run([py, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, env=env).stdout
    assert "x-transformers==1.30.1" in before
    fix = _doctor("fix", "--python", py, "--quick", "--only", "AD401", "--yes", "--installer", "pip")
    # (the SIGINT try of the default run is the next test's, which also sends a second one)
    tries = counts("ATTN_DOCTOR_INTERRUPT_TRIES", "SIGTERM=1,SIGKILL=2")
    span = installer_seconds(fix, env)  # one run left alone: the moments are spread over its installer's life
    # its undo: `--undo --python` must name the run's target
    run = json.loads(subprocess.run(_doctor("fix", "--history", "--json"), env=env, capture_output=True, text=True).stdout)["history"][-1]["id"]
    other = subprocess.run(_doctor("fix", "--undo", "--python", sys.executable), env=env, capture_output=True, text=True)
    assert other.returncode == 2 and f"run {run} changed {py}, not {sys.executable}" in other.stderr, other.stderr
    same = subprocess.run(_doctor("fix", "--undo", "--python", str(heavy_venv)), env=env, capture_output=True, text=True, timeout=300)
    assert same.returncode == 0, same.stderr
    outcomes = []
    for sig, n in tries.items():
        for i, delay in enumerate(spread(n, span * 0.95)):
            # after a SIGKILL: alternately `fix --undo` and the next fix (which restores first)
            # (AD101, no GPU, has no automatic remedy: that fix restores and then changes nothing)
            recover_argv = _doctor("fix", "--undo") if i % 2 == 0 else _doctor("fix", "--python", py, "--quick", "--only", "AD101", "--yes")
            outcome = interrupt_once(fix, env, sig, delay, py, heavy_venv, before,
                                     lambda: _recover(recover_argv, env),
                                     lambda: subprocess.run(_doctor("fix", "--undo"), env=env, capture_output=True, text=True, timeout=300))
            outcomes.append(outcome)
            assert outcome.restored and not outcome.leftovers and not outcome.temp_left, (outcome, table(outcomes))
            if sig == signal.SIGKILL and outcome.when == "installer":
                assert re.search(r"restored the state before the interrupted fix|Undid \S+:|already as it was before", outcome.recovery_output), outcome
            if sig != signal.SIGKILL and outcome.when != "after":
                assert outcome.code == 128 + sig, outcome
                assert outcome.last_line.startswith("attn-doctor: interrupted: "), outcome
                assert outcome.last_line.endswith("nothing changed"), outcome
    print("\n" + table(outcomes))
    # Every run is closed: the history shows none `applying`.
    runs = json.loads(subprocess.run(_doctor("fix", "--history", "--json"), env=env, capture_output=True, text=True).stdout)["history"]
    assert runs and not [r for r in runs if r["status"] in ("planning", "applying")], runs
    left = subprocess.run(_doctor("fix", "--undo"), env=env, capture_output=True, text=True)
    assert left.returncode == 1 and re.search(r"nothing left to undo \(run \S+ was (undone|restored after an interruption) at ", left.stderr), left.stderr


def test_a_second_ctrl_c_while_restoring_is_refused_with_a_line(heavy_venv, heavy_wheelhouse, tmp_path):
    py = str(heavy_venv / "bin" / "python")
    env = dict(offline_env(heavy_wheelhouse), ATTN_DOCTOR_STATE_DIR=str(tmp_path / "state"), COLUMNS="200")
    before = subprocess.run([py, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, env=env).stdout
    for _attempt in range(4):
        proc = subprocess.Popen(_doctor("fix", "--python", py, "--quick", "--only", "AD401", "--yes", "--installer", "pip"), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert wait_for_installer(proc) is not None
        # once pip has moved the old release aside (its `~` stash), so that there is something to restore
        while proc.poll() is None and not stash_folders(heavy_venv):
            time.sleep(0.001)
        if proc.poll() is None:
            break
        proc.communicate()  # pip was quicker than the look-out: undo, try again
        subprocess.run(_doctor("fix", "--undo"), env=env, capture_output=True, timeout=300)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.05)  # the doctor is stopping pip and restoring now: refusing stop signals from the first on
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "SIGINT ignored: restoring the state before the fix" in err, err
    # pip gets the terminal's SIGINT too and may have put its stash back itself before the doctor
    # looks (seen on a loaded 2-core machine): then there was nothing left to restore, and it says so.
    assert re.match(r"attn-doctor: interrupted: ((restored x-transformers 1\.30\.1|cleared pip's leftovers \(~).*; )?nothing changed$",
                    err.strip().splitlines()[-1]), err
    after = subprocess.run([py, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, env=env).stdout
    assert after == before and not stash_folders(heavy_venv)


def test_config_edit_interrupted_at_a_spread_of_moments(tmp_path):
    original = (CONFIGS / "llamafactory_lora_bf16.yaml").read_bytes()
    cfg = tmp_path / "train.yaml"
    cfg.write_bytes(original)
    state = tmp_path / "state"
    env = dict(os.environ, ATTN_DOCTOR_STATE_DIR=str(state), COLUMNS="200")
    fix = _doctor("fix", "--from-report", str(FACTS / "t4.json"), "--config", str(cfg), "--yes", "--json")
    lines = []
    for sig, delay in [(signal.SIGINT, 0.0), (signal.SIGTERM, 0.01), (signal.SIGKILL, 0.005)]:
        runs = len(list(state.glob("runs/*")))
        proc = subprocess.Popen(fix, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        # from the moment this run's journal exists (its backups are being written) on
        while proc.poll() is None and len(list(state.glob("runs/*"))) == runs:
            time.sleep(0.001)
        time.sleep(delay)
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=120)
        if proc.returncode == 0 or sig == signal.SIGKILL:
            subprocess.run(_doctor("fix", "--undo"), env=env, capture_output=True, timeout=120)
        else:
            last = err.strip().splitlines()[-1]
            lines.append(last)
            assert proc.returncode == 128 + sig and last.startswith("attn-doctor: interrupted: "), err
            doc = json.loads(out)  # --json: the document says so too
            assert (doc["interrupted"], doc["exit_code"], doc["restore_error"]) == (signal.Signals(sig).name, 128 + sig, None), doc
            jsonschema.validate(doc, json.loads(schemas.schema_bytes("fix")))  # what `fix --schema` promises
        assert cfg.read_bytes() == original, (sig, delay, err)
    assert lines, "every try finished before its signal: nothing was interrupted"


EDIT_PLAN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from attn_doctor.facts import Facts
    from attn_doctor.fix.apply import FixInterrupted, apply_plan
    from attn_doctor.fix.plan import Action, Plan

    chunk, state = Path(sys.argv[1]), Path(sys.argv[2])
    text = chunk.read_bytes()
    action = Action(id=1, rule="AD402", kind="patch", summary="states_in_fp32=True", safety="unsafe", files=[str(chunk)],
                    new_bytes={str(chunk): text.replace(b"False", b"True")})
    facts = Facts()
    facts.platform.python_executable = sys.executable

    def check_edit(python, fla_dir):  # the edited op running on the GPU (minutes of autotuning)
        print("running", flush=True)
        time.sleep(30)
        return ""

    try:
        apply_plan(Plan(actions=[action], python=sys.executable), facts, verify=None, command=["fix"], patch_dir=state,
                   root=state, check_edit=check_edit, refused=lambda m: print(m, file=sys.stderr, flush=True))
    except FixInterrupted as exc:
        print("interrupted", exc.signum, exc.restored, exc.error, flush=True)
        sys.exit(128 + exc.signum)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_unsafe_package_edit_interrupted_while_it_runs_is_restored(tmp_path, sig):
    # AD402 edits a file inside the installed fla, then runs the edited op on the GPU: interrupted
    # there, the file is back byte for byte. (Only the GPU run is stood in for: none here.)
    chunk = tmp_path / "site-packages" / "fla" / "ops" / "gsa" / "chunk.py"
    chunk.parent.mkdir(parents=True)
    original = b"def chunk_gsa_fwd(q, k, v, s, g):\n    h = chunk_fwd_h(k=k, v=v, g=g, states_in_fp32=False)\n    return h\n"
    chunk.write_bytes(original)
    proc = subprocess.Popen([sys.executable, "-c", EDIT_PLAN, str(chunk), str(tmp_path / "state")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "running"
    assert b"states_in_fp32=True" in chunk.read_bytes()  # the edit is in place while the op runs
    os.killpg(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, (out, err)
    assert f"interrupted {sig} ['{chunk}'] None" in out
    assert chunk.read_bytes() == original
    journal = json.loads(next((tmp_path / "state").glob("runs/*/journal.json")).read_text())
    assert journal["status"] == "interrupted" and journal["undone_at"]


# ---------------------------------------------------------------- what pip leaves half-way


def _files(root, files: dict) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _metadata(name, version):
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n"


def test_the_env_probe_sees_pips_leftovers_and_no_stash_distribution(tmp_path, monkeypatch):
    sp = tmp_path / "lib" / "python3.12" / "site-packages"
    _files(sp, {
        # what a Ctrl-C during `pip install triton==3.7.1` over 3.1.0 left (the report)
        "~riton/__init__.py": "", "~riton-3.1.0.dist-info/METADATA": _metadata("triton", "3.1.0"), "triton/language.py": "",
        # a flash-attn whose RECORD names a file that is gone, and an xformers without RECORD
        "flash_attn-2.8.3.dist-info/METADATA": _metadata("flash-attn", "2.8.3"), "flash_attn/__init__.py": "",
        "flash_attn-2.8.3.dist-info/RECORD": "flash_attn/__init__.py,,\nflash_attn_2_cuda.so,,\nflash_attn-2.8.3.dist-info/RECORD,,\n",
        "xformers-0.0.35.dist-info/METADATA": _metadata("xformers", "0.0.35"),
    })
    monkeypatch.setattr(sys, "path", [str(sp)])
    packages, _ = inventory.collect_packages()
    assert "~riton" not in packages and "triton" not in packages  # a stash is no distribution
    found = {(left["kind"], left["package"], os.path.basename(left["path"])) for left in inventory.collect_leftovers()}
    assert found == {
        ("stash", "triton", "~riton"), ("stash", "triton", "~riton-3.1.0.dist-info"), ("no-metadata", "triton", "triton"),
        ("missing-files", "flash-attn", "flash_attn-2.8.3.dist-info"), ("no-record", "xformers", "xformers-0.0.35.dist-info"),
    }


def test_check_reports_a_half_installed_package_with_the_repair_fix_applies():
    from attn_doctor.core import diagnose
    from attn_doctor.facts import Leftover
    from attn_doctor.fix.plan import Options, build_plan
    from attn_doctor.rules.fixtures import build_facts
    from attn_doctor.rules.loader import load_recipes

    facts = build_facts("cpu-only", FACTS)
    facts.platform.python_executable = "/venv/bin/python"
    sp = "/venv/lib/python3.12/site-packages"
    facts.leftovers = [Leftover(path=f"{sp}/~riton", kind="stash"),
                       Leftover(path=f"{sp}/~riton-3.1.0.dist-info", kind="stash", package="triton", version="3.1.0")]
    result = next(r for r in diagnose(facts, load_recipes()).results if r.rule == "AD008")
    assert result.status == "error" and "~riton-3.1.0.dist-info (stash)" in result.message, result
    plan = build_plan(diagnose(facts, load_recipes()), Options(installer="pip", only=["AD008"]), load_recipes().data)
    (action,) = plan.actions
    assert action.argv == ["/venv/bin/python", "-m", "pip", "install", "--force-reinstall", "--no-deps", "triton==3.1.0"], action
    # any other package's leftovers: a warning; with no name to reinstall, no command but the manual one
    facts.leftovers = [Leftover(path=f"{sp}/~ix", kind="stash")]
    result = next(r for r in diagnose(facts, load_recipes()).results if r.rule == "AD008")
    assert result.status == "warning" and [r.kind for r in result.remedies] == ["manual"], result


@pytest.mark.slow
def test_uv_is_the_installer_where_found_and_its_run_is_undone(heavy_venv, heavy_wheelhouse, tmp_path):
    uv = Path(sys.executable).parent / "uv"  # the test extra installs uv beside the interpreter
    if not uv.is_file():
        pytest.skip("no uv beside the test interpreter")
    py = str(heavy_venv / "bin" / "python")
    # uv offline, with its own empty cache: only the wheelhouse can answer
    env = dict(offline_env(heavy_wheelhouse), ATTN_DOCTOR_STATE_DIR=str(tmp_path / "state"), COLUMNS="200", UV_OFFLINE="1",
               UV_FIND_LINKS=str(heavy_wheelhouse), UV_CACHE_DIR=str(tmp_path / "uv-cache"),
               PATH=str(uv.parent) + os.pathsep + os.environ.get("PATH", ""))
    before = subprocess.run([py, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, env=env).stdout
    dry = subprocess.run(_doctor("fix", "--python", py, "--quick", "--only", "AD401", "--dry-run"), env=env, capture_output=True, text=True)
    assert "installer: uv" in dry.stdout and f"$ {uv} pip install --python {py} --upgrade" in dry.stdout, dry.stdout + dry.stderr
    done = subprocess.run(_doctor("fix", "--python", py, "--quick", "--only", "AD401", "--yes", "--json"), env=env, capture_output=True,
                          text=True, timeout=300)
    doc = json.loads(done.stdout)
    assert doc["actions"][0]["status"] == "verified" and doc["actions"][0]["argv"][:3] == [str(uv), "pip", "install"], doc
    assert "x-transformers==1.30.2" in subprocess.run([py, "-m", "pip", "freeze"], capture_output=True, text=True, env=env).stdout
    undo = subprocess.run(_doctor("fix", "--undo"), env=env, capture_output=True, text=True, timeout=300)
    assert undo.returncode == 0, undo.stderr
    assert subprocess.run([py, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, env=env).stdout == before
    assert not stash_folders(heavy_venv)


def test_recovery_from_the_state_a_hard_kill_leaves_mid_pip(venv, wheelhouse, monkeypatch):
    # The state, made by hand in a real venv: pip's stash of the old release, a partial new
    # module folder without its dist-info, a new dependency half-copied (dist-info, no RECORD), and
    # an untouched-looking package whose files pip had begun to move away.
    from attn_doctor.facts import Facts
    from attn_doctor.fix.apply import read_packages, read_site, restore_packages

    for key, value in offline_env(wheelhouse).items():
        monkeypatch.setenv(key, value)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "pip-stand-in==1.0"], check=True, timeout=120)
    (sp,) = [p for p in venv.glob("lib/python*/site-packages")]
    files_before = sorted(str(p.relative_to(sp)) for p in (sp / "x_transformers").rglob("*") if "__pycache__" not in p.parts)
    before, site_before = read_packages(py), read_site(py)
    freeze_before = subprocess.run([py, "-m", "pip", "freeze", "--all"], capture_output=True, text=True).stdout
    (sp / "x_transformers").rename(sp / "~_transformers")
    (sp / "x_transformers-1.30.1.dist-info").rename(sp / "~_transformers-1.30.1.dist-info")
    _files(sp, {"x_transformers/__init__.py": "__version__ = '1.30.2'\n", "x_transformers/only_in_new.py": "",
                "newdep-1.0.dist-info/METADATA": _metadata("newdep", "1.0"), "newdep/__init__.py": ""})
    (sp / "pip_stand_in" / "b.py").unlink()
    facts = Facts()
    facts.platform.python_executable = py
    done = restore_packages(facts, before, site_before=site_before, tool="pip")
    assert {"x-transformers 1.30.1", "pip-stand-in 1.0", "removed newdep", "cleared ~_transformers"} <= set(done), done
    assert subprocess.run([py, "-m", "pip", "freeze", "--all"], capture_output=True, text=True).stdout == freeze_before
    assert not stash_folders(venv) and not (sp / "newdep").exists() and (sp / "pip_stand_in" / "b.py").exists()
    assert sorted(str(p.relative_to(sp)) for p in (sp / "x_transformers").rglob("*") if "__pycache__" not in p.parts) == files_before


def test_the_interrupted_line_is_printed_under_quiet_too(monkeypatch, capfd):
    # -q keeps the summary and errors only; the state an interrupted fix left is one of those.
    import typer

    from attn_doctor.cli import _common
    from attn_doctor.cli import fix as fix_cli

    monkeypatch.setattr(_common, "_quiet", True)
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with pytest.raises(typer.Exit) as info:
            fix_cli._interrupted(signal.SIGINT, "r1", ["triton 3.6.0"], None, False)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    assert info.value.exit_code == 130
    assert "attn-doctor: interrupted: restored triton 3.6.0" in capfd.readouterr().err


def test_a_module_folder_another_release_of_its_family_ships_into_is_not_a_leftover(tmp_path, monkeypatch):
    # flash-attn-4 installs flash_attn/cute into flash-attn's folder with no flash-attn metadata:
    # its own RECORD owns the folder. A flash_attn/ that no RECORD names stays a finding.
    site = tmp_path / "site-packages"
    (site / "flash_attn" / "cute").mkdir(parents=True)
    (site / "flash_attn" / "cute" / "__init__.py").write_text("")
    info = site / "flash_attn_4-4.0.0b36.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: flash-attn-4\nVersion: 4.0.0b36\n")
    (info / "RECORD").write_text("flash_attn/cute/__init__.py,,\nflash_attn_4-4.0.0b36.dist-info/METADATA,,\n")
    monkeypatch.setattr(inventory, "_site_folders", lambda: [str(site)])
    assert inventory.collect_leftovers() == []
    (info / "RECORD").write_text("flash_attn_4-4.0.0b36.dist-info/METADATA,,\n")
    assert [(f["kind"], f["package"]) for f in inventory.collect_leftovers()] == [("no-metadata", "flash-attn")]


def test_the_installers_temporary_folder_is_removed_only_where_this_run_made_it(tmp_path, monkeypatch):
    """A journal is data on disk: the folder it names as its installers' TMPDIR is removed only
    where it is one this run made (its name, a real folder, this user's), never another path."""
    from attn_doctor.fix.journal import Journal

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    journal = Journal.create(tmp_path / "state", sys.executable, "test", ["fix"])
    scratch = Path(journal.scratch())
    assert scratch.parent == tmp_path / "tmp" and scratch.name.startswith(f"attn-doctor-fix-{journal.id}-")
    assert journal.scratch() == str(scratch)  # one per run
    (scratch / "pip-unpack-x").mkdir()
    journal.clear_scratch()
    assert not scratch.exists()

    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("x")
    link = tmp_path / "tmp" / f"attn-doctor-fix-{journal.id}-link"
    link.symlink_to(precious)
    for named in (str(precious), str(link), str(tmp_path / "tmp" / f"attn-doctor-fix-{journal.id}-gone"), 7):
        journal.data["scratch"] = named
        journal.clear_scratch()
    assert (precious / "keep").read_text() == "x" and link.is_symlink()
