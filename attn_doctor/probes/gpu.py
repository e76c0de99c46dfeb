"""GPUs as the driver sees them: NVML first, `nvidia-smi` second, no torch involved."""

from __future__ import annotations

import shutil
import subprocess

from ..facts import Gpu, GpuInfo

SMI_TIMEOUT_S = 10.0


def probe_gpus() -> GpuInfo:
    nvml_error = None
    try:
        return _from_nvml()
    except Exception as exc:  # noqa: BLE001 - NVML missing, no driver, old driver...
        nvml_error = f"NVML: {_short(exc)}"
    try:
        info = _from_nvidia_smi()
    except FileNotFoundError:
        return GpuInfo(source="none", error=f"{nvml_error}; nvidia-smi: not found")
    except subprocess.TimeoutExpired:
        return GpuInfo(source="none", error=f"{nvml_error}; nvidia-smi: no answer in {SMI_TIMEOUT_S:.0f} s")
    except Exception as exc:  # noqa: BLE001
        return GpuInfo(source="none", error=f"{nvml_error}; nvidia-smi: {_short(exc)}")
    return info


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


def _decode(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _from_nvml() -> GpuInfo:
    import pynvml

    pynvml.nvmlInit()
    try:
        driver = _decode(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()  # 13000 -> "13.0"
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
                capability = f"{major}.{minor}"
            except pynvml.NVMLError:
                capability = None
            try:
                memory = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024))
            except pynvml.NVMLError:
                memory = None
            devices.append(
                Gpu(index=index, name=_decode(pynvml.nvmlDeviceGetName(handle)), capability=capability, memory_mib=memory)
            )
    finally:
        pynvml.nvmlShutdown()
    return GpuInfo(
        source="nvml",
        driver_version=driver,
        cuda_driver_version=f"{cuda // 1000}.{(cuda % 1000) // 10}",
        devices=devices,
    )


def _from_nvidia_smi() -> GpuInfo:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise FileNotFoundError("nvidia-smi")
    fields = "index,name,compute_cap,memory.total,driver_version"
    proc = subprocess.run(
        [exe, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=SMI_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError((proc.stderr or proc.stdout).strip() or f"exit code {proc.returncode}")
    devices, driver = [], None
    for line in proc.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        index, name, cap, mem, driver = parts[:5]
        devices.append(
            Gpu(
                index=int(index),
                name=name,
                capability=cap if cap and cap[0].isdigit() else None,
                memory_mib=int(float(mem)) if mem.replace(".", "").isdigit() else None,
            )
        )
    return GpuInfo(source="nvidia-smi", driver_version=driver, cuda_driver_version=_smi_cuda_version(exe), devices=devices)


def _smi_cuda_version(exe: str):
    # The CUDA version is only printed in the banner: "CUDA Version: 12.4".
    try:
        banner = subprocess.run([exe], capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    marker = "CUDA Version:"
    if marker in banner:
        return banner.split(marker, 1)[1].split()[0]
    return None
