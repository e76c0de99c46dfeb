#!/usr/bin/env python3
r"""Extract user-visible error / warning sites from C, C++, CUDA and ObjC++ sources.

Usage::

    python extract_cpp.py --library NAME --version V --root DIR \
        [--commit C] [--include GLOB ...] [--exclude GLOB ...] --out FILE

Standard library only.  The scanner reads every file under ``--root`` whose
name ends in one of ``.cpp .cc .cu .cuh .h .hpp .mm`` (restricted by the
``--include`` / ``--exclude`` globs, matched with ``fnmatch`` against the path
relative to the root) and writes one JSON object per message site, sorted by
(file, line), to ``--out``.

What counts as a site
---------------------
* torch macros: ``TORCH_CHECK`` (+ ``_VALUE _TYPE _INDEX _NOT_IMPLEMENTED
  _LINALG _WITH _ALWAYS_SHOW_CPP_STACKTRACE``), ``STD_TORCH_CHECK`` (stable
  ABI), ``AT_ERROR``, ``TORCH_WARN``, ``TORCH_WARN_ONCE``,
  ``TORCH_WARN_DEPRECATION``, ``TORCH_INTERNAL_ASSERT`` (only when it carries a
  message), ``AT_ASSERT``, ``AT_ASSERTM``, ``C10_THROW_ERROR``.
* ``throw std::runtime_error(...)``, ``std::invalid_argument``,
  ``std::out_of_range``, ``std::logic_error`` ... and pybind11's
  ``py::value_error`` / ``py::type_error`` ...
* ``printf`` / ``fprintf(stderr, ...)`` whose format string contains an error
  word (see ``ERROR_WORDS``), and ``#error`` / ``#warning`` directives.
* ``spdlog::warn`` / ``error`` / ``critical`` ({fmt}-style ``{}`` fields as placeholders).
* library macros whose message convention is known: flashinfer
  (``FLASHINFER_CHECK``, ``FLASHINFER_ERROR``, ``FLASHINFER_WARN``), tvm-ffi
  stream checks (``TVM_FFI_ICHECK[_EQ|_NE|...]``, ``TVM_FFI_CHECK``,
  ``TVM_FFI_THROW``, ``TVM_FFI_LOG_AND_THROW``), TensorRT-LLM
  (``TLLM_CHECK``, ``TLLM_CHECK_WITH_INFO``, ``TLLM_THROW``) and ggml (``GGML_LOG_ERROR``,
  ``GGML_LOG_WARN`` / ``INFO`` / ``DEBUG`` read as a logger's WARNING and INFO lines, ``GGML_ABORT``).
* helper macros the scanned sources define themselves (``CHECK_SHAPE``,
  ``CHECK_DEVICE``, ``CHECK_CONTIGUOUS``, ``TORCH_CUDABLAS_CHECK``, ...): any
  ``#define`` in the scanned files whose body (recursively) contains one of the
  above.  Every use of such a helper is expanded like the preprocessor would
  (parameters, ``#x`` stringification, ``__VA_ARGS__``) and recorded at the
  call site with ``via_macro`` giving the definition; the definition itself is
  also recorded once with ``macro_definition`` set (its stringified parameters
  are placeholders there).  When a helper name is defined in several files the
  definition in the same file wins, else the one whose path shares the longest
  prefix with the call site.  Uses of the helpers in ``NO_EXPAND`` are not expanded.
  With ``ATen/Dispatch.h`` in the scanned set every ``AT_DISPATCH_*`` use becomes a
  site with torch's ``"<name>" not implemented for '<dtype>'`` message, the name
  filled in from the call.

Argument parsing is a real tokenizer: balanced parentheses / brackets / braces,
string literals with escapes, raw strings, encoding prefixes, adjacent literal
concatenation, comments, line continuations.  For torch macros the first
argument is the condition and the remaining arguments are concatenated by
``c10::str``: each string literal is literal text, every other argument is a
placeholder.  ``"a" + x + "b"`` style expressions (``std::runtime_error``)
split on the top-level ``+``; ``oss.str()`` pulls in what was streamed into
``oss`` earlier in the same function; printf formats split at conversion
specifiers; tvm-ffi messages are read from the ``<< ...`` chain.

Record fields
-------------
``library version commit source("cpp") file line function kind exception call
parts text placeholders condition scope scope_why`` and, where they apply,
``expansions`` (how many times one helper expansion reached the same site, e.g.
once per case of a DISPATCH ladder; identical records are merged),
``via_macro`` (list of {name,file,line}, outermost first), ``macro_definition``,
``location_scope`` / ``location_scope_why`` (for empty messages: the verdict the
function / macro / condition / path alone would give).

* ``kind``: check | error | warn | assert | throw | print.
* ``exception``: the Python class the user sees: TORCH_CHECK -> RuntimeError,
  _VALUE -> ValueError, _TYPE -> TypeError, _INDEX -> IndexError,
  _NOT_IMPLEMENTED -> NotImplementedError, _LINALG -> torch.linalg.LinAlgError,
  warnings -> UserWarning (DeprecationWarning for TORCH_WARN_DEPRECATION),
  std::invalid_argument -> ValueError (pybind11 translation), tvm-ffi -> the
  error kind named in the macro (``InternalError`` for ICHECK); ``null`` for
  plain prints; ``"#error (compile time)"`` for ``#error``.
* ``parts``: literal strings between placeholders (``len(parts) ==
  placeholders + 1``); ``[]`` when the call has no message at all.
* ``text``: ``"{}".join(parts)``.
* ``function``: best-effort enclosing function (``Class::name``), or
  ``#define NAME`` for sites inside a macro definition.

Scope
-----
``scope`` is "in" when the site concerns attention, precision or
kernels/builds/versions, decided in this order (``scope_why`` names the first
hit):

1. the message text matches ``MESSAGE_KEYWORDS``;
2. the enclosing function name or a helper-macro name matches
   ``MESSAGE_KEYWORDS`` (identifiers are also matched with ``_`` read as a
   space);
3. the condition or a placeholder expression matches ``MESSAGE_KEYWORDS`` or
   ``CODE_KEYWORDS``;
4. the file path matches ``PATH_KEYWORDS``.

Otherwise "out" with the reason.  A site whose message is empty is always
"out" with ``scope_why`` "no message (torch prints the condition: 'Expected
... to be true, but got false')" (or the equivalent for the macro family); the
condition is still recorded since that is what the user sees, and
``location_scope`` says whether steps 2-4 would have put it in scope.

MESSAGE_KEYWORDS (label: regex, case-insensitive), see the lists in the code:
attention, sdpa, flash (not 'flashinfer'), mem_efficient, fmha/mha/mla, cudnn, cublas, cublasLt,
cutlass, dtype, BFloat16, Half, float16, fp8/Float8, fp4, int8/quant,
fp32/float32, precision, tf32, autocast/amp, capability, sm, arch, version,
compiled/build, head_dim/headdim, causal, mask, seqlen, softmax/softcap,
dropout, alibi, window, kv cache/paged, rotary, alignment, shared memory,
CUDA error (cuda error, cudaError, CUBLAS_STATUS, CUDNN_STATUS, no kernel
image, device-side assert, illegal memory access, ...), kernel, gemm/matmul,
query/qkv.

CODE_KEYWORDS (conditions / placeholder expressions only): scalar_type, kHalf,
kBFloat16, kFloat8*, at::Half, major/minor, dprops, getCurrentDeviceProperties,
is_sm*.

PATH_KEYWORDS: transformers/, attention, attn, flash (not 'flashinfer'), fmha, sdp, mem_eff, mha,
mla, cudnn, cublas, blas, gemm, cutlass, autocast, amp, fp8, fp16, bf16, fp4,
smNN, hopper, blackwell, ampere, decode, prefill, page, cascade, pod, rope,
rotary, qattn, sage, softmax.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import sys
from dataclasses import dataclass, field

EXTENSIONS = (".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".mm")
HEADER_EXT = (".h", ".hpp", ".cuh")

# --------------------------------------------------------------------------
# scope keyword lists (documented in the module docstring)
# --------------------------------------------------------------------------

MESSAGE_KEYWORDS = [
    ("attention", r"attention|\battn"),
    ("sdpa", r"sdpa|scaled_dot_product|scaled dot product"),
    ("flash", r"flash(?!infer)"),
    ("mem_efficient", r"mem_eff|mem-eff|memory.efficient|efficient_attention|efficient attention"),
    ("fmha/mha/mla", r"\bfmha|\bmha\b|\bmla\b|multi.?head"),
    ("cudnn", r"cudnn"),
    ("cublasLt", r"cublaslt"),
    ("cublas", r"cublas"),
    ("cutlass", r"cutlass"),
    ("dtype", r"dtype|scalar.?type|data type"),
    ("dtype (dispatch)", r"not implemented for '"),
    ("BFloat16", r"bfloat16|\bbf16"),
    ("Half", r"\bhalf\b"),
    ("float16", r"float16|\bfp16"),
    ("fp8", r"\bfp8|float8|e4m3|e5m2"),
    ("fp4", r"\bfp4|nvfp4|mxfp"),
    ("int8/quant", r"\bint8|quantiz"),
    ("fp32/float32", r"\bfp32|float32"),
    ("precision", r"precision|compute type"),
    ("tf32", r"tf32"),
    ("autocast", r"autocast|\bamp\b|mixed.precision|gradscaler|grad.scal"),
    ("capability", r"capability"),
    ("sm", r"\bsm_?\d+[a-z]?\b|\bsm[0-9]?x\b|\bsm\b"),
    ("arch", r"\barch\b|architecture|\bampere\b|\bhopper\b|\bblackwell\b|\bturing\b|\bvolta\b|\bgfx\d"),
    ("version", r"version"),
    ("compiled", r"compiled|\bcompile\b|\bbuil[dt]\b|recompile|torch_cuda_arch_list"),
    ("head_dim", r"head_?dim|head dim|head_?size|head size|num_?heads|nheads"),
    ("causal", r"causal"),
    ("mask", r"mask"),
    ("seqlen", r"seq_?len|sequence length|cu_seqlens|varlen"),
    ("softmax", r"softmax|softcap"),
    ("dropout", r"dropout"),
    ("alibi", r"alibi"),
    ("window", r"\bwindow"),
    ("kv cache/paged", r"kv.?cache|\bkv\b|paged|page_size|block_table|page table"),
    ("rotary", r"rotary|\brope\b"),
    ("alignment", r"align"),
    ("shared memory", r"shared memory|\bsmem\b|shared_memory"),
    ("CUDA error", r"cuda error|cuda driver|cuda runtime|cudaerror|cublas_status|cudnn_status|"
                   r"no kernel image|device-side assert|illegal memory access|misaligned address|"
                   r"cuda version|cuda toolkit|\bnvcc\b|cuda graph|nvrtc|nvidia driver|\bdriver\b"),
    ("kernel", r"kernel"),
    ("gemm/matmul", r"gemm|matmul|\bbmm\b|\bmm\b|tensor core"),
    ("query/qkv", r"\bquery\b|\bqkv\b"),
]

CODE_KEYWORDS = [
    ("scalar_type", r"scalar_type"),
    ("kHalf/kBFloat16/kFloat8", r"\bk(half|bfloat16|float8\w*)\b|at::half|at::bfloat16|scalartype::(half|bfloat16|float8)"),
    ("capability", r"\bmajor\b|\bminor\b|dprops|getcurrentdeviceproperties|\bis_sm\d*"),
]

PATH_KEYWORDS = [
    ("transformers/", r"transformers/"),
    ("attention", r"attention|attn"),
    ("flash", r"flash(?!infer)"),
    ("fmha", r"fmha"),
    ("sdp", r"sdp"),
    ("mem_eff", r"mem_eff"),
    ("mha/mla", r"(^|[/_.])(mha|mla)([/_.]|$)"),
    ("cudnn", r"cudnn"),
    ("cublas", r"cublas"),
    ("blas", r"blas"),
    ("gemm", r"gemm"),
    ("cutlass", r"cutlass"),
    ("autocast", r"autocast"),
    ("amp", r"(^|/)amp|ampkernels"),
    ("fp8/fp16/bf16/fp4", r"fp8|fp16|bf16|fp4"),
    ("smNN", r"sm_?\d\d"),
    ("arch", r"hopper|blackwell|ampere"),
    ("decode/prefill", r"decode|prefill"),
    ("paged/cascade/pod", r"page|cascade|(^|[/_])pod[_./]"),
    ("rotary", r"rope|rotary"),
    ("qattn/sage", r"qattn|sage"),
    ("softmax", r"softmax"),
]

_MSG_RE = [(lbl, re.compile(rx, re.I)) for lbl, rx in MESSAGE_KEYWORDS]
_CODE_RE = _MSG_RE + [(lbl, re.compile(rx, re.I)) for lbl, rx in CODE_KEYWORDS]
_PATH_RE = [(lbl, re.compile(rx, re.I)) for lbl, rx in PATH_KEYWORDS]

ERROR_WORDS = re.compile(
    r"error|fail|invalid|unsupported|not supported|cannot|can't|must|illegal|abort|"
    r"warning|mismatch|exceed|out of (memory|range|bounds)|unknown|overflow|"
    r"not implemented|expected|wrong|incompatible|too (large|small|many)",
    re.I)

# --------------------------------------------------------------------------
# message-producing macros
# --------------------------------------------------------------------------

EMPTY_TORCH = "no message (torch prints the condition: 'Expected ... to be true, but got false')"
EMPTY_ASSERT = ("no message (torch prints 'INTERNAL ASSERT FAILED at <file>:<line>, please report a "
                "bug to PyTorch.' with the condition)")
EMPTY_TVM = "no message (tvm-ffi prints 'Check failed: (<condition>) is false')"
EMPTY_TLLM = "no message (TensorRT-LLM prints 'Assertion failed: <condition>')"
EMPTY_FI = "no message (flashinfer prints 'Check failed: <condition>')"
EMPTY_GENERIC = "no message text"


@dataclass(frozen=True)
class Spec:
    kind: str
    exception: str | None
    style: str          # torch | all | with | throw_type | spaced | expr | printf | stream | stream_cmp
    ncond: int = 1      # number of leading condition arguments (torch/spaced/stream)
    fmt_index: int = 0  # printf style: index of the format argument
    kind_arg: int = -1  # index of an argument naming the error class
    empty_why: str = EMPTY_GENERIC
    need_message: bool = False  # drop sites without any message
    cmp_op: str = ""


SPECS: dict[str, Spec] = {
    "TORCH_CHECK": Spec("check", "RuntimeError", "torch", empty_why=EMPTY_TORCH),
    "TORCH_CHECK_VALUE": Spec("check", "ValueError", "torch", empty_why=EMPTY_TORCH),
    "TORCH_CHECK_TYPE": Spec("check", "TypeError", "torch", empty_why=EMPTY_TORCH),
    "TORCH_CHECK_INDEX": Spec("check", "IndexError", "torch", empty_why=EMPTY_TORCH),
    "TORCH_CHECK_NOT_IMPLEMENTED": Spec("check", "NotImplementedError", "torch", empty_why=EMPTY_TORCH),
    "TORCH_CHECK_LINALG": Spec("check", "torch.linalg.LinAlgError", "torch", empty_why=EMPTY_TORCH),
    "TORCH_CHECK_ALWAYS_SHOW_CPP_STACKTRACE": Spec("check", "RuntimeError", "torch", empty_why=EMPTY_TORCH),
    "TORCH_CHECK_WITH": Spec("check", None, "with", kind_arg=0, empty_why=EMPTY_TORCH),
    "STD_TORCH_CHECK": Spec("check", "RuntimeError", "torch", empty_why=EMPTY_TORCH),
    "AT_ERROR": Spec("error", "RuntimeError", "all"),
    "TORCH_WARN": Spec("warn", "UserWarning", "all"),
    "TORCH_WARN_ONCE": Spec("warn", "UserWarning", "all"),
    "TORCH_WARN_DEPRECATION": Spec("warn", "DeprecationWarning", "all"),
    "TORCH_INTERNAL_ASSERT": Spec("assert", "RuntimeError", "torch", empty_why=EMPTY_ASSERT, need_message=True),
    "AT_ASSERT": Spec("assert", "RuntimeError", "torch", empty_why=EMPTY_ASSERT),
    "AT_ASSERTM": Spec("assert", "RuntimeError", "torch", empty_why=EMPTY_ASSERT),
    "C10_THROW_ERROR": Spec("error", None, "throw_type", kind_arg=0),
    # flashinfer (include/flashinfer/exception.h): arguments are joined with " "
    "FLASHINFER_CHECK": Spec("check", "RuntimeError", "spaced", empty_why=EMPTY_FI),
    "FLASHINFER_ERROR": Spec("error", "RuntimeError", "expr", ncond=0),
    "FLASHINFER_WARN": Spec("warn", "stderr warning", "spaced", ncond=0),
    # tvm-ffi stream style
    "TVM_FFI_ICHECK": Spec("check", "InternalError", "stream", empty_why=EMPTY_TVM),
    "TVM_FFI_ICHECK_NOTNULL": Spec("check", "InternalError", "stream", empty_why=EMPTY_TVM),
    "TVM_FFI_ICHECK_EQ": Spec("check", "InternalError", "stream_cmp", ncond=2, cmp_op="==", empty_why=EMPTY_TVM),
    "TVM_FFI_ICHECK_NE": Spec("check", "InternalError", "stream_cmp", ncond=2, cmp_op="!=", empty_why=EMPTY_TVM),
    "TVM_FFI_ICHECK_LT": Spec("check", "InternalError", "stream_cmp", ncond=2, cmp_op="<", empty_why=EMPTY_TVM),
    "TVM_FFI_ICHECK_LE": Spec("check", "InternalError", "stream_cmp", ncond=2, cmp_op="<=", empty_why=EMPTY_TVM),
    "TVM_FFI_ICHECK_GT": Spec("check", "InternalError", "stream_cmp", ncond=2, cmp_op=">", empty_why=EMPTY_TVM),
    "TVM_FFI_ICHECK_GE": Spec("check", "InternalError", "stream_cmp", ncond=2, cmp_op=">=", empty_why=EMPTY_TVM),
    "TVM_FFI_CHECK": Spec("check", None, "stream", kind_arg=1, empty_why=EMPTY_TVM),
    "TVM_FFI_THROW": Spec("error", None, "stream", ncond=0, kind_arg=0),
    "TVM_FFI_LOG_AND_THROW": Spec("error", None, "stream", ncond=0, kind_arg=0),
    # TensorRT-LLM helpers vendored by flashinfer
    "TLLM_CHECK": Spec("check", "RuntimeError", "torch", empty_why=EMPTY_TLLM),
    "TLLM_CHECK_WITH_INFO": Spec("check", "RuntimeError", "printf", fmt_index=1, empty_why=EMPTY_TLLM),
    "TLLM_THROW": Spec("error", "RuntimeError", "printf", ncond=0, fmt_index=0),
    "TLLM_LOG_WARNING": Spec("warn", "stderr log", "printf", ncond=0, fmt_index=0),
    "TLLM_LOG_ERROR": Spec("print", "stderr log", "printf", ncond=0, fmt_index=0),
    # ggml (llama.cpp's and whisper.cpp's tensor library): its logger and its abort, printf-style
    # (a logger's levels: its INFO and DEBUG lines are notices, as a Python logger's are)
    "GGML_LOG_ERROR": Spec("print", "stderr log", "printf", ncond=0, fmt_index=0),
    "GGML_LOG_WARN": Spec("log", "WARNING", "printf", ncond=0, fmt_index=0),
    "GGML_LOG_INFO": Spec("log", "INFO", "printf", ncond=0, fmt_index=0),
    "GGML_LOG_DEBUG": Spec("log", "INFO", "printf", ncond=0, fmt_index=0),
    "GGML_ABORT": Spec("error", "abort", "printf", ncond=0, fmt_index=0),
}

# c10::Error subclasses (C10_THROW_ERROR / TORCH_CHECK_WITH) -> python class
C10_ERROR_MAP = {
    "Error": "RuntimeError", "ValueError": "ValueError", "TypeError": "TypeError",
    "IndexError": "IndexError", "NotImplementedError": "NotImplementedError",
    "LinAlgError": "torch.linalg.LinAlgError", "OutOfMemoryError": "torch.OutOfMemoryError",
    "DistError": "torch.distributed.DistError", "EnforceFiniteError": "RuntimeError",
    "OnnxfiBackendSystemError": "RuntimeError", "AcceleratorError": "torch.AcceleratorError",
    "BufferError": "BufferError", "SyntaxError": "SyntaxError", "CuDNNError": "RuntimeError",
}

THROW_MAP = {
    "std::runtime_error": "RuntimeError", "runtime_error": "RuntimeError",
    "std::invalid_argument": "ValueError", "invalid_argument": "ValueError",
    "std::out_of_range": "IndexError", "out_of_range": "IndexError",
    "std::domain_error": "ValueError", "std::length_error": "ValueError",
    "std::range_error": "ValueError", "std::overflow_error": "OverflowError",
    "std::logic_error": "RuntimeError",
    "py::value_error": "ValueError", "pybind11::value_error": "ValueError",
    "py::type_error": "TypeError", "pybind11::type_error": "TypeError",
    "py::index_error": "IndexError", "pybind11::index_error": "IndexError",
    "py::key_error": "KeyError", "py::attribute_error": "AttributeError",
    "c10::Error": "RuntimeError", "c10::ValueError": "ValueError",
    "c10::TypeError": "TypeError", "c10::NotImplementedError": "NotImplementedError",
    "c10::IndexError": "IndexError", "c10::OutOfMemoryError": "torch.OutOfMemoryError",
}

PRINT_FUNCS = {"printf", "fprintf", "std::printf", "std::fprintf"}
SPDLOG_KINDS = {"warn": "warn", "error": "print", "critical": "print"}

# helpers whose definition is recorded but whose uses are not expanded:
# AT_PRIVATE_CHECK_SELECTIVE_BUILD only fires in mobile selective builds and would add one
# record per dtype case of every AT_DISPATCH use.
NO_EXPAND = {"AT_PRIVATE_CHECK_SELECTIVE_BUILD"}

PRI_RE = re.compile(r"^(PRI|SCN)([diouxX])(8|16|32|64|LEAST\d+|FAST\d+|MAX|PTR)$")
FMT_RE = re.compile(
    r"%(?:%|[-+ #0']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|j|z|t|L|q)?[diouxXeEfFgGaAcspn])")

# --------------------------------------------------------------------------
# tokenizer
# --------------------------------------------------------------------------


class Tok:
    __slots__ = ("typ", "val", "raw", "line", "ws", "arg")

    def __init__(self, typ, val, raw, line, ws, arg=False):
        self.typ = typ      # id num str chr punct
        self.val = val      # decoded value for str, text otherwise
        self.raw = raw
        self.line = line
        self.ws = ws        # whitespace before this token
        self.arg = arg      # came from a macro argument during helper expansion

    def __repr__(self):  # pragma: no cover - debugging aid
        return f"Tok({self.typ},{self.raw!r},{self.line})"


@dataclass
class Directive:
    name: str
    toks: list
    line: int
    text: str


PUNCTS = sorted(
    ["...", "<<=", ">>=", "->*", "<=>", "::", "->", "++", "--", "<<", ">>", "<=", ">=", "==",
     "!=", "&&", "||", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##", ".*"],
    key=len, reverse=True)
ID_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
NUM_RE = re.compile(r"\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.']|'(?=[0-9A-Fa-f]))*")
STR_PREFIXES = {"u8", "u", "U", "L", "R", "u8R", "uR", "UR", "LR"}
SIMPLE_ESC = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "a": "\a", "b": "\b", "f": "\f",
              "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?", "e": "\x1b"}


def decode_escapes(body: str) -> str:
    out = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        d = body[i + 1]
        if d == "\n":
            i += 2
            continue
        if d == "\r" and body[i + 2:i + 3] == "\n":
            i += 3
            continue
        if d == "x":
            m = re.match(r"[0-9A-Fa-f]+", body[i + 2:])
            if m:
                out.append(chr(int(m.group(0), 16) % 0x110000))
                i += 2 + len(m.group(0))
                continue
        if d in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            out.append(chr(int(m.group(0), 8)))
            i += 1 + len(m.group(0))
            continue
        if d in "uU":
            width = 4 if d == "u" else 8
            h = body[i + 2:i + 2 + width]
            if re.fullmatch(r"[0-9A-Fa-f]{%d}" % width, h):
                out.append(chr(int(h, 16) % 0x110000))
                i += 2 + width
                continue
        out.append(SIMPLE_ESC.get(d, d))
        i += 2
    return "".join(out)


def _skip_quoted(src, i, q):
    """src[i] == q; return index just past the closing quote (or end of line)."""
    n = len(src)
    j = i + 1
    while j < n:
        c = src[j]
        if c == "\\":
            j += 2
            continue
        if c == q:
            return j + 1
        if c == "\n":
            return j
        j += 1
    return n


def lex(src: str, base_line: int = 1, directives: bool = True):
    """Return a list of Tok and Directive objects."""
    out = []
    i, n = 0, len(src)
    line = base_line
    at_bol = True
    ws = False
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
            at_bol = True
            ws = True
            continue
        if c in " \t\r\f\v":
            i += 1
            ws = True
            continue
        if c == "\\" and (src.startswith("\n", i + 1) or src.startswith("\r\n", i + 1)):
            i += 2 if src[i + 1] == "\n" else 3
            line += 1
            ws = True
            continue
        if src.startswith("//", i):
            j = i
            while True:
                k = src.find("\n", j)
                if k < 0:
                    j = n
                    break
                if src[k - 1] == "\\" or (src[k - 1] == "\r" and src[k - 2] == "\\"):
                    line += 1
                    j = k + 1
                    continue
                j = k
                break
            i = j
            ws = True
            continue
        if src.startswith("/*", i):
            k = src.find("*/", i + 2)
            k = n if k < 0 else k + 2
            line += src.count("\n", i, k)
            i = k
            ws = True
            continue
        if c == "#" and at_bol and directives:
            j = i + 1
            while j < n:
                cj = src[j]
                if cj == "\\" and (src.startswith("\n", j + 1) or src.startswith("\r\n", j + 1)):
                    j += 2 if src[j + 1] == "\n" else 3
                    continue
                if src.startswith("/*", j):
                    k = src.find("*/", j + 2)
                    j = n if k < 0 else k + 2
                    continue
                if src.startswith("//", j):
                    k = src.find("\n", j)
                    j = n if k < 0 else k
                    break
                if cj in "\"'":
                    if cj == "'" and j > 0 and src[j - 1].isalnum():
                        j += 1  # digit separator / odd text
                        continue
                    j = _skip_quoted(src, j, cj)
                    continue
                if cj == "\n":
                    break
                j += 1
            text = src[i:j]
            sub = lex(text[1:], line, directives=False)
            name = sub[0].val if sub and isinstance(sub[0], Tok) and sub[0].typ == "id" else ""
            out.append(Directive(name, sub[1:] if name else sub, line, text))
            line += text.count("\n")
            i = j
            at_bol = False
            ws = True
            continue
        at_bol = False
        start_line = line
        if c.isalpha() or c == "_" or c == "$":
            m = ID_RE.match(src, i)
            word = m.group(0)
            j = m.end()
            if word in STR_PREFIXES and j < n and src[j] == '"':
                if word.endswith("R"):
                    m2 = re.match(r'"([^()\\\s]{0,16})\(', src[j:])
                    if m2:
                        delim = m2.group(1)
                        close = ")" + delim + '"'
                        k = src.find(close, j + len(m2.group(0)))
                        k = n if k < 0 else k
                        body = src[j + len(m2.group(0)):k]
                        end = min(n, k + len(close))
                        out.append(Tok("str", body, src[i:end], start_line, ws))
                        line += src.count("\n", i, end)
                        i = end
                        ws = False
                        continue
                k = _skip_quoted(src, j, '"')
                raw = src[i:k]
                body = src[j + 1:k - 1] if src[k - 1:k] == '"' else src[j + 1:k]
                out.append(Tok("str", decode_escapes(body), raw, start_line, ws))
                line += raw.count("\n")
                i = k
                ws = False
                continue
            if word in ("u8", "u", "U", "L") and j < n and src[j] == "'":
                k = _skip_quoted(src, j, "'")
                out.append(Tok("chr", decode_escapes(src[j + 1:k - 1]), src[i:k], start_line, ws))
                i = k
                ws = False
                continue
            out.append(Tok("id", word, word, start_line, ws))
            i = j
            ws = False
            continue
        if c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            m = NUM_RE.match(src, i)
            out.append(Tok("num", m.group(0), m.group(0), start_line, ws))
            i = m.end()
            ws = False
            continue
        if c == '"':
            k = _skip_quoted(src, i, '"')
            raw = src[i:k]
            body = src[i + 1:k - 1] if src[k - 1:k] == '"' and k - 1 > i else src[i + 1:k]
            out.append(Tok("str", decode_escapes(body), raw, start_line, ws))
            line += raw.count("\n")
            i = k
            ws = False
            continue
        if c == "'":
            k = _skip_quoted(src, i, "'")
            out.append(Tok("chr", decode_escapes(src[i + 1:k - 1]), src[i:k], start_line, ws))
            i = k
            ws = False
            continue
        for p in PUNCTS:
            if src.startswith(p, i):
                out.append(Tok("punct", p, p, start_line, ws))
                i += len(p)
                break
        else:
            out.append(Tok("punct", c, c, start_line, ws))
            i += 1
        ws = False
    return out


def spell(toks) -> str:
    """Source spelling of a token run, whitespace collapsed to single spaces."""
    out = []
    for k, t in enumerate(toks):
        if k and t.ws:
            out.append(" ")
        out.append(t.raw)
    return re.sub(r"\s+", " ", "".join(out)).strip()


# --------------------------------------------------------------------------
# argument lists
# --------------------------------------------------------------------------

OPEN = {"(": ")", "[": "]", "{": "}"}
CLOSE = {")", "]", "}"}


def parse_args(toks, k):
    """toks[k] is '('.  Return (args, index_of_closing_paren) or None."""
    depth = 0
    args, cur = [], []
    n = len(toks)
    j = k
    while j < n:
        t = toks[j]
        if t.typ == "punct":
            if t.val in OPEN:
                depth += 1
                if depth == 1:
                    j += 1
                    continue
            elif t.val in CLOSE:
                depth -= 1
                if depth == 0:
                    if cur or args:
                        args.append(cur)
                    return args, j
            elif t.val == "," and depth == 1:
                args.append(cur)
                cur = []
                j += 1
                continue
            elif t.val == ";" and depth == 1:
                return None  # runaway: not a real call
        cur.append(t)
        j += 1
    return None


def split_top(toks, sep):
    parts, cur, depth = [], [], 0
    for t in toks:
        if t.typ == "punct":
            if t.val in OPEN:
                depth += 1
            elif t.val in CLOSE:
                depth -= 1
            elif t.val == sep and depth == 0:
                parts.append(cur)
                cur = []
                continue
            elif t.val == "?" and depth == 0 and sep == "+":
                return [toks]  # a conditional expression: keep whole
        cur.append(t)
    parts.append(cur)
    return parts


# --------------------------------------------------------------------------
# enclosing-function tracking
# --------------------------------------------------------------------------

NOT_FUNC = {"constexpr", "consteval", "if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof",
            "alignas", "static_assert", "noexcept", "throw", "do", "else", "try", "defined",
            "__attribute__", "__declspec", "__launch_bounds__", "C10_LAUNCH_BOUNDS_1",
            "C10_LAUNCH_BOUNDS_2", "requires", "typeid", "new", "delete"}
SCOPE_WORDS = {"namespace", "class", "struct", "union", "enum", "extern"}
TRAILERS = {"const", "noexcept", "override", "final", "mutable", "volatile", "&", "&&", "->", "::",
            "*", "<", ">", ",", "throw", "__device__", "__host__", "__forceinline__", "constexpr",
            "C10_HOST_DEVICE", "C10_DEVICE", "CUTLASS_DEVICE", "CUTLASS_HOST_DEVICE"}


def _match_back(toks, j, open_, close_):
    depth = 0
    while j >= 0:
        t = toks[j]
        if t.typ == "punct":
            if t.val == close_:
                depth += 1
            elif t.val == open_:
                depth -= 1
                if depth == 0:
                    return j
        j -= 1
    return -1


def _func_name_before(toks, p):
    """toks[p] is '(' of a parameter list; return qualified name or None."""
    j = p - 1
    if j >= 1 and toks[j].val == ")" and toks[j - 1].val == "(" and j >= 2 and toks[j - 2].val == "operator":
        return "operator()"
    if j >= 1 and toks[j].typ == "punct" and toks[j - 1].val == "operator":
        return "operator" + toks[j].val
    if j >= 0 and toks[j].val in (">", ">>"):  # template-id  foo<T>(
        depth = 0
        while j >= 0:
            v = toks[j].val
            if v == ">":
                depth += 1
            elif v == ">>":
                depth += 2
            elif v == "<":
                depth -= 1
                if depth <= 0:
                    break
            j -= 1
        j -= 1
    if j < 0:
        return None
    t = toks[j]
    if t.val == "]":
        return "<lambda>"
    if t.typ != "id":
        if t.val == ")":  # TORCH_META_FUNC(addmm)(...) / TORCH_IMPL_FUNC(x)(...)
            p2 = _match_back(toks, j, "(", ")")
            if p2 >= 1 and toks[p2 - 1].typ == "id" and toks[p2 - 1].val not in NOT_FUNC:
                return toks[p2 - 1].val + spell(toks[p2:j + 1]).replace(" ", "")
        return None
    if t.val in NOT_FUNC:
        return None
    names = [t.val]
    while j >= 2 and toks[j - 1].val == "::" and toks[j - 2].typ == "id":
        names.insert(0, toks[j - 2].val)
        j -= 2
    if j >= 1 and toks[j - 1].val == "~":
        names[-1] = "~" + names[-1]
    return "::".join(names)


def classify_brace(toks, k):
    """toks[k] is '{'.  Return ('func', name) / ('lambda', None) / ('other', None)."""
    j = k - 1
    steps = 0
    while j >= 0 and steps < 60:
        t = toks[j]
        if t.typ == "punct" and t.val == ")":
            p = _match_back(toks, j, "(", ")")
            if p < 0:
                return ("other", None)
            prev = toks[p - 1] if p > 0 else None
            if prev is not None and prev.typ == "id" and prev.val in ("noexcept", "throw", "__attribute__",
                                                                   "__launch_bounds__", "requires",
                                                                   "C10_LAUNCH_BOUNDS_1", "C10_LAUNCH_BOUNDS_2",
                                                                   "alignas", "decltype"):
                j = p - 2
                steps += 1
                continue
            name = _func_name_before(toks, p)
            if name is None:
                return ("other", None)
            if name == "<lambda>":
                return ("lambda", None)
            # constructor initializer list:  Foo::Foo(args) : a_(x), b_(y) {
            q = p - 1 - name.count("::") * 2
            before = toks[q - 1] if q >= 1 else None
            if before is not None and before.val == ":" and q >= 2 and \
                    toks[q - 2].val in ("public", "private", "protected"):
                before = None  # access label, not an initializer list
            if before is not None and before.val in (",", ":"):
                jj = q - 1
                while jj >= 0 and toks[jj].val != ":":
                    if toks[jj].val == ")":
                        jj = _match_back(toks, jj, "(", ")")
                    elif toks[jj].val == "}":
                        jj = _match_back(toks, jj, "{", "}")
                    elif toks[jj].val in (";", "{"):
                        return ("other", None)
                    jj -= 1
                if jj > 0 and toks[jj - 1].val == ")":
                    j = jj - 1
                    steps += 1
                    continue
                return ("other", None)
            return ("func", name)
        if t.typ == "id" and t.val in SCOPE_WORDS:
            return ("other", None)
        if t.typ == "punct" and t.val in (";", "{", "}", "=", "(", "[", "return"):
            return ("other", None)
        if t.typ == "id" and t.val in ("else", "do", "try", "return"):
            return ("other", None)
        if t.typ == "str":  # extern "C" {
            return ("other", None)
        if not (t.typ in ("id", "num") or t.val in TRAILERS or t.val in (">>",)):
            return ("other", None)
        j -= 1
        steps += 1
    return ("other", None)


def function_map(stream):
    """For each index of `stream` (Tok/Directive list) the enclosing function name."""
    toks_only = []
    idx_map = []
    for i, t in enumerate(stream):
        if isinstance(t, Tok):
            idx_map.append(i)
            toks_only.append(t)
    funcs = [None] * len(stream)
    stack = []        # list of (kind, name)
    pp_stack = []     # saved brace stacks for #if/#else
    ti = 0
    for i, t in enumerate(stream):
        if isinstance(t, Directive):
            if t.name in ("if", "ifdef", "ifndef"):
                pp_stack.append(list(stack))
            elif t.name in ("elif", "else", "elifdef", "elifndef"):
                if pp_stack:
                    stack = list(pp_stack[-1])
            elif t.name == "endif":
                if pp_stack:
                    pp_stack.pop()
            continue
        name = None
        for kind, nm in reversed(stack):
            if kind == "func":
                name = nm
                break
        funcs[i] = name
        if t.typ == "punct":
            if t.val == "{":
                stack.append(classify_brace(toks_only, ti))
            elif t.val == "}":
                if stack:
                    stack.pop()
        ti += 1
    return funcs


# --------------------------------------------------------------------------
# macro definitions
# --------------------------------------------------------------------------


@dataclass
class MacroDef:
    name: str
    file: str
    line: int
    params: list | None      # None for object-like
    variadic: bool
    body: list


def parse_define(d: Directive, rel):
    toks = d.toks
    if not toks or toks[0].typ != "id":
        return None
    name = toks[0].val
    params = None
    variadic = False
    body_start = 1
    if len(toks) > 1 and toks[1].val == "(" and not toks[1].ws:
        params = []
        j = 2
        while j < len(toks) and toks[j].val != ")":
            if toks[j].typ == "id":
                params.append(toks[j].val)
            elif toks[j].val == "...":
                variadic = True
                params.append("__VA_ARGS__")
            j += 1
        body_start = j + 1
    return MacroDef(name, rel, d.line, params, variadic, toks[body_start:])


def _mk(typ, val, raw, line, ws, arg=False):
    return Tok(typ, val, raw, line, ws, arg)


def expand(mdef: MacroDef, args, line):
    """Substitute `args` (token lists) into mdef.body; tokens get `line`."""
    amap = {}
    params = mdef.params or []
    for k, p in enumerate(params):
        if p == "__VA_ARGS__":
            va = []
            for m, a in enumerate(args[k:]):
                if m:
                    va.append(_mk("punct", ",", ",", line, False))
                va.extend(a)
            amap[p] = va
        else:
            amap[p] = args[k] if k < len(args) else []
    out = []
    body = mdef.body
    j = 0
    while j < len(body):
        t = body[j]
        if t.typ == "punct" and t.val == "#" and j + 1 < len(body) and body[j + 1].val in amap:
            s = spell(amap[body[j + 1].val])
            out.append(_mk("str", s, json.dumps(s), line, t.ws))
            j += 2
            continue
        if t.typ == "punct" and t.val == "##":
            # GNU ", ## __VA_ARGS__" with empty varargs drops the comma
            if (j + 1 < len(body) and body[j + 1].val == "__VA_ARGS__" and not amap.get("__VA_ARGS__")
                    and out and out[-1].val == ","):
                out.pop()
            j += 1
            continue
        if t.typ == "id" and t.val in amap:
            first = True
            for a in amap[t.val]:
                out.append(_mk(a.typ, a.val, a.raw, line, t.ws if first else a.ws, True))
                first = False
            j += 1
            continue
        out.append(_mk(t.typ, t.val, t.raw, line, t.ws))
        j += 1
    return out


# --------------------------------------------------------------------------
# message construction
# --------------------------------------------------------------------------


def _is_literal_run(toks, printf=False, define_params=None):
    """Tokens that are only string literals (and stringified params / PRI macros)."""
    if not toks:
        return False
    j = 0
    while j < len(toks):
        t = toks[j]
        if t.typ == "str" or (t.typ == "chr" and len(toks) == 1):
            j += 1
            continue
        if printf and t.typ == "id" and PRI_RE.match(t.val):
            j += 1
            continue
        if (define_params is not None and t.val == "#" and j + 1 < len(toks)
                and toks[j + 1].val in define_params):
            j += 2
            continue
        return False
    return True


def _literal_items(toks, printf=False):
    items = []
    j = 0
    while j < len(toks):
        t = toks[j]
        if t.typ in ("str", "chr"):
            items.append(("L", t.val))
            j += 1
        elif t.typ == "id" and PRI_RE.match(t.val):
            items.append(("L", PRI_RE.match(t.val).group(2)))
            j += 1
        else:  # '#' param (inside a macro definition)
            items.append(("P", "#" + toks[j + 1].val))
            j += 2
    return items


class Ctx:
    def __init__(self, toks, index, define_params=None):
        self.toks = toks            # token list the site lives in
        self.index = index          # index of the site's first token
        self.define_params = define_params


BUILDER_TYPES = ("stringstream", "ostringstream", "string")


def _stream_lookup(name, ctx: Ctx):
    """Message text built up in a local ``std::ostringstream`` / ``std::string`` `name`
    before ctx.index (same token list): ``name << a << b;``, ``name.append(a);``,
    ``name += a;``, ``std::string name = a;``.  None when `name` is not such a local."""
    toks = ctx.toks
    lo = max(0, ctx.index - 600)
    decl = None
    for j in range(ctx.index - 1, lo - 1, -1):
        t = toks[j]
        if t.typ == "id" and t.val == name and j >= 1 and toks[j - 1].typ == "id" and \
                toks[j - 1].val in BUILDER_TYPES:
            decl = j
            break
        if t.typ == "id" and t.val == name and j >= 2 and toks[j - 1].val == "*" and \
                toks[j - 2].val == "char" and j + 1 < len(toks) and toks[j + 1].val == "=":
            decl = j  # const char* name = "...";  (AT_DISPATCH's at_dispatch_name)
            break
    if decl is None:
        return None
    items = []
    j = decl
    depth = 0
    if j + 1 < len(toks) and toks[j + 1].val == "=":
        stop = j + 2
        while stop < len(toks) and toks[stop].val != ";":
            stop += 1
        items.extend(_operand_items(toks[j + 2:stop], None))
        j = stop
    while j < ctx.index:
        t = toks[j]
        if t.typ == "punct" and t.val == "{":
            depth += 1
        elif t.typ == "punct" and t.val == "}":
            depth = max(0, depth - 1)
        if t.typ == "id" and t.val == name and (j == 0 or toks[j - 1].val not in (".", "->", "::")) \
                and j + 1 < len(toks) and depth > 0 and toks[j + 1].val in ("<<", "+=", "."):
            # appended inside an if/else or loop block: text depends on control flow
            items.append(("P", "<" + name + ": conditional text>"))
            j += 1
            continue
        if t.typ == "id" and t.val == name and (j == 0 or toks[j - 1].val not in (".", "->", "::")) \
                and j + 1 < len(toks):
            nxt = toks[j + 1].val
            if nxt == "<<":
                ops, end = _stream_operands(toks, j + 1)
                for op in ops:
                    items.extend(_operand_items(op, None))
                j = end
                continue
            if nxt == "+=":
                stop = j + 2
                while stop < len(toks) and toks[stop].val != ";":
                    stop += 1
                items.extend(_operand_items(toks[j + 2:stop], None))
                j = stop
                continue
            if nxt == "." and j + 3 < len(toks) and toks[j + 2].val == "append" and toks[j + 3].val == "(":
                pr = parse_args(toks, j + 3)
                if pr:
                    args, end = pr
                    if len(args) == 1:
                        items.extend(_operand_items(args[0], None))
                    else:
                        items.append(("P", spell(toks[j:end + 1])))
                    j = end + 1
                    continue
        j += 1
    return items or None


def _stream_operands(toks, j):
    """toks[j] is '<<'. Return (operands, index after the chain)."""
    ops, cur, depth = [], [], 0
    n = len(toks)
    j += 1
    while j < n:
        t = toks[j]
        if t.typ == "punct":
            if t.val in OPEN:
                depth += 1
            elif t.val in CLOSE:
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and t.val == ";":
                break
            elif depth == 0 and t.val == "<<":
                ops.append(cur)
                cur = []
                j += 1
                continue
        cur.append(t)
        j += 1
    if cur:
        ops.append(cur)
    return ops, j


STRINGIZE_MACROS = {"C10_STRINGIZE", "C10_STRINGIZE_IMPL", "STRINGIFY", "TOSTRING", "XSTR", "STRINGIZE"}


def fold_stringize(op):
    """Replace ``C10_STRINGIZE(x)`` style calls by the string literal they produce."""
    if not any(t.typ == "id" and t.val in STRINGIZE_MACROS for t in op):
        return op
    out = []
    j = 0
    while j < len(op):
        t = op[j]
        if t.typ == "id" and t.val in STRINGIZE_MACROS and j + 1 < len(op) and op[j + 1].val == "(":
            pr = parse_args(op, j + 1)
            if pr:
                args, end = pr
                s_ = spell(args[0]) if args else ""
                out.append(Tok("str", s_, json.dumps(s_), t.line, t.ws))
                j = end + 1
                continue
        out.append(t)
        j += 1
    return out


def _operand_items(op, ctx: Ctx, printf=False):
    if not op:
        return []
    op = fold_stringize(op)
    if _is_literal_run(op, printf, ctx.define_params if ctx else None):
        return _literal_items(op, printf)
    if len(op) == 1 and op[0].typ == "id" and op[0].val in ("std::endl", "endl"):
        return [("L", "\n")]
    if len(op) == 3 and op[0].val == "std" and op[2].val == "endl":
        return [("L", "\n")]
    # std::string("...") / c10::str("...")
    if len(op) >= 4 and op[-1].val == ")" and op[-2].typ == "str":
        k = 0
        while k < len(op) and (op[k].typ == "id" or op[k].val == "::"):
            k += 1
        if k < len(op) and op[k].val == "(" and _is_literal_run(op[k + 1:-1]) and \
                spell(op[:k]) in ("std::string", "std::string_view", "c10::str", "string"):
            return _literal_items(op[k + 1:-1])
    # oss.str() / oss.str().c_str() / a local std::string message
    if ctx is not None and op[0].typ == "id" and (
            len(op) == 1 or (len(op) >= 5 and op[1].val == "." and op[2].val == "str" and op[3].val == "("
                             and op[4].val == ")") or
            (len(op) >= 4 and op[1].val == "." and op[2].val == "c_str")):
        got = _stream_lookup(op[0].val, ctx)
        if got:
            return got
    pieces = split_top(op, "+")
    if len(pieces) > 1 and any(_is_literal_run(p) or _literal_wrapped(p) for p in pieces):
        items = []
        for p in pieces:
            if _is_literal_run(p):
                items.extend(_literal_items(p))
            elif _literal_wrapped(p):
                k = 0
                while p[k].typ == "id" or p[k].val == "::":
                    k += 1
                items.extend(_literal_items(p[k + 1:-1]))
            else:
                items.append(("P", spell(p)))
        return items
    return [("P", spell(op))]


def _literal_wrapped(op):
    if len(op) >= 4 and op[-1].val == ")" and op[-2].typ == "str":
        k = 0
        while k < len(op) and (op[k].typ == "id" or op[k].val == "::"):
            k += 1
        return k < len(op) and op[k].val == "(" and _is_literal_run(op[k + 1:-1])
    return False


def _format_items(args, fmt_index, ctx, fields, printf):
    """A format string's literal text and placeholders: each field `fields` finds in its literals is
    a placeholder, filled from the arguments after the format in order. printf: ``%%`` is a literal
    ``%``; {fmt}: ``{{`` and ``}}`` are literal braces."""
    if fmt_index >= len(args):
        return []
    fmt = args[fmt_index]
    rest = [spell(a) for a in args[fmt_index + 1:]]
    if not _is_literal_run(fmt, printf=printf, define_params=ctx.define_params):
        return [("P", spell(fmt))]
    escapes = ("%%",) if printf else ("{{", "}}")
    items = []
    ai = 0
    for kind, val in _literal_items(fmt, printf=printf):
        if kind == "P":
            items.append(("P", val))
            continue
        pos = 0
        for m in fields.finditer(val):
            items.append(("L", val[pos:m.start()]))
            if m.group(0) in escapes:
                items.append(("L", m.group(0)[0]))
            else:
                items.append(("P", rest[ai] if ai < len(rest) else m.group(0)))
                ai += 1
            pos = m.end()
        items.append(("L", val[pos:]))
    return items


def _printf_items(args, fmt_index, ctx):
    return _format_items(args, fmt_index, ctx, FMT_RE, printf=True)


_FMT_BRACES = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


def _fmt_items(args, fmt_index, ctx):
    """{fmt}-style (spdlog, fmt::format): the format string's ``{}`` fields are placeholders."""
    return _format_items(args, fmt_index, ctx, _FMT_BRACES, printf=False)


def normalize(items):
    """items -> (parts, placeholders).  parts == [] when there is no message at all."""
    if not items:
        return [], []
    parts = [""]
    ph = []
    last_p = False
    for kind, val in items:
        if kind == "L":
            parts[-1] += val
            last_p = False
        else:
            if last_p:
                ph[-1] = ph[-1] + " " + val
                continue
            ph.append(val)
            parts.append("")
            last_p = True
    return parts, ph


# --------------------------------------------------------------------------
# scope
# --------------------------------------------------------------------------


def _first(res, text):
    for lbl, rx in res:
        m = rx.search(text)
        if m:
            return lbl, m.group(0)
    return None


def _ident_hit(res, ident):
    if not ident:
        return None
    return _first(res, ident) or _first(res, ident.replace("_", " "))


def location_scope(rec, macros):
    f = rec.get("function") or ""
    fn = f[len("#define "):] if f.startswith("#define ") else f
    hit = _ident_hit(_MSG_RE, fn)
    if hit:
        return "in", f"function '{fn}' matches {hit[0]} ('{hit[1]}')"
    for m in macros:
        hit = _ident_hit(_MSG_RE, m)
        if hit:
            return "in", f"macro '{m}' matches {hit[0]} ('{hit[1]}')"
    code = " ; ".join([rec.get("condition") or ""] + list(rec.get("placeholders") or []))
    hit = _first(_CODE_RE, code) or _first(_CODE_RE, code.replace("_", " "))
    if hit:
        return "in", f"condition/arguments match {hit[0]} ('{hit[1]}')"
    hit = _first(_PATH_RE, rec["file"])
    if hit:
        return "in", f"path matches {hit[0]} ('{hit[1]}')"
    return "out", "no attention/precision/kernel/build keyword in message, function, macro, condition or path"


def decide_scope(rec, empty_why, macros):
    if not rec["parts"]:
        ls, lw = location_scope(rec, macros)
        rec["scope"] = "out"
        rec["scope_why"] = empty_why
        rec["location_scope"] = ls
        rec["location_scope_why"] = lw
        return
    hit = _first(_MSG_RE, "".join(rec["parts"]))
    if hit:
        rec["scope"] = "in"
        rec["scope_why"] = f"message matches {hit[0]} ('{hit[1]}')"
        return
    rec["scope"], rec["scope_why"] = location_scope(rec, macros)


# --------------------------------------------------------------------------
# scanning
# --------------------------------------------------------------------------


class Scanner:
    def __init__(self, library, version, commit):
        self.library = library
        self.version = version
        self.commit = commit
        self.defs: dict[str, list[MacroDef]] = {}
        self.helpers: set[str] = set()
        self.aliases: dict[str, str] = {}
        self.records = []
        self.seq = 0
        self._pick_cache = {}
        self._seen = {}

    # ---- pass 1: collect #defines -------------------------------------
    def collect_defines(self, rel, stream):
        for d in stream:
            if isinstance(d, Directive) and d.name == "define":
                md = parse_define(d, rel)
                if md:
                    self.defs.setdefault(md.name, []).append(md)

    def _body_has_target(self, body, names):
        for j, t in enumerate(body):
            if t.typ != "id":
                continue
            nxt = body[j + 1].val if j + 1 < len(body) else ""
            if t.val in SPECS or t.val in names:
                return True
            if t.val == "throw":
                q, _ = self._qualname(body, j + 1)
                if q in THROW_MAP:
                    return True
            if t.val in ("printf", "fprintf") and nxt == "(":
                return True
        return False

    def resolve_helpers(self):
        # object-like aliases:  #define XFORMERS_CHECK TORCH_CHECK
        for name, defs in self.defs.items():
            if name in SPECS:
                continue
            for md in defs:
                if md.params is None and len(md.body) == 1 and md.body[0].typ == "id" and \
                        md.body[0].val in SPECS:
                    self.aliases[name] = md.body[0].val
        changed = True
        while changed:
            changed = False
            for name, defs in self.defs.items():
                if name in SPECS or name in self.helpers or name in self.aliases or name in PRINT_FUNCS:
                    continue
                known = self.helpers | set(self.aliases)
                if any(self._body_has_target(md.body, known) for md in defs):
                    self.helpers.add(name)
                    changed = True

    def pick_def(self, name, rel):
        key = (name, rel)
        if key in self._pick_cache:
            return self._pick_cache[key]
        known = self.helpers | set(self.aliases)
        cands = [md for md in self.defs.get(name, [])
                 if (md.file == rel or md.file.endswith(HEADER_EXT)) and self._body_has_target(md.body, known)]
        res = self._pick(cands, rel) if cands else None
        self._pick_cache[key] = res
        return res

    @staticmethod
    def _pick(cands, rel):
        same = [md for md in cands if md.file == rel]
        if same:
            return same[0]

        def common(md):
            a, b = md.file.split("/"), rel.split("/")
            k = 0
            while k < min(len(a), len(b)) and a[k] == b[k]:
                k += 1
            return k
        return sorted(cands, key=lambda md: (-common(md), md.file, md.line))[0]

    # ---- helpers --------------------------------------------------------
    @staticmethod
    def _qualname(toks, j):
        names = []
        if j < len(toks) and toks[j].val == "::":
            j += 1
        while j < len(toks) and toks[j].typ == "id":
            names.append(toks[j].val)
            if j + 1 < len(toks) and toks[j + 1].val == "::":
                j += 2
                continue
            j += 1
            break
        return "::".join(names), j

    def emit(self, rel, line, func, kind, exception, call, items, condition, empty_why, via,
             macro_definition=None, need_message=False):
        parts, ph = normalize(items)
        if need_message and not parts:
            return
        rec = {
            "library": self.library,
            "version": self.version,
            "commit": self.commit,
            "source": "cpp",
            "file": rel,
            "line": line,
            "function": func,
            "kind": kind,
            "exception": exception,
            "call": call,
            "parts": parts,
            "text": "{}".join(parts),
            "placeholders": ph,
            "condition": (condition[:200] if condition is not None else None),
        }
        if via:
            rec["via_macro"] = [dict(v) for v in via]
        if macro_definition:
            rec["macro_definition"] = macro_definition
            rec["function"] = f"#define {macro_definition}"
        key = (rel, line, rec["function"], call, tuple(parts), tuple(ph), rec["condition"],
               tuple((v["name"], v["file"], v["line"]) for v in via), macro_definition)
        if key in self._seen:
            # the same helper expansion reached the same site again (DISPATCH-style ladders)
            self._seen[key]["expansions"] += 1
            return
        rec["expansions"] = 1
        self._seen[key] = rec
        macros = [v["name"] for v in via] + ([macro_definition] if macro_definition else [])
        decide_scope(rec, empty_why, macros)
        rec["_seq"] = self.seq
        self.seq += 1
        self.records.append(rec)

    # ---- main scan over one token list ---------------------------------
    def scan(self, toks, rel, funcs, via=(), define=None, define_params=None, depth=0):
        """funcs: callable index -> function name."""
        n = len(toks)
        j = 0
        while j < n:
            t = toks[j]
            if t.typ != "id" or t.arg:
                # tokens substituted from a helper's arguments are scanned once, in place
                j += 1
                continue
            prev = toks[j - 1].val if j else ""
            if prev in (".", "->"):
                j += 1
                continue
            name = t.val
            nxt = toks[j + 1].val if j + 1 < n else ""
            line = t.line
            func = funcs(j)
            ctx = Ctx(toks, j, define_params)
            # --- throw X(...)
            if name == "throw":
                q, k = self._qualname(toks, j + 1)
                if q in THROW_MAP and k < n and toks[k].val in ("(", "{"):
                    if toks[k].val == "(":
                        pr = parse_args(toks, k)
                    else:
                        pr = self._parse_brace_args(toks, k)
                    if pr:
                        args, end = pr
                        items = _operand_items(args[0], ctx) if args else []
                        self.emit(rel, line, func, "throw", THROW_MAP[q], "throw " + q, items, None,
                                  EMPTY_GENERIC, via, define)
                        j = end + 1
                        continue
                j += 1
                continue
            # --- printf / fprintf
            if name in ("printf", "fprintf") and nxt == "(" and (prev != "::" or toks[j - 2].val == "std"):
                pr = parse_args(toks, j + 1)
                if pr:
                    args, end = pr
                    if name == "fprintf":
                        ok = args and spell(args[0]) in ("stderr", "std::cerr")
                        fi = 1
                    else:
                        ok, fi = True, 0
                    if ok and fi < len(args):
                        items = _printf_items(args, fi, ctx)
                        lit = "".join(v for k2, v in items if k2 == "L")
                        if ERROR_WORDS.search(lit):
                            self.emit(rel, line, func, "print", None, name, items, None, EMPTY_GENERIC,
                                      via, define)
                    j = end + 1
                    continue
            # --- spdlog::warn / error / critical ({fmt} style; CTranslate2's warnings)
            if name in SPDLOG_KINDS and nxt == "(" and prev == "::" and j >= 2 and toks[j - 2].val == "spdlog":
                pr = parse_args(toks, j + 1)
                if pr:
                    args, end = pr
                    self.emit(rel, line, func, SPDLOG_KINDS[name], "stderr log", "spdlog::" + name,
                              _fmt_items(args, 0, ctx), None, EMPTY_GENERIC, via, define)
                    j = end + 1
                    continue
            real = self.aliases.get(name, name)
            if real in SPECS and nxt == "(":
                pr = parse_args(toks, j + 1)
                if pr:
                    args, end = pr
                    end = self._site(SPECS[real], real if real == name else f"{name}={real}", args, end,
                                     toks, rel, line, func, ctx, via, define)
                    j = end + 1
                    continue
            if depth < 8 and define is None and name in self.helpers and name not in NO_EXPAND and \
                    (nxt == "(" or self._objlike(name, rel)):
                md = self.pick_def(name, rel)
                if md is not None and (md.params is None) == (nxt != "("):
                    if md.params is None:
                        args, end = [], j
                    else:
                        pr = parse_args(toks, j + 1)
                        if not pr:
                            j += 1
                            continue
                        args, end = pr
                    body = expand(md, args, line)
                    chain = tuple(via) + ({"name": name, "file": md.file, "line": md.line},)
                    self.scan(body, rel, lambda _i, f=func: f, chain, define, define_params, depth + 1)
                    # keep scanning inside the arguments (code blocks passed to DISPATCH-style macros)
                    j += 1
                    continue
            j += 1

    def _objlike(self, name, rel):
        md = self.pick_def(name, rel)
        return md is not None and md.params is None

    @staticmethod
    def _parse_brace_args(toks, k):
        depth = 0
        for j in range(k, len(toks)):
            if toks[j].val in OPEN:
                depth += 1
            elif toks[j].val in CLOSE:
                depth -= 1
                if depth == 0:
                    inner = toks[k + 1:j]
                    return ([inner] if inner else []), j
        return None

    def _site(self, spec: Spec, call, args, end, toks, rel, line, func, ctx, via, define):
        exc = spec.exception
        cond = None
        items = []
        if spec.kind_arg >= 0 and spec.kind_arg < len(args):
            kname = spell(args[spec.kind_arg]).split("::")[-1]
            if spec.style in ("with", "throw_type"):
                exc = C10_ERROR_MAP.get(kname, kname)
            else:
                exc = kname
        if spec.style == "torch":
            cond = spell(args[0]) if args else ""
            for a in args[1:]:
                items.extend(_operand_items(a, ctx))
        elif spec.style == "with":
            cond = spell(args[1]) if len(args) > 1 else ""
            for a in args[2:]:
                items.extend(_operand_items(a, ctx))
        elif spec.style == "all":
            for a in args:
                items.extend(_operand_items(a, ctx))
        elif spec.style == "throw_type":
            for a in args[1:]:
                items.extend(_operand_items(a, ctx))
        elif spec.style == "spaced":
            if spec.ncond:
                cond = spell(args[0]) if args else ""
            for m, a in enumerate(args[spec.ncond:]):
                if m:
                    items.append(("L", " "))
                items.extend(_operand_items(a, ctx))
        elif spec.style == "expr":
            if args:
                items.extend(_operand_items(args[0], ctx))
        elif spec.style == "printf":
            if spec.ncond:
                cond = spell(args[0]) if args else ""
            items = _printf_items(args, spec.fmt_index, ctx)
        elif spec.style in ("stream", "stream_cmp"):
            if spec.style == "stream_cmp" and len(args) >= 2:
                cond = f"{spell(args[0])} {spec.cmp_op} {spell(args[1])}"
            elif spec.ncond:
                cond = spell(args[0]) if args else ""
            if end + 1 < len(toks) and toks[end + 1].val == "<<":
                ops, stop = _stream_operands(toks, end + 1)
                for op in ops:
                    items.extend(_operand_items(op, ctx))
                end = stop - 1
        func_name = func
        if define:
            func_name = f"#define {define}"
        self.emit(rel, line, func_name, spec.kind, exc, call, items, cond, spec.empty_why, via,
                  define, need_message=spec.need_message)
        return end

    # ---- per file -------------------------------------------------------
    def scan_file(self, rel, stream):
        funcs = function_map(stream)
        toks = []
        tfuncs = []
        for t, f in zip(stream, funcs):
            if isinstance(t, Tok):
                toks.append(t)
                tfuncs.append(f)
            elif t.name in ("error", "warning"):
                msg = t.text.split(t.name, 1)[1].strip() if t.name in t.text else ""
                msg = re.sub(r"\s*\\\r?\n\s*", " ", msg)
                if len(msg) >= 2 and msg[0] == '"' and msg[-1] == '"':
                    msg = decode_escapes(msg[1:-1])
                self.emit(rel, t.line, f, "error" if t.name == "error" else "warn",
                          "#error (compile time)" if t.name == "error" else "#warning (compile time)",
                          "#" + t.name, [("L", msg)] if msg else [], None, EMPTY_GENERIC, ())
        self.scan(toks, rel, lambda i: tfuncs[i])
        # helper definitions themselves
        for t in stream:
            if isinstance(t, Directive) and t.name == "define":
                md = parse_define(t, rel)
                if md and md.name in self.helpers:
                    params = set(md.params or [])
                    self.scan(md.body, rel, lambda _i: None, (), md.name, params)


def iter_files(root, includes, excludes):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            if not fn.endswith(EXTENSIONS):
                continue
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if includes and not any(fnmatch.fnmatch(rel, g) for g in includes):
                continue
            if excludes and any(fnmatch.fnmatch(rel, g) for g in excludes):
                continue
            out.append((rel, full))
    return sorted(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--library", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--commit", default=None, help="commit / tarball id recorded with every site")
    ap.add_argument("--root", required=True)
    ap.add_argument("--include", nargs="*", default=[], help="fnmatch globs on the relative path")
    ap.add_argument("--exclude", nargs="*", default=[], help="fnmatch globs on the relative path")
    ap.add_argument("--out", required=True)
    ap.add_argument("--stats", default=None, help="optional JSON file with counts")
    a = ap.parse_args(argv)

    files = iter_files(a.root, a.include, a.exclude)
    sc = Scanner(a.library, a.version, a.commit)
    streams = []
    for rel, full in files:
        with open(full, "r", encoding="utf-8", errors="replace") as fh:
            src = fh.read()
        stream = lex(src)
        streams.append((rel, stream))
        sc.collect_defines(rel, stream)
    sc.resolve_helpers()
    for rel, stream in streams:
        sc.scan_file(rel, stream)

    recs = sorted(sc.records, key=lambda r: (r["file"], r["line"], r["_seq"]))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as fh:
        for r in recs:
            r.pop("_seq", None)
            fh.write(json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n")
    stats = {
        "library": a.library, "version": a.version, "commit": a.commit,
        "files_scanned": len(files),
        "files_with_sites": len({r["file"] for r in recs}),
        "sites": len(recs),
        "in_scope": sum(r["scope"] == "in" for r in recs),
        "empty_message": sum(not r["parts"] for r in recs),
        "empty_message_location_in": sum((not r["parts"]) and r.get("location_scope") == "in" for r in recs),
        "helpers": sorted(sc.helpers),
        "aliases": dict(sorted(sc.aliases.items())),
    }
    if a.stats:
        with open(a.stats, "w", encoding="utf-8") as fh:
            json.dump(stats, fh, indent=1, sort_keys=True)
    print(json.dumps({k: v for k, v in stats.items() if k not in ("helpers", "aliases")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
