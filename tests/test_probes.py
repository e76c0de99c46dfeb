"""The probes against real broken environments, in real subprocesses.

Nothing here fakes the code under test: the child probe script runs in a real interpreter, the
broken packages are real files on PYTHONPATH (a gcc-compiled extension with an undefined C++
symbol, a real segfault, a real hang), and the other interpreters are real venvs.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attn_doctor.facts import MODULE_DISTRIBUTIONS, Facts
from attn_doctor.failures import demangle
from attn_doctor.probes import collect_facts
from attn_doctor.probes.runner import CHILD_PACKAGE, PROBES_DIR, child_package_source, start_child
from helpers import broken_env

needs_gcc = pytest.mark.skipif(not broken_env.have_gcc(), reason="gcc is needed to compile the broken extension")
needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="the isolated import probes fork")

IMPORT_TIMEOUT_S = 8  # generous: the samples share 2 cores with the import forks


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory):
    """flash_attn with an undefined C++ symbol, a segfaulting xformers, a hanging fla and a
    working (chatty) flash_attn_interface, all on PYTHONPATH; probed once for the module."""
    if not broken_env.have_gcc():
        pytest.skip("gcc is needed to compile the broken extension")
    root = tmp_path_factory.mktemp("site")
    pid_file = root.parent / "fla.pid"
    broken_env.install_flash_attn(root, "undefined_symbol")
    broken_env.install_segfaulting_xformers(root)
    broken_env.install_hanging_fla(root, pid_file)
    broken_env.install_noisy_flash_attn_interface(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(root))
        mp.setenv("ATTN_DOCTOR_IMPORT_TIMEOUT", str(IMPORT_TIMEOUT_S))
        start = time.monotonic()
        facts = collect_facts(timeout=60)
        elapsed = time.monotonic() - start
    return {"root": root, "facts": facts, "elapsed": elapsed, "pid_file": pid_file}


@pytest.fixture(scope="module")
def missing_extension_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site-noext")
    broken_env.install_flash_attn(root, "missing")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(root))
        mp.setenv("ATTN_DOCTOR_IMPORT_TIMEOUT", str(IMPORT_TIMEOUT_S))
        facts = collect_facts(timeout=60)
    return {"root": root, "facts": facts}


# ------------------------------------------------------------------ broken imports


@needs_fork
def test_undefined_symbol_is_classified_and_demangled(broken_site):
    result = broken_site["facts"].imports["flash_attn"]
    assert result.status == "error"
    err = result.error
    assert err.type == "ImportError"
    assert err.kind == "undefined_symbol"
    assert err.symbol == broken_env.CXX11_STRING_ERROR_SYMBOL
    so = str(broken_site["root"] / ("flash_attn_2_cuda" + broken_env.EXTENSION_SUFFIX))
    assert err.library == so
    assert err.message == f"{so}: undefined symbol: {broken_env.CXX11_STRING_ERROR_SYMBOL}"
    assert err.demangled == (
        "c10::Error::Error(c10::SourceLocation, "
        "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >)"
    )
    assert err.demangled == demangle(err.symbol)


@needs_fork
def test_segfaulting_import_is_a_fact_not_a_crash(broken_site):
    facts = broken_site["facts"]
    xformers = facts.imports["xformers"]
    assert xformers.status == "crashed"
    assert xformers.signal == 11
    assert xformers.error is None
    # The rest of the probe survived the segfault.
    assert facts.torch.status == "ok"
    assert facts.probe("torch").status == "ok"
    fa3 = facts.imports["flash_attn_interface"]
    assert fa3.status == "ok"
    assert fa3.version == "3.0.0b1"


@needs_fork
def test_hanging_import_times_out_and_is_killed(broken_site):
    facts = broken_site["facts"]
    fla = facts.imports["fla"]
    assert fla.status == "timeout"
    assert fla.duration_s == pytest.approx(IMPORT_TIMEOUT_S, abs=0.5)
    assert broken_site["elapsed"] < 20
    # The hung import really ran, and the fork that ran it is gone, not left sleeping.
    pid = int(broken_site["pid_file"].read_text())
    assert not _alive(pid)


@needs_fork
def test_sample_forward_survives_a_hanging_library(broken_site):
    # The samples run in forks beside the import probes: the fla sample hangs on `import fla` and
    # is reported as failed, while the samples that do not need fla still ran.
    samples = {s.name: s for s in broken_site["facts"].dtype_path.samples}
    assert samples["fla_layer"].status == "failed"
    assert "did not finish" in samples["fla_layer"].reason
    assert samples["sdpa_block"].status == "ran"
    assert broken_site["facts"].dtype_path.findings == []


@needs_fork
def test_import_results_cover_every_target(broken_site):
    facts = broken_site["facts"]
    assert set(facts.imports) == {"flash_attn", "flash_attn_interface", "flash_attn_4", "xformers", "triton", "fla", "liger_kernel"}
    # Not installed is "missing", not an error: no flash_attn/cute/ on this site.
    assert facts.imports["flash_attn_4"].status == "missing"
    assert facts.imports["flash_attn_4"].error is None
    # triton is here only where torch brought it (its CUDA builds pin one; the CPU wheel has none).
    if importlib.util.find_spec("triton") is None:
        assert facts.imports["triton"].status == "missing" and facts.imports["triton"].error is None
    else:
        assert facts.imports["triton"].status == "ok", facts.imports["triton"]
        assert facts.imports["triton"].version == importlib.metadata.version("triton")


def test_env_child_reads_packages_on_pythonpath(broken_site, monkeypatch):
    # The environment probe of another interpreter (here: a child of this one, which sees
    # PYTHONPATH) reports the distributions found there, with installer and wheel URL.
    monkeypatch.setenv("PYTHONPATH", str(broken_site["root"]))
    data = start_child(sys.executable, ["env"]).result(30)
    packages = data["packages"]
    assert packages["flash-attn"]["version"] == "2.7.4.post1"
    assert packages["flash-attn"]["installer"] == "pip"
    assert packages["flash-attn"]["url"].endswith("cu12torch2.6cxx11abiTRUE-cp311-cp311-linux_x86_64.whl")
    assert packages["xformers"]["version"] == "0.0.29.post1"
    assert packages["flash-linear-attention"]["version"] == "0.2.2"
    assert data["platform"]["python_executable"] == sys.executable


@needs_fork
def test_broken_facts_round_trip_through_json(broken_site):
    import msgspec

    facts = broken_site["facts"]
    again = msgspec.json.decode(msgspec.json.encode(facts), type=Facts)
    assert again == facts


@needs_fork
def test_missing_extension_module(missing_extension_site):
    result = missing_extension_site["facts"].imports["flash_attn"]
    assert result.status == "error"
    assert result.error.type == "ModuleNotFoundError"
    assert result.error.message == "No module named 'flash_attn_2_cuda'"
    assert result.error.kind == "missing_extension"
    assert result.error.library == "flash_attn_2_cuda"
    assert result.error.symbol is None


def test_child_keeps_stdout_clean_of_library_chatter(tmp_path, monkeypatch):
    # A library printing on import must not corrupt the JSON the child writes on stdout.
    broken_env.install_noisy_flash_attn_interface(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    data = start_child(sys.executable, ["torch", "flash_attn_interface"]).result(60)
    assert data["protocol"] == 1
    assert data["imports"]["flash_attn_interface"]["status"] == "ok"
    assert data["imports"]["flash_attn_interface"]["version"] == "3.0.0b1"


def test_import_that_leaves_a_process_behind_is_not_a_timeout(tmp_path, monkeypatch):
    # Some libraries start a helper process on import (a compile server, a telemetry daemon).
    # It inherits every descriptor: the probe must decide on the importing process's exit, not
    # wait for EOF on a pipe the helper keeps open.
    pid_file = tmp_path / "daemon.pid"
    broken_env.write_module(
        tmp_path,
        "fla",
        f"""
        import os, time
        pid = os.fork()  # a helper forked without exec: it holds every descriptor of the importer
        if pid == 0:
            os.setsid()
            time.sleep(30)
            os._exit(0)
        open({str(pid_file)!r}, "w").write(str(pid))
        __version__ = "0.0.99"
        """,
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("ATTN_DOCTOR_IMPORT_TIMEOUT", "20")
    start = time.monotonic()
    try:
        data = start_child(sys.executable, ["torch", "fla"]).result(60)
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert data["imports"]["fla"]["status"] == "ok"
    assert data["imports"]["fla"]["version"] == "0.0.99"
    assert time.monotonic() - start < 15


# ------------------------------------------------------------------ --python


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory):
    """A real venv without torch (and without pip), its python a copy of the interpreter."""
    path = tmp_path_factory.mktemp("venvs") / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--copies", str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def symlinked_venv(tmp_path_factory):
    """The usual kind of venv: bin/python is a symlink to the base interpreter."""
    path = tmp_path_factory.mktemp("venvs") / "linked"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--symlinks", str(path)], check=True)
    return path


def test_other_interpreter_without_torch(bare_venv):
    python = str(bare_venv / "bin" / "python")
    facts = collect_facts(python=python, timeout=60)
    assert facts.torch.status == "missing"
    assert all(result.status == "skipped" for result in facts.imports.values())
    assert facts.platform.python_executable == python
    assert facts.platform.in_virtualenv is True
    assert "torch" not in facts.packages
    assert facts.tools["pip"].present is False
    assert [(p.name, p.status) for p in facts.probes] == [
        ("environment", "ok"),
        ("gpu", "ok"),
        ("torch", "ok"),
    ]
    # No torch: no forward pass to judge, and not a probe failure.
    assert facts.dtype_path.status == "skipped" and "torch" in facts.dtype_path.error


def test_the_child_runs_on_the_standard_library_alone(bare_venv, tmp_path, monkeypatch):
    # The target need not have attn-doctor or its dependencies: from a folder where attn_doctor
    # cannot be imported either, the child's modules import nothing outside the standard library
    # and their own package, the probes' folder stays off sys.path, and each command answers.
    python = str(bare_venv / "bin" / "python")
    code = child_package_source() + (
        "importlib.import_module(%r)\n"
        "tops = {name.split('.')[0] for name in sys.modules} - set(sys.stdlib_module_names)\n"
        "print(sorted(tops - {'__main__', %r}), %r in sys.path)\n" % (CHILD_PACKAGE + ".child", CHILD_PACKAGE, str(PROBES_DIR)))
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "False"]
    monkeypatch.chdir(tmp_path)
    env = start_child(python, ["env", "--fingerprint", '["json"]']).result(60)
    assert env["packages"] == {} and env["modules"]["json"]["origin"].endswith("json")
    assert start_child(python, ["site"]).result(60)["site"][0]["dists"] == {}
    assert start_child(python, ["torch", "flash_attn"]).result(60)["torch"] == {"status": "missing"}


# Regression: same_interpreter() used os.path.samefile(), which follows the venv's bin/python
# symlink to the base interpreter and took any venv of the same Python for the running one.
def test_symlinked_venv_is_probed_as_itself(symlinked_venv):
    python = str(symlinked_venv / "bin" / "python")
    facts = collect_facts(python=python, timeout=60)
    assert facts.torch.status == "missing"  # the torch child did run the target
    assert facts.platform.python_executable == python
    assert "torch" not in facts.packages


def _not_an_interpreter(kind: str, tmp_path: Path) -> str:
    if kind == "nonexistent":
        return str(tmp_path / "no-such-python")
    if kind == "text-file":
        path = tmp_path / "python"
        path.write_text("this is not an interpreter\n")
        return str(path)
    if kind == "executable-text":
        path = tmp_path / "python"
        path.write_text("this is not an interpreter either\n")
        path.chmod(0o755)
        return str(path)
    return "/bin/false"


# Regression: start_child(python, ["torch"]) ran outside any try, so an interpreter that cannot
# be executed made collect_facts raise instead of reporting failed probes.
@pytest.mark.parametrize("kind", ["nonexistent", "text-file", "executable-text", "bin-false"])
def test_not_an_interpreter_becomes_failed_probes(kind, tmp_path):
    if kind == "bin-false" and not os.path.exists("/bin/false"):
        pytest.skip("no /bin/false")
    python = _not_an_interpreter(kind, tmp_path)
    facts = collect_facts(python=python, timeout=30)
    runs = {p.name: p for p in facts.probes}
    for name in ("torch", "environment"):
        assert runs[name].status == "failed"
        assert runs[name].error and "\n" not in runs[name].error
    assert python in runs["environment"].error or "exit code" in runs["environment"].error
    assert facts.torch.status != "ok"
    assert facts.packages == {}
    # GPU facts come from the driver, not from the target interpreter: still probed.
    assert runs["gpu"].status == "ok"


def test_whole_child_timeout(tmp_path, monkeypatch):
    # A sitecustomize that hangs the target interpreter at startup, before the probe runs.
    site = tmp_path / "site"
    site.mkdir()
    pid_file = tmp_path / "child.pid"
    (site / "sitecustomize.py").write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    start = time.monotonic()
    facts = collect_facts(timeout=2)
    elapsed = time.monotonic() - start
    assert elapsed < 10
    run = facts.probe("torch")
    assert run.status == "timeout"
    assert "torch" in run.error and "2 s" in run.error
    assert facts.torch.status == "timeout"
    # The environment probe runs in-process for this interpreter and is unaffected.
    assert facts.probe("environment").status == "ok"
    assert not _alive(int(pid_file.read_text()))


# ------------------------------------------------------------------ recorded facts fixtures
# The fixtures stand in for collect_facts on machines we do not have: they must have exactly its
# shape and be internally consistent, or rules tested against them prove nothing.

import json  # noqa: E402

import msgspec  # noqa: E402

from attn_doctor.facts import canonical_name  # noqa: E402
from attn_doctor.failures import classify  # noqa: E402
from attn_doctor.boundary.redact import safe_environment  # noqa: E402
from conftest import FACTS_DIR, load_facts  # noqa: E402

FIXTURES = [
    "cpu-only",
    "t4",
    "v100",
    "a100",
    "h100",
    "h100-numerics",
    "rtx4090",
    "rtx5090",
    "flash-attn-undefined-symbol",
    "torch-missing",
    "pip-missing",
    "first-contact",
]
# KNOWLEDGE.md section 3: the triton each torch minor pins.
TRITON_FOR_TORCH = {"2.4": "3.0.0", "2.5": "3.1.0", "2.6": "3.2.0", "2.7": "3.3", "2.8": "3.4.0", "2.11": "3.6.0"}


def test_every_fixture_is_there_and_listed():
    names = {p.stem for p in FACTS_DIR.glob("*.json")}
    assert set(FIXTURES) <= names
    readme = (FACTS_DIR / "README.md").read_text()
    for name in names:
        assert f"`{name}.json`" in readme


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_is_exactly_what_facts_serialises(name):
    # msgspec ignores unknown fields and fills missing ones: a typo would vanish silently.
    # Equality of the raw JSON with the re-encoded Facts rules that out.
    raw = json.loads((FACTS_DIR / f"{name}.json").read_text())
    facts = load_facts(name)
    assert raw == msgspec.to_builtins(facts)


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_is_consistent(name):
    facts = load_facts(name)
    # the sample forward pass is a probe of its own where it ran (recordings made since it was split out)
    assert [p.name for p in facts.probes] in (["environment", "gpu", "torch"], ["environment", "gpu", "torch", "sample"],
                                              ["environment", "gpu", "node", "torch", "sample"])  # a check's own report
    assert all(p.status == "ok" for p in facts.probes)
    assert set(facts.imports) <= set(MODULE_DISTRIBUTIONS)
    for module in set(MODULE_DISTRIBUTIONS) - set(facts.imports):
        # a real recording made before this import probe existed: there, nothing provided it
        assert facts.module_installed(module) is False, module
    assert all(key == canonical_name(key) for key in facts.packages)
    assert safe_environment(facts.env) == facts.env  # nothing outside the allow-list, all redacted
    # pip is present exactly when the environment has the pip distribution.
    assert facts.tools["pip"].present == ("pip" in facts.packages)
    if facts.tools["pip"].present:
        assert facts.tools["pip"].version == facts.version_of("pip")

    if facts.gpu.source == "none":
        assert facts.gpu.devices == [] and facts.gpu.error
        assert facts.probe("gpu").error == facts.gpu.error
    else:
        assert facts.gpu.source == "nvml" and facts.gpu.driver_version and facts.gpu.cuda_driver_version

    torch = facts.torch
    if torch.status == "missing":
        assert "torch" not in facts.packages
        assert all(r.status == "skipped" for r in facts.imports.values())
        return
    assert torch.status == "ok"
    # The distribution's version is torch's, less the local tag when installed from PyPI.
    assert torch.version.startswith(facts.version_of("torch"))
    minor = ".".join(torch.version.split(".")[:2])
    for module, result in facts.imports.items():
        dists = MODULE_DISTRIBUTIONS[module]
        installed = any(facts.version_of(d) for d in dists)
        assert (result.status != "missing") == installed, module
        if result.status == "ok" and result.version:
            assert result.version in {facts.version_of(d) for d in dists}, module
    if torch.cuda is None:
        assert torch.cuda_available is False and torch.devices == []
        return
    if minor in TRITON_FOR_TORCH:  # a later real recording may carry a torch not in the table
        assert facts.version_of("triton").startswith(TRITON_FOR_TORCH[minor])
    assert any(name.startswith("nvidia-cublas") for name in facts.packages)
    assert torch.cuda_available is True and torch.device_count == len(torch.devices)
    assert [d.capability for d in torch.devices] == [g.capability for g in facts.gpu.devices]
    for dev, gpu in zip(torch.devices, facts.gpu.devices):
        assert dev.name == gpu.name
        assert dev.bf16_native == (int(dev.capability.split(".")[0]) >= 8)
        assert dev.total_memory_mib < gpu.memory_mib  # NVML counts memory torch cannot use
        # Some sm_<major><minor'> with minor' <= minor runs on it (sm_86 code runs on sm_89).
        major, minor = dev.capability.split(".")
        assert any(a.startswith("sm_" + major) and int(a[3 + len(major):]) <= int(minor) for a in torch.arch_list)
    # The CUDA the driver supports is at least the CUDA torch was built with.
    as_tuple = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
    assert as_tuple(facts.gpu.cuda_driver_version) >= as_tuple(torch.cuda)
    expected_dtype = "bfloat16" if torch.devices[0].bf16_native else "float16"
    assert torch.sdpa_probe_dtype == expected_dtype
    for key, usable in torch.sdpa.items():
        if key.endswith("_usable"):
            assert (key in torch.sdpa_reasons) == (not usable), key


def test_undefined_symbol_fixture_is_what_classify_gives():
    facts = load_facts("flash-attn-undefined-symbol")
    err = facts.imports["flash_attn"].error
    assert err == classify(err.type, err.message)
    assert err.kind == "undefined_symbol"
    assert err.demangled.startswith("c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char")
    assert facts.torch.cxx11_abi is False


def test_pre_ampere_fixtures_have_emulated_bf16_only():
    for name, capability in (("t4", "7.5"), ("v100", "7.0")):
        dev = load_facts(name).torch.devices[0]
        assert (dev.capability, dev.bf16_native, dev.bf16_api) == (capability, False, True)
        reasons = load_facts(name).torch.sdpa_reasons["flash_usable"]
        assert f"Attempting to run on a sm {capability} gpu." in reasons[0]


def test_h100_fixture_matches_knowledge():
    facts = load_facts("h100")
    dev = facts.torch.devices[0]
    assert (dev.capability, dev.multi_processor_count, dev.shared_memory_per_block_optin) == ("9.0", 132, 232448)
    assert (facts.gpu.driver_version, facts.gpu.cuda_driver_version) == ("580.159.04", "13.0")
    assert all(facts.torch.sdpa[k] for k in ("flash_usable", "mem_efficient_usable", "cudnn_usable"))


def test_package_scan_agrees_with_importlib_metadata(tmp_path, monkeypatch):
    # The fast scan reads versions from .dist-info folder names; it must see what importlib does,
    # legacy .egg-info folders and shadowed duplicates included.
    import importlib.metadata as md

    from attn_doctor.facts import canonical_name
    from attn_doctor.probes.target import inventory

    site = tmp_path / "site"
    (site / "legacy_pkg.egg-info").mkdir(parents=True)
    (site / "legacy_pkg.egg-info" / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy-pkg\nVersion: 0.3\n\nbody\n")
    (site / "Zope.Interface-6.0.dist-info").mkdir()
    (site / "Zope.Interface-6.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: zope.interface\nVersion: 6.0\n")
    (site / "torch-0.0.1.dist-info").mkdir()  # shadowed by nothing: it comes first on sys.path
    (site / "torch-0.0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 0.0.1\nRequires-Dist: filelock\n"
        "Requires-Dist: triton~=3.9.0; platform_system == \"Linux\"\nRequires-Dist: pytorch-triton (==2.0.0)\n"
        "Requires-Dist: triton-windows; extra == \"x\"\n\nRequires-Dist: triton==9 (in the body, not a header)\n")
    monkeypatch.syspath_prepend(str(site))
    packages, requires = inventory.collect_packages()
    # torch's pin of triton, markers kept; other projects and the body are not
    assert requires == {"torch": ['triton~=3.9.0; platform_system == "Linux"', "pytorch-triton (==2.0.0)"]}
    fast = {name: record["version"] for name, record in packages.items()}
    slow = {}
    for dist in md.distributions():
        slow.setdefault(canonical_name(dist.metadata["Name"]), dist.version)
    assert fast == slow
    assert fast["legacy-pkg"] == "0.3" and fast["zope-interface"] == "6.0" and fast["torch"] == "0.0.1"


# The sample verdict's cache (single-flight, keys, stale holders): tests/test_cache.py.


@pytest.mark.parametrize("broken", [False, True])
def test_flash_attn_4_alone_is_not_a_broken_flash_attn_2(tmp_path, monkeypatch, broken):
    # flash-attn-4 makes flash_attn a namespace package: FlashAttention 2 is not installed, and
    # must not be reported as failing to import (AD305); FA4 itself is probed as flash_attn.cute.
    broken_env.install_flash_attn_4_only(tmp_path, broken=broken)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    facts = collect_facts(timeout=60, sample=False)
    assert facts.imports["flash_attn"].status == "missing"
    fa4 = facts.imports["flash_attn_4"]
    from attn_doctor.core import diagnose
    from attn_doctor.rules.loader import load_recipes

    statuses = {r.rule: r for r in diagnose(facts, load_recipes(None)).results}
    assert statuses["AD305"].status == "pass"
    if broken:
        assert fa4.status == "error" and fa4.error.message == "No module named 'cutlass'"
        assert statuses["AD309"].status == "error"
        assert statuses["AD309"].message == "import flash_attn.cute: No module named 'cutlass'"
    else:
        assert (fa4.status, fa4.version) == ("ok", "4.0.0b36")  # the distribution's, not its "0.0.0"
        assert statuses["AD309"].status == "pass"


@needs_fork
def test_a_check_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    # The samples run in forks that end with os._exit (no atexit handlers): the flash_attn
    # stand-in's metadata folder, the samples' package link, the probes' output files must all go.
    import tempfile

    system_tmp = tmp_path / "tmp"
    system_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(system_tmp))  # the probe processes'
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))  # this process's, already decided
    facts = collect_facts(timeout=120, use_cache=False, cache_root=str(tmp_path / "cache"))
    samples = {s.name: s.status for s in facts.dtype_path.samples}
    assert samples["flash_attn_block"] == "ran"  # through the stand-in where flash_attn is not installed
    # torch keeps its own compile cache folder there (torchinductor_USER), as in any torch process
    assert sorted(p.name for p in system_tmp.iterdir() if not p.name.startswith("torchinductor_")) == []


def test_installed_libraries_that_do_not_import_are_one_finding_with_their_causes(tmp_path, monkeypatch):
    # Before, `[-] Attention kernels: triton import error` fired no rule and the check passed.
    from rich.console import Console

    from attn_doctor.core import diagnose
    from attn_doctor.render.human import render
    from attn_doctor.rules.loader import load_recipes

    broken_env.install_broken_triton_family(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the import probes' interpreter
    monkeypatch.syspath_prepend(str(tmp_path))  # the package scan, which runs in this process for its own interpreter
    facts = collect_facts(timeout=60, sample=False)
    assert {m: facts.imports[m].status for m in ("triton", "liger_kernel", "fla")} == dict.fromkeys(
        ("triton", "liger_kernel", "fla"), "error")
    report = diagnose(facts, load_recipes(None))
    result = next(r for r in report.results if r.rule == "AD318")
    assert result.status == ("error" if facts.torch.cuda else "warning"), result
    assert result.evidence["causes"] == ["missing_part", "missing_dependency", "dependency_broken"]
    summary = result.evidence["summary"]
    assert summary.startswith("triton 3.6.0 does not import (ModuleNotFoundError: No module named 'triton._C.libtriton')"
                              ": part of the package is missing"), summary
    assert "fla-core 0.3.2 does not import (ModuleNotFoundError: No module named 'a_dependency_not_installed'): " \
           "a dependency is missing (a_dependency_not_installed)" in summary
    assert "liger-kernel 0.6.2 does not import (ModuleNotFoundError: No module named 'triton._C.libtriton'): " \
           "its dependency triton does not import" in summary
    assert result.remedies[0].kind == "pip" and result.remedies[0].requirement.startswith("triton")
    console = Console(record=True, width=400, color_system=None)
    render(report, console)
    kernels = next(line for line in console.export_text().splitlines() if "Attention kernels" in line)
    assert kernels.startswith("[✗]" if facts.torch.cuda else "[!]"), kernels  # never [-] over a failure
