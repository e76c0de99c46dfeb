"""Real environments from real registry packages, built with uv, once per test session.

Every environment is a venv made by `uv venv` and filled by `uv pip install` steps, all sharing
uv's one cache (installs are hard links out of it: a CUDA torch takes seconds once cached). torch
2.13.0 comes from the local CPU wheel (ATTN_DOCTOR_TORCH_WHEELS, else PIP_FIND_LINKS, else
/opt/wheels) wherever a CPU build will do; later steps may not replace the torch an environment was
built around (checked). With ATTN_DOCTOR_REALENV_DIR set, environments are kept there between
sessions, keyed by their recipe, and reused while `pip freeze` still says what it said when built.

An install that fails is a test failure naming the command; only an unreachable registry skips.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FORMAT = 1  # bump to rebuild every kept environment


def torch_wheels() -> str:
    for value in (os.environ.get("ATTN_DOCTOR_TORCH_WHEELS"), os.environ.get("PIP_FIND_LINKS"), "/opt/wheels"):
        if value:
            return value.split()[0]
    return "/opt/wheels"


# The pinned CPU build every CPU environment starts from (CI's torch).
TORCH_CPU = ("--find-links", torch_wheels(), "torch==2.13.0")
TORCH_CPU_VERSION = "2.13.0+cpu"


@dataclass(frozen=True)
class Spec:
    name: str
    steps: tuple  # each step: the arguments of one `uv pip install`
    seed: bool = True  # pip in the venv, as `python -m venv` makes it (fix then uses pip)
    torch: Optional[str] = TORCH_CPU_VERSION  # what torch must be after every step (None: not checked)
    about: str = ""
    # Bytecode compiled at install, as pip does (uv does not by default): where PYTHONDONTWRITEBYTECODE
    # is set (CI) every process would otherwise compile torch and transformers from source (an import
    # of both: about 16 s, not 7). Compiling costs 10-25 s per environment, so only environments whose
    # tests start many such processes take it.
    bytecode: bool = False
    # torch's bytecode hard-linked from one environment that compiled it (TORCH_BYTECODE), for
    # environments used by one trace each: the trace would otherwise compile torch from source, about
    # 12 of its 22 s. Where a source file is not the same file as there (uv copied instead of linking
    # out of its cache), its bytecode is left out and Python compiles that module as before.
    torch_bytecode: bool = False

    def key(self) -> str:
        text = json.dumps([FORMAT, self.steps, self.seed, _base_python(), self.bytecode] + ([True] if self.torch_bytecode else []))
        return hashlib.sha256(text.encode()).hexdigest()[:10]


def _cpu(*steps) -> tuple:
    return (TORCH_CPU,) + tuple(tuple(s) for s in steps)


TORCH_BYTECODE = "torch-2.13-cpu+bytecode"

# The matrix. Versions are pinned so that a verdict is a fact about named releases.
SPECS = {s.name: s for s in [
    Spec("torch-2.13-cpu", _cpu(), about="the pinned CPU build, without bytecode (as uv installs by default)"),
    Spec(TORCH_BYTECODE, _cpu(), seed=False, bytecode=True, about="the pinned CPU build compiled once, its torch bytecode linked into others"),
    Spec("torch-2.0.1", (("torch==2.0.1",),), torch="2.0.1",
         about="the oldest torch attn-doctor supports, PyPI's CUDA 11.7 build (its triton 2.0.0 pin)"),
    Spec("torch-2.0.1+triton-2.1.0", (("torch==2.0.1",), ("triton==2.1.0",)), torch="2.0.1",
         about="triton upgraded alone: not the release torch 2.0.1 pins"),
    Spec("torch-newest", (("torch",),), torch=None, about="PyPI's newest torch: a CUDA build, on a machine without a driver"),
    Spec("torch-newest+triton-3.6.0", (("torch",), ("triton==3.6.0",)), torch=None, about="triton replaced alone under the newest torch"),
    Spec("x-transformers-1.30.1", _cpu(["x-transformers==1.30.1"])),
    Spec("x-transformers-1.30.2", _cpu(["x-transformers==1.30.2"])),
    Spec("fla-0.2.1", _cpu(["flash-linear-attention==0.2.1"]), about="an old flash-linear-attention (before RWKV7's fix)"),
    Spec("fla-0.6.0", _cpu(["flash-linear-attention==0.6.0"]), about="the current flash-linear-attention"),
    # GSA's chunk_fwd_h(..., states_in_fp32=False) is in every release from 0.1 to 0.5.x; triton 2.2
    # is what AD402 is about. No pip in the venv and no uv on PATH: the torch upgrade cannot be done.
    Spec("fla-0.2.2+triton-2.2.0", _cpu(["triton==2.2.0", "einops"], ["--no-deps", "flash-linear-attention==0.2.2"]), seed=False,
         about="GSA with states_in_fp32=False, triton 2.2, nothing to install with"),
    # Built for torch 2.10.0+cu128; --no-deps keeps the CPU torch (its own requirement would replace it).
    Spec("xformers-0.0.35", _cpu(["--no-deps", "xformers==0.0.35"])),
    Spec("flash-attn-4", _cpu(["flash-attn-4==4.0.0b36"]), about="FlashAttention 4 (pure Python) on a CPU-only machine"),
    # LLaMA-Factory with --no-deps and what its argument parser imports (its full install brings
    # gradio, torchvision and torchaudio, which would replace the CPU torch): the transformers,
    # datasets, accelerate, peft and trl of the release's time, within its own version checks.
    Spec("llamafactory-0.7.1", _cpu(["--no-deps", "llamafactory==0.7.1"],
                                    ["transformers==4.41.2", "datasets==2.19.2", "accelerate==0.30.1", "peft==0.10.0", "trl==0.8.6", "pyyaml"]),
         about="the oldest llamafactory on PyPI (flash_attn: off/sdpa/fa2/auto)", bytecode=True),
    Spec("llamafactory-0.8.3", _cpu(["--no-deps", "llamafactory==0.8.3"],
                                    ["transformers==4.43.4", "datasets==2.20.0", "pyarrow==17.0.0", "accelerate==0.32.1", "peft==0.12.0",
                                     "trl==0.9.6", "pyyaml"]),
         about="0.8.3 (flash_attn: auto/disabled/sdpa/fa2)", bytecode=True),
    # The framework callbacks run in the training process: attn-doctor itself installed (editable,
    # with its dependencies) next to the frameworks, as `pip install 'attn-doctor[transformers]'` does.
    Spec("integrations", _cpu(["-e", str(REPO)], ["transformers==4.57.6", "accelerate==1.11.0", "lightning==2.6.6"]),
         about="attn-doctor's transformers and Lightning callbacks in the training process", bytecode=True),
    # fleet --ray: attn-doctor and Ray in the one environment the cluster's raylets, workers and checks run in.
    Spec("ray", _cpu(["-e", str(REPO)], ["ray==2.60.0"]), about="a Ray cluster of several raylets on this host (fleet --ray)"),
    # examples/k8s: the Kubernetes schemas (kubernetes-validate) and the Kubeflow training operator's
    # API models, generated from its OpenAPI spec (kubeflow-training), to validate the manifests with.
    Spec("k8s-validators", (("kubernetes-validate==1.37.0", "kubeflow-training==1.9.4"),), seed=False, torch=None,
         about="validators for the Kubernetes examples"),
    # benchmarks/inject_generic.py's sample in CI: transformers (a codebase the trace's rules were built
    # on) and x-transformers (held out; pure Python: the other held-out codebases need torchvision, whose
    # PyPI build would replace the CPU torch).
    Spec("open-world-sample", _cpu(["-e", str(REPO)], ["transformers==5.6.0", "x-transformers==2.31.10"]),
         about="a stratified sample of the generic-mutation benchmark", bytecode=True),
    Spec("llamafactory-0.9.5", _cpu(["--no-deps", "llamafactory==0.9.5"],
                                    ["transformers==5.6.0", "datasets==4.0.0", "accelerate==1.11.0", "peft==0.18.1", "trl==0.24.0",
                                     "omegaconf", "pyyaml"]),
         about="the newest llamafactory (adds fa3)", bytecode=True),
]}


# ---------------------------------------------------------------- tools


def _real_bug_specs() -> dict:
    """Two environments per real bug (tests/realenv/real_bugs): its buggy and its fixed release."""
    from .real_bugs import load

    specs = {}
    for case in load():
        for which, version in (("buggy", case.buggy), ("fixed", case.fixed)):
            spec = Spec(case.env_name(which), _cpu(*case.steps(version)), seed=False, torch_bytecode=True,
                        about="%s %s (%s release of a real bug: %s)" % (case.package, version, which, case.source))
            specs[spec.name] = spec
    return specs


SPECS.update(_real_bug_specs())


def _base_python() -> str:
    """The interpreter the test venv was made from: every environment uses the same Python."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def uv_binary() -> Optional[str]:
    beside = Path(sys.executable).parent / "uv"  # the test extra installs uv into the venv
    if beside.is_file():
        return str(beside)
    return shutil.which("uv")


def uv_env() -> dict:
    # Never download a Python (only the registry is reachable); no progress bars in logs.
    return dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1")


def registry_problem(timeout: float = 15.0) -> Optional[str]:
    """Why the package registry uv uses cannot be reached, or None."""
    url = os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL") or "https://pypi.org/simple/"
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/pip/", timeout=timeout) as resp:
            resp.read(1)
    except Exception as exc:  # noqa: BLE001 - any failure to reach it is the reason to skip
        return f"{url}: {exc}"
    return None


def freeze(python: Path) -> list[str]:
    """`pip freeze --all` of the environment (uv's freeze where it has no pip)."""
    has_pip = subprocess.run([str(python), "-c", "import pip"], capture_output=True, timeout=60).returncode == 0
    if has_pip:
        argv = [str(python), "-m", "pip", "freeze", "--all", "--disable-pip-version-check"]
    else:
        argv = [uv_binary() or "uv", "pip", "freeze", "--python", str(python)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=uv_env())
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr[-1000:]}"
    return sorted(line for line in proc.stdout.splitlines() if line.strip())


def installed_version(python: Path, dist: str) -> Optional[str]:
    proc = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                          capture_output=True, text=True, timeout=60)
    return proc.stdout.strip() if proc.returncode == 0 else None


# ---------------------------------------------------------------- building


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def link_bytecode(source: Path, target: Path, package: str) -> int:
    """Hard-link the bytecode of `package` in site-packages `source` into site-packages `target`,
    for each module whose source file is the same file (inode) in both: Python validates a .pyc by
    its source's mtime and size, which one file has once. The number of files linked."""
    linked = 0
    for cache in (source / package).rglob("__pycache__"):
        folder = target / cache.parent.relative_to(source)
        for pyc in cache.glob("*.pyc"):
            module = pyc.name.split(".", 1)[0] + ".py"
            try:
                if (folder / module).stat().st_ino != (cache.parent / module).stat().st_ino:
                    continue
                (folder / "__pycache__").mkdir(exist_ok=True)
                os.link(pyc, folder / "__pycache__" / pyc.name)
            except (FileNotFoundError, FileExistsError):
                continue
            linked += 1
    return linked



@dataclass
class Env:
    spec: Spec
    path: Path
    build_s: float
    reused: bool
    frozen: list = field(default_factory=list)  # pip freeze right after the build

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def site_packages(self) -> Path:
        return site_packages(self.path)


class InstallFailed(Exception):
    pass


class Builder:
    """Environments by name, each built once per session (or reused from ATTN_DOCTOR_REALENV_DIR)."""

    def __init__(self, root: Path):
        self.root = root
        self.envs: dict[str, Env] = {}
        self.failed: dict[str, str] = {}
        self._registry: Optional[str] = None
        self._registry_checked = False

    def get(self, name: str) -> Env:
        if name in self.envs:
            return self.envs[name]
        if name in self.failed:
            pytest.fail(self.failed[name], pytrace=False)
        spec = SPECS[name]
        uv = uv_binary()
        if uv is None:
            pytest.fail("realenv needs uv (pip install -e '.[test]' installs it, or put uv on PATH)", pytrace=False)
        try:
            self.envs[name] = self._build(spec, uv)
        except InstallFailed as exc:
            problem = self._registry_problem()
            if problem:
                pytest.skip(f"the package registry is unreachable ({problem}): the realenv matrix installs from it")
            self.failed[name] = f"environment {name}: {exc}"
            pytest.fail(self.failed[name], pytrace=False)
        return self.envs[name]

    def _registry_problem(self) -> Optional[str]:
        if not self._registry_checked:
            self._registry, self._registry_checked = registry_problem(), True
        return self._registry

    def _build(self, spec: Spec, uv: str) -> Env:
        path = self.root / f"{spec.name}-{spec.key()}"
        record = path / "realenv.json"
        if record.is_file():
            kept = json.loads(record.read_text())
            if freeze(path / "bin" / "python") == kept["freeze"]:
                return Env(spec, path, kept["build_s"], True, kept["freeze"])
        if path.exists():
            shutil.rmtree(path)  # half built, or changed since: from scratch
        start = time.monotonic()
        cmd = [uv, "venv", "-q", "--python", _base_python()] + (["--seed"] if spec.seed else []) + [str(path)]
        self._run(cmd, "uv venv")
        python = path / "bin" / "python"
        for step in spec.steps:
            self._run([uv, "pip", "install", "--python", str(python), *(["--compile-bytecode"] if spec.bytecode else []), *step],
                      "uv pip install " + " ".join(step))
            if spec.torch is not None and step is not spec.steps[0]:
                found = installed_version(python, "torch")
                if found != spec.torch:
                    raise InstallFailed(f"`uv pip install {' '.join(step)}` replaced torch {spec.torch} with {found}")
        if spec.torch is not None:
            found = installed_version(python, "torch")
            if found != spec.torch:
                raise InstallFailed(f"torch is {found}, not the {spec.torch} this environment is built around "
                                    f"(is the CPU wheel in {torch_wheels()}? set ATTN_DOCTOR_TORCH_WHEELS)")
        if spec.torch_bytecode:
            link_bytecode(self.get(TORCH_BYTECODE).site_packages(), site_packages(path), "torch")
        build_s = round(time.monotonic() - start, 1)
        frozen = freeze(python)
        record.write_text(json.dumps({"spec": spec.name, "steps": spec.steps, "freeze": frozen, "build_s": build_s}, indent=1))
        return Env(spec, path, build_s, False, frozen)

    @staticmethod
    def _run(cmd: list, what: str) -> None:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=uv_env(), stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise InstallFailed(f"`{what}` did not finish in 20 minutes") from None
        if proc.returncode != 0:
            tail = " | ".join(line.strip() for line in (proc.stderr or proc.stdout).strip().splitlines()[-6:])
            raise InstallFailed(f"`{what}` exited {proc.returncode}: {tail}")
