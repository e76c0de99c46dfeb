"""The compiled-extension probe (attn_doctor/probes/target/builds_child.py) on real shared libraries:
built here with gcc against this torch's libc10, installed as a distribution in a temporary site
folder, loaded by the real probe child next to the real torch, and judged by rule AD312."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from attn_doctor.probes.target import builds_child
from attn_doctor.probes.runner import BUILDS_CHILD_SCRIPT, start_child

torch = pytest.importorskip("torch")
TORCH_LIB = Path(torch.__file__).parent / "lib"
TORCH_MM = ".".join(torch.__version__.split("+")[0].split(".")[:2])
TORCH_ABI = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or not (TORCH_LIB / "libc10.so").exists(),
                                reason="needs gcc and a Linux torch with libc10.so")


def _cc(out: Path, source: str, *libs: str, lib_dirs=()) -> None:
    src = out.with_suffix(".c")
    src.write_text(source)
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(out), str(src), "-Wl,--no-as-needed"]
    for d in lib_dirs:
        cmd += ["-L", str(d)]
    cmd += [f"-l:{lib}" for lib in libs]
    subprocess.run(cmd, check=True, capture_output=True)
    src.unlink()


def _dist(site: Path, name: str, version: str, files: dict[str, Path], requires=(), extra=None) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    meta = [f"Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"] + [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(meta) + "\n\n")
    package = site / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    record = [f"{name}/__init__.py,,"]
    for rel, built in files.items():
        shutil.move(str(built), package / rel)
        record.append(f"{name}/{rel},,")
    for rel, text in (extra or {}).items():
        (package / rel).write_text(text)
        record.append(f"{name}/{rel},,")
    (info / "RECORD").write_text("\n".join(record) + "\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("builds")
    site = root / "site"
    site.mkdir()
    stubs = root / "stubs"
    stubs.mkdir()
    # a CUDA runtime that exists while linking and is gone when loading: "built for CUDA 12"
    _cc(stubs / "libcudart.so.12", "int cudart_stub(void) { return 0; }")
    _cc(root / "good.so", "int good(void) { return 1; }", "libc10.so", lib_dirs=[TORCH_LIB])
    _cc(root / "needs_cuda.so", "int x(void) { return 2; }", "libc10.so", "libcudart.so.12", lib_dirs=[TORCH_LIB, stubs])
    # a torch C++ symbol this torch does not export: what a build for another torch release leaves
    # (no libc10 in its needed libraries: the probe finds it by its undefined torch symbol)
    _cc(root / "old_torch.so", "extern void _ZN3c1014gone_in_2_13_0Ev(void); void y(void) { _ZN3c1014gone_in_2_13_0Ev(); }")
    _cc(root / "plain.so", "int plain(void) { return 3; }")  # links nothing of torch: not an extension of it
    (stubs / "libcudart.so.12").unlink()
    shutil.copy(root / "good.so", root / "good2.so")
    for copy in ("abi_other.so", "abi_same.so"):
        shutil.copy(root / "good.so", root / copy)
    _dist(site, "goodext", "1.0", {"_good.so": root / "good.so", "_plain.so": root / "plain.so"}, requires=["torch>=2.0"])
    _dist(site, "cudaext", "0.3+cu121torch2.1", {"_C.so": root / "needs_cuda.so"}, requires=["torch==2.1.0"])
    # an extension that does not declare torch in its metadata is read only under a known name
    _dist(site, "silentext", "1.0", {"_hidden.so": root / "good2.so"})
    _dist(site, "oldext", "2.0", {"_ops.so": root / "old_torch.so"}, requires=["numpy", "torch (>=2.0)"],
          extra={"cpp_lib.json": json.dumps({"version": {"cuda": 1208, "torch": "2.10.0+cu128", "python": "3.10.19"}})})
    # Built for this very torch release, one with the other C++ ABI and one with torch's own, as
    # the wheels' local version tags say (flash-attn's naming: +cu12torch2.6cxx11abiFALSE).
    _dist(site, "abiother", f"1.0+torch{TORCH_MM}cxx11abi{str(not TORCH_ABI).upper()}", {"_C.so": root / "abi_other.so"}, requires=["torch"])
    _dist(site, "abisame", f"1.0+torch{TORCH_MM}cxx11abi{str(TORCH_ABI).upper()}", {"_C.so": root / "abi_same.so"}, requires=["torch"])
    return site


def test_elf_reader_on_real_libraries(site):
    needed, symbols, _ = builds_child.elf_dynamic(str(site / "cudaext" / "_C.so"))
    assert "libc10.so" in needed and "libcudart.so.12" in needed
    needed, symbols, sample = builds_child.elf_dynamic(str(site / "oldext" / "_ops.so"))
    assert symbols == 1 and sample == ["_ZN3c1014gone_in_2_13_0Ev"]
    assert builds_child.elf_dynamic(str(site / "goodext" / "__init__.py")) is None
    plain = builds_child.elf_dynamic(str(site / "goodext" / "_plain.so"))
    assert plain is not None and not builds_child.links_torch(plain[0], plain[1])


def test_probe_loads_each_extension_next_to_torch(site, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(site))
    data = start_child(sys.executable, ["torch", "--targets", "{}", "--builds", json.dumps({"script": str(BUILDS_CHILD_SCRIPT)})]).result(120)
    builds = data["builds"]
    assert "silentext" not in builds  # does not require torch: not read at all
    assert builds["goodext"]["extensions"] == [
        {"file": "goodext/_good.so", "needed": builds["goodext"]["extensions"][0]["needed"], "torch_symbols": 0, "status": "ok"}
    ]  # _plain.so links nothing of torch: not listed
    cuda = builds["cudaext"]
    assert cuda["built_for"]["torch"] == "2.1.0" and cuda["built_for"]["cuda"] == "12.1"
    assert "Requires-Dist: torch==2.1.0" in cuda["built_for"]["source"]
    assert cuda["extensions"][0]["status"] == "error" and "libcudart.so.12" in cuda["extensions"][0]["error"]["message"]
    old = builds["oldext"]
    assert old["built_for"] == {"torch": "2.10.0+cu128", "cuda": "12.8", "python": "3.10.19", "source": "oldext/cpp_lib.json"}
    for name, abi in (("abiother", not TORCH_ABI), ("abisame", TORCH_ABI)):
        assert builds[name]["built_for"]["cxx11_abi"] is abi and builds[name]["built_for"]["torch"] == TORCH_MM, builds[name]
        assert builds[name]["extensions"][0]["status"] == "ok"  # a library with no std::string in its interface loads either way
    assert data["torch"]["cxx11_abi"] is TORCH_ABI
    assert "undefined symbol: _ZN3c1014gone_in_2_13_0Ev" in old["extensions"][0]["error"]["message"]


def test_check_names_what_each_extension_was_built_for(site, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(site))
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--json", "--no-sample", "--no-cache"],
                          capture_output=True, text=True, timeout=300)
    doc = json.loads(proc.stdout)
    result = next(r for r in doc["results"] if r["rule"] == "AD312")
    assert result["status"] == "error", result
    message = result["message"]
    assert "cudaext 0.3+cu121torch2.1: cudaext/_C.so does not load (libcudart.so.12: cannot open shared object file" in message
    assert "built for torch 2.1.0, CUDA 12.1" in message
    assert "oldext 2.0: oldext/_ops.so does not load" in message and "torch 2.10.0+cu128" in message
    assert "goodext" not in message
    assert f"This is torch {torch.__version__}" in message
    # The C++ ABI from the local tag, against torch._C._GLIBCXX_USE_CXX11_ABI: named where it differs.
    other, own = ("C++11", "pre-C++11") if not TORCH_ABI else ("pre-C++11", "C++11")
    assert f"abiother 1.0+torch{TORCH_MM}cxx11abi{str(not TORCH_ABI).upper()}; built for the {other} ABI" in message
    assert f", {own} ABI (cxx11abi{str(TORCH_ABI).upper()})" in message  # this torch's, beside its version
    assert "abisame" not in message
    assert proc.returncode == 1


def test_recorded_h100_xformers_names_the_build_behind_the_smoke_failure():
    # Recorded on the H100 node with the registry's xformers 0.0.35 beside torch 2.11.0+cu130: the
    # import succeeds with its kernels disabled, so the failure must name the build it expected.
    from attn_doctor.rules.fixtures import build_facts
    from attn_doctor.rules.loader import load_recipes
    from attn_doctor.diagnosis.engine import evaluate

    facts = build_facts("h100-xformers", Path(__file__).parent / "fixtures" / "facts")
    results = {r.rule: r for r in evaluate(load_recipes(), facts)}
    assert results["AD312"].status == "error"
    assert "built for torch 2.10.0+cu128" in results["AD312"].message and "torch 2.11.0+cu130" in results["AD312"].message
    # one cause, one finding: xformers' smoke failure is that build's symptom, reported by AD312
    assert results["AD701"].status == "skipped" and "AD312" in results["AD701"].reason
    from attn_doctor.diagnosis.engine import evaluate_rule

    alone = evaluate_rule(load_recipes().get("AD701"), facts)  # on its own it still names the build
    assert alone.status == "error" and "built for torch 2.10.0+cu128: AD312" in alone.message


def _with_build(facts, name: str, cxx11_abi, torch_abi, status: str = "ok"):
    from attn_doctor.facts import BuiltFor, ExtensionBuild, ExtensionLibrary

    version = facts.torch.version.split("+")[0]
    build = ExtensionBuild(version="0.1", built_for=BuiltFor(torch=version, cxx11_abi=cxx11_abi, source=f"local version +torch{version}"),
                           extensions=[ExtensionLibrary(file=f"{name}/_C.so", status=status, needed=["libc10.so"])])
    torch_info = msgspec.structs.replace(facts.torch, cxx11_abi=torch_abi)
    return msgspec.structs.replace(facts, torch=torch_info, builds={name: build}, builds_probed=True)


@pytest.mark.parametrize("built, torch_abi", [(True, False), (False, True)])
def test_a_build_for_the_other_cxx_abi_is_named_from_recorded_facts(built, torch_abi):
    """The H100's recorded facts with one extension built for its very torch release: only the C++
    ABI differs, and the finding says which ABI each side has."""
    from attn_doctor.diagnosis.engine import evaluate
    from attn_doctor.rules.fixtures import build_facts
    from attn_doctor.rules.loader import load_recipes

    recipes = load_recipes()
    h100 = build_facts("h100", Path(__file__).parent / "fixtures" / "facts")
    result = {r.rule: r for r in evaluate(recipes, _with_build(h100, "myext", built, torch_abi))}["AD312"]
    assert result.status == "warning", result  # it loads: a warning, not an error
    words = {True: "the C++11 ABI (cxx11abiTRUE)", False: "the pre-C++11 ABI (cxx11abiFALSE)"}
    assert f"myext 0.1; built for {words[built]}" in result.message
    assert words[torch_abi].replace("the ", "", 1) in result.message.split("This is ", 1)[1]
    assert "another torch or C++ ABI" in result.message

    same = {r.rule: r for r in evaluate(recipes, _with_build(h100, "myext", torch_abi, torch_abi))}["AD312"]
    assert same.status == "pass", same.message
    unknown = {r.rule: r for r in evaluate(recipes, _with_build(h100, "myext", built, None))}["AD312"]
    assert unknown.status == "pass", unknown.message  # torch's ABI unknown: no comparison, no guess


def test_an_abi_mismatch_that_does_not_load_is_an_error_naming_both():
    from attn_doctor.facts import ImportError_
    from attn_doctor.diagnosis.engine import evaluate
    from attn_doctor.rules.fixtures import build_facts
    from attn_doctor.rules.loader import load_recipes

    h100 = build_facts("h100", Path(__file__).parent / "fixtures" / "facts")
    facts = _with_build(h100, "myext", False, True, status="error")
    symbol = "_ZN3c105ErrorC2ENS_14SourceLocationESs"
    facts.builds["myext"].extensions[0].error = ImportError_(type="OSError", message=f"myext/_C.so: undefined symbol: {symbol}", kind="undefined_symbol", symbol=symbol)
    result = {r.rule: r for r in evaluate(load_recipes(), facts)}["AD312"]
    assert result.status == "error"
    assert f"undefined symbol: {symbol}); built for the pre-C++11 ABI (cxx11abiFALSE)" in result.message
    assert "C++11 ABI (cxx11abiTRUE)" in result.message.split("This is ", 1)[1]
