"""What each cached result of a check depends on, and what reruns when that changes: the node's
SDPA tests per boot, the stack's kernel tests (compiled flex_attention, FA4...) per package set,
GPU architecture and driver, shared by every node reading the same cache folder. No GPU here: the
GPU boundary is a recorded device and a GPU child script that counts each smoke group it runs
(the approach of tests/test_gpu_child.py); the probes, the keys, the cache and the children are
the real ones."""

from __future__ import annotations

import textwrap

import pytest

# One SDPA group (this node's) and one compiled group (the stack's); each run appends its name.
CHILD = """
import os

def cuda_facts():
    return {"status": "ok", "cuda_available": True, "devices": [{"index": 0, "name": "Fake GPU", "capability": "9.0", "bf16_native": True}]}

LIBRARIES = {}
COMPILED = {}

def stack_group(group):
    return group.startswith(("lib:", "compile:"))

def smoke_groups(capability, libraries=(), compiled=(), numerics=True, numerics_only=()):
    return ["main", "compile:flex-compiled"]

def run_smoke_group(group, index=0, groups=None, shapes=None, kernel_cache=None, capability=None, budget_s=None):
    with open(os.environ["SMOKE_RUNS"], "a") as fh:
        fh.write(group + "\\n")
    backend = "sdpa-flash" if group == "main" else "flex-compiled"
    return {"status": "ok", "choices": [{"dtype": "bfloat16", "head_dim": 128, "backend": "flash_attention"}] if group == "main" else [],
            "results": [{"backend": backend, "dtype": "bfloat16", "status": "ok", "rel_err": 0.004,
                         "rel_err_grad": 0.006, "tolerance": 0.04, "kernel_ms": 0.3}]}
"""


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A fake GPU node: returns (check, runs): a check of this interpreter, and the groups run so far."""
    import attn_doctor.probes as probes
    from attn_doctor.facts import Gpu, GpuInfo
    from attn_doctor.probes import keys

    script = tmp_path / "counting_gpu_child.py"
    script.write_text(textwrap.dedent(CHILD))
    runs = tmp_path / "runs"
    runs.write_text("")
    monkeypatch.setenv("SMOKE_RUNS", str(runs))
    monkeypatch.setattr(probes, "GPU_CHILD_SCRIPT", script)
    stamp = keys.doctor_stamp()  # other work on this tree must not change the key mid-test
    monkeypatch.setattr(keys, "doctor_stamp", lambda: stamp)
    machine = {"driver": "580.159.04", "capability": "9.0", "name": "NVIDIA H100 80GB HBM3", "boot": "boot-1"}
    monkeypatch.setattr(keys, "boot_id", lambda: machine["boot"])
    monkeypatch.setattr(probes, "probe_gpus", lambda: GpuInfo(
        source="nvml", driver_version=machine["driver"], cuda_driver_version="13.0",
        devices=[Gpu(index=0, name=machine["name"], capability=machine["capability"], memory_mib=81559)]))
    cache_root = str(tmp_path / "shared-cache")

    def check(**kw):
        return probes.collect_facts(sample=False, cache_root=cache_root, **kw)

    def ran():
        got = sorted(runs.read_text().split())
        runs.write_text("")
        return got

    return check, ran, machine


def test_a_repeated_check_runs_no_test_and_starts_no_child(node):
    check, ran, _machine = node
    first = check()
    assert ran() == ["compile:flex-compiled", "main"]
    assert first.smoke.cached is None and first.smoke.capability_cached is None and first.torch.cached is None
    assert {r.backend for r in first.smoke.results} == {"sdpa-flash", "flex-compiled"}
    second = check()
    assert ran() == []
    assert second.smoke.cached and second.smoke.capability_cached and second.torch.cached
    assert second.smoke.results == first.smoke.results and second.imports == first.imports
    assert {p.name: p.duration_s for p in second.probes if p.name in ("torch", "node")} == {"torch": 0.0, "node": 0.0}


def test_a_reboot_reruns_the_node_tests_only(node):
    """After a reboot (another boot id, the same shared cache: a cluster's node whose stack another
    node has already tested) only this GPU's SDPA tests run."""
    check, ran, machine = node
    check()
    ran()
    machine["boot"] = "boot-2"
    after = check()
    assert ran() == ["main"]
    assert after.smoke.cached is None and after.smoke.capability_cached and after.torch.cached
    assert {r.backend for r in after.smoke.results} == {"sdpa-flash", "flex-compiled"}


@pytest.mark.parametrize("change", ["driver", "capability"])
def test_another_driver_or_architecture_reruns_the_stack(node, change):
    check, ran, machine = node
    check()
    ran()
    machine.update(driver="590.10") if change == "driver" else machine.update(capability="10.0", name="NVIDIA B200")
    after = check()
    # the stack's kernel tests again; the node's too (its key holds the GPU and the driver)
    assert ran() == ["compile:flex-compiled", "main"]
    assert after.torch.cached is None and after.smoke.capability_cached is None


def test_another_package_set_reruns_the_stack(node, tmp_path, monkeypatch):
    check, ran, machine = node
    check()
    ran()
    machine["boot"] = "boot-2"  # and a reboot: both parts new
    site = tmp_path / "site"
    dist = site / "flash_attn_stand_in-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: flash-attn-stand-in\nVersion: 1.0\n")
    monkeypatch.syspath_prepend(str(site))  # a distribution installed into the checked environment
    after = check()
    assert "flash-attn-stand-in" in after.packages
    assert ran() == ["compile:flex-compiled", "main"]
    assert after.torch.cached is None


def test_no_cache_reruns_both_and_no_smoke_keeps_its_own_entries(node):
    check, ran, _machine = node
    check()
    ran()
    check(use_cache=False)
    assert ran() == ["compile:flex-compiled", "main"]
    quick = check(smoke=False)
    assert ran() == [] and quick.smoke.status == "skipped"
    assert check().smoke.capability_cached  # --no-smoke's entries do not stand in for the tested ones
    assert ran() == []


def test_prepare_on_a_gpu_node_fills_the_stack_for_every_node(node, tmp_path):
    """check --prepare on a GPU build node stores the stack's results: a node of that GPU
    architecture and driver, after its own reboot, runs only its SDPA tests."""
    from attn_doctor.core import prepare_cache
    from attn_doctor.options import CheckOptions

    check, ran, machine = node
    cache = tmp_path / "shared-cache"
    _folder, verdicts, stack = prepare_cache(CheckOptions(cache_dir=cache), [])
    assert stack is not None and stack.torch.status == "ok" and stack.torch.key
    assert ran() == ["compile:flex-compiled", "main"]
    machine["boot"] = "another-node-boot"
    facts = check()
    assert ran() == ["main"] and facts.torch.key == stack.torch.key and facts.smoke.capability_cached
