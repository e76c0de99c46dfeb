"""The GPU facts probe and the smoke tests, on a real GPU."""

from __future__ import annotations

import json
import subprocess
import sys

import torch


def test_gpu_seen_by_nvml_and_torch(gpu_facts):
    assert gpu_facts.gpu.source == "nvml"
    assert gpu_facts.gpu.driver_version and gpu_facts.gpu.cuda_driver_version
    assert len(gpu_facts.torch.devices) == torch.cuda.device_count() >= 1
    for device in gpu_facts.torch.devices:
        major, minor = torch.cuda.get_device_capability(device.index)
        assert device.capability == f"{major}.{minor}"
        assert device.bf16_native == (major >= 8)  # decided from the capability, not is_bf16_supported()
        assert device.name == torch.cuda.get_device_name(device.index)
    nvml_caps = sorted(d.capability for d in gpu_facts.gpu.devices)
    assert nvml_caps == sorted(d.capability for d in gpu_facts.torch.devices)


def test_torch_build_facts(gpu_facts):
    t = gpu_facts.torch
    assert t.status == "ok" and t.version == torch.__version__ and t.cuda == torch.version.cuda
    assert t.cxx11_abi == bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    assert t.arch_list == torch.cuda.get_arch_list()
    assert t.cuda_available is True


def test_sdpa_flash_usable_on_ampere_and_newer(gpu_facts):
    major = torch.cuda.get_device_capability(0)[0]
    sdpa = gpu_facts.torch.sdpa
    assert sdpa["flash_usable"] is (8 <= major <= 12)
    assert gpu_facts.torch.sdpa_probe_dtype == ("bfloat16" if major >= 8 else "float16")


def test_smoke_every_native_backend_passes(gpu_facts):
    smoke = gpu_facts.smoke
    assert smoke.status == "ok", smoke.error
    major = torch.cuda.get_device_capability(0)[0]
    dtypes = {"float16"} | ({"bfloat16"} if major >= 8 else set())
    assert {r.dtype for r in smoke.results} == dtypes
    by = {(r.backend, r.dtype): r for r in smoke.results}
    for dtype in dtypes:
        math = by[("sdpa-math", dtype)]
        assert math.status == "ok" and math.rel_err <= math.tolerance
        if major >= 8:
            for backend in ("sdpa-flash", "sdpa-mem-efficient"):
                r = by[(backend, dtype)]
                assert r.status == "ok", (backend, dtype, r.error, r.reasons)
                assert r.rel_err <= r.tolerance and r.rel_err_grad <= 2 * r.tolerance
                assert r.kernel_ms and r.kernel_ms > 0
    assert not [r for r in smoke.results if r.status in ("wrong", "error")]


def test_smoke_reports_the_backend_sdpa_picks(gpu_facts):
    choices = {c.dtype: c for c in gpu_facts.smoke.choices}
    major = torch.cuda.get_device_capability(0)[0]
    if major >= 8:
        assert choices["bfloat16"].backend in ("flash_attention", "cudnn_attention", "efficient_attention")
    assert all(c.head_dim == 128 for c in choices.values())


def test_check_on_this_gpu_end_to_end(tmp_path):
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "attn_doctor", "check", "--json", "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    doc = json.loads(out.read_text())
    statuses = {r["rule"]: r["status"] for r in doc["results"]}
    assert statuses["AD101"] == "pass"  # a GPU was found
    assert statuses["AD701"] == "pass"  # every backend passed its smoke test
    assert statuses["AD108"] == "pass"  # CUDA initialises
    assert doc["facts"]["smoke"]["status"] == "ok"
    assert proc.returncode == doc["exit_code"] in (0, 1)
    human = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--from-report", str(out)], capture_output=True, text=True)
    name = torch.cuda.get_device_name(0)
    assert name in human.stdout and "bf16 native" in human.stdout
    assert "SDPA picks" in human.stdout


def test_check_tells_the_fast_path_of_the_models_head_dim(tmp_path):
    # A model with head dim 512 in bf16: over the flash kernel's 256. The report must say which
    # kernel SDPA's dispatch gives it on this GPU and quote torch's reason for refusing flash.
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "head_dim": 512, "hidden_size": 4096,
                                  "num_attention_heads": 8, "torch_dtype": "bfloat16"}))
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "attn_doctor", "check", "--no-sample", "--json", "--output", str(out), "--config", str(config)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr
    choices = json.loads(out.read_text())["facts"]["smoke"]["choices"]
    mine = [c for c in choices if c.get("source") == "config.json"]
    assert [(c["dtype"], c["head_dim"]) for c in mine] == [("bfloat16", 512)]
    assert mine[0]["backend"] != "flash_attention"
    assert mine[0]["refused"]["flash"][0].startswith(
        "Flash attention requires q,k,v to have the same last dimension and to be less than or equal to 256. Got Query.size(-1): 512")
    # forcing one backend disables the others: their "runtime disabled" lines are not its reasons
    assert not [r for reasons in mine[0]["refused"].values() for r in reasons if "runtime disabled" in r or "Triggered" in r]
    from torch.nn.attention import SDPBackend

    q = torch.zeros(2, 4, 256, 512, dtype=torch.bfloat16, device="cuda")
    assert mine[0]["backend"] == SDPBackend(torch._fused_sdp_choice(q, q, q, None, 0.0, True)).name.lower()
    human = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--from-report", str(out)], capture_output=True, text=True)
    assert "your model (config.json: bfloat16, head dim 512): SDPA picks" in human.stdout
