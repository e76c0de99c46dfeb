"""Helpers for the fix tests: the CLI in a subprocess with its own state directory, and wheels
written by hand (small, correct metadata) for a local wheelhouse."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "fixtures" / "configs"
FACTS = REPO / "tests" / "fixtures" / "facts"


def cli(*args, state: Path, env_extra=None, timeout=300, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, ATTN_DOCTOR_STATE_DIR=str(state), COLUMNS="200")
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL, **kw
    )


def make_wheel(directory: Path, name: str, version: str, files: dict[str, str], requires: tuple = ()) -> Path:
    """A pure-Python wheel with METADATA, WHEEL and a RECORD pip verifies."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    contents = dict(files)
    contents[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    contents[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: attn-doctor-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = "\n".join(record) + "\n"
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name_, text in contents.items():
            zf.writestr(name_, text)
    return path


def x_transformers_wheel(directory: Path, version: str) -> Path:
    return make_wheel(
        directory,
        "x-transformers",
        version,
        {"x_transformers/__init__.py": f"__version__ = {version!r}\n"},
    )


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("wheelhouse")
    x_transformers_wheel(d, "1.30.1")
    x_transformers_wheel(d, "1.30.2")
    make_wheel(d, "pip-stand-in", "1.0", {"pip_stand_in/__init__.py": "", "pip_stand_in/a.py": "A = 1\n", "pip_stand_in/b.py": "B = 2\n"})
    return d


@pytest.fixture(scope="session")
def base_venv(tmp_path_factory) -> Path:
    """A venv with pip (made once; tests copy it)."""
    d = tmp_path_factory.mktemp("venv") / "base"
    subprocess.run([sys.executable, "-m", "venv", str(d)], check=True, timeout=120)
    return d


@pytest.fixture
def venv(base_venv, tmp_path, wheelhouse) -> Path:
    """A fresh venv (a copy of the base one) with x-transformers 1.30.1 from the wheelhouse."""
    d = tmp_path / "venv"
    shutil.copytree(base_venv, d, symlinks=True)
    # venv scripts hard-code their folder: call pip through the interpreter only.
    subprocess.run(
        [str(d / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse), "x-transformers==1.30.1"],
        check=True,
        timeout=120,
        env=offline_env(wheelhouse),
    )
    return d


def offline_env(wheelhouse: Path) -> dict:
    """pip offline, answered by `wheelhouse`; no uv on PATH, so that fix installs with pip (uv
    reads none of PIP_*; the uv test sets its own)."""
    path = os.pathsep.join(f for f in os.environ.get("PATH", "").split(os.pathsep) if f and not (Path(f) / "uv").exists())
    return dict(
        os.environ,
        PATH=path,
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheelhouse),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_CACHE_DIR="1",
    )


def installed_version(venv: Path, dist: str) -> str:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout.strip() or out.stderr.strip().splitlines()[-1]
