"""recipes/numerics.toml's checks: kernels that run but compute wrong numbers.

Measured: the numerics sweep's results (attn_doctor/probes/target/numerics_child.py), one finding per
kernel: SDPA's cuDNN kernel (AD704), SDPA's other kernels (AD705), the attention libraries and
compiled attention (AD706). A kernel is graded by what the job meets: an error where SDPA's default
dispatch picks it for the failing calls (or where the job calls the library itself), a note where it
runs only when forced; rows that see no key get a warning (they hold padding, which the loss
ignores, but the wrong values flow on through later layers).

Known: each public bug of the family as a rule over versions, the GPU, SDPA's choice and what the
job does (recipes' data table `numerics_bugs`): the off-GPU shadow of the measurement, for
`check --gpu`, `--from-report` and nodes where the sweep did not run. Where the sweep ran, its
measurement decides: a known bug whose cases ran clean here is not reported.
"""

from __future__ import annotations

import collections
import math
import re
from typing import Any, Optional

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ...facts import MODULE_DISTRIBUTIONS, Facts, NumericsResult
from ..conditions import SkipRule
from .common import kernels_not_run

DIRECTION = {"out": "forward", "dq": "dQ", "dk": "dK", "dv": "dV"}
DTYPE = {"float16": "fp16", "bfloat16": "bf16"}
# SDPA's kernels as the sweep names them -> (words, the switch that turns it off, its SDPBackend member)
SDPA_KERNELS = {
    "sdpa-cudnn": ("SDPA's cuDNN kernel", "torch.backends.cuda.enable_cudnn_sdp(False)", "CUDNN_ATTENTION"),
    "sdpa-flash": ("SDPA's flash kernel", "torch.backends.cuda.enable_flash_sdp(False)", "FLASH_ATTENTION"),
    "sdpa-mem-efficient": ("SDPA's memory-efficient kernel", "torch.backends.cuda.enable_mem_efficient_sdp(False)",
                           "EFFICIENT_ATTENTION"),
    "sdpa-math": ("SDPA's math kernel", "torch.backends.cuda.enable_math_sdp(False)", "MATH"),
}
LIBRARY_WORDS = {"flash_attn": "flash-attn (FlashAttention 2)", "flash_attn_3": "FlashAttention 3",
                 "flash_attn_4": "FlashAttention 4 (flash-attn-4)", "xformers": "xformers",
                 "sageattention": "SageAttention", "flex-compiled": "flex_attention compiled by torch.compile"}
LIBRARY_MODULES = {"flash_attn": "flash_attn", "flash_attn_3": "flash_attn_interface", "flash_attn_4": "flash_attn_4",
                   "xformers": "xformers", "sageattention": "sageattention", "flex-compiled": "triton"}
# A known bug's trigger keys that name head dims of the model (judged against a config's head dims;
# an MLA trigger also needs v's head dim, which a config's `head_dim` does not give).
_SHAPE_KEYS = {"head_dims", "head_dim_not_multiple_of"}
# Rows that see no key: SDPA promises zeros there; a kernel that differs hurts only through later layers.
SOFT_MASKS = ("fully-masked",)


def _swept(facts: Facts) -> list[NumericsResult]:
    if facts.smoke.status == "skipped":
        if facts.quick:
            raise SkipRule("the numerics sweep needs the full check (--quick)")
        raise SkipRule(kernels_not_run(facts, "numerics sweep"))
    if not facts.smoke.numerics:
        raise SkipRule("no numerics sweep ran (a report from an attn-doctor before it)")
    return facts.smoke.numerics


def _count(n: int) -> str:
    return f"{n:,}"


def _directions(result: NumericsResult) -> list[str]:
    out = []
    for name, d in result.directions.items():
        word = DIRECTION.get(name, name)
        if d.missing:
            out.append(f"no {word}")
        elif d.nonfinite:
            out.append(f"{word}: {_count(d.nonfinite)} of {_count(d.size or d.nonfinite)} values NaN or inf")
        elif d.err is not None and d.allowed:
            out.append(f"{word}: error {d.err:.3g}, {d.err / d.allowed:.0f}x the tolerance")
    return out


def _bugs_by_case(data: dict, kernel: str) -> dict[str, tuple[str, dict]]:
    """case name -> (bug id, bug) for the known bugs of this kernel."""
    out = {}
    for bug_id, bug in (data.get("numerics_bugs") or {}).items():
        if bug.get("kernel") == kernel:
            for case in bug.get("cases", []):
                out.setdefault(case, (bug_id, bug))
    return out


def _is_soft(facts: Facts, case: str) -> bool:
    known = facts.smoke.numerics_cases.get(case)
    return bool(known and known.mask in SOFT_MASKS)


def config_head_dims(facts: Facts) -> list[int]:
    """The head dims of the models the configs given train (their `head_dim` setting), if any."""
    out = []
    for config in facts.configs:
        value = config.settings.get("head_dim") if config.status == "ok" else None
        if isinstance(value, int) and value > 0 and value not in out:
            out.append(value)
    return out


def head_dim_meets(trigger: dict, head_dim: int, head_dim_v: Optional[int] = None) -> bool:
    """Whether a head dim (and v's, where known) meets a known bug's `trigger`."""
    if "head_dims" in trigger and head_dim not in trigger["head_dims"]:
        return False
    if "head_dim_not_multiple_of" in trigger and head_dim % int(trigger["head_dim_not_multiple_of"]) == 0:
        return False
    if "head_dim_max" in trigger and head_dim > int(trigger["head_dim_max"]):
        return False
    if trigger.get("mla_dv"):
        # Dao-AILab/flash-attention#2552: (tile_hdimv / 2) not a multiple of gcd(32, tile_hdim / 2)
        if head_dim_v is None or head_dim < 128:
            return False
        tile, tile_v = -(-head_dim // 16) * 16, -(-head_dim_v // 16) * 16
        return (tile_v // 2) % math.gcd(32, tile // 2) != 0
    return True


def trigger_words(trigger: dict) -> str:
    """What a known bug's trigger asks of the job, in words."""
    parts = []
    if trigger.get("head_dims"):
        parts.append("head dim " + ", ".join(str(d) for d in trigger["head_dims"]))
    if trigger.get("head_dim_not_multiple_of"):
        top = f" up to {trigger['head_dim_max']}" if trigger.get("head_dim_max") else ""
        parts.append(f"a head dim{top} that is not a multiple of {trigger['head_dim_not_multiple_of']}")
    if trigger.get("mla_dv"):
        parts.append("q/k head dim 128 or more with v's head dim not a multiple of 64")
    if trigger.get("strided"):
        parts.append("q, k, v strided views (a fused QKV projection, a transpose)")
    if trigger.get("backward"):
        parts.append("training (the backward)")
    return ", ".join(parts)


def _kernel_failures(facts: Facts, data: dict, backend: str, results: list[NumericsResult]) -> Optional[dict]:
    """The evidence for one kernel's wrong results: what failed where, graded."""
    wrong = [r for r in results if r.backend == backend and r.status == "wrong"]
    if not wrong:
        return None
    bugs = _bugs_by_case(data, backend)
    groups: dict[str, dict[str, Any]] = {}
    for r in wrong:
        bug_id, bug = bugs.get(r.case, (None, None))
        key = bug_id or r.case
        case = facts.smoke.numerics_cases.get(r.case)
        group = groups.setdefault(key, {"cls": (bug or {}).get("cls") or (case.cls if case else r.case), "dtypes": [],
                                        "directions": {}, "default": False, "picked": False, "soft": True,
                                        "source": (bug or {}).get("source"), "bug": bug_id, "cases": [],
                                        "trigger": (bug or {}).get("trigger") or {}})
        group["dtypes"].append(DTYPE.get(r.dtype, r.dtype))
        group["cases"].append(r.case)
        for text in _directions(r):
            group["directions"].setdefault(text.split(":")[0], text)
        group["default"] = group["default"] or r.default is not None
        group["picked"] = group["picked"] or r.default == backend
        group["soft"] = group["soft"] and _is_soft(facts, r.case)
    library = not backend.startswith("sdpa-")
    parts, severity = [], "info"
    for group in sorted(groups.values(), key=lambda g: (g["soft"], not (g["picked"] or library))):
        text = f"{', '.join(group['directions'].values())} at {group['cls']} ({', '.join(dict.fromkeys(group['dtypes']))}"
        if not library:
            text += ("; SDPA picks it by default there" if group["picked"] else
                     "; SDPA's default picks another kernel there: it runs only when forced")
        graded = "info" if not (group["picked"] or library) else ("warning" if group["soft"] else "error")
        if library and _SHAPE_KEYS & set(group["trigger"]):
            # a known bug's own shapes (a head dim few models have): graded by the job's head dims
            dims = config_head_dims(facts)
            meeting = [d for d in dims if head_dim_meets(group["trigger"], d)]
            if not dims:
                text += f"; it hurts only where the job has {trigger_words(group['trigger'])}"
                graded = "warning" if graded == "error" else graded
            elif not meeting:
                text += f"; the config's model has head dim {', '.join(map(str, dims))}, which it does not hurt"
                graded = "info"
            else:
                text += f"; the config's model has head dim {', '.join(map(str, meeting))}"
        if group["source"]:
            text += f"; {_short_link(group['source'])}"
        parts.append(text + ")")
        severity = min(severity, graded, key=("error", "warning", "info").index)
    cases = sorted({c for g in groups.values() for c in g["cases"]})
    clean = _clean_kernels(results, backend, cases)
    return {"severity": severity, "summary": "; ".join(parts), "kernel": backend,
            "known": " ".join(dict.fromkeys(g["source"] for g in groups.values() if g["source"])),
            "bugs": " ".join(dict.fromkeys(g["bug"] for g in groups.values() if g["bug"])),
            "cases": " ".join(cases), "clean": ", ".join(clean) if clean else ""}


def _short_link(url: str) -> str:
    m = re.match(r"https://github\.com/([^/]+/[^/]+)/(?:issues|pull)/(\d+)", url)
    return f"{m.group(1)}#{m.group(2)}" if m else url


def _clean_kernels(results: list[NumericsResult], backend: str, cases: list[str]) -> list[str]:
    """SDPA's other kernels that ran every failing case and were right: what SDPA runs instead."""
    out = []
    for other in SDPA_KERNELS:
        if other in (backend, "sdpa-math"):
            continue
        mine = [r for r in results if r.backend == other and r.case in cases]
        if mine and all(r.status in ("ok", "refused") for r in mine) and any(r.status == "ok" for r in mine):
            out.append(other)
    return out + (["sdpa-math"] if backend != "sdpa-math" else [])


def _skip_smoke_failed(facts: Facts, backend: str) -> bool:
    # a kernel whose smoke test already failed is AD701's (or AD703's) finding: one cause, one finding
    return any(r.backend == backend and r.status in ("wrong", "error") for r in facts.smoke.results)


def cudnn_numerics(facts: Facts, data: dict) -> Optional[dict]:
    """SDPA's cuDNN kernel computed wrong numbers in the sweep."""
    results = _swept(facts)
    if _skip_smoke_failed(facts, "sdpa-cudnn"):
        return None
    evidence = _kernel_failures(facts, data, "sdpa-cudnn", results)
    if evidence is None:
        return None
    evidence.update(_sdpa_remedy_words(facts, "sdpa-cudnn", evidence))
    evidence["packages"] = "torch " + " ".join(d for d in ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12") if facts.version_of(d))
    evidence["cudnn"] = cudnn_words(facts)
    return evidence


def sdpa_numerics(facts: Facts, data: dict) -> Optional[dict]:
    """SDPA's flash, memory-efficient or math kernel computed wrong numbers in the sweep (the
    first that did; the others are named)."""
    results = _swept(facts)
    failing = [b for b in SDPA_KERNELS if b != "sdpa-cudnn" and not _skip_smoke_failed(facts, b)
               and any(r.backend == b and r.status == "wrong" for r in results)]
    if not failing:
        return None
    found = [e for e in (_kernel_failures(facts, data, b, results) for b in failing) if e]
    found.sort(key=lambda e: ("error", "warning", "info").index(e["severity"]))
    evidence = dict(found[0])
    if len(found) > 1:
        evidence["summary"] += "; also " + "; ".join(f"{SDPA_KERNELS[e['kernel']][0]}: {e['summary']}" for e in found[1:])
    evidence.update(_sdpa_remedy_words(facts, evidence["kernel"], evidence))
    evidence["packages"] = "torch"
    return evidence


def library_numerics(facts: Facts, data: dict) -> Optional[dict]:
    """An attention library's kernel (flash-attn, FlashAttention 3, xformers, SageAttention) or
    compiled flex_attention computed wrong numbers in the sweep."""
    results = _swept(facts)
    names = [b for b in dict.fromkeys(r.backend for r in results) if not b.startswith("sdpa-") and not _skip_smoke_failed(facts, b)]
    found = [e for e in (_kernel_failures(facts, data, b, results) for b in names) if e]
    if not found:
        return None
    evidence = dict(found[0])
    for e in found[1:]:
        evidence["summary"] += f"; {LIBRARY_WORDS.get(e['kernel'], e['kernel'])}: {e['summary']}"
    evidence["kernel_words"] = LIBRARY_WORDS.get(evidence["kernel"], evidence["kernel"])
    dists = []
    for e in found:
        module = LIBRARY_MODULES.get(e["kernel"], e["kernel"])
        dists += [d for d in MODULE_DISTRIBUTIONS.get(module, (module,)) if facts.version_of(d)] or [module]
    evidence["packages"] = " ".join(dict.fromkeys(dists))
    evidence["library"] = dists[0] if dists else evidence["kernel"]
    return evidence


def _sdpa_remedy_words(facts: Facts, backend: str, evidence: dict) -> dict:
    words, disable, _member = SDPA_KERNELS[backend]
    clean = [b for b in evidence.get("clean", "").split(", ") if b]
    members = ", ".join(f"SDPBackend.{SDPA_KERNELS[b][2]}" for b in clean) or "SDPBackend.MATH"
    short = {"sdpa-flash": "flash", "sdpa-mem-efficient": "memory-efficient", "sdpa-math": "math", "sdpa-cudnn": "cuDNN"}
    out = {"kernel_words": words, "disable": disable, "instead": "its " + (" or ".join(short[b] for b in clean[:2]) or "math") + " kernel",
           "sdpa_kernel": f"with torch.nn.attention.sdpa_kernel([{members}]):"}
    env = cudnn_env(facts) if backend == "sdpa-cudnn" else None
    if env:
        out["env_variable"], out["env_value"] = env
    return out


# ---------------------------------------------------------------- versions of torch and cuDNN


def _version(text: Optional[str]) -> Optional[Version]:
    try:
        return Version(str(text).split("+")[0]) if text else None
    except InvalidVersion:
        return None


def torch_version(facts: Facts) -> Optional[Version]:
    return _version(facts.torch.version or facts.version_of("torch"))


def cudnn_version(facts: Facts) -> tuple[Optional[Version], str]:
    """The cuDNN SDPA runs with and where that was read: torch's own answer on the GPU
    (torch.backends.cudnn.version(), 91900), else the cuDNN wheel torch installed beside it."""
    raw = facts.torch.cudnn
    if raw and str(raw).isdigit():
        return parse_cudnn(raw), "torch.backends.cudnn.version()"
    for dist in ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12"):
        v = _version(facts.version_of(dist))
        if v is not None:
            return v, f"the {dist} wheel"
    return None, ""


def cudnn_words(facts: Facts) -> str:
    v, where = cudnn_version(facts)
    return f"cuDNN {v}" if v else "cuDNN of unknown version"


def cudnn_env(facts: Facts) -> Optional[tuple[str, str]]:
    """The variable that takes cuDNN off the top of SDPA's order in this torch (sdp_utils.cpp's
    check_prefer_cudnn_attention): TORCH_CUDNN_SDPA_DEPRIORITIZED=1 from 2.10, TORCH_CUDNN_SDPA_PREFERRED=0
    in 2.9; none before (cuDNN was never first by default, except 2.5.0)."""
    v = torch_version(facts)
    if v is None:
        return None
    if v >= Version("2.10"):
        return "TORCH_CUDNN_SDPA_DEPRIORITIZED", "1"
    if v >= Version("2.9"):
        return "TORCH_CUDNN_SDPA_PREFERRED", "0"
    return None


def cudnn_first(facts: Facts, capability: tuple[int, int]) -> Optional[str]:
    """Why SDPA's default dispatch tries cuDNN first for this torch, cuDNN and GPU, or None where it
    does not."""
    cudnn, _ = cudnn_version(facts)
    return cudnn_first_for(torch_version(facts), cudnn, facts.torch.cuda or "", facts.env, capability)


def cudnn_first_for(tv: Optional[Version], cudnn: Optional[Version], cuda: str, env: dict,
                    capability: tuple[int, int]) -> Optional[str]:
    """The same from plain values (a trace's stack): tracing/kernel_choice/sdpa_select.py emulates the order, the
    variables the user set are read here."""
    from ...tracing.kernel_choice import sdpa_select

    if tv is None:
        return None
    if tv >= Version("2.10") and str(env.get("TORCH_CUDNN_SDPA_DEPRIORITIZED", "")).lower() in ("1", "true", "on", "yes"):
        return None
    if Version("2.9") <= tv < Version("2.10") and str(env.get("TORCH_CUDNN_SDPA_PREFERRED", "")).lower() in ("0", "false", "off", "no"):
        return None
    if Version("2.5") <= tv < Version("2.5.1"):
        return "torch 2.5.0 put cuDNN first on sm90 and newer" if capability >= (9, 0) else None
    target = sdpa_select.target_for(capability, str(tv), cudnn=(cudnn.major * 10000 + cudnn.minor * 100 + cudnn.micro) if cudnn else None,
                                    cuda_major=int(cuda.split(".")[0]) if cuda[:1].isdigit() else None)
    if sdpa_select.priority_order(target)[0] != "cudnn":
        return None
    return f"torch {tv.major}.{tv.minor} puts cuDNN first on sm{capability[0]}{capability[1]}"


def parse_cudnn(raw: Any) -> Optional[Version]:
    """cuDNN's version from torch.backends.cudnn.version() (91900) or a wheel's (9.19.0.56)."""
    text = str(raw or "")
    if text.isdigit():
        n = int(text)
        return Version(f"{n // 10000}.{n // 100 % 100}.{n % 100}")
    return _version(text)


# ---------------------------------------------------------------- known bugs


def _specifier_holds(spec: Optional[str], version: Optional[Version]) -> Optional[bool]:
    if not spec:
        return True
    if version is None:
        return None
    try:
        return SpecifierSet(spec).contains(version, prereleases=True)
    except InvalidSpecifier:
        return False


def _capabilities(facts: Facts) -> list[tuple[int, int]]:
    caps = facts.gpu_capabilities()
    if caps is None:
        raise SkipRule("the GPU was not probed")
    if not caps:
        raise SkipRule("no NVIDIA GPU here (check --gpu NAME judges for the GPU the job gets)")
    out = []
    for c in caps:
        major, _, minor = str(c).partition(".")
        if major.isdigit():
            out.append((int(major), int(minor or 0) if (minor or "0").isdigit() else 0))
    return out


def _measured(facts: Facts, bug: dict) -> Optional[str]:
    """"wrong" / "clean" where the sweep ran the bug's cases on this kernel, else None."""
    mine = [r for r in facts.smoke.numerics if r.backend == bug.get("kernel") and r.case in bug.get("cases", [])]
    if not [r for r in mine if r.status in ("ok", "wrong")]:
        return None
    return "wrong" if any(r.status == "wrong" for r in mine) else "clean"


def _jobs_attention(facts: Facts) -> tuple[Optional[bool], str]:
    """Whether the configs given train attention through SDPA: (None, "") without a config; the
    framework's default implementation counts where the file names none."""
    plans = [c for c in facts.configs if c.status == "ok" and c.kind != "unknown"]
    if not plans:
        return None, ""
    through, names = False, []
    for config in plans:
        setting = config.plan.get("attention")
        value = setting.value if setting else None
        names.append(f"{config.path.rsplit('/', 1)[-1]}: attention {value or 'not set (the framework picks SDPA where it can)'}")
        if value in (None, "sdpa", "auto"):
            through = True
    return through, "; ".join(names)


def known_numerics_bug(facts: Facts, data: dict, bug_id: str) -> Optional[dict]:
    """A public bug of this family (recipes' numerics_bugs[bug_id]) whose versions, GPU and
    kernel choice this stack meets, and where the job is known, whose calls it makes."""
    bug = (data.get("numerics_bugs") or {}).get(bug_id)
    if bug is None:
        raise SkipRule(f"no knowledge of {bug_id} in the recipes")
    tv = torch_version(facts)
    if tv is None:
        raise SkipRule("the torch version is unknown")
    if not (facts.torch.cuda or "+cu" in (facts.torch.version or "") or facts.version_of("nvidia-cudnn-cu13")
            or facts.version_of("nvidia-cudnn-cu12")):
        raise SkipRule("this torch is not a CUDA build: which cuDNN the GPU nodes run is unknown")
    if not _specifier_holds(bug.get("torch"), tv):
        return None
    caps = [c for c in _capabilities(facts) if _specifier_holds(bug.get("capability"), Version(f"{c[0]}.{c[1]}"))]
    if not caps:
        return None
    cudnn, where = cudnn_version(facts)
    holds = _specifier_holds(bug.get("cudnn"), cudnn)
    if holds is False:
        return None
    measured = _measured(facts, bug)
    if measured == "clean":
        return None  # the sweep ran its cases on this GPU and stack: the measurement decides
    why_first = cudnn_first(facts, caps[0]) if bug.get("kernel") == "sdpa-cudnn" else "called by the job"
    if why_first is None:
        return None
    through, plans = _jobs_attention(facts)
    if through is False:
        return None
    cap = caps[0]
    evidence = {
        "torch": str(tv), "cudnn": f"cuDNN {cudnn}" + ("" if where.startswith("torch.") else f" ({where})") if cudnn else "cuDNN of unknown version",
        "gpu": f"sm{cap[0]}{cap[1]}" + (f" ({facts.assumed_gpu.name}, assumed)" if facts.assumed_gpu else ""),
        "why": why_first, "observed": bug.get("observed", ""), "fixed": bug.get("fixed") or "no release is known to fix it",
        "cls": bug.get("cls", ""), "jobs": f"; {plans}" if plans else "", "packages": "torch",
        "measured": "The numerics sweep measured it here" if measured == "wrong" else "Not measured here (no numerics sweep ran)",
    }
    if cudnn is None:
        evidence["cudnn"] = "cuDNN of unknown version (affected: " + str(bug.get("cudnn")) + ")"
    env = cudnn_env(facts)
    if env:
        evidence["env_variable"], evidence["env_value"] = env
    return evidence


def cudnn_kv_tile_nan(facts: Facts, data: dict) -> Optional[dict]:
    return known_numerics_bug(facts, data, "AD710")


def cudnn_default_torch_250(facts: Facts, data: dict) -> Optional[dict]:
    return known_numerics_bug(facts, data, "AD712")


# ---------------------------------------------------------------- known bugs of the libraries

# A distribution some environments install under another name (Transformer Engine's metapackage,
# or only its framework part).
DIST_ALTERNATIVES = {"transformer-engine": ("transformer-engine", "transformer-engine-torch", "transformer-engine-cu12",
                                            "transformer-engine-cu13")}


def _kernel_words(backend: str) -> str:
    return SDPA_KERNELS[backend][0] if backend in SDPA_KERNELS else LIBRARY_WORDS.get(backend, backend)


def numerics_not_measured(facts: Facts, data: dict) -> Optional[dict]:
    """The sweep's cases whose call raised instead of running: each kernel and case once, with what
    it raised and the dtypes it raised in. Their numbers are unknown, never passed. A kernel that
    raised at every case it was called on is said once, with the cause where it is known (its
    compiled extension does not load: AD312's)."""
    from .smoke import _unloaded_build

    swept = _swept(facts)
    raised: dict[tuple, list[str]] = {}
    called: dict[str, set] = {}
    for r in swept:
        if r.status != "n/a":
            called.setdefault(r.backend, set()).add(r.case)
        if r.status == "error":
            said = (r.error or "").strip().splitlines()
            dtypes = raised.setdefault((r.backend, r.case, said[0][:200] if said else ""), [])
            if DTYPE.get(r.dtype, r.dtype) not in dtypes:
                dtypes.append(DTYPE.get(r.dtype, r.dtype))
    if not raised:
        return None
    failed_cases: dict[str, set] = {}
    for backend, case, _ in raised:
        failed_cases.setdefault(backend, set()).add(case)
    # a kernel that raised at each case it was called on (more than one): not a case's trouble
    whole = {b for b, cases in failed_cases.items() if len(cases) > 1 and cases == called.get(b, set())}
    parts = []
    for backend in dict.fromkeys(b for b, _, _ in raised if b in whole):  # in the sweep's order
        errors = collections.Counter(e for (b, _, e) in raised if b == backend)
        dtypes = list(dict.fromkeys(d for (b, _, _), ds in raised.items() if b == backend for d in ds))
        first = errors.most_common(1)[0][0]  # the commonest; among equals the first the sweep met
        others = f" (and {len(errors) - 1} other error{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        what = (f"raised '{first}'" if first else "raised without a message") + others
        parts.append(f"{_kernel_words(backend)} at every case it was called on ({len(failed_cases[backend])} cases, {', '.join(dtypes)}) "
                     f"{what}{_unloaded_build(facts, backend)}")
    for (backend, case, error), dtypes in raised.items():
        if backend in whole:
            continue
        known = facts.smoke.numerics_cases.get(case)
        shape = f": {known.cls}" if known is not None and known.cls else ""
        what = f"raised '{error}'" if error else "raised without a message"
        parts.append(f"{_kernel_words(backend)} at {case} ({', '.join(dtypes)}{shape}) {what}")
    # the distributions whose kernels raised: a finding that says their cause (AD312: the compiled
    # extension does not load) covers this one
    from ...probes.target.gpu_child import LIBRARIES

    packages = []
    for backend in dict.fromkeys(b for b, _, _ in raised):
        module = LIBRARIES.get(backend)
        packages += list(MODULE_DISTRIBUTIONS.get(module, (module,))) if module else ["torch"]
    return {"count": len(raised), "cases_said": "; ".join(parts), "packages": ", ".join(dict.fromkeys(packages))}


# The checks recipes name (the registry in __init__.py collects them). AD711 and AD713 need the
# job's shapes (one query row; grouped-query heads): the tracer judges them at a call.
# The libraries' known bugs (AD714-AD717) are known_bugs.py's.
CHECKS = (cudnn_numerics, sdpa_numerics, library_numerics, cudnn_kv_tile_nan, cudnn_default_torch_250, numerics_not_measured)
