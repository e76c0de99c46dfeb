"""A kernel's refusal judged against the support matrix (attn_doctor/support): the facts the text
states (rules/support_facts.py: the kernel, the GPU, the head size, the dtype, the feature) and the
GPUs and versions the whole log shows. Where the matrix says a stated fact is one the kernel does not
support, that is the reason, with the remedy the matrix knows (another kernel that supports it, the
release that added it, the dtype that works). Where it says the facts are supported, or a fact is
unknown, the matrix gives no reason and the match is dropped: never a guess. One exception, which
guesses nothing: a refusal that is itself about the architecture ("Unsupported architecture") where
no GPU is named anywhere: the text states the fact, the matrix adds what the kernel is built for."""

from __future__ import annotations

import re
from typing import Optional

from ..support import DTYPE_WORDS, FEATURE_WORDS, Kernel, arch_of, matrix, sm_name

# Kernels offered instead, most general first, per platform: those a user can switch to by a setting.
_INSTEAD = {
    "nvidia": ("sdpa-flash", "sdpa-mem-efficient", "flash-attn-2", "xformers-cutlass", "flex-attention", "sdpa-math"),
    "amd": ("sdpa-rocm-aotriton", "flash-attn-rocm-ck", "flash-attn-rocm-triton", "sdpa-math"),
    "mps": ("sdpa-math",),
}
_FEATURE_INSTEAD = ("flash-attn-2", "flash-attn-3", "flashinfer", "vllm-flash-attn", "flex-attention", "sdpa-math")


def _arch_words(arch: tuple) -> str:
    return sm_name(arch[1]) if arch[0] == "nvidia" else arch[1] if arch[0] == "amd" else {"cpu": "the CPU", "mps": "Apple MPS"}[arch[0]]


def _target_words(arch: tuple) -> str:
    return f"this GPU's {_arch_words(arch)}" if arch[0] in ("nvidia", "amd") else _arch_words(arch)


def _archs_in_log(captures: dict, log_facts, log_amd: list[str]) -> list[tuple]:
    """The architectures the text states near the refusal, then those the log shows elsewhere."""
    out = []
    stated = arch_of(captures.get("support_arch"))
    if stated:
        out.append(stated)
    for cap in log_facts.gpu_capabilities() or []:
        a = arch_of(cap)
        if a and a not in out:
            out.append(a)
    for gfx in log_amd:
        a = arch_of(gfx)
        if a and a not in out:
            out.append(a)
    return out


def _version(kernel: Kernel, log_facts) -> Optional[str]:
    return log_facts.version_of(kernel.library)


def _release_with(kernel: Kernel, holds) -> Optional[str]:
    """The first release of the kernel's library whose rows hold a fact (`holds(row)`), from the rows'
    lower bounds: "2.7.3"."""
    for row in kernel.rows:
        if holds(row) is True:
            for part in row.versions.split(","):
                part = part.strip()
                if part.startswith(">="):
                    return part[2:].strip()
    return None


def _others(kernel: Kernel, arch: Optional[tuple], ok) -> list[str]:
    """Other kernels of the platform (the arch's vendor, else the kernel's) for which `ok(other)` holds."""
    vendor = arch[0] if arch else {"rocm": "amd", "mps": "mps"}.get(kernel.platform, "nvidia")
    names = []
    for kid in _INSTEAD.get(vendor, ()):
        other = matrix().get(kid)
        if other is None or other.id == kernel.id:
            continue
        if arch is not None and other.supports_arch(arch) is False:
            continue
        if ok(other) is True:
            names.append(other.name)
    return names[:3]


def judge(captures: dict, log_facts, log_amd: list[str]) -> Optional[dict]:
    """The matrix's verdict on a refusal the guards kept: the evidence for the match (support_reason,
    support_remedy, support_source, ...), or None where the matrix gives no reason."""
    kernel = matrix().get(captures.get("support_kernel") or "")
    kind = captures.get("support_class")
    if kernel is None or kind is None:
        return None
    version = _version(kernel, log_facts)
    archs = _archs_in_log(captures, log_facts, log_amd)
    release = f" ({kernel.library} {version})" if version else ""
    out = None
    if kind == "arch":
        out = _judge_arch(kernel, version, archs, release)
        if out is None and not archs and _REFUSES_ARCH.search(captures.get("refusal_line") or ""):
            out = _judge_unnamed_gpu(kernel, version, release, captures.get("support_dtype"))
    elif kind == "head_dim" and captures.get("support_head_dim", "").isdigit():
        out = _judge_head_dim(kernel, version, archs, int(captures["support_head_dim"]), release)
    elif kind == "dtype" and captures.get("support_dtype"):
        out = _judge_dtype(kernel, version, archs, captures["support_dtype"], release)
    elif kind == "feature" and captures.get("support_feature"):
        out = _judge_feature(kernel, version, captures["support_feature"], release)
    if out is None:
        return None
    rows = kernel.rows_for(version)
    out.setdefault("support_source", rows[-1].source if rows else kernel.rows[-1].source)
    out["support_kernel_name"] = kernel.name
    return out


_PLATFORM_OF = {"nvidia": "cuda", "amd": "rocm", "mps": "mps", "cpu": "cpu"}


def _for_platform(kernel: Kernel, arch: tuple) -> list[Kernel]:
    """The kernels that run on this architecture's platform: itself, or the same library's builds
    for that platform, its default first (flash-attn on an AMD GPU: its Composable Kernel backend,
    then its Triton one); none where the matrix has none."""
    if kernel.platform in ("any", _PLATFORM_OF[arch[0]]):
        return [kernel]
    return [k for k in matrix().kernels.values() if k.library == kernel.library and k.platform == _PLATFORM_OF[arch[0]]]


def _arch_verdict(kernel: Kernel, arch: tuple, version) -> Optional[bool]:
    verdict = kernel.supports_arch(arch, version)
    if verdict is None and kernel.platform == "any" and any(r.archs for r in kernel.rows_for(version)):
        return False  # a kernel for every platform lists each place it runs (FlexAttention's CPU from 2.6)
    return verdict


def _judge_arch(kernel: Kernel, version, archs, release) -> Optional[dict]:
    for arch in archs:
        native = _for_platform(kernel, arch)
        if not native or any(_arch_verdict(k, arch, version) is not False for k in native):
            continue  # a build the matrix does not know, or one of the library's builds runs there: no verdict
        if native[0] is not kernel:
            kernel, release = native[0], ""
        rows = kernel.rows_for(version)
        listed = ", ".join(r.arch_words() for r in rows if r.archs)
        newer = _release_with(kernel, lambda row: row.arch_holds(arch)) if version else None
        remedy = []
        if newer:
            remedy.append(f"Upgrade {kernel.library} to {newer} or newer, which supports {_arch_words(arch)}")
        others = _others(kernel, arch, lambda other: True)
        if others:
            remedy.append(("or use " if remedy else "Use ") + " / ".join(others) + (", which runs" if len(others) == 1 else ", which run") + f" on {_arch_words(arch)}")
        return {
            "support_reason": f"{kernel.name}{release} is built for {listed}, not for {_target_words(arch)}",
            "support_remedy": "; ".join(remedy) if remedy else f"Run {kernel.name} on a GPU it is built for ({listed})",
            "support_fact": _arch_words(arch),
        }
    return None


# A refusal that is itself about the GPU's architecture: with no GPU named anywhere, the matrix can
# still say what the kernel is built for and how to compare the GPU with it.
_REFUSES_ARCH = re.compile(
    r"(?i)(?:unsupported|not supported|cannot be enabled (?:except )?on|only (?:supported|available) on)\W{0,3}(?:\w+\W+){0,6}?(?:gpu |cuda |device )?arch(?:itecture)?s?\b"
    r"|\b(?:gpu |cuda |device )?arch(?:itecture)?\b[^\n]{0,30}(?:is )?(?:unsupported|not supported)")


def _judge_unnamed_gpu(kernel: Kernel, version, release, dtype: Optional[str]) -> Optional[dict]:
    rows = kernel.rows_for(version)
    listed = ", ".join(r.arch_words() for r in rows if r.archs)
    if not listed:
        return None
    narrowed = [a.text for r in rows for a in r.dtype_archs.get(dtype or "", [])]
    if narrowed:  # the refusal names a dtype the kernel runs on fewer GPUs ("FP8 FMHA cannot be enabled except on ...")
        listed = f"{DTYPE_WORDS.get(dtype, dtype)} on {', '.join(dict.fromkeys(narrowed))}"
    others = _others(kernel, None, lambda other: True)
    remedy = (f"Compare this GPU's compute capability (nvidia-smi --query-gpu=name,compute_cap --format=csv) with "
              f"what {kernel.name} is built for ({listed}): a GPU below it needs another kernel"
              + (f" ({' / '.join(others)})" if others else "")
              + f", a GPU newer than this release of {kernel.library} needs a newer release")
    return {"support_reason": f"{kernel.name}{release} refuses this GPU's architecture (the text names no GPU; "
                              f"the kernel is built for {listed})",
            "support_remedy": remedy, "support_fact": "this GPU's architecture"}


def _judge_head_dim(kernel: Kernel, version, archs, d: int, release) -> Optional[dict]:
    arch = next((a for a in archs if kernel.supports_arch(a, version) is True), None)
    if kernel.supports_head_dim(d, version, arch) is not False:
        return None
    words = "; ".join(w for w in (r.head_dim_words() for r in kernel.rows_for(version, arch)) if w)
    others = _others(kernel, arch, lambda other: other.supports_head_dim(d))
    remedy = (f"Use {' / '.join(others)}, which take head size {d}" if others
              else f"Use a model whose head size is one {kernel.name} takes ({words})")
    return {"support_reason": f"{kernel.name}{release} takes head sizes {words}; {d} is not one of them",
            "support_remedy": remedy, "support_fact": f"head size {d}"}


def _judge_dtype(kernel: Kernel, version, archs, dtype: str, release) -> Optional[dict]:
    arch = next((a for a in archs if kernel.supports_arch(a, version) is not False), archs[0] if archs else None)
    if kernel.supports_dtype(dtype, version, arch) is not False:
        return None
    works = [d for d in ("bf16", "fp16", "fp32") if d != dtype and kernel.supports_dtype(d, version, arch) is True]
    where = f" on {_arch_words(arch)}" if arch else ""
    others = _others(kernel, arch, lambda o: o.supports_dtype(dtype, None, arch))
    if works:
        remedy = f"Run it in {DTYPE_WORDS[works[0]]}, which {kernel.name} takes{where}"
    elif others:
        remedy = f"Use {' / '.join(others)}, which take {DTYPE_WORDS.get(dtype, dtype)}{where}"
    else:
        return None  # nothing the matrix knows would run it: no remedy to offer, no reason to give
    listed = ", ".join(DTYPE_WORDS[d] for r in kernel.rows_for(version, arch) for d in r.dtypes
                       if r.dtype_holds(d, arch) is not False)
    return {"support_reason": f"{kernel.name}{release} takes {listed or 'other dtypes'}{where}, not {DTYPE_WORDS.get(dtype, dtype)}",
            "support_remedy": remedy, "support_fact": DTYPE_WORDS.get(dtype, dtype)}


def _judge_feature(kernel: Kernel, version, feature: str, release) -> Optional[dict]:
    supported, since = kernel.feature(feature, version)
    if supported is not False:
        return None
    words = FEATURE_WORDS.get(feature, feature)
    if since:
        return {"support_reason": f"{words} came in {kernel.library} {since}; this is {kernel.library} {version}",
                "support_remedy": f"Upgrade {kernel.library} to {since} or newer", "support_fact": words}
    others = [matrix().get(k) for k in _FEATURE_INSTEAD]
    others = [o.name for o in others if o is not None and o.id != kernel.id and o.feature(feature)[0] is True][:3]
    remedy = (f"Use {' / '.join(others)}, which support {words}" if others else f"Turn {words} off for {kernel.name}")
    return {"support_reason": f"{kernel.name}{release} does not support {words}", "support_remedy": remedy,
            "support_fact": words}
