"""An attention library installed without bytecode beside a torch that has it: its bytecode kept in the
doctor's private folder, compiled there ahead while torch imports, torch's own left where it is, and
nothing written beside the target's sources. Real interpreters, real distributions on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from attn_doctor.probes import _bytecode_env
from attn_doctor.probes.keys import LIBRARY_MODULES
from attn_doctor.probes.target import library_bytecode

ROOT = Path(library_bytecode.__file__).parents[3]  # the checkout: the module is imported as the package's


def _dist(site: Path, name: str, modules: dict, requires=()) -> None:
    """A distribution as pip lays it out, without bytecode: its package, METADATA and RECORD."""
    package = site / name
    package.mkdir(parents=True)
    files = []
    for module, body in modules.items():
        (package / f"{module}.py").write_text(body)
        files.append(f"{name}/{module}.py")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n%s" % (
        name, "".join(f"Requires-Dist: {r}\n" for r in requires)))
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files + [f"{name}-1.0.dist-info/METADATA"]))


def _python(code: str, site: Path, **env) -> str:
    full = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]), PYTHONDONTWRITEBYTECODE="1", **env)
    full.pop("PYTHONPYCACHEPREFIX", None)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    _dist(site, "fakeattn", {"__init__": "from . import kernels\nimport fakedep\n", "kernels": "X = 1\n"},
          requires=["fakedep>=1", "extraonly; extra == 'dev'"])
    _dist(site, "fakedep", {"__init__": "Y = 2\n"})
    return site


def _pycs(folder: Path) -> list[str]:
    return sorted(p.name.split(".")[0] for p in folder.rglob("*.pyc"))


def test_a_library_without_bytecode_is_compiled_into_the_private_folder_ahead_and_read_from_there(tmp_path):
    site, prefix = _site(tmp_path), tmp_path / "pycache"
    prefix.mkdir()
    _python(f"""
        import os
        from attn_doctor.probes.target import library_bytecode as lb
        pid = lb.start_precompile({str(prefix)!r}, ["fakeattn"], workers=2)
        os.waitpid(pid, 0)
    """, site)
    assert _pycs(prefix) == ["__init__", "__init__", "kernels"]  # the library and what it requires
    assert not list(site.rglob("__pycache__"))  # never beside the target's sources
    out = json.loads(_python(f"""
        import json, sys
        from attn_doctor.probes.target import library_bytecode as lb
        lb.redirect({str(prefix)!r})
        import fakeattn, json.decoder
        print(json.dumps([fakeattn.kernels.__cached__, json.decoder.__cached__, sys.dont_write_bytecode]))
    """, site))
    assert out[0].startswith(str(prefix))  # read from the folder
    assert not out[1].startswith(str(prefix))  # a module with bytecode beside it: its own, as before
    assert not list(site.rglob("__pycache__"))


def test_an_import_without_the_precompile_keeps_its_bytecode_in_the_folder_and_nowhere_else(tmp_path):
    site, prefix = _site(tmp_path), tmp_path / "pycache"
    prefix.mkdir()
    _python(f"""
        from attn_doctor.probes.target import library_bytecode as lb
        lb.redirect({str(prefix)!r})
        lb.redirect({str(prefix)!r})  # twice: once in effect
        import fakeattn
    """, site)
    assert _pycs(prefix) == ["__init__", "__init__", "kernels"]
    assert not list(site.rglob("__pycache__"))


def test_files_with_bytecode_beside_them_are_not_compiled_again_file_by_file(tmp_path):
    site = _site(tmp_path)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site / "fakedep")], check=True)
    # FlashAttention 2 (compiled) and 4 (not) share one folder: judged per file, from each RECORD
    (site / "fakeattn" / "cute.py").write_text("Z = 3\n")
    record = site / "fakeattn-1.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + "fakeattn/cute.py,,\n")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site / "fakeattn" / "kernels.py")], check=True)
    out = _python("""
        from attn_doctor.probes.target import library_bytecode as lb
        print(sorted(p.rsplit("/", 1)[-1] for p in lb.library_sources(["fakeattn", "not-installed"])))
    """, site)
    assert out.strip() == "['__init__.py', 'cute.py']"


def test_a_stale_bytecode_beside_a_source_is_left_as_it_is(tmp_path):
    site, prefix = _site(tmp_path), tmp_path / "pycache"
    prefix.mkdir()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site / "fakedep")], check=True)
    stale = next((site / "fakedep" / "__pycache__").glob("*.pyc"))
    before = stale.read_bytes()
    (site / "fakedep" / "__init__.py").write_text("Y = 22\n")
    os.utime(site / "fakedep" / "__init__.py", (1, 1))  # another mtime than the .pyc records
    out = _python(f"""
        from attn_doctor.probes.target import library_bytecode as lb
        lb.redirect({str(prefix)!r})
        import fakedep
        print(fakedep.Y)
    """, site)
    assert out.strip() == "22" and stale.read_bytes() == before  # compiled again, never written beside it
    assert not list(prefix.rglob("*.pyc"))  # nor in the folder: a source with bytecode beside it keeps it


def _big_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    body = "".join(f"def f{i}(x):\n    return [x * {i} for _ in range(3)]\n" for i in range(400))
    _dist(site, "bigattn", {f"m{i}": body for i in range(300)})
    return site


def test_stop_ends_the_precompile_and_its_workers_and_it_never_holds_the_probes_pipe(tmp_path):
    site, prefix = _big_site(tmp_path), tmp_path / "pycache"
    prefix.mkdir()
    out = json.loads(_python(f"""
        import json, os, sys, time
        from attn_doctor.probes.target import isolation, library_bytecode as lb
        read_fd, write_fd = os.pipe()
        isolation.OUT_FD = write_fd  # the probe's answer to the doctor
        pid = lb.start_precompile({str(prefix)!r}, ["bigattn"], workers=2)
        os.close(write_fd)
        start = time.monotonic()
        os.read(read_fd, 1)  # end of file at once: no fork holds the pipe
        eof_s = time.monotonic() - start
        time.sleep(0.3)
        def stat(p):  # (state, parent) of a process, None once it is gone (any process may end meanwhile)
            try:
                with open(f"/proc/{{p}}/stat") as fh:
                    return fh.read().split(") ")[1].split()[:2]
            except (FileNotFoundError, ProcessLookupError):
                return None
        children = [p for p in os.listdir("/proc") if p.isdigit() and (stat(p) or [None, None])[1] == str(pid)]
        lb.stop(pid)
        time.sleep(0.5)
        left = [p for p in children if (stat(p) or ["Z"])[0] != "Z"]
        print(json.dumps([eof_s, len(children), left]))
    """, site))
    assert out[0] < 1.0 and out[1] == 2 and out[2] == []  # both workers were running, and none is left
    assert len(list(prefix.rglob("*.pyc"))) < 300  # stopped before the end


def test_a_variable_from_the_environment_never_reaches_the_probe(tmp_path, monkeypatch):
    from attn_doctor.probes.runner import ChildProcess

    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nenv > {tmp_path / 'env.txt'}\necho '{{}}'\n")
    fake.chmod(0o755)
    monkeypatch.setenv(library_bytecode.VARIABLE, str(tmp_path))
    ChildProcess(str(fake), ["env"]).result(30)
    assert library_bytecode.VARIABLE not in (tmp_path / "env.txt").read_text()
    ChildProcess(str(fake), ["env"], {library_bytecode.VARIABLE: str(tmp_path / "given")}).result(30)
    assert f"{library_bytecode.VARIABLE}={tmp_path / 'given'}" in (tmp_path / "env.txt").read_text()


def test_the_folder_is_asked_for_only_where_a_library_lacks_bytecode_and_torch_has_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    modules = {"torch": {"origin": "x"}, "flash_attn": {"origin": "y"}}
    env, note = _bytecode_env({"modules": modules, "bytecode": {"torch": "fresh", "flash_attn": "missing"}}, LIBRARY_MODULES)
    assert note is None and list(env) == [library_bytecode.VARIABLE] and env[library_bytecode.VARIABLE].endswith("pycache")
    assert _bytecode_env({"modules": modules, "bytecode": {"torch": "fresh", "flash_attn": "fresh"}}, LIBRARY_MODULES) == ({}, None)
    env, _ = _bytecode_env({"modules": modules, "bytecode": {"torch": "missing", "flash_attn": "missing"}}, LIBRARY_MODULES)
    assert list(env) == ["PYTHONPYCACHEPREFIX"]  # torch's own: every module goes there, the library's too


def test_a_folder_others_could_write_is_not_used(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    for bad in ("relative/pycache", str(tmp_path / "absent")):
        monkeypatch.setenv(library_bytecode.VARIABLE, bad)
        assert library_bytecode.folder() is None
    monkeypatch.setenv(library_bytecode.VARIABLE, str(mine))
    assert library_bytecode.folder() == str(mine)
    mine.chmod(0o777)  # anyone could plant bytecode there
    assert library_bytecode.folder() is None
    (tmp_path / "link").symlink_to(mine)
    mine.chmod(0o700)
    monkeypatch.setenv(library_bytecode.VARIABLE, str(tmp_path / "link"))
    assert library_bytecode.folder() is None
