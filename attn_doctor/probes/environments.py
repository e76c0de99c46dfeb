"""Where else on this machine a Python environment has torch: the answer a check of the doctor's
own, torch-less environment owes a newcomer (installed into `.venv`, run with nothing activated).

Metadata only: folders and the names of `torch-X.dist-info` entries are read, nothing is run or
imported in any environment (a broken interpreter cannot hang the check, and an interpreter's
`.pth` files run nothing). Looked at, in this order: `python3` and `python` in every folder of
PATH, conda's environments (the base of $CONDA_EXE, of a conda / mamba on PATH and of the usual
install folders, each one's `envs/`, and `~/.conda/environments.txt`, the list every `conda create`
appends to and `conda env list` reads: its start-up alone costs longer than this whole search),
venvs and conda environments of any name in the working folder and the folders beside it
(`./train`, `./.venv-dev`, `./*/.venv`: a folder with pyvenv.cfg or conda-meta), pyenv's versions, uv's Pythons, virtualenvwrapper's,
`~/venvs`, `~/.venvs` and `~/envs`.

The search runs in a thread with a deadline: a hung network home folder stops it, never the check.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, Optional

import msgspec

from ..facts import Environments, OtherEnvironment
from .runner import TARGET_PYTHON_FLOOR, TOO_OLD

DEADLINE_S = 2.0
MAX_CANDIDATES = 64  # environments examined at most; past it the search stops and says so
_LIST_MAX_BYTES = 64 * 1024  # environments.txt read at most
_NAMES = ("python3", "python")
_CONDA_HOMES = ("miniconda3", "anaconda3", "miniforge3", "mambaforge", "micromamba", "miniconda", "anaconda")
_VERSION_DIR = re.compile(r"^python(\d+\.\d+)t?$")
_TORCH = re.compile(r"^torch-(?P<version>[0-9][^-]*?)(?:-py\d[\d.]*)?\.(?:dist-info|egg-info)$")


def find_environments(target: str, doctor: Optional[str] = None, environ: Optional[dict] = None,
                      cwd: Optional[str] = None, deadline_s: float = DEADLINE_S) -> Environments:
    """The Python environments here other than `target`'s (the interpreter checked), those with
    torch first. doctor: how to run this doctor in the commands (default: as it was run)."""
    environ = dict(os.environ if environ is None else environ)
    cwd = cwd or os.getcwd()
    doctor = doctor or doctor_command(environ)
    started = time.monotonic()
    found: list[OtherEnvironment] = []
    state: dict = {"stopped": None, "closed": False}

    def search() -> None:
        try:
            _search(target, environ, cwd, doctor, found, state)
        except Exception as exc:  # noqa: BLE001 - a failed search is a note, never a failed check
            state["stopped"] = f"failed: {type(exc).__name__}: {exc}"

    thread = threading.Thread(target=search, name="attn-doctor-environments", daemon=True)
    thread.start()
    thread.join(deadline_s)
    state["closed"] = True  # a search still running after the deadline changes nothing any more
    error = state["stopped"]
    if thread.is_alive():
        error = f"stopped after {deadline_s:g} s (a slow file system?): what was found before"
    candidates = [msgspec.structs.replace(c, found=list(c.found)) for c in list(found)]
    candidates.sort(key=lambda c: c.torch is None)  # stable: with torch first, each group as found
    return Environments(searched=searched_words(), doctor=doctor, candidates=candidates,
                        duration_s=round(time.monotonic() - started, 3), error=error)


def searched_words() -> list[str]:
    return ["python3 and python on PATH", "conda environments", "venvs and conda environments of any name in ./ and ./*/",
            "pyenv versions",
            "uv Pythons", "~/.virtualenvs, ~/venvs, ~/.venvs and ~/envs"]


def doctor_command(environ: dict) -> str:
    """How the user can run this doctor again: `attn-doctor` where that name on PATH is this one,
    else the script as it was run (`.venv/bin/attn-doctor`, the Quickstart's), else `python -m`."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    name = os.path.basename(argv0)
    if name in ("attn-doctor", "attn-doctor.exe"):
        on_path = shutil.which("attn-doctor", path=environ.get("PATH"))
        if on_path and _same_file(on_path, argv0):
            return "attn-doctor"
        return shlex.quote(argv0)
    if name == "__main__.py" and os.path.basename(os.path.dirname(argv0)) == "attn_doctor":
        return f"{shlex.quote(sys.executable)} -m attn_doctor"
    return "attn-doctor"


# ---------------------------------------------------------------- the search


def _search(target: str, environ: dict, cwd: str, doctor: str, found: list[OtherEnvironment], state: dict) -> None:
    skip = {_key(target)}
    if os.path.abspath(target) == os.path.abspath(sys.executable):
        skip.add(_key_of_prefix(sys.prefix))
    seen: dict[tuple, OtherEnvironment] = {}
    for python, where in _places(environ, cwd):
        if state.get("closed"):
            return
        key = _key(python)
        if key in skip:
            continue
        if key in seen:
            if where not in seen[key].found:
                seen[key].found.append(where)
            continue
        if len(seen) >= MAX_CANDIDATES:
            state["stopped"] = f"stopped after {MAX_CANDIDATES} environments"
            return
        version, torch = _read(python, environ)
        left_out = _too_old(version)
        candidate = OtherEnvironment(python=python, found=[where], python_version=version, torch=torch,
                                     command="" if left_out else f"{doctor} check -p {shlex.quote(python)}", left_out=left_out)
        seen[key] = candidate
        found.append(candidate)


def _places(environ: dict, cwd: str) -> Iterator[tuple[str, str]]:
    """(interpreter, where it was found) for every place looked at; duplicates are merged later."""
    home = Path(environ.get("HOME") or os.path.expanduser("~"))
    for folder in (environ.get("PATH") or "").split(os.pathsep):
        for name in _NAMES:
            python = _executable(Path(folder or ".") / name)
            if python and Path(folder).name == "shims":
                python = _pyenv_shim(Path(folder).parent, environ, cwd)  # a script that runs pyenv
            if python:
                yield python, f"{name} on PATH"
    yield from _conda(environ, home)
    # environments of any name in this folder and the projects beside it: ./train, ./.venv-dev,
    # ./myproject/.venv (a folder with pyvenv.cfg is a venv, one with conda-meta a conda environment)
    here = Path(cwd)
    for name in (".venv", "venv"):
        python = _environment_python(here / name)
        if python:
            yield python, f"./{name}"
    for child in _children(here):
        if _is_environment(child):
            python = _environment_python(child)
            if python:
                yield python, f"./{child.name}"
            continue
        for grandchild in _children(child):
            if _is_environment(grandchild):
                python = _environment_python(grandchild)
                if python:
                    yield python, f"./{child.name}/{grandchild.name}"
    pyenv = Path(environ.get("PYENV_ROOT") or home / ".pyenv") / "versions"
    for folder in _children(pyenv):
        python = _environment_python(folder)
        if python:
            yield python, f"pyenv {folder.name}"
    data = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    uv_pythons = Path(environ.get("UV_PYTHON_INSTALL_DIR") or data / "uv" / "python")
    for folder in _children(uv_pythons):
        python = _environment_python(folder)
        if python:
            yield python, f"uv Python {folder.name}"
    for root in (Path(environ["WORKON_HOME"]) if environ.get("WORKON_HOME") else home / ".virtualenvs", home / "venvs", home / ".venvs",
                 home / "envs"):
        for folder in _children(root):
            python = _environment_python(folder)
            if python:
                yield python, f"{_shown(root, home)}/{folder.name}"


def _pyenv_shim(root: Path, environ: dict, cwd: str) -> Optional[str]:
    """The interpreter a pyenv shim runs, as `pyenv version-name` picks it: $PYENV_VERSION, else the
    nearest .python-version up from the working folder, else ROOT/version; None for `system` (the
    next python on PATH) and for any other shim folder (asdf's...)."""
    if not (root / "versions").is_dir():
        return None
    name = environ.get("PYENV_VERSION")
    if not name:
        here = Path(cwd)
        for folder in (here, *here.parents):
            lines = _lines(folder / ".python-version")
            if lines:
                name = lines[0]
                break
        else:
            lines = _lines(root / "version")
            name = lines[0] if lines else None
    name = (name or "").split(":")[0].strip()
    if not name or name == "system" or "/" in name or name.startswith("."):
        return None
    return _environment_python(root / "versions" / name)


def _conda(environ: dict, home: Path) -> Iterator[tuple[str, str]]:
    roots: list[Path] = []
    for variable in ("CONDA_EXE", "MAMBA_EXE"):
        if environ.get(variable):
            roots.append(Path(environ[variable]).parent.parent)  # ROOT/bin/conda, ROOT/condabin/conda
    for tool in ("conda", "mamba", "micromamba"):
        path = shutil.which(tool, path=environ.get("PATH"))
        if path:
            roots.append(Path(os.path.realpath(path)).parent.parent)
    if environ.get("MAMBA_ROOT_PREFIX"):
        roots.append(Path(environ["MAMBA_ROOT_PREFIX"]))
    roots += [home / name for name in _CONDA_HOMES] + [Path("/opt/conda")]
    listed = home / ".conda" / "environments.txt"
    seen: set[str] = set()
    for root in roots:
        if str(root) in seen or not (root / "conda-meta").is_dir():
            continue
        seen.add(str(root))
        python = _environment_python(root)
        if python:
            yield python, "conda base"
        for folder in _children(root / "envs"):
            python = _environment_python(folder)
            if python:
                yield python, f"conda env {folder.name}"
    for folder in _children(home / ".conda" / "envs"):
        python = _environment_python(folder)
        if python:
            yield python, f"conda env {folder.name}"
    for line in _lines(listed):
        folder = Path(line)
        python = _environment_python(folder) if folder.is_absolute() else None
        if python:
            yield python, "conda base" if (folder / "condabin").is_dir() else f"conda env {folder.name}"


# ---------------------------------------------------------------- reading one environment


def _too_old(version: Optional[str]) -> Optional[str]:
    """Why an environment's Python cannot be checked (its probes would not start there), or None:
    a version read from its folders below the probes' floor. An unknown version is offered."""
    try:
        older = version is not None and tuple(int(x) for x in version.split(".")[:2]) < TARGET_PYTHON_FLOOR
    except ValueError:
        return None
    return f"Python {version} is {TOO_OLD}" if older else None


def torch_of(python: str, environ: Optional[dict] = None) -> Optional[str]:
    """The torch version installed for this interpreter, from its folders alone (nothing imported)."""
    return _read(python, dict(os.environ if environ is None else environ))[1]


def python_of(prefix: str) -> Optional[str]:
    """The interpreter of an environment folder (a venv, a conda env, /usr/local), where it is here."""
    try:
        folder = Path(prefix)
        return _environment_python(folder) if folder.is_absolute() and folder.is_dir() else None
    except (OSError, ValueError):
        return None


def _read(python: str, environ: dict) -> tuple[Optional[str], Optional[str]]:
    """(Python version "3.11", torch version or None) from the environment's folders alone."""
    version = None
    for folder in _site_folders(python, environ):
        m = _VERSION_DIR.match(folder.parent.name)
        version = version or (m.group(1) if m else None)
        torch = _torch_in(folder)
        if torch:
            return version or _version_of(python), torch
    return version or _version_of(python), None


def _site_folders(python: str, environ: dict) -> list[Path]:
    """Where this interpreter imports installed packages from, as its site module would put them
    on sys.path: a venv's own site-packages (and its base's where pyvenv.cfg includes them), else
    the prefix's site- and dist-packages (Debian's too) and the user's site-packages."""
    exe = Path(python)
    root = _root(exe)
    cfg = _pyvenv(root)
    version = cfg.get("version") or cfg.get("version_info")
    version = ".".join(version.split(".")[:2]) if version else None
    folders = _prefix_sites(root, version)
    if cfg:
        if cfg.get("include-system-site-packages", "").lower() == "true" and cfg.get("home"):
            folders += _prefix_sites(Path(cfg["home"]).parent, version)
        return folders
    real = Path(os.path.realpath(exe))
    version = version or _version_of(python)
    real_root = real.parent.parent
    if real_root != root:
        folders += _prefix_sites(real_root, version)
    if version:
        user = Path(environ.get("PYTHONUSERBASE") or Path(environ.get("HOME") or Path.home()) / ".local")
        folders.append(user / "lib" / f"python{version}" / "site-packages")
    return folders


def _prefix_sites(root: Path, version: Optional[str]) -> list[Path]:
    if version:
        libs = [root / lib / f"python{version}" for lib in ("lib", "lib64")] + [root / "local" / "lib" / f"python{version}"]
    else:
        libs = [p for lib in ("lib", "lib64") for p in _children(root / lib) if _VERSION_DIR.match(p.name)]
    folders = [lib / name for lib in libs for name in ("site-packages", "dist-packages")]
    folders += [root / "lib" / "python3" / "dist-packages", root / "Lib" / "site-packages"]
    return folders


def _torch_in(folder: Path) -> Optional[str]:
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith("torch-"):
                    m = _TORCH.match(entry.name)
                    if m and entry.is_dir():
                        return m.group("version")
    except OSError:
        pass
    return None


def _version_of(python: str) -> Optional[str]:
    """X.Y from the interpreter's own name (python3.11, where `python3` points) or its prefix's
    conda-meta record of python, else the one lib/pythonX.Y folder of its prefix."""
    real = Path(os.path.realpath(python))
    m = _VERSION_DIR.match(real.name)
    if m:
        return m.group(1)
    root = _root(Path(python))
    for entry in _children(root / "conda-meta"):
        m = re.match(r"^python-(\d+\.\d+)\.", entry.name)
        if m:
            return m.group(1)
    found = {m.group(1) for p in _children(root / "lib") for m in [_VERSION_DIR.match(p.name)] if m}
    return found.pop() if len(found) == 1 else None


def _root(exe: Path) -> Path:
    """The environment folder of an interpreter: ROOT/bin/python, ROOT/Scripts/python.exe, ROOT/python.exe."""
    return exe.parent.parent if exe.parent.name in ("bin", "Scripts") else exe.parent


def _pyvenv(root: Path) -> dict[str, str]:
    out = {}
    for line in _lines(root / "pyvenv.cfg"):
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


# ---------------------------------------------------------------- small helpers


def _is_environment(folder: Path) -> bool:
    try:
        return (folder / "pyvenv.cfg").is_file() or (folder / "conda-meta").is_dir()
    except OSError:
        return False


def _environment_python(folder: Path) -> Optional[str]:
    for name in ("bin/python", "bin/python3", "Scripts/python.exe", "python.exe"):
        python = _executable(folder / name)
        if python:
            return python
    return None


def _executable(path: Path) -> Optional[str]:
    try:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path.absolute())
    except OSError:
        pass
    return None


def _key(python: str) -> tuple:
    """One environment, whichever of its names: a venv is its folder (its bin/python links to the
    base interpreter); any other Python is the binary its name resolves to (/bin/python3 and
    /usr/bin/python3 of a merged /usr are one)."""
    root = _root(Path(python))
    if _pyvenv(root):
        return _key_of_prefix(str(root))
    return ("python", os.path.realpath(python))


def _key_of_prefix(prefix: str) -> tuple:
    return ("venv", os.path.realpath(prefix))


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())[:MAX_CANDIDATES]
    except OSError:
        return []


def _lines(path: Path) -> list[str]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(_LIST_MAX_BYTES)
    except OSError:
        return []
    return [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip() and not line.startswith("#")]


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _shown(folder: Path, home: Path) -> str:
    try:
        return "~/" + str(folder.relative_to(home))
    except ValueError:
        return str(folder)
