"""What of the environment may appear in a report: an allow-list, and redaction on top of it."""

from __future__ import annotations

import re
from collections.abc import Mapping

# Variables that change how torch, CUDA, flash-attn and the training stack behave.
ALLOWED_PREFIXES = (
    "CUDA_",
    "CUDNN_",
    "NVIDIA_",
    "NCCL_",
    "TORCH_",
    "PYTORCH_",
    "TORCHINDUCTOR_",
    "TRITON_",
    "FLASH_ATTENTION_",
    "XFORMERS_",
    "HF_",
    "TRANSFORMERS_",
    "ACCELERATE_",
    "DS_",
    "DEEPSPEED_",
    "USE_",
    "FORCE_TORCHRUN",
    "LLAMAFACTORY_",
    "SLURM_JOB_",
    "PIP_",
    "UV_",
    "CONDA_",
)
ALLOWED_NAMES = {
    "LD_LIBRARY_PATH",
    "PATH",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "OMP_NUM_THREADS",
    "MAX_JOBS",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
}
SECRET_NAME = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION)", re.IGNORECASE)
URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][\w+.-]*://)(?P<cred>[^/@\s]+)@")
# Token-shaped values that sometimes hide in innocent names (hf_..., ghp_..., sk-...).
TOKEN_VALUE = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_\-]{20,}|xox[abpr]-[A-Za-z0-9\-]{10,})\b")

REDACTED = "***"


def redact_value(value: str) -> str:
    value = URL_CREDENTIALS.sub(lambda m: m.group("scheme") + REDACTED + "@", value)
    return TOKEN_VALUE.sub(REDACTED, value)


def allowed(name: str) -> bool:
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def safe_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed variables, secrets replaced by ***; everything else left out."""
    out = {}
    for name in sorted(environ):
        if not allowed(name):
            continue
        out[name] = REDACTED if SECRET_NAME.search(name) else redact_value(environ[name])
    return out
