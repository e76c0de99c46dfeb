"""Which path runs: a model that falls back to SDPA without flash-attn is traced both ways, and the
report says which path is the verdict. The stand-in is also an installed distribution, as the
libraries that check for flash-attn by its metadata expect."""
import getpass
import json
import os
import subprocess
import sys
import tempfile

from conftest import REPO, marker_line, toy_target

TOY = "heldout_toy.py"


def cli(*args):
    env = dict(os.environ, PYTHONPATH=REPO, COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "trace", *args], capture_output=True, text=True,
                          env=env, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def routes(report):
    return {r["name"]: r for r in report["routes"]}


def test_fallback_model_is_traced_on_both_paths(trace):
    r = trace(toy_target(TOY, "build_fallback"), autocast="bf16")
    got = routes(r)
    installed, standin = got["installed"], got["standin"]
    # As installed, SDPA under (emulated) CUDA autocast casts the fp32 q/k itself: clean.
    assert installed["attention"] == ["SDPA"] and installed["verdict"] == "clean"
    assert installed["summary"]["sinks"] == 2 and installed["role"] == "verdict"
    # With flash-attn, the same promotion reaches flash_attn_func, which autocast does not touch.
    assert standin["attention"] == ["flash-attn 2"] and standin["verdict"] == "fails"
    assert standin["at"]["line"] == marker_line(TOY, "SINK-FB-FLASH") and standin["at"]["id"] == "AD601"
    assert standin["label"].startswith("with flash-attn 2.")
    # On meta both paths count: the training machine may or may not have flash-attn.
    assert r["exit_code"] == 1
    assert [f["route"] for f in r["findings"]] == ["standin"]
    assert r["findings"][0]["chain"][0]["line"] == marker_line(TOY, "PROMOTE-FB")


def test_on_cuda_the_installed_path_is_the_verdict(trace):
    # The combination rule, applied to the two real traces of the same model: with --device cuda the
    # path this machine takes decides; the stand-in's failure is advice.
    from attn_doctor.render.trace_human import render_trace
    from attn_doctor.tracing.runs.routes import combine_routes

    standin = trace(toy_target(TOY, "build_fallback"), autocast="bf16", routes=False)
    installed = trace(toy_target(TOY, "build_fallback"), autocast="bf16", routes=False, standins=False)
    assert standin["standin_calls"] == 2 and installed["standin_calls"] == 0
    combined = combine_routes(standin, installed, "cuda")
    assert combined["exit_code"] == 0 and combined["findings"] == []
    advice = routes(combined)["standin"]
    assert advice["role"] == "advice" and advice["verdict"] == "fails" and advice["findings"][0]["id"] == "AD601"
    assert combine_routes(standin, installed, "meta")["exit_code"] == 1

    from io import StringIO

    from rich.console import Console

    buf = StringIO()
    render_trace(combined, console=Console(file=buf, width=200, highlight=False))
    text = buf.getvalue()
    assert "as installed: SDPA — clean" in text
    assert "advice, with flash-attn" in text and "not the path this machine takes" in text


def test_cli_says_which_path_runs():
    code, out, err = cli(toy_target(TOY, "build_fallback"), "--autocast", "bf16")
    assert code == 1, out + err
    assert "✓ as installed: SDPA — clean  (2 attention calls)" in out
    line = marker_line(TOY, "SINK-FB-FLASH")
    assert "with flash-attn 2.8.3: flash-attn 2 — fails at" in out and "heldout_toy.py:%d (AD601)" % line in out
    code, out, _ = cli(toy_target(TOY, "build_fallback"), "--autocast", "bf16", "--json")
    report = json.loads(out)
    assert code == 1 and [r["name"] for r in report["routes"]] == ["installed", "standin"]
    assert [r["verdict"] for r in report["routes"]] == ["clean", "fails"]


def test_one_path_when_the_stand_in_is_never_called(trace):
    r = trace(toy_target("healthy_toy.py", "build_bf16"))
    assert [(rt["name"], rt["verdict"], rt["attention"]) for rt in r["routes"]] == [("installed", "clean", ["SDPA"])]


def _run_fresh(code):
    """stdout of `code` run in a fresh interpreter with this checkout importable (stand-ins are per process)."""
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_stand_in_is_an_installed_distribution():
    # What transformers 5.x reads (packages_distributions, version) agrees with `import flash_attn`.
    code = (
        "import importlib.metadata as md\n"
        "from attn_doctor.tracing.standins import registry as standins\n"
        "standins.install_standins()\n"
        "import flash_attn\n"
        "print(md.version('flash-attn'), md.version('flash_attn'), flash_attn.__version__,\n"
        "      md.packages_distributions()['flash_attn'])\n"
        "from flash_attn.bert_padding import pad_input, unpad_input, index_first_axis\n"
        "standins.remove_standins()\n"
        "print('flash_attn' in md.packages_distributions())\n")
    first, second = _run_fresh(code).splitlines()
    assert first == "2.8.3 2.8.3 2.8.3 ['flash_attn']" and second == "False"


def test_every_stand_in_is_a_distribution_of_its_module_and_transformers_sees_no_hub():
    # transformers 5.x indexes packages_distributions()[MODULE] once find_spec(MODULE) finds a module
    # (a KeyError there stopped its import), and swaps a flash_attention_N it finds unusable for the
    # Hub's kernel where is_kernels_available(): the kernels stand-in is an import, not an install.
    code = (
        "import importlib.metadata as md, sys, types\n"
        "from attn_doctor.tracing.standins import registry as standins\n"
        "standins.install_standins()\n"
        "m = md.packages_distributions()\n"
        "print(m['flash_attn_interface'], m['sageattention'], m['kernels'], md.version('flash_attn_3'))\n"
        "iu = types.ModuleType('transformers.utils.import_utils')\n"
        "real = lambda MIN_VERSION='0.9.0': True\n"
        "iu.is_kernels_available = real\n"
        "sys.modules['transformers'] = types.ModuleType('transformers')\n"
        "sys.modules['transformers.utils.import_utils'] = iu\n"
        "user = types.ModuleType('transformers.modeling_utils'); user.is_kernels_available = real\n"
        "sys.modules['transformers.modeling_utils'] = user\n"
        "standins._patch_kernels_check(iu)\n"
        "later = types.ModuleType('transformers.models.x'); later.is_kernels_available = iu.is_kernels_available\n"
        "sys.modules['transformers.models.x'] = later  # imported during the trace, by name\n"
        "print(iu.is_kernels_available(), user.is_kernels_available())\n"
        "standins.remove_standins()\n"
        "print(iu.is_kernels_available is real, user.is_kernels_available is real, later.is_kernels_available is real,\n"
        "      'kernels' in md.packages_distributions())\n")
    out = _run_fresh(code)
    assert out.splitlines() == ["['flash_attn_3'] ['sageattention'] ['kernels'] 3.0.0", "False False",
                                "True True True False"], out


def test_a_trace_in_this_interpreter_leaves_nothing_in_the_temporary_folder(tmp_path):
    # The doctor skips the teardown of a process that imported torch (0.5-0.8 s), never its exit
    # handlers: the flash_attn stand-in's metadata folder still goes.
    system_tmp = tmp_path / "tmp"
    system_tmp.mkdir()
    # inductor's compile cache stays where every other test's compile left it (Triton's is under ~
    # already): a cold cache in the new TMPDIR costs a minute of compiling and proves nothing about
    # the doctor's own files, which are what this test reads
    real_tmp = tempfile.gettempdir()
    env = dict(os.environ, PYTHONPATH=REPO, COLUMNS="200", TMPDIR=str(system_tmp),
               TORCHINDUCTOR_CACHE_DIR=os.environ.get("TORCHINDUCTOR_CACHE_DIR", os.path.join(real_tmp, f"torchinductor_{getpass.getuser()}")))
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "trace", toy_target(TOY, "build_fallback"), "--autocast", "bf16", "--json"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "standin" in {r["name"] for r in json.loads(proc.stdout)["routes"]}
    # torch keeps its own compile cache folder there (torchinductor_USER), as in any torch process
    assert sorted(p.name for p in system_tmp.iterdir() if not p.name.startswith("torchinductor_")) == []
