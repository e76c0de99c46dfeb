"""What each cached result of a check depends on: the inputs its cache key is computed from.

Three results, each paid only where it must be (attn_doctor.cache.Once computes each once):

- the sample verdict: the installed code it imports, the interpreter, the GPU capability and dtype
  it is judged for. Shared by every node with that package set.
- the stack's capability: torch's build, each attention library's import, each extension's load,
  and the kernels that compile or ship per package set (flex_attention through Inductor,
  FlashAttention 2/3/4, xformers) run on this GPU architecture with this driver. Shared by every
  node of that architecture and driver: one node of a cluster pays, the others read.
- the node's health: this GPU, this driver, this boot (CUDA starts; SDPA's kernels run and match
  float64). Kept per node and boot: a GPU that went bad is tested again after the reboot that
  usually follows.

Each key also holds attn-doctor's own code (a changed doctor judges afresh).
"""

from __future__ import annotations

import os
from typing import Optional

from .. import cache
from ..facts import Facts, GpuInfo
from .target.env_probe import fingerprint_modules

# What the sample forward pass imports, fingerprinted for its cache key where the target would
# import it from (a trailing "/": the top folder only; torch's 2,000 files change with its version).
SAMPLE_MODULES = ("torch/", "transformers", "x_transformers", "einops", "flash_attn", "flash_attn_interface", "fla", "triton/")
# What the stack probe imports and loads (the import probes' modules, MODULE_DISTRIBUTIONS; FA4 is
# flash_attn.cute): the attention libraries whole (their extensions are files in their folders),
# torch's and triton's top folders.
STACK_MODULES = ("torch/", "triton/", "flash_attn", "flash_attn_interface", "xformers", "fla", "liger_kernel")
# The attention libraries among them (torch's and triton's top folders are torch's own install): one
# without bytecode beside a torch with it keeps its bytecode in the doctor's folder (local.bytecode_env).
LIBRARY_MODULES = tuple(name for name in STACK_MODULES if not name.endswith("/"))
# What the environment probe fingerprints for a full check: both lists, each key taking its own.
FINGERPRINTED = tuple(dict.fromkeys(SAMPLE_MODULES + STACK_MODULES))
# Where a process looks for shared libraries and CUDA: an extension that loads under one value may
# not under another.
LOADER_VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_HOME", "CUDA_PATH")
# What torch reads to order SDPA's kernels (sdp_utils.cpp): the sweep records which kernel SDPA picks
# for each case, so a changed order is a changed result.
SDPA_VARIABLES = ("TORCH_CUDNN_SDPA_DEPRIORITIZED", "TORCH_CUDNN_SDPA_PREFERRED")


def package_set(facts: Facts) -> list[str]:
    return sorted(f"{name}=={pkg.version}" for name, pkg in facts.packages.items())


def doctor_stamp() -> Optional[dict]:
    # attn-doctor's own probes and tracer produce the results: a changed doctor is a changed result.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return fingerprint_modules(["attn_doctor"], root).get("attn_doctor")


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _common(python: str, facts: Facts, env_data: dict, modules: tuple) -> dict:
    # Resolved: `python` and `python3` of one image are one interpreter; a venv's symlink to its
    # base interpreter still differs by its packages and where they are imported from.
    return {
        "python": os.path.realpath(python),
        "python_version": facts.platform.python_version,
        "packages": package_set(facts),
        "modules": _only(env_data.get("modules"), modules),
        "pythonpath": os.environ.get("PYTHONPATH", ""),
        "doctor": doctor_stamp(),
    }


def _only(fingerprints: Optional[dict], names: tuple) -> Optional[dict]:
    if not isinstance(fingerprints, dict):
        return fingerprints
    wanted = {name.rstrip("/") for name in names}
    return {name: value for name, value in fingerprints.items() if name in wanted}


def sample_inputs(python: str, facts: Facts, env_data: dict, config: dict) -> dict:
    """Everything the sample verdict depends on (its key's inputs, recorded in its entry): the
    package set, where each imported library comes from and its files (a distribution,
    PYTHONPATH or the working folder: the working folder counts through what it shadows, so a
    container image's prepared verdicts serve any folder), the interpreter and its version,
    PYTHONPATH, the GPU capability and dtype it is judged for, and attn-doctor's own code."""
    return cache.inputs_of(**_common(python, facts, env_data, SAMPLE_MODULES), **config)


def stack_inputs(python: str, facts: Facts, env_data: dict, gpu: Optional[GpuInfo], kernels: bool) -> dict:
    """What the stack's capability depends on: the package set and the libraries' files, the
    interpreter, where shared libraries are found, the GPU architectures and the driver (a kernel
    that compiles for sm90 may not for sm100; a JIT compiler goes through the driver), and whether
    the kernel tests were asked for (`kernels`: --no-smoke leaves them out)."""
    devices = gpu.devices if gpu else []
    return cache.inputs_of(
        **_common(python, facts, env_data, STACK_MODULES),
        loader={name: os.environ.get(name, "") for name in LOADER_VARIABLES},
        sdpa_order={name: os.environ.get(name, "") for name in SDPA_VARIABLES},
        architectures=sorted({d.capability for d in devices if d.capability}),
        driver=gpu.driver_version if gpu else None,
        kernels=kernels,
    )


def node_inputs(python: str, facts: Facts, gpu: GpuInfo, index: int, shapes: Optional[list], smoke: bool) -> dict:
    """What a GPU's health depends on: that GPU and its siblings, its driver, the installed code,
    the shapes asked about, whether the SDPA tests were asked for, and this boot of the machine
    (`--no-cache` tests it again at once)."""
    return cache.inputs_of(
        python=os.path.realpath(python),
        packages=package_set(facts),
        pythonpath=os.environ.get("PYTHONPATH", ""),
        gpus=[(d.index, d.name, d.capability, d.memory_mib) for d in gpu.devices],
        driver=gpu.driver_version,
        index=index,
        visible=os.environ.get("CUDA_VISIBLE_DEVICES"),
        shapes=shapes or [],
        smoke=smoke,
        boot=boot_id(),
        doctor=doctor_stamp(),
    )
