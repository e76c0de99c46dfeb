"""What of the environment reaches a report: the allow-list, and redaction of secrets in it."""

from __future__ import annotations

import sys

from attn_doctor.boundary.redact import REDACTED, allowed, redact_value, safe_environment
from attn_doctor.probes.runner import start_child
from helpers import broken_env

HF_TOKEN = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f"  # the 34-character shape of a real one
GH_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
OPENAI_KEY = "sk-proj-" + "Xy7_Zq9-Wv3Tu5Rs1Po8Nm6Lk4Ji2Hg0Fe"

ENVIRON = {
    # secrets in allow-listed names
    "HF_TOKEN": HF_TOKEN,
    "HUGGING_FACE_HUB_TOKEN": HF_TOKEN,  # not allow-listed at all
    "HF_HUB_SECRET": "plain-words-but-a-secret",
    "DS_SECRET": "hunter2",
    "UV_INDEX_PRIVATE_PASSWORD": "s3cr3t",
    "PIP_INDEX_URL": "https://alice:pa55w0rd@pypi.internal.example.com/simple",
    "PIP_EXTRA_INDEX_URL": "https://download.pytorch.org/whl/cu124 https://__token__:pypi-AgEIcHlwaS5vcmc@mirror.example.com/simple",
    "UV_INDEX_URL": f"https://oauth2:{GH_TOKEN}@git.example.com/api/packages/simple",
    # token-shaped values hiding in innocent allow-listed names
    "HF_ENDPOINT": f"https://hf-mirror.example.com/?t={HF_TOKEN}",
    "TORCH_EXTRA_NOTE": f"key {OPENAI_KEY} was pasted here",
    "PYTHONPATH": f"/opt/{GH_TOKEN}/lib",
    # not allow-listed: dropped whatever they hold
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "OPENAI_API_KEY": OPENAI_KEY,
    "HOME": "/home/alice",
    "USER": "alice",
    "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.1234",
    "https_proxy": "http://alice:pa55w0rd@proxy:3128",
    # allow-listed and harmless: kept verbatim
    "CUDA_VISIBLE_DEVICES": "0,1",
    "CUDA_HOME": "/usr/local/cuda-12.4",
    "TORCH_CUDA_ARCH_LIST": "8.0;8.6;9.0+PTX",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "NCCL_DEBUG": "INFO",
    "FLASH_ATTENTION_FORCE_BUILD": "TRUE",
    "HF_HOME": "/data/hf",
    "LD_LIBRARY_PATH": "/usr/local/cuda/lib64:/usr/local/nvidia/lib64",
    "PATH": "/home/alice/venv/bin:/usr/local/bin:/usr/bin:/bin",
    "VIRTUAL_ENV": "/home/alice/venv",
    "MAX_JOBS": "4",
    "LOCAL_RANK": "0",
    "PIP_INDEX_URL_PLAIN": "https://pypi.org/simple",
}

SECRETS = [
    HF_TOKEN,
    GH_TOKEN,
    OPENAI_KEY,
    "plain-words-but-a-secret",
    "hunter2",
    "s3cr3t",
    "pa55w0rd",
    "pypi-AgEIcHlwaS5vcmc",
    "0123456789abcdef0123456789abcdef01234567",
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI",
]


def safe():
    return safe_environment(ENVIRON)


def test_no_secret_survives_anywhere():
    text = repr(safe())
    for secret in SECRETS:
        assert secret not in text, secret


def test_secret_names_are_replaced_whole():
    out = safe()
    for name in ("HF_TOKEN", "HF_HUB_SECRET", "DS_SECRET", "UV_INDEX_PRIVATE_PASSWORD"):
        assert out[name] == REDACTED


def test_url_credentials_are_replaced_and_the_rest_kept():
    out = safe()
    assert out["PIP_INDEX_URL"] == "https://***@pypi.internal.example.com/simple"
    assert out["PIP_EXTRA_INDEX_URL"] == "https://download.pytorch.org/whl/cu124 https://***@mirror.example.com/simple"
    assert out["UV_INDEX_URL"] == "https://***@git.example.com/api/packages/simple"


def test_token_shaped_values_are_replaced_in_innocent_names():
    out = safe()
    assert out["HF_ENDPOINT"] == "https://hf-mirror.example.com/?t=***"
    assert out["TORCH_EXTRA_NOTE"] == "key *** was pasted here"
    assert out["PYTHONPATH"] == "/opt/***/lib"


def test_not_allow_listed_variables_are_dropped():
    out = safe()
    for name in (
        "HOME",
        "USER",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "WANDB_API_KEY",
        "OPENAI_API_KEY",
        "HUGGING_FACE_HUB_TOKEN",
        "SSH_AUTH_SOCK",
        "https_proxy",
    ):
        assert name not in out


def test_allow_listed_variables_are_kept_verbatim():
    out = safe()
    for name in (
        "CUDA_VISIBLE_DEVICES",
        "CUDA_HOME",
        "TORCH_CUDA_ARCH_LIST",
        "PYTORCH_CUDA_ALLOC_CONF",
        "NCCL_DEBUG",
        "FLASH_ATTENTION_FORCE_BUILD",
        "HF_HOME",
        "LD_LIBRARY_PATH",
        "PATH",
        "VIRTUAL_ENV",
        "MAX_JOBS",
        "LOCAL_RANK",
        "PIP_INDEX_URL_PLAIN",
    ):
        assert out[name] == ENVIRON[name], name


def test_output_is_sorted_and_exactly_the_allowed_names():
    out = safe()
    assert list(out) == sorted(out)
    assert set(out) == {name for name in ENVIRON if allowed(name)}


def test_allowed_is_case_sensitive_and_by_prefix():
    assert allowed("CUDA_VISIBLE_DEVICES")
    assert allowed("TRITON_CACHE_DIR")
    assert allowed("PATH")
    assert not allowed("cuda_visible_devices")
    assert not allowed("MYPATH")
    assert not allowed("PATHS")


def test_redact_value_leaves_ordinary_text_alone():
    for value in ("expandable_segments:True", "https://download.pytorch.org/whl/cu124", "hf_transfer", "sk-short"):
        assert redact_value(value) == value


def test_empty_environment():
    assert safe_environment({}) == {}


def test_package_url_credentials_are_stripped_by_the_env_probe(tmp_path, monkeypatch):
    # A wheel installed from a private mirror with credentials in the URL: the environment probe
    # (the real child script, in a real interpreter) keeps the URL, minus the credentials.
    broken_env.write_dist_info(
        tmp_path,
        "flash_attn",
        "2.7.4.post1",
        url=f"https://alice:{GH_TOKEN}@wheels.example.com/flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl",
    )
    broken_env.write_dist_info(tmp_path, "local_pkg", "0.1.0", url="file:///home/alice/src/local_pkg")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    data = start_child(sys.executable, ["env"]).result(30)
    url = data["packages"]["flash-attn"]["url"]
    assert url == "https://***@wheels.example.com/flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"
    assert GH_TOKEN not in repr(data)
    # Local paths are not URLs worth reporting.
    assert "url" not in data["packages"]["local-pkg"]



# Regression: GitHub fine-grained tokens (github_pat_..., the default kind since 2023) had no
# pattern; classic ghp_ tokens did.
def test_github_fine_grained_token_in_a_value():
    token = "github_pat_11ABCDEFG0123456789abc_" + "Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa9876543210zyxwvutsrqponmlkjihgfedcba"
    out = safe_environment({"PIP_FIND_LINKS": f"https://wheels.example.com/index.html?access={token}"})
    assert out["PIP_FIND_LINKS"] == "https://wheels.example.com/index.html?access=***"
