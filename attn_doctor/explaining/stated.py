"""Requirements a message states, judged against the facts: "requires compute capability 8.9 ...
your GPU has 8.6", "only supports Ampere GPUs or newer" with a Tesla V100 named elsewhere in the
log, "must be float16 or bfloat16 ... got torch.float32". The signatures read the statement with
the fragments of rules/signatures.py (<<floor>>, <<have>>, <<half_only>>, <<have_dtype>>); this
module decides whether the stated requirement is what failed: a floor the GPU meets, or a dtype list
that holds the tensors' dtype, is not the cause, whatever the words."""

from __future__ import annotations

import re
from typing import Optional

# an architecture named as a floor -> its first compute capability
ARCH_FLOOR = {
    "kepler": 3.0, "maxwell": 5.0, "pascal": 6.0, "volta": 7.0, "turing": 7.5, "ampere": 8.0,
    "ada": 8.9, "lovelace": 8.9, "ada lovelace": 8.9, "ada-lovelace": 8.9, "hopper": 9.0, "blackwell": 10.0,
}
_FLOAT_NAMES = {"float16": "float16", "fp16": "float16", "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16",
                "bfloat": "bfloat16", "float32": "float32", "fp32": "float32", "float": "float32", "float64": "float64",
                "double": "float64", "fp64": "float64"}


def capability(text: Optional[str]) -> Optional[float]:
    """A compute capability as written (8.9, "sm_90", "90", "120", "(7, 5)", "8") as a number; None
    for what is no capability (a version, a size)."""
    if not text:
        return None
    t = re.sub(r"(?i)^sm[_ ]?", "", text.strip()).replace(", ", ".").replace(",", ".")
    t = re.sub(r"^(\d+) (\d)$", r"\1.\2", t)  # "7 5": text-generation-inference writes a capability so
    try:
        value = float(t) if "." in t else (float(t) / 10 if len(t) >= 2 else float(t))
    except ValueError:
        return None
    return value if 3.0 <= value <= 13.0 else None


def need_capability(captures: dict) -> Optional[float]:
    for key in ("need_cc", "need_cc2", "need_cc3", "below_cc"):
        value = capability(captures.get(key))
        if value is not None:
            return value
    arch = captures.get("need_arch")
    return ARCH_FLOOR.get(arch.lower()) if arch else None


def _sm(value: float) -> str:
    return f"sm{int(round(value * 10))}"


def judge_floor(captures: dict, log_capabilities: list[str], decisive: bool = False) -> Optional[tuple[str, str]]:
    """(likelihood, reason) for a stated capability floor; None when the text states none or
    nothing shows the GPU."""
    need = need_capability(captures)
    if need is None:
        return None
    stated = capability(captures.get("have_cc") or captures.get("have_cc2"))
    if stated is not None:
        if stated < need:
            return "confirmed", f"the text states a floor of compute capability {need:.1f} and a GPU of {stated:.1f} ({_sm(stated)})"
        return "unlikely", (f"the text states a floor of compute capability {need:.1f}, and the GPU it names ({stated:.1f}) "
                            "meets it: the refusal has another cause")
    seen = [c for c in (capability(x) for x in log_capabilities) if c is not None]
    if not seen:
        return None  # nothing to judge the floor against: the message's own word stands
    below = [c for c in seen if c < need]
    if below:
        return "confirmed", (f"the text states a floor of compute capability {need:.1f}, and the log shows a GPU of "
                             f"{', '.join(_sm(c) for c in sorted(set(below)))}")
    meets = ", ".join(_sm(c) for c in sorted(set(seen)))
    if decisive:
        return "possible", (f"the text states a floor of compute capability {need:.1f}, though the log shows only GPUs that "
                            f"meet it ({meets}): another machine of the same log?")
    return "unlikely", (f"the text states a floor of compute capability {need:.1f}, and the log shows only GPUs that meet it "
                        f"({meets}): the refusal has another cause")


def judge_only_arch(captures: dict, log_capabilities: list[str]) -> Optional[tuple[str, str]]:
    """(likelihood, reason) for the architectures a kernel is built for, stated as majors ("10.x"),
    against the GPU the text or the log names; None when it states none or nothing shows the GPU."""
    exact = [float(c) for c in re.findall(r"\d+\.\d", captures.get("only_exact") or "")]
    listed = captures.get("only_majors") or captures.get("only_majors2") or captures.get("only_majors4")
    if not listed and not exact:
        return None
    majors = sorted({int(m) for m in re.findall(r"(\d+)\.x", listed or "")})
    stated = capability(captures.get("have_cc") or captures.get("have_cc2"))
    seen = [stated] if stated is not None else [c for c in (capability(x) for x in log_capabilities) if c is not None]
    if not seen:
        return None
    if exact:  # "compute capability = 9.0": that capability, not its major
        names = " / ".join(f"{c:.1f}" for c in exact)
        other = sorted({c for c in seen if all(abs(c - e) > 0.05 for e in exact)})
    else:
        names = " / ".join(f"{m}.x" for m in majors)
        other = sorted({c for c in seen if int(c) not in majors})
    if other:
        return "confirmed", f"the kernel is built for compute capability {names} only, and the GPU is {', '.join(_sm(c) for c in other)}"
    return "unlikely", f"the kernel is built for compute capability {names}, and the GPU named is of it: the refusal has another cause"


def _dtypes(text: str) -> set[str]:
    out = set()
    for word in re.findall(r"[A-Za-z_]\w*", text.lower().replace("torch.", "")):
        if word in _FLOAT_NAMES:
            out.add(_FLOAT_NAMES[word])
        elif word.startswith(("float8", "fp8")):
            out.add("float8")
    return out


def judge_dtypes(captures: dict) -> Optional[tuple[str, str]]:
    """(likelihood, reason) for the dtypes a kernel or an op states it takes (a half-precision kernel's
    "must be float16 or bfloat16", an op's "only supported for float and double tensors") against the
    dtype the text says it got; None when the text states none or not the dtype it got."""
    listed = (captures.get("need_dtypes") or captures.get("need_dtypes2") or captures.get("need_dtypes3")
              or captures.get("need_dtypes4"))
    if not listed:
        return None
    need = _dtypes(listed)
    have_text = (captures.get("have_dtype") or captures.get("dtype") or "").lower().replace("torch.", "")
    have = _FLOAT_NAMES.get(have_text) or (have_text or None)
    names = " / ".join(sorted(need))
    if have is None:
        return None
    if have in need:
        return "unlikely", f"the kernel accepts {names} and the text says it got {have}: the refusal has another cause"
    return "confirmed", f"the kernel accepts only {names}, and the text says it got {have}"


def _api_key(api: str) -> str:
    api = api.strip()
    if len(api) > 1 and api[0] == api[-1] and api[0] in "'\"":  # quoted whole, not a quote inside ("device_type 'mps'")
        api = api[1:-1]
    return api.removeprefix("torch.").removeprefix("nn.functional.")


def judge_api(captures: dict, log_torch: Optional[str], data: dict) -> Optional[tuple[Optional[str], Optional[str], dict]]:
    """A torch API the code calls and this torch lacks: the release that brought it (recipes'
    torch_api_since) against the torch the log shows. None when the text names no API."""
    api = captures.get("api")
    if not api:
        return None
    table = data.get("torch_api_since") or {}
    key = _api_key(api)
    since = table.get(key) or table.get(key.rsplit(".", 1)[-1])
    if since is None:
        return None, None, {}
    evidence = {"since": since}
    if not log_torch:
        return None, None, evidence
    from packaging.version import InvalidVersion, Version

    try:
        older = Version(log_torch.split("+")[0]) < Version(since)
    except InvalidVersion:
        return None, None, evidence
    if older:
        return "confirmed", f"{key} came in torch {since}, and the log shows torch {log_torch}", evidence
    return "possible", (f"{key} came in torch {since} and the log shows torch {log_torch}, which has it: the code ran in "
                        "another Python than the one whose torch the log printed?"), evidence


def judge_library(captures: dict, data: dict) -> Optional[tuple[Optional[str], Optional[str], dict]]:
    """An attention library's module name -> its distribution and how it is installed (recipes'
    attention_libraries). None when the text names none."""
    module = (captures.get("module") or "").strip().strip("'\"").split(".")[0]
    if not module:
        return None
    entry = (data.get("attention_libraries") or {}).get(module.lower())
    if not entry:
        return None
    return None, None, {k: v for k, v in entry.items() if isinstance(v, str)}


def judge(captures: dict, log_capabilities: list[str], log_torch: Optional[str] = None,
          data: Optional[dict] = None, decisive: bool = False) -> Optional[tuple[Optional[str], Optional[str], dict]]:
    """What the requirement a text states says about a match: (likelihood or None to keep the
    message's own, its reason, evidence the rule's message and remedies use), or None."""
    data = data or {}
    for verdict in (judge_floor(captures, log_capabilities, decisive), judge_only_arch(captures, log_capabilities),
                    judge_dtypes(captures)):
        if verdict is not None:
            return verdict[0], verdict[1], {}
    return judge_api(captures, log_torch, data) or judge_library(captures, data)
