"""tests/gpu: run on a machine with an NVIDIA GPU; skipped everywhere else (CI has none).

    python -m pytest tests/gpu -m gpu -v
"""

from __future__ import annotations

import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOYS = os.path.join(os.path.dirname(HERE), "trace", "toys")


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


HAVE_CUDA = _cuda()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with a CUDA build of torch")
    for item in items:
        if HERE in str(item.fspath):
            item.add_marker(pytest.mark.gpu)
            if not HAVE_CUDA:
                item.add_marker(skip)


def marker_line(toy: str, marker: str) -> int:
    with open(os.path.join(TOYS, toy)) as fh:
        for number, line in enumerate(fh, 1):
            if line.rstrip().endswith("# " + marker):
                return number
    raise AssertionError(f"marker {marker} not in {toy}")


def toy_target(toy: str, factory: str) -> str:
    return os.path.join(TOYS, toy) + ":" + factory


def load_file(path: str, name: str):
    """The module in a file that is on no import path (a toy, tests/trace/hf_configs.py), run for real."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def gpu_facts():
    """One full probe of this GPU machine, shared by the tests (and saved where asked)."""
    from attn_doctor.probes import collect_facts

    facts = collect_facts(timeout=300)
    out = os.environ.get("ATTN_DOCTOR_GPU_FACTS_OUT")
    if out:
        import msgspec

        with open(out, "wb") as fh:
            fh.write(msgspec.json.format(msgspec.json.encode(facts), indent=2) + b"\n")
    return facts


def this_gpu():
    """The emulation's target for the GPU these tests run on: its capability, this torch, its cuDNN,
    CUDA and the SDPA backends switched on."""
    import torch

    from attn_doctor.tracing.kernel_choice import kernels, sdpa_select

    cap = torch.cuda.get_device_capability(0)
    cuda = torch.version.cuda
    return sdpa_select.target_for(cap, torch.__version__, cudnn=torch.backends.cudnn.version(),
                                  cuda_major=int(cuda.split(".")[0]) if cuda else None,
                                  enabled=kernels._enabled_backends(torch))
