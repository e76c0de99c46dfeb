import os
import subprocess
import sys
import textwrap

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


def cli(*args, cwd=None):
    """``python -m attn_doctor trace ARGS`` in a fresh process: (exit code, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "trace", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def write_module(tmp_path, name, body):
    """A user's model file written into tmp_path (body dedented); its path."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


@pytest.fixture(scope="session")
def trace():
    from attn_doctor.tracing.runs.api import trace as _trace

    return _trace


# Real transformers releases, each in a venv of its own built with uv (torch from the local CPU
# wheel where there is one). One venv per release per session; uv's cache is shared, so a second
# session builds them in seconds. A release that does not install fails the tests that need it.
# Bytecode is compiled at install: under PYTHONDONTWRITEBYTECODE each traced subprocess would
# otherwise compile torch and transformers from source (about 16 s an import, not 7).
TORCH_WHEELS = os.environ.get("ATTN_DOCTOR_TORCH_WHEELS", "/opt/wheels")


@pytest.fixture(scope="session")
def transformers_venv(tmp_path_factory):
    import shutil
    import subprocess
    import sys

    # the test extra installs uv beside this interpreter; a venv's bin is often not on PATH
    beside = os.path.join(os.path.dirname(sys.executable), "uv")
    uv = beside if os.path.isfile(beside) else shutil.which("uv")
    built = {}

    def get(version):
        """(python, installed transformers version) for transformers==version (None: the newest)."""
        if version in built:
            return built[version]
        if uv is None:
            pytest.fail("uv is not installed (pip install -e '.[test]' installs it): cannot build the transformers venvs")
        import torch

        folder = tmp_path_factory.mktemp("tf-%s" % (version or "newest"))
        python = str(folder / "bin" / "python")
        steps = [[uv, "venv", "-q", "--python", sys.executable, str(folder)],
                 [uv, "pip", "install", "-q", "--compile-bytecode", "--python", python, "torch==" + torch.__version__.split("+")[0],
                  "transformers" + ("==" + version if version else "")]
                 + (["--find-links", TORCH_WHEELS] if os.path.isdir(TORCH_WHEELS) else [])]
        for step in steps:
            proc = subprocess.run(step, capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                pytest.fail("installing transformers %s failed: %s" % (version or "(newest)", proc.stderr[-1500:]))
        proc = subprocess.run([python, "-c", "import transformers; print(transformers.__version__)"],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            pytest.fail("transformers %s does not import in its venv: %s" % (version, proc.stderr[-1500:]))
        built[version] = (python, proc.stdout.strip())
        return built[version]

    return get
