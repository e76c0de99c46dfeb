"""Judgements of a build-cause match from the text's own facts: a "built for another torch" reading
whose text names the same torch on both sides (or a CPU-only torch against a CUDA build), and a "torch lacks this GPU's kernels" reading whose
text names a torch wheel that has them (the reason the reading is unlikely) or one that cannot have
them (the reason it is confirmed). Each returns its reason, or None."""

from __future__ import annotations

from typing import Optional

from packaging.version import InvalidVersion, Version

from ..facts import Facts
from ..rules.model import Rule


def torch_side_clears_the_build(rule: Rule, captures: dict, evidence: dict) -> Optional[str]:
    """A "built for another torch" match whose text clears the build, said as the reason: the same
    torch on both sides ("built for: PyTorch 2.0.1 ... (you have 2.0.1)"), or a CPU-only torch on
    the installed side of an extension built for a CUDA one (the torch is what to change)."""
    built, have = captures.get("built_torch"), captures.get("torch") or evidence.get("torch")
    if rule.cause != "build-mismatch" or not built or not have or have == "?":
        return None
    if captures.get("built_python") and captures.get("python") and captures["built_python"] != captures["python"]:
        return None  # built for another Python: the same torch on both sides does not clear the build
    base_built, _, local_built = str(built).partition("+")
    base_have, _, local_have = str(have).partition("+")
    if base_built == base_have and local_have == "cpu" and local_built.startswith("cu"):
        return (f"the extension was built for this torch release's CUDA build ({built}) and the installed one is its "
                f"CPU-only build ({have}): the torch is what to change (a CUDA build of {base_have}), not the extension")
    if local_have == "cpu" and local_built.startswith("cu"):
        return (f"the installed torch is a CPU-only build ({have}): no extension built for CUDA ({built}) runs on it, and "
                f"nothing on the GPU does; a CUDA build of torch comes first (of {base_built}, the release the extension "
                "was built for)")
    if str(built) != str(have):
        return None  # another release, or another build of it (+cu121 against +xpu)
    return (f"the text names the same torch on both sides ({built}): the extension was not built for another "
            "torch; it fails to load for another reason (no CUDA on this machine: macOS or a CPU-only torch; another Python; a "
            "CUDA runtime missing)")


def _build_cudas(log_facts: Facts, data: dict) -> list[Version]:
    """The CUDA releases the text's torch may have been built with: the wheel's own CUDA where the
    text says it (+cu121, "CUDA used to build PyTorch", conda's cudatoolkit), else every CUDA of the
    release's official wheels (data.torch_release_cudas) for a version without a local tag (pip's
    default wheel on Linux). Empty for a source, CPU or untagged pre-release build (+git..., +cpu,
    2.4.0a0: no official wheel's architecture list), a +cuXYZ tag whose CUDA was not read, or a
    release the table does not know."""
    version = log_facts.torch.version or ""
    base, _, local = version.partition("+")
    try:
        if version and not (local.startswith("cu") or not (local or Version(base).is_prerelease)):
            return []
        if log_facts.torch.cuda:
            return [Version(log_facts.torch.cuda)]
        if local or not base:
            return []
        return [Version(str(c)) for c in data.get("torch_release_cudas", {}).get(".".join(base.split(".")[:2]), [])]
    except InvalidVersion:
        return []


def _wheel_and_gpus(rule: Rule, log_facts: Facts, data: dict) -> Optional[tuple[str, list[Version], list[str]]]:
    """(torch's version, the CUDA releases its wheel may have been built with, the GPUs'
    capabilities) the text names, for a "torch lacks this GPU's architecture" match; None where it
    names no torch or no GPU, or no CUDA of the build is known (_build_cudas)."""
    if rule.when is None or rule.when.check != "torch_arch_missing":
        return None
    version = log_facts.torch.version or ""
    caps = log_facts.gpu_capabilities() or []
    cudas = _build_cudas(log_facts, data) if version and caps else []
    return (version, cudas, caps) if cudas else None


def _sm(caps) -> str:
    return ", ".join(dict.fromkeys("sm" + c.replace(".", "") for c in caps))


def _wheels(version: str, cudas: list[Version]) -> str:
    if len(cudas) == 1:
        return f"torch {version}"
    return f"torch {version}, whose official wheels are built with CUDA {', '.join(str(c) for c in cudas)}"


def _covered(cuda: Version, data: dict) -> set[str]:
    return {str(c) for row in data.get("torch_wheel_kernels", {}).get("rows", [])
            if cuda >= Version(str(row.get("cuda")))
            and ("cuda_before" not in row or cuda < Version(str(row["cuda_before"])))
            for c in row.get("capabilities", [])}


def torch_has_the_kernels(rule: Rule, captures: dict, log_facts: Facts, data: dict) -> Optional[str]:
    """A "torch lacks this GPU's architecture" match where the text names an official CUDA wheel of
    torch (or a release all of whose CUDA wheels qualify) and a GPU that every such wheel has
    kernels for (data.torch_wheel_kernels): the kernels missing are another library's, said as the
    reason. Not for a runtime compiler's refusal (a `runtime_compiler` capture): NVRTC compiles for
    the GPU's own architecture, which a wheel's CUDA may not know though its kernels run there
    (sm_86 code on an sm_89 GPU)."""
    named = _wheel_and_gpus(rule, log_facts, data)
    if named is None or captures.get("runtime_compiler"):
        return None
    version, cudas, caps = named
    try:
        if not all(c in _covered(cuda, data) for cuda in cudas for c in caps):
            return None
    except InvalidVersion:
        return None
    return (f"the text names {_wheels(version, cudas)}; each carries kernels for {_sm(caps)}: the kernels missing "
            "are another library's (an extension built without this GPU's architecture)")


def _lacks(cuda: Version, caps: list[str], data: dict) -> Optional[str]:
    for row in data.get("torch_wheel_lacks", {}).get("rows", []):
        if "cuda_from" in row and cuda < Version(str(row["cuda_from"])):
            continue
        if "cuda_before" in row and cuda >= Version(str(row["cuda_before"])):
            continue
        if all(("below" not in row or Version(c) < Version(str(row["below"])))
               and ("from" not in row or Version(c) >= Version(str(row["from"]))) for c in caps):
            return str(row.get("why", "its CUDA builds no code for it"))
    return None


def torch_wheel_lacks_the_kernels(rule: Rule, log_facts: Facts, data: dict) -> Optional[str]:
    """A "torch lacks this GPU's architecture" match where the text names a torch wheel (or a
    release none of whose CUDA wheels can) whose CUDA cannot build code for the GPU the text names
    (data.torch_wheel_lacks): confirmed, said why."""
    named = _wheel_and_gpus(rule, log_facts, data)
    if named is None:
        return None
    version, cudas, caps = named
    try:
        whys = [_lacks(cuda, caps, data) for cuda in cudas]
    except InvalidVersion:
        return None
    if not whys or not all(whys):
        return None
    return f"the text names {_wheels(version, cudas)} and a GPU of {_sm(caps)}: {whys[-1]}"


def runtime_compiler_predates_the_gpu(rule: Rule, captures: dict, log_facts: Facts, data: dict) -> Optional[str]:
    """A runtime compiler's refusal of the GPU's architecture (a `runtime_compiler` capture) where
    the text names a torch wheel whose CUDA is older than the first CUDA that compiles for the GPU
    (data.cuda_compiles_for): confirmed, said why."""
    named = _wheel_and_gpus(rule, log_facts, data) if captures.get("runtime_compiler") else None
    if named is None:
        return None
    version, cudas, caps = named
    cuda = max(cudas)
    try:
        # from torch 2.0 on, torch asks its NVRTC only for architectures that NVRTC knows (a newer
        # GPU gets the newest it has, pytorch#87618): the refusal is then another runtime
        # compiler's (CuPy, numba, an extension's)
        if Version(version.partition("+")[0]) >= Version("2.0"):
            return None
    except InvalidVersion:
        return None
    first = {str(row.get("capability")): str(row.get("cuda")) for row in data.get("cuda_compiles_for", {}).get("rows", [])}
    try:
        late = [(c, first[c]) for c in caps if c in first and cuda < Version(first[c])]
    except InvalidVersion:
        return None
    if not late:
        return None
    built = f"torch {version}, built with CUDA {cuda}" if len(cudas) == 1 else _wheels(version, cudas)
    return (f"the text names {built}, and a GPU of {_sm([c for c, _ in late])}: "
            f"CUDA compiles for it from {late[0][1]} on, so the runtime compiler torch brings cannot generate its code")


# CUDA 11.0 first came out (as a release candidate) in May 2020: a torch conda build started before
# then was built with CUDA 10.2 (the newest before it) or older
_CUDA_11_OUT = "2020-05-01"
_NEWEST_BEFORE_CUDA_11 = Version("10.2")
_AMPERE = ["8.0"]


def torch_build_predates_gpu(log_facts: Facts, versions, data: dict) -> Optional[tuple[str, str]]:
    """A CUDA library's failure to execute (cuDNN's or cuBLAS's EXECUTION_FAILED, which a bad input
    or a faulty kernel give as well) read as torch's build lacking the GPU's code only where the text
    names a torch whose CUDA cannot build code for the GPU (data.torch_wheel_lacks; a torch conda
    build dated before CUDA 11 came out counts as CUDA 10.2): confirmed with such a GPU named,
    possible with none named where the build has no Ampere code (the GPUs such builds met most),
    and no reading with only GPUs named that the build has code for."""
    version = log_facts.torch.version or ""
    cudas = _build_cudas(log_facts, data)
    built = f"torch {version}, built with CUDA {cudas[0]}" if len(cudas) == 1 and version else (
        f"a torch built with CUDA {cudas[0]}" if len(cudas) == 1 else _wheels(version, cudas) if cudas else "")
    early = [d for d in versions.torch_built if d < _CUDA_11_OUT]
    if not cudas and early and "+cpu" not in version:
        cudas = [_NEWEST_BEFORE_CUDA_11]
        built = f"a torch conda build of {early[-1]} (the date its build path shows), before CUDA 11 came out"
    caps = [c for c in (log_facts.gpu_capabilities() or []) if c]
    try:
        whys = [_lacks(cuda, caps or _AMPERE, data) for cuda in cudas]
    except InvalidVersion:
        return None
    if not whys or not all(whys):
        return None
    if caps:
        return "confirmed", f"the text names {built} and a GPU of {_sm(caps)}: {whys[-1]}"
    return ("possible", f"the text names {built}: {whys[-1]}; cuDNN and cuBLAS then fail to execute exactly so. "
            "The GPU is not named: on an older one the cause is elsewhere")


FACT_JUDGEMENTS = {"torch_build_predates_gpu": torch_build_predates_gpu}


def read_by_facts(rule: Rule, captures: dict, needs: set, log_facts: Facts, versions, data: dict) -> Optional[tuple]:
    """What the text's own facts make of a match: where every line matched needs a facts judgement
    (`needs`, the signatures' `facts`, without None), that judgement's (likelihood, reason), or ()
    where it reads nothing (no match); else a confirmation that the torch wheel named cannot carry
    the GPU's code, or None (the match stays as the message made it)."""
    if None not in needs:
        return next(filter(None, (FACT_JUDGEMENTS[name](log_facts, versions, data) for name in sorted(needs))), ())
    lacks = torch_wheel_lacks_the_kernels(rule, log_facts, data) or runtime_compiler_predates_the_gpu(rule, captures, log_facts, data)
    return ("confirmed", lacks) if lacks else None
