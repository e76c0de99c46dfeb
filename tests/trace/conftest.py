import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOYS = os.path.join(HERE, "toys")
REPO = os.path.dirname(os.path.dirname(HERE))


def _have_cuda():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


# The same assertions on the GPU, under real CUDA autocast instead of its emulation: part of the
# GPU suite (`pytest -m gpu`), skipped where there is no GPU.
CUDA = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not _have_cuda(), reason="needs an NVIDIA GPU with a CUDA build of torch")])


def marker_line(toy, marker):
    """Line number of the line ending with ``# MARKER`` in a toy file."""
    with open(os.path.join(TOYS, toy)) as fh:
        for number, line in enumerate(fh, 1):
            if line.rstrip().endswith("# " + marker):
                return number
    raise AssertionError("marker %s not in %s" % (marker, toy))


def toy_target(toy, factory):
    return os.path.join(TOYS, toy) + ":" + factory


@pytest.fixture(scope="session")
def trace():
    from attn_doctor.trace.api import trace as _trace

    return _trace
