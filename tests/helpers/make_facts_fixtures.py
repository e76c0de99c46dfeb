"""Write tests/fixtures/facts/*.json: what collect_facts records on typical machines.

Run by hand (`.venv/bin/python tests/helpers/make_facts_fixtures.py`), never by the tests; the
JSON files are committed. Each machine is built from the same pieces the probes fill (Facts and
its structs), the environment goes through the real allow-list and redaction, and import errors
through the real failures.classify(), so the files say exactly what the probes would.

Sources for the numbers: KNOWLEDGE.md (H100 facts, torch/triton pins, messages), PyPI metadata
of torch's nvidia-* dependencies, torch's sdp_utils.cpp for the SDPA refusal texts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from attn_doctor.facts import (  # noqa: E402
    Environments,
    Facts,
    OtherEnvironment,
    Target,
    Gpu,
    GpuInfo,
    ImportResult,
    Package,
    Platform,
    ProbeRun,
    Tool,
    TorchDevice,
    TorchInfo,
    bf16_native,
    canonical_name,
)
from attn_doctor.failures import classify  # noqa: E402
from attn_doctor.boundary.redact import safe_environment  # noqa: E402
from attn_doctor.facts import MODULE_DISTRIBUTIONS as IMPORT_TARGETS  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "facts"
IMPORT_MODULES = tuple(IMPORT_TARGETS)
FA_RELEASES = "https://github.com/Dao-AILab/flash-attention/releases/download"

# ------------------------------------------------------------------ package sets

# torch's pinned CUDA wheels (Requires-Dist of the Linux x86_64 wheels), by torch build.
CUDA_WHEELS = {
    "2.4.1+cu121": {
        "nvidia-cublas-cu12": "12.1.3.1",
        "nvidia-cuda-cupti-cu12": "12.1.105",
        "nvidia-cuda-nvrtc-cu12": "12.1.105",
        "nvidia-cuda-runtime-cu12": "12.1.105",
        "nvidia-cudnn-cu12": "9.1.0.70",
        "nvidia-cufft-cu12": "11.0.2.54",
        "nvidia-curand-cu12": "10.3.2.106",
        "nvidia-cusolver-cu12": "11.4.5.107",
        "nvidia-cusparse-cu12": "12.1.0.106",
        "nvidia-nccl-cu12": "2.20.5",
        "nvidia-nvjitlink-cu12": "12.6.85",
        "nvidia-nvtx-cu12": "12.1.105",
    },
    "2.5.1+cu121": {
        "nvidia-cublas-cu12": "12.1.3.1",
        "nvidia-cuda-cupti-cu12": "12.1.105",
        "nvidia-cuda-nvrtc-cu12": "12.1.105",
        "nvidia-cuda-runtime-cu12": "12.1.105",
        "nvidia-cudnn-cu12": "9.1.0.70",
        "nvidia-cufft-cu12": "11.0.2.54",
        "nvidia-curand-cu12": "10.3.2.106",
        "nvidia-cusolver-cu12": "11.4.5.107",
        "nvidia-cusparse-cu12": "12.1.0.106",
        "nvidia-nccl-cu12": "2.21.5",
        "nvidia-nvjitlink-cu12": "12.6.85",
        "nvidia-nvtx-cu12": "12.1.105",
    },
    "2.5.1+cu124": {
        "nvidia-cublas-cu12": "12.4.5.8",
        "nvidia-cuda-cupti-cu12": "12.4.127",
        "nvidia-cuda-nvrtc-cu12": "12.4.127",
        "nvidia-cuda-runtime-cu12": "12.4.127",
        "nvidia-cudnn-cu12": "9.1.0.70",
        "nvidia-cufft-cu12": "11.2.1.3",
        "nvidia-curand-cu12": "10.3.5.147",
        "nvidia-cusolver-cu12": "11.6.1.9",
        "nvidia-cusparse-cu12": "12.3.1.170",
        "nvidia-nccl-cu12": "2.21.5",
        "nvidia-nvjitlink-cu12": "12.4.127",
        "nvidia-nvtx-cu12": "12.4.127",
    },
    "2.6.0+cu124": {
        "nvidia-cublas-cu12": "12.4.5.8",
        "nvidia-cuda-cupti-cu12": "12.4.127",
        "nvidia-cuda-nvrtc-cu12": "12.4.127",
        "nvidia-cuda-runtime-cu12": "12.4.127",
        "nvidia-cudnn-cu12": "9.1.0.70",
        "nvidia-cufft-cu12": "11.2.1.3",
        "nvidia-curand-cu12": "10.3.5.147",
        "nvidia-cusolver-cu12": "11.6.1.9",
        "nvidia-cusparse-cu12": "12.3.1.170",
        "nvidia-cusparselt-cu12": "0.6.2",
        "nvidia-nccl-cu12": "2.21.5",
        "nvidia-nvjitlink-cu12": "12.4.127",
        "nvidia-nvtx-cu12": "12.4.127",
    },
    "2.7.0+cu128": {
        "nvidia-cublas-cu12": "12.8.3.14",
        "nvidia-cuda-cupti-cu12": "12.8.57",
        "nvidia-cuda-nvrtc-cu12": "12.8.61",
        "nvidia-cuda-runtime-cu12": "12.8.57",
        "nvidia-cudnn-cu12": "9.7.1.26",
        "nvidia-cufft-cu12": "11.3.3.41",
        "nvidia-cufile-cu12": "1.13.0.11",
        "nvidia-curand-cu12": "10.3.9.55",
        "nvidia-cusolver-cu12": "11.7.2.55",
        "nvidia-cusparse-cu12": "12.5.7.53",
        "nvidia-cusparselt-cu12": "0.6.3",
        "nvidia-nccl-cu12": "2.26.2",
        "nvidia-nvjitlink-cu12": "12.8.61",
        "nvidia-nvtx-cu12": "12.8.55",
    },
    # CUDA 13 wheels dropped the -cu13 suffix for the toolkit parts.
    "2.11.0+cu130": {
        "cuda-bindings": "13.0.3",
        "cuda-pathfinder": "1.3.3",
        "nvidia-cublas": "13.1.0.3",
        "nvidia-cuda-cupti": "13.0.85",
        "nvidia-cuda-nvrtc": "13.0.88",
        "nvidia-cuda-runtime": "13.0.96",
        "nvidia-cudnn-cu13": "9.19.0.56",
        "nvidia-cufft": "12.0.0.61",
        "nvidia-cufile": "1.15.1.6",
        "nvidia-curand": "10.4.0.35",
        "nvidia-cusolver": "12.0.4.66",
        "nvidia-cusparse": "12.6.3.3",
        "nvidia-cusparselt-cu13": "0.8.0",
        "nvidia-nccl-cu13": "2.28.9",
        "nvidia-nvjitlink": "13.0.88",
        "nvidia-nvshmem-cu13": "3.4.5",
        "nvidia-nvtx": "13.0.85",
    },
}

# torch's own pure-Python dependencies, by torch minor.
TORCH_DEPS = {
    "2.4": {"filelock": "3.16.1", "fsspec": "2024.9.0", "jinja2": "3.1.4", "markupsafe": "2.1.5", "mpmath": "1.3.0", "networkx": "3.3", "sympy": "1.13.3", "typing-extensions": "4.12.2"},
    "2.5": {"filelock": "3.16.1", "fsspec": "2024.10.0", "jinja2": "3.1.4", "markupsafe": "3.0.2", "mpmath": "1.3.0", "networkx": "3.4.2", "sympy": "1.13.1", "typing-extensions": "4.12.2"},
    "2.6": {"filelock": "3.17.0", "fsspec": "2025.2.0", "jinja2": "3.1.5", "markupsafe": "3.0.2", "mpmath": "1.3.0", "networkx": "3.4.2", "sympy": "1.13.1", "typing-extensions": "4.12.2"},
    "2.7": {"filelock": "3.18.0", "fsspec": "2025.3.2", "jinja2": "3.1.6", "markupsafe": "3.0.2", "mpmath": "1.3.0", "networkx": "3.4.2", "sympy": "1.14.0", "typing-extensions": "4.13.2"},
    "2.11": {"filelock": "3.20.3", "fsspec": "2026.2.0", "jinja2": "3.1.6", "markupsafe": "3.0.3", "mpmath": "1.3.0", "networkx": "3.6.1", "sympy": "1.14.0", "typing-extensions": "4.15.0"},
    "2.13": {"filelock": "4.2.11", "fsspec": "2026.9.0", "jinja2": "3.1.6", "markupsafe": "3.0.4", "mpmath": "1.3.0", "networkx": "3.6.1", "sympy": "1.14.0", "typing-extensions": "4.16.0"},
}

# The Hugging Face stack, by era.
HF_2024_Q3 = {"transformers": "4.44.2", "tokenizers": "0.19.1", "huggingface-hub": "0.24.6", "safetensors": "0.4.5", "accelerate": "0.34.2"}
HF_2024_Q4 = {"transformers": "4.46.3", "tokenizers": "0.20.3", "huggingface-hub": "0.26.3", "safetensors": "0.4.5", "accelerate": "1.1.1"}
HF_2025_Q1 = {"transformers": "4.49.0", "tokenizers": "0.21.0", "huggingface-hub": "0.29.1", "safetensors": "0.5.3", "accelerate": "1.4.0"}
HF_2025_Q2 = {"transformers": "4.51.3", "tokenizers": "0.21.1", "huggingface-hub": "0.30.2", "safetensors": "0.5.3", "accelerate": "1.6.0"}
HF_2026 = {"transformers": "5.17.0", "tokenizers": "0.23.1", "huggingface-hub": "1.8.0", "safetensors": "0.7.0", "accelerate": "1.13.0"}

COMMON_2024 = {"numpy": "1.26.4", "packaging": "24.2", "pyyaml": "6.0.2", "regex": "2024.11.6", "requests": "2.32.3", "tqdm": "4.67.1", "einops": "0.8.0", "psutil": "6.1.0"}
COMMON_2025 = {"numpy": "2.2.5", "packaging": "25.0", "pyyaml": "6.0.2", "regex": "2024.11.6", "requests": "2.32.3", "tqdm": "4.67.1", "einops": "0.8.1", "psutil": "7.0.0"}
COMMON_2026 = {"numpy": "2.4.2", "packaging": "26.0", "pyyaml": "6.0.3", "regex": "2026.1.15", "requests": "2.32.5", "tqdm": "4.67.2", "einops": "0.8.2", "psutil": "7.2.2"}

CUDA12_ARCHES = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


def packages(*groups: dict, installer: str = "pip", urls: dict | None = None) -> dict[str, Package]:
    out: dict[str, Package] = {}
    urls = urls or {}
    for group in groups:
        for name, version in group.items():
            key = canonical_name(name)
            out[key] = Package(version=version, installer=installer, url=urls.get(key))
    return out


def base_tools(pip: str | None = "24.3.1", uv: str | None = None) -> dict[str, Tool]:
    return {
        "pip": Tool(present=pip is not None, version=pip, path=None),
        "uv": Tool(present=uv is not None, version=None, path=uv),
    }


def environ(extra: dict[str, str], venv: str | None) -> dict[str, str]:
    """A realistic process environment, through the real allow-list and redaction."""
    raw = {
        "HOME": "/home/dev",
        "USER": "dev",
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "TERM": "xterm-256color",
        "PATH": (f"{venv}/bin:" if venv else "") + "/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64:/usr/local/nvidia/lib64",
        "SSH_CONNECTION": "10.0.0.12 51514 10.0.0.40 22",
    }
    if venv:
        raw["VIRTUAL_ENV"] = venv
    raw.update(extra)
    return safe_environment(raw)


def missing_imports(**results: ImportResult) -> dict[str, ImportResult]:
    out = {m: ImportResult(status="missing") for m in IMPORT_MODULES}
    out.update(results)
    return out


def ok(version: str | None, seconds: float, **detail: str) -> ImportResult:
    return ImportResult(status="ok", version=version, duration_s=seconds, detail=dict(detail))


def flash_ok(version: str, seconds: float, site: str, py: str) -> ImportResult:
    return ok(version, seconds, extension="flash_attn_2_cuda", extension_file=f"{site}/flash_attn_2_cuda.cpython-{py}-x86_64-linux-gnu.so")


def probes(env_s: float, gpu_s: float, torch_s: float | None, gpu_error: str | None = None) -> list[ProbeRun]:
    runs = [ProbeRun(name="environment", status="ok", duration_s=env_s), ProbeRun(name="gpu", status="ok", duration_s=gpu_s, error=gpu_error)]
    if torch_s is not None:
        runs.append(ProbeRun(name="torch", status="ok", duration_s=torch_s))
    return runs


def nvml(driver: str, cuda: str, name: str, capability: str, memory_mib: int, count: int = 1) -> GpuInfo:
    return GpuInfo(
        source="nvml",
        driver_version=driver,
        cuda_driver_version=cuda,
        devices=[Gpu(index=i, name=name, capability=capability, memory_mib=memory_mib) for i in range(count)],
    )


def device(name: str, capability: str, sms: int, smem_optin: int | None, total_mib: int, index: int = 0) -> TorchDevice:
    return TorchDevice(
        index=index,
        name=name,
        capability=capability,
        bf16_native=bf16_native(capability),
        bf16_api=True,  # torch >= 2.3 answers True on pre-Ampere GPUs too (emulation)
        multi_processor_count=sms,
        shared_memory_per_block_optin=smem_optin,
        total_memory_mib=total_mib,
    )


def sdpa(flash: bool, mem: bool, cudnn: bool | None, cudnn_enabled: bool = True) -> dict[str, bool]:
    out = {
        "flash_compiled": True,
        "flash_enabled": True,
        "mem_efficient_enabled": True,
        "cudnn_enabled": cudnn_enabled,
        "math_enabled": True,
        "flash_usable": flash,
        "mem_efficient_usable": mem,
    }
    if cudnn is not None:  # can_use_cudnn_attention appeared in torch 2.5
        out["cudnn_usable"] = cudnn
    return out


def torch_warning(text: str, line: int, old_paths: bool) -> str:
    # TORCH_WARN as Python sees it; wheels up to 2.5 were built from ../aten, later from /pytorch.
    prefix = "../aten" if old_paths else "/pytorch/aten"
    return f"{text} (Triggered internally at {prefix}/src/ATen/native/transformers/cuda/sdp_utils.cpp:{line}.)"


def arch_refusal(backend: str, bounds: str, capability: str, line: int, old_paths: bool) -> list[str]:
    what = {"flash": "Flash attention", "cudnn": "cuDNN MHA"}[backend]
    text = f"{what} only supports gpu architectures in the range [{bounds}]. Attempting to run on a sm {capability} gpu."
    return [torch_warning(text, line, old_paths)]


def platform(python: str, executable: str, venv: bool, hostname: str, release: str = "5.15.0-126-generic", libc: str = "2.35", managed: bool = False) -> Platform:
    return Platform(
        system="Linux",
        release=release,
        machine="x86_64",
        libc="glibc",
        libc_version=libc,
        python_version=python,
        python_implementation="CPython",
        python_executable=executable,
        in_virtualenv=venv,
        externally_managed=managed,
        hostname=hostname,
    )


# ------------------------------------------------------------------ machines


def cpu_only() -> Facts:
    venv = "/home/dev/attn/.venv"
    return Facts(
        platform=platform("3.11.7", f"{venv}/bin/python", True, "ci-runner-07", release="6.8.0-1021-azure", libc="2.39"),
        tools=base_tools(pip="24.0"),
        packages=packages(
            {"pip": "24.0", "setuptools": "80.9.0", "torch": "2.13.0+cpu"},
            TORCH_DEPS["2.13"],
            HF_2026,
            COMMON_2026,
        ),
        gpu=GpuInfo(source="none", error="NVML: NVML Shared Library Not Found; nvidia-smi: not found"),
        torch=TorchInfo(
            status="ok",
            version="2.13.0+cpu",
            cxx11_abi=True,
            cuda_available=False,
            cuda_error="Torch not compiled with CUDA enabled",
            sdpa={"flash_compiled": False, "flash_enabled": True, "mem_efficient_enabled": True, "cudnn_enabled": True, "math_enabled": True},
            duration_s=1.684,
        ),
        imports=missing_imports(),
        env=environ({"OMP_NUM_THREADS": "2", "PIP_INDEX_URL": "https://download.pytorch.org/whl/cpu", "HF_HUB_OFFLINE": "1"}, venv),
        probes=probes(0.104, 0.036, 2.311, gpu_error="NVML: NVML Shared Library Not Found; nvidia-smi: not found"),
    )


def t4() -> Facts:
    # A cloud notebook VM: system Python, LLaMA-Factory from a git checkout, flash-attn built
    # from source (no 2.6.3 release wheel exists for torch 2.5).
    site = "/usr/local/lib/python3.10/dist-packages"
    build = "2.5.1+cu121"
    return Facts(
        platform=platform("3.10.12", "/usr/bin/python3", False, "7f3c9a1d2b4e", release="6.1.85+", libc="2.35"),
        tools=base_tools(pip="24.1.2"),
        packages=packages(
            {"pip": "24.1.2", "setuptools": "75.1.0", "wheel": "0.44.0"},
            {"torch": build, "triton": "3.1.0"},
            CUDA_WHEELS[build],
            TORCH_DEPS["2.5"],
            {"transformers": "4.46.1", "tokenizers": "0.20.3", "huggingface-hub": "0.26.2", "safetensors": "0.4.5", "accelerate": "1.0.1"},
            {"llamafactory": "0.9.1", "peft": "0.12.0", "trl": "0.9.6", "datasets": "3.1.0", "gradio": "4.44.1", "bitsandbytes": "0.44.1", "flash-attn": "2.6.3"},
            COMMON_2024,
        ),
        gpu=nvml("535.183.01", "12.2", "Tesla T4", "7.5", 15360),
        torch=TorchInfo(
            status="ok",
            version=build,
            cuda="12.1",
            cudnn="90100",
            cxx11_abi=False,
            arch_list=CUDA12_ARCHES,
            cuda_available=True,
            device_count=1,
            devices=[device("Tesla T4", "7.5", 40, 65536, 14930)],
            sdpa=sdpa(flash=False, mem=True, cudnn=False),
            sdpa_probe_dtype="float16",
            sdpa_reasons={
                "flash_usable": arch_refusal("flash", "sm80, sm90", "7.5", 262, old_paths=True),
                "cudnn_usable": arch_refusal("cudnn", "sm80, sm90", "7.5", 519, old_paths=True),
            },
            duration_s=3.912,
        ),
        imports=missing_imports(
            flash_attn=flash_ok("2.6.3", 1.873, site, "310"),
            triton=ok("3.1.0", 0.612),
        ),
        env=environ({"CUDA_VISIBLE_DEVICES": "0", "HF_HOME": "/content/hf", "HF_TOKEN": "placeholder-secret-redacted-by-safe-environment", "TRANSFORMERS_CACHE": "/content/hf/hub"}, None),
        probes=probes(0.211, 0.094, 6.487),
    )


def v100() -> Facts:
    venv = "/home/dev/envs/xf"
    build = "2.4.1+cu121"
    return Facts(
        platform=platform("3.10.14", f"{venv}/bin/python", True, "dgx1-03", release="5.4.0-200-generic", libc="2.31"),
        tools=base_tools(pip="24.2"),
        packages=packages(
            {"pip": "24.2", "setuptools": "72.1.0", "wheel": "0.44.0"},
            {"torch": build, "triton": "3.0.0", "xformers": "0.0.28.post1", "torchvision": "0.19.1+cu121"},
            CUDA_WHEELS[build],
            TORCH_DEPS["2.4"],
            HF_2024_Q3,
            {"pillow": "10.4.0", "diffusers": "0.30.3"},
            COMMON_2024,
        ),
        gpu=nvml("550.127.05", "12.4", "Tesla V100-SXM2-32GB", "7.0", 32768),
        torch=TorchInfo(
            status="ok",
            version=build,
            cuda="12.1",
            cudnn="90100",
            cxx11_abi=False,
            arch_list=CUDA12_ARCHES,
            cuda_available=True,
            device_count=1,
            # torch 2.4's device properties have no shared_memory_per_block_optin yet.
            devices=[device("Tesla V100-SXM2-32GB", "7.0", 80, None, 32501)],
            sdpa=sdpa(flash=False, mem=True, cudnn=None),
            sdpa_probe_dtype="float16",
            sdpa_reasons={"flash_usable": arch_refusal("flash", "sm80, sm90", "7.0", 253, old_paths=True)},
            duration_s=3.406,
        ),
        imports=missing_imports(
            xformers=ok("0.0.28.post1", 2.214),
            triton=ok("3.0.0", 0.587),
        ),
        env=environ({"CUDA_VISIBLE_DEVICES": "0", "XFORMERS_MORE_DETAILS": "1", "NCCL_DEBUG": "WARN"}, venv),
        probes=probes(0.158, 0.121, 5.938),
    )


def a100() -> Facts:
    # torch from PyPI: the distribution says 2.5.1, torch.__version__ says 2.5.1+cu124.
    venv = "/home/dev/train/.venv"
    site = f"{venv}/lib/python3.11/site-packages"
    fa_url = f"{FA_RELEASES}/v2.7.2.post1/flash_attn-2.7.2.post1+cu12torch2.5cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"
    return Facts(
        platform=platform("3.11.10", f"{venv}/bin/python", True, "a100-node-12", release="5.15.0-125-generic"),
        tools=base_tools(pip="24.3.1"),
        packages=packages(
            {"pip": "24.3.1", "setuptools": "75.6.0", "wheel": "0.45.1"},
            {"torch": "2.5.1", "triton": "3.1.0", "flash-attn": "2.7.2.post1"},
            CUDA_WHEELS["2.5.1+cu124"],
            TORCH_DEPS["2.5"],
            {**HF_2024_Q4, "transformers": "4.46.3"},
            {"peft": "0.13.2", "datasets": "3.1.0", "deepspeed": "0.15.4"},
            COMMON_2024,
            urls={"flash-attn": fa_url},
        ),
        gpu=nvml("550.90.07", "12.4", "NVIDIA A100-SXM4-80GB", "8.0", 81920),
        torch=TorchInfo(
            status="ok",
            version="2.5.1+cu124",
            cuda="12.4",
            cudnn="90100",
            cxx11_abi=False,
            arch_list=CUDA12_ARCHES,
            cuda_available=True,
            device_count=1,
            devices=[device("NVIDIA A100-SXM4-80GB", "8.0", 108, 166912, 81050)],
            sdpa=sdpa(flash=True, mem=True, cudnn=True),
            sdpa_probe_dtype="bfloat16",
            duration_s=2.871,
        ),
        imports=missing_imports(
            flash_attn=flash_ok("2.7.2.post1", 1.342, site, "311"),
            triton=ok("3.1.0", 0.498),
        ),
        env=environ({"CUDA_VISIBLE_DEVICES": "0", "HF_HOME": "/data/hf", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NCCL_P2P_DISABLE": "0", "WANDB_API_KEY": "placeholder-dropped-by-the-allow-list"}, venv),
        probes=probes(0.187, 0.142, 4.903),
    )


def _h100_torch(duration: float) -> TorchInfo:
    return TorchInfo(
        status="ok",
        version="2.11.0+cu130",
        cuda="13.0",
        cudnn="91900",
        cxx11_abi=True,
        arch_list=["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_110", "sm_120"],
        cuda_available=True,
        device_count=1,
        devices=[device("NVIDIA H100 80GB HBM3", "9.0", 132, 232448, 81090)],
        sdpa=sdpa(flash=True, mem=True, cudnn=True),
        sdpa_probe_dtype="bfloat16",
        duration_s=duration,
    )


def _h100_packages(installer: str, with_pip: bool) -> dict[str, Package]:
    tooling = {"pip": "25.3", "setuptools": "80.9.0"} if with_pip else {}
    return packages(
        tooling,
        {"torch": "2.11.0+cu130", "triton": "3.6.0"},
        CUDA_WHEELS["2.11.0+cu130"],
        TORCH_DEPS["2.11"],
        HF_2026,
        {"datasets": "4.5.0", "peft": "0.18.1"},
        COMMON_2026,
        installer=installer,
    )


def h100() -> Facts:
    # KNOWLEDGE.md section 2: the H100 as torch 2.11 and NVML saw it. The base of pip-missing.json
    # only: tests/fixtures/facts/h100.json itself is a real recording, never written here.
    venv = "/home/dev/lab/.venv"
    return Facts(
        platform=platform("3.12.3", f"{venv}/bin/python", True, "h100-01", release="6.8.0-90-generic", libc="2.39"),
        tools=base_tools(pip="25.3"),
        packages=_h100_packages("pip", with_pip=True),
        gpu=nvml("580.159.04", "13.0", "NVIDIA H100 80GB HBM3", "9.0", 81559),
        torch=_h100_torch(2.204),
        imports=missing_imports(triton=ok("3.6.0", 0.731)),
        env=environ({"CUDA_VISIBLE_DEVICES": "0", "HF_HOME": "/data/hf", "TRITON_CACHE_DIR": "/data/cache/triton"}, venv),
        probes=probes(0.173, 0.088, 3.516),
    )


def pip_missing() -> Facts:
    # `uv venv` + `uv pip install`: no pip in the venv, uv found on PATH.
    venv = "/home/dev/lab/.venv"
    facts = h100()
    facts.platform = platform("3.12.12", f"{venv}/bin/python", True, "h100-01", release="6.8.0-90-generic", libc="2.39")
    facts.tools = base_tools(pip=None, uv="/home/dev/.local/bin/uv")
    facts.packages = _h100_packages("uv", with_pip=False)
    facts.env = environ({"CUDA_VISIBLE_DEVICES": "0", "UV_CACHE_DIR": "/data/cache/uv", "UV_LINK_MODE": "copy"}, venv)
    facts.probes = probes(0.152, 0.091, 3.447)
    return facts


def rtx4090() -> Facts:
    # A workstation, torch from PyPI (distribution 2.6.0, torch.__version__ 2.6.0+cu124).
    venv = "/home/dev/.virtualenvs/llm"
    site = f"{venv}/lib/python3.11/site-packages"
    fa_url = f"{FA_RELEASES}/v2.7.4.post1/flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"
    return Facts(
        platform=platform("3.11.11", f"{venv}/bin/python", True, "ws-4090", release="6.8.0-52-generic", libc="2.39"),
        tools=base_tools(pip="25.0.1"),
        packages=packages(
            {"pip": "25.0.1", "setuptools": "75.8.0", "wheel": "0.45.1"},
            {"torch": "2.6.0", "triton": "3.2.0", "flash-attn": "2.7.4.post1", "torchvision": "0.21.0"},
            CUDA_WHEELS["2.6.0+cu124"],
            TORCH_DEPS["2.6"],
            HF_2025_Q1,
            {"peft": "0.14.0", "bitsandbytes": "0.45.3", "sentencepiece": "0.2.0"},
            COMMON_2025,
            urls={"flash-attn": fa_url},
        ),
        gpu=nvml("560.35.03", "12.6", "NVIDIA GeForce RTX 4090", "8.9", 24564),
        torch=TorchInfo(
            status="ok",
            version="2.6.0+cu124",
            cuda="12.4",
            cudnn="90100",
            cxx11_abi=False,
            arch_list=CUDA12_ARCHES,
            cuda_available=True,
            device_count=1,
            devices=[device("NVIDIA GeForce RTX 4090", "8.9", 128, 101376, 24080)],
            sdpa=sdpa(flash=True, mem=True, cudnn=True),
            sdpa_probe_dtype="bfloat16",
            duration_s=2.512,
        ),
        imports=missing_imports(
            flash_attn=flash_ok("2.7.4.post1", 1.208, site, "311"),
            triton=ok("3.2.0", 0.455),
        ),
        env=environ({"CUDA_VISIBLE_DEVICES": "0", "HF_HOME": "/home/dev/.cache/huggingface", "MAX_JOBS": "8"}, venv),
        probes=probes(0.129, 0.067, 4.116),
    )


def rtx5090() -> Facts:
    # flash-attn 2.7.2.post1 built from source against torch 2.7: it imports, but its C++
    # architecture check (before 2.7.3) rejects sm120 at the first call.
    venv = "/home/dev/blackwell/.venv"
    site = f"{venv}/lib/python3.12/site-packages"
    build = "2.7.0+cu128"
    return Facts(
        platform=platform("3.12.9", f"{venv}/bin/python", True, "ws-5090", release="6.11.0-21-generic", libc="2.39"),
        tools=base_tools(pip="25.1"),
        packages=packages(
            {"pip": "25.1", "setuptools": "79.0.1", "wheel": "0.45.1", "ninja": "1.11.1.4"},
            {"torch": build, "triton": "3.3.0", "flash-attn": "2.7.2.post1", "torchvision": "0.22.0+cu128"},
            CUDA_WHEELS[build],
            TORCH_DEPS["2.7"],
            HF_2025_Q2,
            COMMON_2025,
        ),
        gpu=nvml("570.133.07", "12.8", "NVIDIA GeForce RTX 5090", "12.0", 32607),
        torch=TorchInfo(
            status="ok",
            version=build,
            cuda="12.8",
            cudnn="90701",
            cxx11_abi=True,
            arch_list=["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"],
            cuda_available=True,
            device_count=1,
            devices=[device("NVIDIA GeForce RTX 5090", "12.0", 170, 101376, 32120)],
            sdpa=sdpa(flash=True, mem=True, cudnn=False),
            sdpa_probe_dtype="bfloat16",
            sdpa_reasons={"cudnn_usable": arch_refusal("cudnn", "sm80, sm100", "12.0", 627, old_paths=False)},
            duration_s=2.388,
        ),
        imports=missing_imports(
            flash_attn=flash_ok("2.7.2.post1", 1.097, site, "312"),
            triton=ok("3.3.0", 0.512),
        ),
        env=environ({"CUDA_VISIBLE_DEVICES": "0", "TORCH_CUDA_ARCH_LIST": "12.0", "MAX_JOBS": "16", "FLASH_ATTENTION_FORCE_BUILD": "TRUE"}, venv),
        probes=probes(0.141, 0.072, 3.981),
    )


UNDEFINED_SYMBOL = "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"


def flash_attn_undefined_symbol() -> Facts:
    # torch 2.6.0+cu124 from the PyTorch index uses the old C++ ABI; the flash-attn release wheel
    # chosen was the cxx11abiTRUE one, whose extension asks torch for the C++11-ABI
    # c10::Error(SourceLocation, std::__cxx11::string) constructor, which this torch lacks.
    venv = "/home/dev/ft/.venv"
    site = f"{venv}/lib/python3.11/site-packages"
    build = "2.6.0+cu124"
    fa_url = f"{FA_RELEASES}/v2.7.4.post1/flash_attn-2.7.4.post1+cu12torch2.6cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"
    error = classify("ImportError", f"{site}/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: {UNDEFINED_SYMBOL}")
    return Facts(
        platform=platform("3.11.11", f"{venv}/bin/python", True, "a100-node-04", release="5.15.0-130-generic"),
        tools=base_tools(pip="25.0.1"),
        packages=packages(
            {"pip": "25.0.1", "setuptools": "75.8.0", "wheel": "0.45.1"},
            {"torch": build, "triton": "3.2.0", "flash-attn": "2.7.4.post1"},
            CUDA_WHEELS[build],
            TORCH_DEPS["2.6"],
            HF_2025_Q1,
            {"peft": "0.14.0", "datasets": "3.3.2"},
            COMMON_2025,
            urls={"flash-attn": fa_url},
        ),
        gpu=nvml("550.127.08", "12.4", "NVIDIA A100-SXM4-80GB", "8.0", 81920),
        torch=TorchInfo(
            status="ok",
            version=build,
            cuda="12.4",
            cudnn="90100",
            cxx11_abi=False,
            arch_list=CUDA12_ARCHES,
            cuda_available=True,
            device_count=1,
            devices=[device("NVIDIA A100-SXM4-80GB", "8.0", 108, 166912, 81050)],
            sdpa=sdpa(flash=True, mem=True, cudnn=True),
            sdpa_probe_dtype="bfloat16",
            duration_s=2.746,
        ),
        imports=missing_imports(
            flash_attn=ImportResult(status="error", duration_s=0.412, error=error),
            triton=ok("3.2.0", 0.466),
        ),
        env=environ({"CUDA_VISIBLE_DEVICES": "0", "HF_HOME": "/data/hf", "PIP_EXTRA_INDEX_URL": "https://download.pytorch.org/whl/cu124"}, venv),
        probes=probes(0.176, 0.139, 3.322),
    )


def torch_missing() -> Facts:
    # A fresh venv on a GPU box: the training stack minus torch (installed without it, or torch
    # uninstalled). The torch child finds no torch and skips every import probe.
    venv = "/home/dev/new/.venv"
    return Facts(
        platform=platform("3.11.10", f"{venv}/bin/python", True, "a100-node-12", release="5.15.0-125-generic"),
        tools=base_tools(pip="24.3.1"),
        packages=packages(
            {"pip": "24.3.1", "setuptools": "75.6.0"},
            HF_2024_Q4,
            {"filelock": "3.16.1", "fsspec": "2024.10.0", "typing-extensions": "4.12.2"},
            COMMON_2024,
        ),
        gpu=nvml("550.90.07", "12.4", "NVIDIA A100-SXM4-80GB", "8.0", 81920),
        torch=TorchInfo(status="missing"),
        imports={m: ImportResult(status="skipped") for m in IMPORT_MODULES},
        env=environ({"CUDA_VISIBLE_DEVICES": "0"}, venv),
        probes=probes(0.118, 0.135, 0.047),
    )


def first_contact() -> Facts:
    # The Quickstart on a GPU node, as a newcomer runs it: the doctor installed into the clone's
    # .venv and run from there with nothing activated; it checks its own torch-less venv, and
    # names the training environments it finds from their metadata (probes/environments.py).
    venv = "/home/dev/src/attn-doctor/.venv"
    doctor = ".venv/bin/attn-doctor"
    train = "/home/dev/miniforge3/envs/train/bin/python"
    return Facts(
        target=Target(python=f"{venv}/bin/python3", source="self", why="the interpreter attn-doctor runs in"),
        environments=Environments(
            searched=["python3 and python on PATH", "conda environments", "./.venv and ./venv", "pyenv versions", "uv Pythons",
                      "~/.virtualenvs and ~/venvs"],
            doctor=doctor,
            candidates=[
                OtherEnvironment(python=train, found=["conda env train"], python_version="3.11", torch="2.11.0+cu130",
                                 command=f"{doctor} check -p {train}"),
                OtherEnvironment(python="/home/dev/miniforge3/bin/python", found=["conda base"], python_version="3.12",
                                 command=f"{doctor} check -p /home/dev/miniforge3/bin/python"),
                OtherEnvironment(python="/usr/bin/python3", found=["python3 on PATH"], python_version="3.10",
                                 command=f"{doctor} check -p /usr/bin/python3"),
            ],
            duration_s=0.004,
        ),
        platform=platform("3.11.10", f"{venv}/bin/python3", True, "a100-node-12", release="5.15.0-125-generic"),
        tools=base_tools(pip="24.3.1"),
        packages=packages({"pip": "24.3.1"}, {"typer": "0.15.1", "rich": "13.9.4", "msgspec": "0.19.0", "packaging": "24.2"}),
        gpu=nvml("550.90.07", "12.4", "NVIDIA A100-SXM4-80GB", "8.0", 81920),
        torch=TorchInfo(status="missing"),
        imports={m: ImportResult(status="skipped") for m in IMPORT_MODULES},
        env=environ({"CUDA_VISIBLE_DEVICES": "0"}, None),
        probes=probes(0.021, 0.135, 0.047),
    )


MACHINES = {
    "cpu-only": cpu_only,
    "t4": t4,
    "v100": v100,
    "a100": a100,
    "rtx4090": rtx4090,
    "rtx5090": rtx5090,
    "flash-attn-undefined-symbol": flash_attn_undefined_symbol,
    "torch-missing": torch_missing,
    "first-contact": first_contact,
    "pip-missing": pip_missing,
}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, build in MACHINES.items():
        facts = build()
        data = msgspec.json.format(msgspec.json.encode(facts), indent=2) + b"\n"
        (OUT / f"{name}.json").write_bytes(data)
        print(f"wrote {name}.json")


if __name__ == "__main__":
    main()
