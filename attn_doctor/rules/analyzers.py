"""Messages whose cause is in their structure, not in one line: named analyzers a signature can
call (`analyzer = "..."` in a recipe) with the block of lines that follows its match.

xformers' `No operator found for memory_efficient_attention_forward` lists, under every operator,
why it refused the inputs. Most of those reasons are normal (the small-head-dim operator refuses a
head dim of 128 in every report); the cause is the reason shared by the operators that could
have run: the general cutlass operator when it is built, else what every operator says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional

from .compiled_modules import compiled_module_named
from .dispatch_guards import op_dtype_in_later_torch, op_dtype_not_in_later_torch, op_is_torch_cpu_kernel
from .torch_age import torch_api_added, torch_keyword_added


@dataclass
class Finding:
    rule: str  # the rule the structure points to
    line: int  # offset of the deciding line in the block
    text: str  # the deciding line
    captures: dict
    end: int = 0  # offset of the report's last line in the block (what the analyzer weighed)


_OP_HEADER = re.compile(r"^`(?P<op>[^`]+)` is not supported because:?\s*$")
_INPUT = re.compile(r"^(?P<name>query|key|value)\s*:\s*shape=\((?P<shape>[\d, ]+)\)\s*\((?P<dtype>torch\.\w+)\)")

# (reason pattern, rule, rank): a lower rank is a more telling cause when several apply.
_REASONS: list[tuple[re.Pattern, str, int]] = [
    (re.compile(r"xFormers wasn't build with CUDA support|xFormers can't load"), "AD312", 0),
    (re.compile(r"device=cpu\b|device=cpu \(supported"), "AD256", 1),
    # an upper bound the GPU is above: no input fits that operator here, so it outranks the input reasons;
    # the kernel predates this GPU, not flash-attn 2's floor (AD103)
    (re.compile(r"capability <=? ?\(\d+, ?\d+\) but your GPU has capability \(\d+, ?\d+\)|\(too new\)"), "AD317", 2),
    (re.compile(r"attn_bias\.stride\(|aligned by slicing|is not correctly aligned|not a multiple of 8"), "AD254", 3),
    (re.compile(r"dtype=torch\.bfloat16 \(supported: \{torch\.float(?:32|16), torch\.float(?:32|16)\}\)|bf16 is only supported on A100\+? GPUs"), "AD102", 4),
    (re.compile(r"max\(query\.shape\[-1\]|embed per head|only head-dim|head[_ -]?dim|query\.shape\[-1\] % \d+|shape\[-1\] [<>]|K > \d+|does not have enough shared-memory"), "AD603", 5),
    (re.compile(r"dtype=torch\.float32 \(supported"), "AD604", 6),
    (re.compile(r"requires (?:a GPU|device) with (?:compute )?capability|compute capability [<>=]"), "AD103", 7),
]
_NOT_BUILT = re.compile(r"operator wasn't built")
_END = re.compile(r"^(?:Traceback|File \"|During handling|The above exception|\[|[A-Za-z_][\w.]*(?:Error|Exception|Warning)\b:?)")


# where a report flattened onto one line (a web page, a UI's error box) had its line breaks: before
# each operator's header, after its "because:", before each input's name
_FLAT_BREAK = re.compile(r"\s+(?=`[^`\s]+` is not supported because)|(?<=is not supported because:)\s+"
                         r"|\s+(?=(?:query|key|value|attn_bias|p)\s*:\s)")


def _unflattened(lines: list[str]) -> list[tuple[int, str]]:
    """(line's offset in the block, text) of each line, a flattened report's line split at the
    breaks it lost (every piece keeps its line's offset)."""
    out = []
    for i, raw in enumerate(lines):
        if raw.count("is not supported because") >= 2:
            out.extend((i, piece) for piece in _FLAT_BREAK.split(raw) if piece.strip())
        else:
            out.append((i, raw))
    return out


def xformers_no_operator(lines: list[str]) -> list[Finding]:
    """The root cause of an xformers "No operator found" / "does not support inputs" report."""
    ops: dict[str, list[tuple[int, str]]] = {}
    current: Optional[str] = None
    inputs: dict[str, str] = {}
    for i, raw in _unflattened(lines)[1:]:
        line = raw.strip()
        m = _OP_HEADER.match(line)
        if m:
            current = m.group("op")
            ops[current] = []
            continue
        m = _INPUT.match(line)
        if m and current is None:
            inputs[m.group("name")] = m.group("dtype").replace("torch.", "")
            inputs.setdefault("head_dim", m.group("shape").split(",")[-1].strip())
            continue
        if current is not None:
            if not line or _END.match(line):
                current = None  # the report ended
                continue
            ops[current].append((i, line))
    if not ops:
        return []
    end = max(i for reasons in ops.values() for i, _ in reasons) if any(ops.values()) else 0
    captures = {k: v for k, v in inputs.items() if k in ("query", "head_dim")}
    every = [reason for reasons in ops.values() for reason in reasons]
    for i, text in every:
        if _REASONS[0][0].search(text):
            return [Finding("AD312", i, text, captures, end)]
    built = {op: reasons for op, reasons in ops.items() if not any(_NOT_BUILT.search(t) for _, t in reasons)}
    if not built:
        i, text = next((r for r in every if _NOT_BUILT.search(r[1])), every[0])
        return [Finding("AD312", i, text, captures, end)]
    general = {op: reasons for op, reasons in built.items() if op.lower().startswith("cutlass")}
    chosen = general or built
    best: Optional[tuple[int, Finding]] = None
    for reasons in chosen.values():
        for i, text in reasons:
            for pattern, rule, rank in _REASONS[1:]:
                if pattern.search(text):
                    if best is None or rank < best[0]:
                        best = (rank, Finding(rule, i, text, captures, end))
                    break
    return [best[1]] if best else []


_VLLM_REASONS = re.compile(r"Reasons:\s*\{(?P<body>.*)", re.S)
_VLLM_BACKEND = re.compile(r"(?P<name>[A-Z][A-Z0-9_]+):\s*\[(?P<reasons>[^\]]*)\]?")
# (reason pattern, rule): the reason every refusing backend shares names the cause
_VLLM_CAUSES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"compute capability not supported|not supported on (?:this )?(?:device|gpu)|only supported on \w+", re.I), "AD317"),
    (re.compile(r"head_?size not supported|head size", re.I), "AD603"),
    (re.compile(r"dtype not supported", re.I), "AD604"),
]


def vllm_no_backend(lines: list[str]) -> list[Finding]:
    """vLLM's "No valid attention backend found ... Reasons: {BACKEND: [reason, ...], ...}". A
    backend that lacks a feature the model needs (sparse, sinks, a KV-cache dtype) was never a
    candidate; what the candidates all refuse on (a GPU none of them supports, a head size none
    takes) is the cause. When every backend lacks a feature, the choice of backend is (AD281's)."""
    text = " ".join(line.strip() for line in lines[:3])
    m = _VLLM_REASONS.search(text)
    if not m:
        return []
    backends = {b.group("name"): [r.strip() for r in b.group("reasons").split(",") if r.strip()]
                for b in _VLLM_BACKEND.finditer(m.group("body"))}
    candidates = {name: reasons for name, reasons in backends.items()
                  if all(any(p.search(r) for p, _ in _VLLM_CAUSES) for r in reasons)}
    if not candidates:  # every backend lacks a feature, or the reasons are cut off
        candidates = backends
    for pattern, rule in _VLLM_CAUSES:
        shared = [next((r for r in reasons if pattern.search(r)), None) for reasons in candidates.values()]
        if shared and all(shared):
            return [Finding(rule, 0, lines[0], {"what": f"{', '.join(candidates)}: {shared[0]}"}, min(2, len(lines) - 1))]
    return []


ANALYZERS: dict[str, Callable[[list[str]], list[Finding]]] = {
    "xformers_no_operator": xformers_no_operator,
    "vllm_no_backend": vllm_no_backend,
}
# the rules an analyzer weighs among: once it has named one, a line of its report read alone as
# another (smallkF's head-dim limit, listed in every report) is one operator's reason, not a cause
WEIGHED: dict[str, frozenset[str]] = {
    "xformers_no_operator": frozenset(rule for _, rule, _ in _REASONS),
    "vllm_no_backend": frozenset(rule for _, rule in _VLLM_CAUSES),
}
BLOCK_LINES = 80  # lines after the match an analyzer sees


# -- guards: whether a match counts, from its facts and the lines around it --------------------

GUARD_LINES = 40  # lines before and after a match a guard sees (a traceback's frames, a UI's report)
_SIZE = re.compile(r"(?P<n>[\d.]+)\s*(?P<unit>[KMGT]?i?B)", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 1e3, "kib": 2**10, "mb": 1e6, "mib": 2**20, "gb": 1e9, "gib": 2**30, "tb": 1e12, "tib": 2**40}
# a frame or a line of the traceback around an allocation that computes attention scores
_ATTENTION_FRAME = re.compile(r"attention|\battn|softmax|baddbmm|einsum|scaled_dot_product|get_full_mask|\bsdpa\b|xformers", re.IGNORECASE)


def _bytes(text: Optional[str]) -> Optional[float]:
    m = _SIZE.fullmatch((text or "").strip())
    if not m:
        return None
    try:
        return float(m.group("n")) * _UNITS[m.group("unit").lower()]
    except (ValueError, KeyError):
        return None


def _allocation(groups: dict) -> Optional[float]:
    alloc = _bytes(groups.get("alloc"))
    capacity = _bytes(groups.get("capacity") or groups.get("capacity2"))
    return alloc / capacity if alloc and capacity else None


def allocation_in_attention(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """An out-of-memory whose one allocation is a quarter of the GPU or more, with attention in
    the lines around it (its frames, an attention library that failed to load), or 8 GiB or more
    raised at the attention call the traceback ends in: a score matrix materialised where a
    memory-efficient kernel computes it in tiles. None: not this."""
    ratio = _allocation(groups)
    frames = [line for line in before + after if _ATTENTION_FRAME.search(line)]
    if ratio is not None and ratio >= 0.25 and frames:
        return {"ratio": f"{ratio:.1f}", "attention_line": frames[-1].strip()[:200]}
    at_call = _attention_call_site(groups, before)
    if ratio is not None and at_call:
        return {"ratio": f"{ratio:.2f}", "attention_line": at_call}
    return None


def _attention_call_site(groups: dict, before: list[str]) -> Optional[str]:
    """The attention code line the traceback ends in, where the allocation is 8 GiB or more: the
    last code lines it quotes (not its `File "..."` lines: a path such as diffusers'
    models/attention.py holds feed-forward layers too)."""
    alloc = _bytes(groups.get("alloc"))
    if alloc is None or alloc < _ALLOCATION_AT_CALL_BYTES:
        return None
    frames = [line for line in before if line.strip()][-4:]
    calls = [line for line in frames if not _is_file_line(line) and _ATTENTION_FRAME.search(line)]
    return calls[-1].strip()[:200] if calls else None


def _is_file_line(line: str) -> bool:
    return bool(re.match(r'^(?:[^"]{0,40}\s)?\s*File "', line))


def allocation_over_gpu(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """One allocation larger than the whole GPU, with nothing around it naming attention: most
    often an attention matrix, but a VAE decode or a huge batch can be as large."""
    ratio = _allocation(groups)
    return {"ratio": f"{ratio:.1f}"} if ratio is not None and ratio >= 1.0 else None


# Where an out-of-memory names no capacity (a text cut after the allocation): an allocation this
# large at an attention call is its score matrix; a layer's weights or activations rarely take one
# allocation of 8 GiB.
_ALLOCATION_AT_CALL_BYTES = 8 * 2**30


def allocation_at_attention_call(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """An out-of-memory without the GPU's capacity (the line cut after the allocation; the pattern
    refuses a line that has it) whose one allocation is 8 GiB or more, raised at the attention call
    the traceback's last code lines show (scaled_dot_product_attention, an attention function, a
    softmax or matmul of scores). None: not this, or the capacity on a line of its own
    (allocation_in_attention judges it with it)."""
    if any("total capacity" in line for line in [*before[-2:], *after[:2]]):
        return None
    at_call = _attention_call_site(groups, before)
    return {"attention_line": at_call} if at_call else None


def _compiled_for(groups: dict) -> Optional[bool]:
    """Whether the architecture a kernel has no code for is in the list its library was compiled
    for ("CUDA arch 600 ... compiled for: 500,600,700"); None where the text gives neither."""
    arch = (groups.get("arch") or "").strip()
    archs = {a.strip() for a in (groups.get("archs") or "").split(",") if a.strip()}
    if not arch.isdigit() or not archs:
        return None
    return arch in archs


def arch_compiled_for(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """The build carries the GPU's architecture, the kernel has no code for it: its own floor."""
    return {} if _compiled_for(groups) is True else None


def arch_not_compiled_for(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """The architecture is not in the build's list: the build lacks it."""
    return {} if _compiled_for(groups) is False else None


# flash-attn's fused kernels built on their own, by module: the flash-attention repository's folder
# that builds each (its setup.py's CUDAExtension name).
FLASH_ATTN_CSRC = {"dropout_layer_norm": "layer_norm", "rotary_emb": "rotary", "fused_dense_lib": "fused_dense_lib",
                   "xentropy_cuda_lib": "xentropy", "ft_attention": "ft_attention"}


def flash_attn_csrc_folder(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """The csrc/ folder that builds the fused-kernel module the text names."""
    folder = FLASH_ATTN_CSRC.get(groups.get("module") or "")
    return {"folder": folder} if folder else None


# a call into an attention library, as a traceback's code line or a quoted line shows it
_ATTENTION_CALL = re.compile(r"\b(?:flash_attn\w*|_flash_attn\w*|unpad_input|pad_input|memory_efficient_attention\w*|sageattn\w*|flash_attn_interface\.\w+|xformers\.ops\.\w+)\s*\(", re.IGNORECASE)


def attention_call_before(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """A Python error about returned values (too many values to unpack) whose line before calls an
    attention library: the caller expects another release's return values."""
    for line in reversed([b for b in before if b.strip()][-4:]):
        m = _ATTENTION_CALL.search(line)
        if m:
            return {"call": line.strip()[:200]}
    return None


# a frame in an attention library's module, or in a serving engine's backend for one
_LIBRARY_FRAME = re.compile(r"[/\\](?:backends[/\\])?(?P<module>flashinfer|xformers|sageattention|flash_attn_interface|flash_attn)\w*\.py\b|[/\\]site-packages[/\\](?P<package>flashinfer|xformers|sageattention)[/\\]")


def library_name_is_none(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """`'NoneType' object is not callable` raised in the frames of an attention library's backend:
    the library's import failed quietly (a try/except left its names None), so it is not installed."""
    for line in reversed(before[-6:]):
        m = _LIBRARY_FRAME.search(line)
        if m:
            return {"module": m.group("module") or m.group("package")}
    return None


# a traceback frame in a library that registers its own CUDA operators with torch
_EXTENSION_FRAME = re.compile(r'File "[^"\n]*[/\\](?P<package>xformers|flash_attn\w*|vllm\w*|flashinfer|mamba_ssm|causal_conv1d|apex|'
                              r'bitsandbytes|sageattention|fla|liger_kernel|natten|torchao)[/\\]')
_OPS_FRAME = re.compile(r'File "[^"\n]*[/\\]torch[/\\]_ops\.py"')


def extension_operator_before(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """A CUDA error raised where the traceback's last frames are a library's then torch's operator
    dispatch (torch/_ops.py): the failing kernel is that library's registered operator, not torch's."""
    frames = [line for line in before if line.lstrip().startswith("File ")][-2:]
    if len(frames) == 2 and _OPS_FRAME.search(frames[1]):
        m = _EXTENSION_FRAME.search(frames[0])
        if m:
            return {"component": m.group("package")}
    return None


# the code line that wrote a value into a tensor: masked_fill, fill_, torch.full, an item assignment
_FILL_CODE = re.compile(r"masked_fill_?\(|\.fill_\(|torch\.(?:full|where)\(|\]\s*=\s*[-+]?(?:float|torch|\d)|finfo\(")


def fill_source(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """The value that overflowed a half tensor: the code line above the error that wrote it (a
    traceback shows it), and what kind of value it is. Always a match: the message is the cause."""
    for line in reversed([b for b in before if b.strip()][-3:]):
        if _FILL_CODE.search(line):
            code = line.strip()[:200]
            out = {"fill_code": code}
            other = re.search(r"finfo\(\s*(?P<name>[\w.]+)\.dtype\s*\)", code)
            if re.search(r"finfo\(\s*torch\.float(?:32)?\s*\)", code):
                out["fill_kind"] = "float32's limit, not the filled tensor's"
            elif other:
                # its own dtype's limit would fit: this one is wider
                out["fill_kind"] = f"the limit of {other.group('name')}'s dtype, which is wider than the filled tensor's"
            elif re.search(r"-?\s*1e\+?(?:9|1\d)|2\s*\*\*\s*(?:1[6-9]|[2-9]\d)|float\(\s*2\s*\*\*", code):
                out["fill_kind"] = "a constant beyond float16's range"
            return out
    return {}


_TENSOR_TYPE = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16", "byte": "uint8",
                "char": "int8", "int": "int32", "long": "int64", "short": "int16", "bool": "bool",
                "fp16": "float16", "f16": "float16", "bf16": "bfloat16", "fp32": "float32", "f32": "float32", "fp64": "float64"}


def _dtype_named(text: str) -> str:
    """The dtype a type's name says, whatever the spelling: torch.cuda.HalfTensor, c10::Half,
    struct c10::BFloat16, float, torch.float16."""
    t = re.sub(r"^(?:struct |class )", "", text.strip().lower())
    t = re.sub(r"^(?:torch\.)?(?:cuda\.|mps\.|xpu\.)?|^c10::?|^at::", "", t)
    t = re.sub(r"^(?:cpu|cuda|mps|xpu)(\w+)type$", r"\1", t)  # torch's MPSFloatType, CUDABFloat16Type
    t = re.sub(r"tensor$", "", t)
    return _TENSOR_TYPE.get(t, t)


def _tensor_device(text: str) -> Optional[str]:
    """The device a legacy tensor type's name says (torch.cuda.HalfTensor: cuda, torch.FloatTensor:
    cpu); None for a name that says no device (c10::Half, torch.float16)."""
    m = re.fullmatch(r"(?:torch\.)?(?:(cuda|mps|xpu)\.)?[A-Z]\w*Tensor|(CPU|CUDA|MPS|XPU)[A-Z]\w*Type", text.strip())
    return ((m.group(1) or m.group(2) or "cpu").lower()) if m else None


def is_half(text: str) -> bool:
    """Whether a type's name, however spelt, is a half-precision (or 8-bit float) dtype."""
    named = _dtype_named(text)
    return named in ("float16", "bfloat16") or named.startswith("float8")


def dtypes_differ(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """A "types should be the same" message whose two types name one dtype (torch.cuda.HalfTensor
    and torch.HalfTensor): they differ in device, not in precision; or one of them an 8-bit
    integer: a quantized weight, not a precision mismatch."""
    values = [v for k, v in groups.items() if v and k.endswith("dtype")]
    if len(values) != 2:
        return {}
    a, b = _dtype_named(values[0]), _dtype_named(values[1])
    if a == b:
        return None
    devices = {_tensor_device(values[0]), _tensor_device(values[1])}
    if None not in devices and len(devices) == 2:
        return None  # torch.FloatTensor beside torch.cuda.HalfTensor: the input is on another device first
    if {a, b} & {"uint8", "int8"}:
        return None  # a packed (quantized) weight reaching a float op: not a precision mismatch
    if not (is_half(values[0]) or is_half(values[1])):
        return None  # float32 beside float64: the caller's data (numpy's float64), not the stack's precision
    return {}


_BF16_RUN = re.compile(r"(?i)\bbf16\b|bfloat16")
_FP16_RUN = re.compile(r"(?i)\bfp16\b|(?<!b)float16|\.half\(|halftensor|16-mixed")
# mixed precision said to be off: a NaN of such a run is no float16 overflow
_AMP_OFF = re.compile(
    r"(?i)(?<![\w-])(?:use_)?(?:amp|fp16|autocast)['\"]?\s*[=:]\s*['\"]?(?:false|0|off|none|no)\b(?![.\d])"
    r"|\bmixed_precision\s*[=:]\s*['\"]?no\b|\bprecision\s*[=:]\s*['\"]?(?:32|fp32)\b"
    r"|\bwithout (?:amp|apex|mixed[- ]precision|fp16|autocast)\b|\b(?:disabled?|turned? off|switched off|no) (?:amp|mixed[- ]precision|fp16|autocast)\b"
    r"|\b(?:amp|mixed[- ]precision|fp16|autocast) (?:is |was )?(?:disabled|turned off|off)\b")
# mixed precision said to be on (what a NaN of a float16 run is told with), once the "off" phrases are out
_AMP_ON = re.compile(r"(?i)--(?:use[-_])?amp\b|\buse_amp\b|\b(?:amp|fp16|autocast)\s*[=:]\s*['\"]?(?:true|1|O[123])\b|\bwith (?:amp|fp16|autocast)\b|\bGradScaler\b|\bautocast\(")
# NaN or black output with a cause of its own: a safety checker's blank image, a softmax over a fully masked row
_OTHER_NAN = re.compile(r"(?i)nsfw|safety[_ ]checker|fully[- ]masked|all[- ]masked|masked rows?\b|all -inf|every (?:key|position) (?:is )?masked")


def float16_run(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """NaN or black output in a run the text shows in float16: not where the lines around it show a
    bf16 run and no float16, or mixed precision turned off and nothing of float16 or AMP besides,
    nor where they name another cause of NaN or a black image (a safety checker's blank output, a
    softmax over a fully masked row)."""
    around = "\n".join([*before[-12:], groups.get("whole_line") or groups.get("what") or "", *after[:12]])
    if _OTHER_NAN.search(around):
        return None
    if _BF16_RUN.search(around) and not _FP16_RUN.search(around):
        return None
    if _AMP_OFF.search(around):
        rest = _AMP_OFF.sub(" ", around)
        if not (_FP16_RUN.search(rest) or _AMP_ON.search(rest)):
            return None  # the run is said to be in full precision
    return {}


def built_torch_differs(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """A package's statement of the torch build it needs (or was built for) and the one found: a
    mismatch only where the two differ, in torch's release (compared as far as both are written:
    2.1 is 2.1.2), in the local build tag (+cu118, +cu121), or in the CUDA or CPU variant named."""
    from packaging.version import InvalidVersion, Version

    def split(v: Optional[str]) -> tuple[Optional[str], Optional[str]]:
        if not v:
            return None, None
        release, _, local = v.partition("+")
        return release.rstrip("."), (local or None)

    (built, built_local), (found, found_local) = split(groups.get("built_torch")), split(groups.get("torch"))
    if built is None or found is None:
        return None
    try:
        a, b = Version(built).release, Version(found).release
        n = min(len(a), len(b))
        same_torch = a[:n] == b[:n]
    except InvalidVersion:
        same_torch = built == found
    if built_local and found_local and built_local != found_local:
        return {}
    built_variant = groups.get("built_cuda") or ("cpu" if groups.get("built_cpu") else None)
    found_variant = groups.get("found_cuda") or ("cpu" if groups.get("found_cpu") else None)
    if built_variant and found_variant and built_variant != found_variant:
        return {}
    return None if same_torch else {}


_NOT_A_PICKLE = re.compile(r"Unsupported operand \d+|invalid load key|version https://git-lfs|unexpected EOF|file might be corrupted"
                           r"|Ran out of input|pickle data was truncated")


def not_a_pickle(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """torch's weights-only refusal of a file that is no checkpoint at all (a Git LFS pointer, a
    truncated or HTML download: the unpickler meets an operand no pickle has) is not a Python object
    the safe loader refused: the file itself is the problem."""
    around = [*before[-6:], groups.get("rest") or "", *after[:6]]
    return None if any(_NOT_A_PICKLE.search(line) for line in around) else {}


_EARLIER_CUDA_FAILURE = re.compile(
    r"device-side assert|illegal memory access|CUDA out of memory|OutOfMemoryError|error: out of memory|: out of memory at|"
    r"error=2 : out of memory|error=59\b|_STATUS_ALLOC_FAILED|Assertion `[^`]{1,200}` failed|"
    r"misaligned address|unspecified launch failure", re.I)


def after_no_other_cuda_failure(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """A CUDA library's failure that follows another failure on the GPU (a device-side assert, an
    illegal address, memory exhausted) is that failure's echo (CUDA errors are sticky and reported
    late): not a reading of its own."""
    return None if any(_EARLIER_CUDA_FAILURE.search(line) for line in before) else {}


# a line that says something failed, after a warning: the source line Python prints under a warning
# (`warnings.warn(f'Error checking ...')`) is the warning's own echo, not a failure
_FAILURE_AFTER = re.compile(r"Traceback \(most recent call last\)|(?<![\w.])\w*(?:Error|Exception)(?::|\b(?! checking))|"
                            r"(?i:\berror\b\s*(?::|C\d{4})|\bfailed\b|\bfatal\b)|错误|失败")


def a_failure_follows(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """A warning that is a cause only when the run then fails (torch's extension builder warns that it
    could not check the compiler's version, then tries to compile anyway): with no failure after it,
    it is a notice of a run that went on."""
    return {} if any(_FAILURE_AFTER.search(line) for line in after if "warnings.warn(" not in line) else None


# a line that shows a GPU: TensorFlow's device list (or the libraries it skipped for one),
# nvidia-smi's table, a GPU named in the writer's words
_GPU_SEEN = re.compile(r"Found device \d+ with properties|Skipping registering GPU devices|Cannot dlopen some GPU libraries|"
                       r"Created (?:TensorFlow )?device [^\n]{0,80}GPU|/device:GPU:\d|Adding visible gpu devices: \d|"
                       r"NVIDIA-SMI|Driver Version|(?i:\b(?:geforce|quadro|tesla|rtx|gtx|titan|[ahlbv]100|h200|a10g?|l4|l40s?|t4|"
                       r"a[2-6]000|jetson)\b)")


def tensorflow_saw_no_gpu(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """TensorFlow probing for its CUDA runtime on a machine without a GPU: its own notice to ignore
    the failed load there ("Ignore above cudart dlerror if you do not have a GPU set up") on the next
    line, and no line of the whole text showing a GPU. The guard reads the text whole only where it is
    short (fewer lines around than it is given): in a longer log the device list may lie further on,
    and the load failure stays the cause."""
    if len(before) >= GUARD_LINES or len(after) >= GUARD_LINES:
        return None
    if not any("Ignore above cudart dlerror" in line for line in after[:2]):
        return None
    return None if any(_GPU_SEEN.search(line) for line in [*before, *after]) else {}


def bf16_refusal_ends_here(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """transformers' bf16 refusal whose Ampere sentence a wrapped paste put on the next line is not the
    message that ends without it (which only a machine without CUDA prints)."""
    following = next((line.strip() for line in after if line.strip()), "")
    return None if re.match(r"(?i)you need (?:ampere|torch>=)", following) else {}


# guards that read only the words (whether the lines around say something failed; whether torch's own
# kernel table has the named op for the CPU alone), not the facts a rule's family judges: their
# rules' known cases are still offered on words alone (explaining/core.py)
WORDS_GUARDS = frozenset({"a_failure_follows", "op_is_torch_cpu_kernel", "bf16_refusal_ends_here", "compiled_module_named",
                          "tensorflow_saw_no_gpu"})


def fact_judged(rules) -> frozenset:
    """The rules a guard judges by facts: their known cases are never offered on words alone."""
    return frozenset(r.id for r in rules for sig in r.signatures
                     if not isinstance(sig, str) and sig.guard and sig.guard not in WORDS_GUARDS)


def _support_guards() -> dict:
    from .support_facts import GUARDS as support_guards  # refusals the support matrix judges (matrix_arch, ...)

    return support_guards


GUARDS: dict[str, Callable[[dict, list[str], list[str]], Optional[dict]]] = {
    "library_name_is_none": library_name_is_none,
    "attention_call_before": attention_call_before,
    "extension_operator_before": extension_operator_before,
    "allocation_in_attention": allocation_in_attention,
    "allocation_over_gpu": allocation_over_gpu,
    "allocation_at_attention_call": allocation_at_attention_call,
    "flash_attn_csrc_folder": flash_attn_csrc_folder,
    "arch_compiled_for": arch_compiled_for,
    "arch_not_compiled_for": arch_not_compiled_for,
    "fill_source": fill_source,
    "dtypes_differ": dtypes_differ,
    "op_dtype_in_later_torch": op_dtype_in_later_torch,
    "float16_run": float16_run,
    "built_torch_differs": built_torch_differs,
    "not_a_pickle": not_a_pickle,
    "after_no_other_cuda_failure": after_no_other_cuda_failure,
    "a_failure_follows": a_failure_follows,
    "bf16_refusal_ends_here": bf16_refusal_ends_here,
    "tensorflow_saw_no_gpu": tensorflow_saw_no_gpu,
    "torch_api_added": torch_api_added,
    "torch_keyword_added": torch_keyword_added,
    "op_dtype_not_in_later_torch": op_dtype_not_in_later_torch,
    "op_is_torch_cpu_kernel": op_is_torch_cpu_kernel,
    "compiled_module_named": compiled_module_named,
    **_support_guards(),
}

# Judgements of the text's own versions and GPUs that a signature's `facts` names; explain runs them
# (attn_doctor/explaining/builds.py FACT_JUDGEMENTS, the same names) once it has read the whole text.
FACT_JUDGEMENTS = frozenset({"torch_build_predates_gpu"})
