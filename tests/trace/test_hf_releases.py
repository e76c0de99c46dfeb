"""``trace --hf`` across real transformers releases: each release installed with uv in a venv of
its own, each architecture a config.json folder (tests/trace/hf_configs.py), the model built from
it on meta as from_pretrained would build it.

- 5.6.0 (what ``pip install llamafactory==0.9.5`` brings) failed on every architecture with
  ``KeyError: 'flash_attn'``: the flash_attn stand-in was importable but no installed distribution.
  Traced here with the real CLI, ``attn-doctor trace --hf DIR --python VENV``.
- The other releases run through the same API in one process per release (the CLI's child does
  exactly this call; one process per release only saves importing transformers 14 times).
"""
import json
import os
import subprocess
import sys
import time

import pytest

import hf_configs
from conftest import REPO

# Real releases installed from the registry: part of the realenv matrix (`pytest -m realenv`).
pytestmark = [pytest.mark.slow, pytest.mark.realenv]

RELEASES = ["4.46.3", "4.57.6", "5.6.0", None]  # None: the newest on PyPI when the tests run
ARCHS = sorted(hf_configs.CONFIGS)
# Attention calls of one forward pass: 2 layers; T5 has encoder, decoder and cross attention;
# llava its vision tower too (one image in the input).
SINKS = {"t5": 6, "llava": 4}
DTYPES = {"bfloat16": "bfloat16", "float16": "float16", None: "float32"}


def _release_tuple(version):
    return tuple(int(x) for x in version.split(".")[:2])


def cli(python, *args):
    env = dict(os.environ, PYTHONPATH=REPO, COLUMNS="250")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "trace", *args, "--python", python],
                          capture_output=True, text=True, env=env, timeout=900)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start


RUNNER = r"""
import json, sys, time
from attn_doctor.tracing.runs.api import trace
from attn_doctor.tracing.runs.child import stdout_to_stderr
specs, out = json.loads(sys.argv[1]), sys.argv[2]
with open(out, "w") as fh:
    for spec in specs:
        start = time.monotonic()
        with stdout_to_stderr():
            report = trace(**spec)
        report["wall_s"] = round(time.monotonic() - start, 2)
        fh.write(json.dumps(report, default=str) + "\n")
        fh.flush()
"""


def trace_many(python, specs, tmp_path):
    """trace(**spec) for each spec in one process of ``python``; the reports, in order."""
    from attn_doctor.tracing.runs.launch import package_dir

    pkg = package_dir()
    out = tmp_path / "reports.jsonl"
    env = dict(os.environ, PYTHONPATH=pkg)
    try:
        proc = subprocess.run([python, "-c", RUNNER, json.dumps(specs), str(out)], capture_output=True, text=True,
                              env=env, timeout=1800, cwd=str(tmp_path))
    finally:
        import shutil

        shutil.rmtree(pkg, ignore_errors=True)
    reports = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    assert proc.returncode == 0 and len(reports) == len(specs), proc.stderr[-3000:]
    return reports


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf-configs")
    return {name: hf_configs.write(root, name) for name in ARCHS}


def _expect_healthy(report, arch, version):
    where = "%s on transformers %s" % (arch, version)
    assert report["status"] == "ok", (where, report.get("error"))
    assert report["exit_code"] == 0, (where, report["findings"])
    assert not [f for f in report["findings"] if f["severity"] == "error"], where
    # fp32 configs reach SDPA in fp32: its slow-path warning is the only finding allowed, and T5's
    # learned relative position bias (an additive mask SDPA reads from memory) the one note
    assert {f["id"] for f in report["findings"]} <= {"AD604", "AD616"}, (where, report["findings"])
    for f in report["findings"]:
        if f["id"] == "AD616":
            assert arch == "t5" and f["severity"] == "info" and "relative_attention_bias" in f["message"], (where, f)
    assert report["summary"]["sinks"] == SINKS.get(arch, 2), (where, [s["name"] for s in report["sinks"]])
    want = DTYPES[hf_configs.CONFIGS[arch].get("torch_dtype")]
    assert {s["effective_dtypes"]["q"] for s in report["sinks"]} == {want}, where
    assert report["hf"]["attn_implementation_source"] == "transformers default", where
    assert report["hf"]["transformers"] == version


@pytest.mark.parametrize("release", RELEASES, ids=lambda v: v or "newest")
def test_every_architecture_traces_as_from_pretrained_builds_it(release, transformers_venv, configs, tmp_path):
    python, version = transformers_venv(release)
    reports = trace_many(python, [{"hf": configs[a]} for a in ARCHS], tmp_path)
    table = []
    for arch, report in zip(ARCHS, reports):
        table.append("%-9s %-8s %-7s %s %5.1fs" % (version, arch, report["status"], report.get("hf", {}).get(
            "attn_implementation"), report["wall_s"]))
        if arch in hf_configs.ADDED_IN and _release_tuple(version) < hf_configs.ADDED_IN[arch]:
            # transformers too old for the architecture: one line with its reason, "could not run"
            assert report["status"] == "failed" and report["exit_code"] == 3
            assert "does not recognize this architecture" in report["error"]["message"]
            assert "\n" not in report["error"]["message"]
            continue
        _expect_healthy(report, arch, version)
    print("\n" + "\n".join(table))


# How each architecture is traced besides its config's own dtype: the precisions and attention
# implementations people train with. flash_attention_2 runs through the flash_attn stand-in (there
# is no GPU here); routes=False keeps it to that path (the installed-path retrace is tested above).
MODES = {
    "fp16": {"dtype": "fp16"},
    "fp16-autocast": {"dtype": "fp32", "autocast": "fp16"},
    "train-bf16": {"dtype": "bf16", "train": True},
    "eager-bf16": {"dtype": "bf16", "attn_implementation": "eager"},
    "eager-fp16-autocast": {"dtype": "fp32", "autocast": "fp16", "attn_implementation": "eager"},
    "fa2-bf16": {"dtype": "bf16", "attn_implementation": "flash_attention_2", "routes": False},
}
# Upstream behaviour the trace must reproduce, not hide:
# - transformers 5.6.0's flash wrapper calls s_aux.to() on None (fixed in 5.6.1): every model
#   without attention sinks raises at its first flash call.
# - before HybridCache cast new states to the cache dtype (transformers#37972), Gemma2 under fp16
#   autocast with fp32 weights fails writing fp16 keys into its fp32 cache.
S_AUX = "'NoneType' object has no attribute 'to'"
S_AUX_FREE = {"falcon"}  # calls transformers' flash helper itself, not through the attention interface
# Architectures with no flash_attention_2 path before a release (None: in none of these releases):
# from_pretrained refuses them on any machine, so the trace must not run another kernel instead.
FA2_FROM = {"bert": (5, 0), "t5": None}
INDEX_PUT = "Index put requires the source and destination dtypes match"


@pytest.mark.parametrize("release", RELEASES, ids=lambda v: v or "newest")
def test_precisions_implementations_and_training_across_architectures(release, transformers_venv, configs, tmp_path):
    python, version = transformers_venv(release)
    archs = [a for a in ARCHS if not (a in hf_configs.ADDED_IN and _release_tuple(version) < hf_configs.ADDED_IN[a])]
    cases = [(a, mode) for a in archs for mode in MODES] + [(a, "fa2-fp32-weights") for a in archs]
    specs = [dict({"hf": configs[a]}, **(MODES.get(mode) or {"dtype": "fp32", "attn_implementation": "flash_attention_2",
                                                              "routes": False})) for a, mode in cases]
    start = time.monotonic()
    reports = trace_many(python, specs, tmp_path)
    rows = []
    for (arch, mode), report in zip(cases, reports):
        where = (version, arch, mode)
        rows.append("%-8s %-9s %-17s %-7s exit %d %5.2fs" % (version, arch, mode, report["status"], report["exit_code"],
                                                              report["wall_s"]))
        errors = [f for f in report["findings"] if f["severity"] == "error"]
        if mode.startswith("fa2") and arch in FA2_FROM and (FA2_FROM[arch] is None or _release_tuple(version) < FA2_FROM[arch]):
            assert report["status"] == "failed" and report["exit_code"] == 3, (where, report["findings"])
            assert "has no flash_attention_2 path" in report["error"]["message"], where
            continue
        if mode == "fa2-fp32-weights":
            # the known-bad combination (LLaMA-Factory #7151, #7998): flagged by the kernel's own words
            assert report["exit_code"] == 1, (where, report.get("error"), report["findings"])
            assert any(f["id"] == "AD604" and f["kernel_message"] == "FlashAttention only support fp16 and bf16 data type"
                       for f in errors), (where, report["findings"])
            continue
        if mode == "fa2-bf16" and version == "5.6.0" and arch not in S_AUX_FREE:
            assert report["exit_code"] == 1 and [f["kernel_message"] for f in errors] == [S_AUX], (where, report["findings"])
            continue
        if arch == "gemma2" and "fp16-autocast" in mode and _release_tuple(version) < (4, 52):
            assert report["status"] == "failed" and report["exit_code"] == 3 and INDEX_PUT in report["error"]["message"], where
            continue
        assert report["status"] == "ok" and report["exit_code"] == 0, (where, report.get("error"), report["findings"])
        assert not errors and not [f for f in report["findings"] if f["severity"] == "warning"], (where, report["findings"])
        assert report["summary"]["sinks"] == SINKS.get(arch, 2), (where, [s["name"] for s in report["sinks"]])
        impl = MODES[mode].get("attn_implementation")
        if impl:
            assert report["hf"]["attn_implementation"] == impl, where
        if mode == "fp16":
            assert {s["effective_dtypes"]["q"] for s in report["sinks"]} == {"float16"}, where
    print("\n" + "\n".join(rows) + "\n%d traces in %.1f s" % (len(cases), time.monotonic() - start))


@pytest.mark.parametrize("release", RELEASES, ids=lambda v: v or "newest")
def test_check_runs_its_sample_forward_pass_with_each_release(release, transformers_venv):
    # `check` in the environment a user trains in: its sample forward pass builds transformers'
    # Llama with this release and traces it (no GPU here: AD101 is the one finding).
    python, version = transformers_venv(release)
    # uv (beside this interpreter) is what installs into these pip-less venvs: on PATH, as for a user
    env = dict(os.environ, PYTHONPATH=REPO, COLUMNS="250",
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--python", python, "--json", "--no-cache"],
                          capture_output=True, text=True, env=env, timeout=900)
    report = json.loads(proc.stdout)
    fired = {r["rule"] for r in report["results"] if r["status"] in ("error", "warning", "info", "crashed")}
    assert fired == {"AD101"} and proc.returncode == 0, (fired, proc.stderr[-2000:])  # no GPU: a warning, not an error
    assert report["facts"]["packages"]["transformers"]["version"] == version
    dtype_path = report["facts"]["dtype_path"]
    samples = {s["name"]: s for s in dtype_path["samples"]}
    assert dtype_path["status"] == "ok" and dtype_path["verdict"] == "pass", dtype_path
    assert samples["transformers_sdpa"]["status"] == "ran" and samples["transformers_sdpa"]["summary"]["sinks"] == 2, samples
    assert samples["transformers_flash_attention_2"]["status"] == "skipped"  # flash_attn is not installed here
    # The sample imports Llama's modules without transformers' table of every model (the cold
    # check's cost): that short cut works with this release, it did not fall back to the whole import.
    printed = json.dumps([p.get("stderr") for p in report["facts"]["probes"]])
    assert "transformers imported whole" not in printed, printed[-2000:]


def test_gemma2_takes_what_transformers_picks(transformers_venv, configs, tmp_path):
    # transformers >= 5 refuses sdpa for Gemma2; the tracer no longer asks for it.
    python, version = transformers_venv(None)
    default, sdpa = trace_many(python, [{"hf": configs["gemma2"]},
                                        {"hf": configs["gemma2"], "attn_implementation": "sdpa"}], tmp_path)
    assert default["exit_code"] == 0 and default["hf"]["attn_implementation"] == "eager"
    # transformers' eager function is traced through: the attention written out in it is the call judged
    assert {s["name"] for s in default["sinks"]} == {"eager attention (inline)"}
    assert sdpa["status"] == "failed" and sdpa["exit_code"] == 3
    assert "does not support an attention implementation through torch.nn.functional.scaled_dot_product_attention" \
        in sdpa["error"]["message"]


def test_config_attn_implementation_is_used(transformers_venv, tmp_path):
    python, version = transformers_venv(None)
    folder = hf_configs.write(tmp_path, "llama", {"attn_implementation": "eager"})
    (report,) = trace_many(python, [{"hf": folder}], tmp_path)
    assert report["hf"]["attn_implementation"] == "eager" and report["hf"]["attn_implementation_source"] == "config"
    assert {s["name"] for s in report["sinks"]} == {"eager attention (inline)"} and report["exit_code"] == 0


@pytest.mark.parametrize("release", RELEASES, ids=lambda v: v or "newest")
def test_flash_attention_2_with_fp32_weights_is_flagged(release, transformers_venv, configs, tmp_path):
    # LLaMA-Factory #7151 / #7998: fp32 weights, flash_attention_2, no autocast. As installed (no
    # flash_attn here) transformers refuses FA2; with flash-attn it reaches the kernel in fp32.
    python, version = transformers_venv(release)
    bad, healthy = trace_many(python, [
        {"hf": configs["llama"], "attn_implementation": "flash_attention_2", "dtype": "fp32"},
        {"hf": configs["llama"], "attn_implementation": "flash_attention_2", "autocast": "bf16", "dtype": "fp32"},
    ], tmp_path)
    assert bad["exit_code"] == 1
    fp32 = [f for f in bad["findings"] if f["kernel_message"] == "FlashAttention only support fp16 and bf16 data type"]
    assert fp32 and fp32[0]["severity"] == "error" and fp32[0]["route"] == "standin"
    routes = {r["name"]: r for r in bad["routes"]}
    assert routes["installed"]["verdict"] == "could not run"
    assert "refuses attn_implementation='flash_attention_2'" in routes["installed"]["error"]
    if version == "5.6.0":
        # transformers 5.6.0's flash wrapper calls s_aux.to() on None (fixed in 5.6.1): every model
        # without attention sinks raises there, under autocast too.
        assert healthy["exit_code"] == 1
        assert [f["kernel_message"] for f in healthy["findings"]] == ["'NoneType' object has no attribute 'to'"]
        assert healthy["findings"][0]["id"] == "AD607"
    else:
        # under autocast transformers casts fp32 q/k/v to the autocast dtype first
        assert healthy["exit_code"] == 0 and healthy["findings"] == [], healthy["findings"]
        assert {r["name"]: r["verdict"] for r in healthy["routes"]}["standin"] == "clean"


def test_cli_on_transformers_5_6_no_longer_fails_with_keyerror(transformers_venv, configs):
    python, version = transformers_venv("5.6.0")
    timings = []
    for arch in ("llama", "qwen2", "gemma", "gpt2", "t5"):
        code, out, err, wall = cli(python, "--hf", configs[arch])
        timings.append("%s %.1fs" % (arch, wall))
        assert "KeyError" not in out + err and "Traceback" not in out + err, out + err
        assert code == 0, out + err
        assert "attn_implementation=" in out and "transformers 5.6.0" in out
        assert ("no dtype problems at %d attention calls" % SINKS.get(arch, 2)) in out or "AD604" in out, out
    print(", ".join(timings))


@pytest.mark.parametrize("args,code,needle", [
    (["--hf", "{missing}"], 2, "no such file or folder"),
    (["--hf", "{empty}"], 2, "no config.json in this folder"),
    (["--hf", "{notjson}"], 2, "not a JSON config"),
    (["--hf", "{unknown}"], 3, "does not recognize this architecture"),
    (["--hf", "{gemma2}", "--attn-implementation", "sdpa"], 3,
     "does not support an attention implementation through torch.nn.functional.scaled_dot_product_attention"),
    (["--hf", "{badheads}"], 3, "transformers"),
])
def test_configs_transformers_cannot_build_give_one_line(args, code, needle, transformers_venv, configs, tmp_path):
    python, version = transformers_venv(None)
    (tmp_path / "empty").mkdir()
    (tmp_path / "notjson").mkdir()
    (tmp_path / "notjson" / "config.json").write_text("{model_type: llama")
    paths = {"missing": str(tmp_path / "nope"), "empty": str(tmp_path / "empty"),
             "notjson": str(tmp_path / "notjson"), "gemma2": configs["gemma2"],
             "unknown": hf_configs.write(tmp_path, "llama", {"model_type": "no_such_arch_xyz"}),
             "badheads": hf_configs.write(tmp_path / "bh", "llama", {"hidden_size": 66, "num_attention_heads": 4})}
    got, out, err, _ = cli(python, *[a.format(**paths) for a in args])
    assert got == code, out + err
    assert "Traceback" not in out + err and "internal error" not in out + err
    if code == 2:  # bad input: one line on stderr, as for every command
        (line,) = err.strip().splitlines()
        assert line.startswith("attn-doctor: error: --hf") and needle in line, err
        return
    failed = [line for line in out.splitlines() if line.startswith("✗")]
    assert len(failed) == 1 and needle in failed[0], out
    got, out, _, _ = cli(python, *[a.format(**paths) for a in args], "--json")
    report = json.loads(out)
    assert got == code == report["exit_code"] and needle in report["error"]["message"]


def test_gemma2_with_flash_attention_2_is_a_clear_result(transformers_venv, configs):
    # Was: "internal error", exit 3 and nothing on --json (the retry after transformers refused FA2).
    for release in ("5.6.0", None):
        python, version = transformers_venv(release)
        code, out, err, _ = cli(python, "--hf", configs["gemma2"], "--attn-implementation", "flash_attention_2",
                                "--json")
        report = json.loads(out)
        assert code == report["exit_code"] and "internal" not in json.dumps(report.get("error") or {})
        assert report["hf"]["attn_implementation"] == "flash_attention_2"
        standin = {r["name"]: r for r in report["routes"]}["standin"]
        if version == "5.6.0":
            assert code == 1 and standin["verdict"] == "fails"  # the s_aux bug, as above
        else:
            assert code == 0 and standin["verdict"] == "clean" and standin["attention"] == ["flash-attn 2"]


def test_numpy_float64_table_is_named(transformers_venv):
    # numpy comes with transformers; the table is made in the forward pass by torch.from_numpy.
    python, _ = transformers_venv("5.6.0")
    code, out, err, _ = cli(python, os.path.join(REPO, "tests", "trace", "toys", "numpy_rotary_toy.py") + ":build",
                            "--json")
    report = json.loads(out)
    assert code == 1, err
    (f,) = report["findings"]
    assert f["chain"][0]["dtype"] == "float64"
    origin = f["chain"][0]["operand_origin"]
    assert origin["kind"] == "created" and origin["op"] == "torch.from_numpy"
    assert "promoted to float64" in f["message"] and "made by torch.from_numpy" in f["message"]
