#!/usr/bin/env python3
"""Extract every message site (raise / assert / warning / logging / torch._check)
from the Python sources of a library, as JSON lines with provenance.

First half of the attn-doctor message catalogue: the library texts that
`attn-doctor explain` can later match pasted errors against.  Stdlib only,
Python 3.9+.  (Run it with the newest Python you have: `ast` can only parse
syntax its own interpreter knows, and files it cannot parse are counted and
reported, never silently dropped.)

Usage
-----
    python extract_python.py --library NAME --version V --root DIR \
        [--prefix PKGDIR ...] [--exclude GLOB ...] --out FILE [--stats FILE]

--root is the folder file paths are reported relative to (a site-packages
folder, or a source checkout).  Each --prefix is, relative to --root, a
folder (walked recursively), a single .py file, or a glob (`*` stays inside
one path component, `**` crosses folders).  Without --prefix the whole root
is walked.  --exclude takes globs of the same form.  __pycache__ is skipped.

What is a site
--------------
  raise    `raise X(...)`, `raise X` (exception = X as written; a bare
           `raise` or `raise some_variable` (lower-case name) is a re-raise
           and is not recorded)
  assert   `assert cond` / `assert cond, msg`   (exception "AssertionError")
  warn     `warnings.warn(msg, Category)`, `warn(...)`, `warnings.warn_explicit`
           (exception = the category as written, default "UserWarning")
  log      `<logger>.warning/warn/error/critical/fatal/exception/info/
           warning_once/warning_advice/info_once(...)` where <logger> is
           `logging` or a name looking like a logger (log, logger, _logger,
           LOGGER, self.logger, ...); plus `self.warning(...)` /
           `self.warning_once(...)` (e.g. DeepSpeed's OpBuilder.warning),
           DeepSpeed's `log_dist(msg, ranks, level=...)`, and the notice
           helpers called by bare name in NOTICE_FUNCTIONS (Lightning's
           `rank_zero_warn/info/deprecation`, torch's `warn_once(msg)`,
           `_warn_once(id, message)`, `warning_once(logger, msg)`; a
           helper that warns through `warnings` is a `warn` site).  (`print`
           is not a site.)
           (exception = the level: INFO / WARNING / ERROR / CRITICAL)
  check    `torch._check*(cond, msg_or_lambda)`, `torch._check_with(Exc,
           cond, msg)` and the same called by bare name (`_check_value(...)`)
           (exception = RuntimeError / IndexError / ValueError / TypeError /
           NotImplementedError, or the class given to _check_with)

The message
-----------
`parts` is the list of literal strings between placeholders, so that
"{}".join(parts) == text.  It is rebuilt from: str literals, implicit
concatenation, `+`, f-strings (each replacement field is one placeholder),
`"..." % args` (each %-conversion a placeholder, %% literal), logging's lazy
`logger.x("... %s", arg)`, `"...".format(...)` (each {} / {name} a
placeholder, {{ }} literal braces), a lambda returning such a string,
`"sep".join([...literal list...])`, `"\n".join(lines)` of a list the function builds
(`lines = [...]`, `.append`, `.insert`, `.extend([...])`, `+= [...]`: one site per line, since each
prints on its own line; `via` names the line), `textwrap.dedent` / `inspect.cleandoc`
/ `.strip()` / `.replace("a", "b")` wrappers, a tuple used as message (shown
as its repr), and a variable holding a string (best effort, recorded in
`via`): the nearest assignment above the site in the same function, plus any
`+=` after it; else the same in the enclosing functions (closures); else the
str default of a parameter of that name; else a module-level assignment.
Any other expression is one placeholder; its source text is kept, in order,
in `placeholders`.  A site whose message has no literal text at all gets
parts = [] and "unreadable": true (so does a site with no message, or an
empty message such as `lambda: ""`, which also has "has_message": false).

Record fields
-------------
library, version, source ("python"), file (relative to --root), line, col,
function (enclosing Class.def / def.def, "<module>" at top level), kind,
call (the callee as written, for warn/log/check; the raised expression for
raise), exception, parts, placeholders, text (parts joined by "{}"),
unreadable, has_message, via (variable the message was read from, or null),
condition (source of the asserted / checked condition, assert & check only,
else null), scope ("in" | "out"), scope_why.

Scope
-----
"in" when the site concerns attention, precision, or kernels/builds/versions:
  1. a site with no message at all is "out" ("internal assertion without
     message" / "no message") -- there is no text for `explain` to match;
  2. else a keyword of MESSAGE_KEYWORDS found in the literal text of the
     message -> in ("message keywords: ...");
  3. else the same keywords in the exception/category name -> in;
  4. else the file path (and, for some files, the enclosing function) matches
     PATH_RULES -> in ("file path: ...");
  5. else the same keywords in a placeholder's source expression (e.g.
     `{q.dtype}`) -> in ("placeholder expression: ...");
  6. else the same keywords in the asserted / checked condition of an
     assert or torch._check that has a message (e.g. `q.dtype == k.dtype`)
     -> in ("checked condition: ...");
  7. otherwise "out" ("no attention/precision/kernel/version words", or
     "message unreadable and no attention/precision/kernel/version evidence").
The exact lists are printed at the end of --help.
"""
from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import re
import string
import sys
import textwrap
import warnings
from typing import Dict, List, Optional, Sequence, Tuple, Union

# --------------------------------------------------------------------------
# Scope lists (documented; printed by --help)
# --------------------------------------------------------------------------

# (label, regex) -- matched case-insensitively against the literal text of a
# message (placeholders removed, parts joined by a space).  Short words that
# occur inside ordinary words use \b word boundaries.
MESSAGE_KEYWORDS: List[Tuple[str, str]] = [
    # attention
    ("attention", r"attention"),
    ("attn", r"attn"),
    ("sdpa", r"sdpa"),
    ("scaled_dot_product", r"scaled[_ ]dot[_ ]product"),
    ("flash", r"flash"),
    ("xformers", r"xformers"),
    ("mem_efficient", r"mem(ory)?[_ ]efficient"),
    ("flex", r"\bflex"),
    ("head dim", r"head[_ ]?dim|head[_ ]size|headdim|head dimension"),
    ("num_heads", r"num_(kv_)?heads|n_heads|\bheads\b"),
    ("causal", r"causal"),
    ("mask", r"mask"),
    ("seqlen", r"seq_?lens?\b|cu_seqlens|sequence length|max_seqlen"),
    ("window", r"window_size|sliding[_ ]window"),
    ("softcap", r"softcap"),
    ("alibi", r"alibi"),
    ("rotary", r"rotary|\brope\b"),
    ("kv cache", r"kv[_ ]?cache|paged|block_table|page_table"),
    ("gqa/mqa", r"\bgqa\b|\bmqa\b|\bmla\b"),
    ("varlen", r"varlen"),
    ("softmax", r"softmax"),
    # precision
    ("dtype", r"dtype"),
    ("bf16", r"bf16|bfloat16"),
    ("fp16", r"fp16|float16|\bhalf\b"),
    ("fp32", r"fp32|float32|fp64|float64"),
    ("fp8/fp4", r"fp8|float8|e4m3|e5m2|fp4|mxfp|nvfp4"),
    ("int8/quant", r"int8|int4|quantiz"),
    ("tf32", r"tf32"),
    ("precision", r"precision"),
    ("autocast/amp", r"autocast|\bamp\b"),
    ("GradScaler", r"gradscaler|grad[_ ]scaler|\bscaler\b|loss[_ ]scal"),
    ("unscale", r"unscale"),
    ("overflow", r"overflow|underflow"),
    ("nan", r"\bnans?\b"),
    ("inf", r"\binfs?\b|infinity|non-?finite|\bfinite\b"),
    # kernels / compilation
    ("triton", r"triton"),
    ("compile", r"compil"),
    ("inductor", r"inductor"),
    ("dynamo", r"dynamo|graph break|fullgraph"),
    ("cudagraph", r"cuda ?graph"),
    ("kernel", r"kernel(?!_?size| width| height| dilation)"),
    ("cuda", r"cuda"),
    ("cudnn", r"cudnn"),
    ("cublas", r"cublas"),
    ("cutlass/cute", r"cutlass|\bcute\b|cutedsl"),
    ("nvcc/ptx", r"nvcc|ptxas|\bptx\b|cubin|nvrtc|\bsass\b"),
    ("capability", r"capability"),
    ("sm_", r"\bsm_?\d|\bsm_\b|\bsm\d+"),
    ("arch", r"\barchs?\b|arch_list|(gpu|cuda|device|hardware|compute) architecture"),
    ("gpu generation", r"hopper|ampere|blackwell|volta|turing|\bada\b"),
    ("gpu", r"gpu"),
    ("rocm/hip", r"rocm|\bhip\b|\bamd\b"),
    ("mps/xpu", r"\bmps\b|\bxpu\b|\bmetal\b|\bnpu\b"),
    ("backend", r"backend"),
    ("shared memory", r"shared[_ ]mem|\bsmem\b"),
    ("OutOfResources", r"out ?of ?resources"),
    ("out of memory", r"out of memory|\boom\b"),
    ("registers/warps", r"num_warps|num_stages|\bwarps?\b|registers"),
    ("autotune", r"autotun"),
    ("deterministic", r"determinis"),
    # builds / versions
    ("version", r"version"),
    ("build", r"\bbuild(s|ing)?\b|\bbuilt\b"),
    ("compiled", r"compiled"),
    ("install", r"install"),
    ("wheel/pip", r"\bwheel|\bpip\b"),
    ("ABI", r"\babi\b|cxx11"),
    ("symbol", r"symbol"),
    ("shared library", r"\.so\b|shared (library|object)|libcuda|ld_library_path|dlopen"),
    ("extension", r"extension|ninja|cpp_extension"),
    ("jit", r"\bjit\b"),
]

# Keywords looked for in exception / warning-category names (rule 3).
EXCEPTION_KEYWORDS: List[Tuple[str, str]] = [
    ("OutOfResources", r"outofresources"),
    ("compilation", r"compil"),
    ("triton", r"triton"),
    ("cuda", r"cuda"),
    ("kernel", r"kernel(?!_?size| width| height| dilation)"),
    ("backend", r"backend"),
    ("inductor", r"inductor"),
    ("version", r"version"),
    ("precision", r"precision|dtype|overflow"),
    ("attention", r"attention|attn"),
    ("out of memory", r"outofmemory"),
]

# (glob on the file path relative to --root, optional "::" glob on the
# enclosing function's qualified name, reason).  `*` stays in one path
# component, `**` crosses folders; function globs are case-insensitive.
PATH_RULES: List[Tuple[str, str, str]] = [
    # torch
    ("torch/nn/attention/**", "", "torch attention package"),
    ("torch/nn/functional.py", "*attention*|*attn*|_mha*|_in_projection*|_canonical_mask|_none_or_dtype|_check_key_padding_mask",
     "torch.nn.functional attention function"),
    ("torch/nn/modules/activation.py", "MultiheadAttention*", "nn.MultiheadAttention"),
    ("torch/nn/modules/transformer.py", "", "nn.Transformer* (SDPA fast path)"),
    ("torch/amp/**", "", "torch.amp (autocast / GradScaler)"),
    ("torch/cuda/**", "", "torch.cuda"),
    ("torch/backends/**", "", "torch.backends (cudnn/cuda/mps flags)"),
    ("torch/mps/**", "", "torch.mps"),
    ("torch/utils/cpp_extension.py", "", "C++/CUDA extension builds"),
    ("torch/utils/_triton.py", "", "triton availability"),
    ("torch/_inductor/kernel/flex/**", "", "inductor flex-attention kernels"),
    ("torch/_inductor/kernel/flex*", "", "inductor flex-attention kernels"),
    ("torch/_inductor/lowering.py", "*attention*|*flex*|*sdpa*|*flash*", "inductor attention lowering"),
    ("torch/_higher_order_ops/flex_attention.py", "", "flex_attention higher-order op"),
    ("torch/_meta_registrations.py", "*attention*|*flash*|*efficient*|*cudnn*|*sdpa*", "meta kernel of an attention op"),
    ("torch/_decomp/decompositions.py", "*attention*|*sdpa*", "attention decomposition"),
    ("torch/distributed/fsdp/sharded_grad_scaler.py", "", "FSDP ShardedGradScaler"),
    ("torch/distributed/fsdp/_fully_shard/_fsdp_api.py", "", "FSDP2 MixedPrecisionPolicy"),
    ("torch/distributed/fsdp/api.py", "MixedPrecision*", "FSDP MixedPrecision"),
    # triton
    ("triton/compiler/**", "", "triton compiler"),
    ("triton/runtime/**", "", "triton runtime (jit/autotune/cache/driver)"),
    ("triton/backends/**", "", "triton backends (arch/ptxas/driver)"),
    # transformers
    ("transformers/integrations/*attention*", "", "transformers attention integration"),
    ("transformers/integrations/*flash*", "", "transformers flash integration"),
    ("transformers/integrations/*sdpa*", "", "transformers sdpa integration"),
    ("transformers/integrations/*paged*", "", "transformers paged attention"),
    ("transformers/integrations/hub_kernels.py", "", "transformers hub kernels"),
    ("transformers/modeling_flash_attention_utils.py", "", "transformers flash-attention utils"),
    ("transformers/masking_utils.py", "", "transformers attention masks"),
    ("transformers/utils/import_utils.py", "", "transformers package availability/versions"),
    ("transformers/modeling_utils.py", "*attn*|*attention*|*sdpa*|*flash*|*kernel*|*dtype*", "transformers attention/dtype selection"),
    # accelerate
    ("accelerate/utils/*precision*", "", "accelerate precision utils"),
    ("accelerate/utils/imports.py", "", "accelerate package availability"),
    ("accelerate/utils/versions.py", "", "accelerate version checks"),
    ("accelerate/utils/transformer_engine.py", "", "accelerate TransformerEngine fp8"),
    ("accelerate/utils/ao.py", "", "accelerate torchao fp8"),
    ("accelerate/accelerator.py", "*precision*|*autocast*|*fp8*|*scaler*|*unscale*", "accelerate mixed precision"),
    # kernel libraries: all their listed code is attention / kernels / builds
    ("flash_attn/*.py", "", "flash-attn interface"),
    ("flash_attn/cute/**", "", "flash-attn 4 (CuTe DSL)"),
    ("flash_attn/ops/**", "", "flash-attn kernels"),
    ("flash_attn/layers/**", "", "flash-attn rotary/patch layers"),
    ("flash_attn/modules/mha.py", "", "flash-attn MHA module"),
    ("hopper/*.py", "", "flash-attn 3 (hopper)"),
    ("xformers/**", "", "xformers ops / build info"),
    ("flashinfer/**", "", "flashinfer"),
    ("sageattention/**", "", "SageAttention"),
    ("kernels/**", "", "huggingface kernels loader"),
    ("deepspeed/runtime/fp16/**", "", "DeepSpeed fp16 optimizer / loss scaler"),
    ("deepspeed/runtime/bf16_optimizer.py", "", "DeepSpeed bf16 optimizer"),
    ("op_builder/**", "", "DeepSpeed op builder (builds)"),
    ("deepspeed/ops/op_builder/**", "", "DeepSpeed op builder (builds)"),
    ("bitsandbytes/**", "", "bitsandbytes CUDA setup / diagnostics"),
    ("vllm/attention/**", "", "vllm attention"),
    ("vllm/v1/attention/**", "", "vllm attention backends"),
    ("vllm/platforms/cuda.py", "", "vllm CUDA platform"),
    ("python/sglang/srt/layers/attention/**", "", "sglang attention backends"),
    ("sglang/srt/layers/attention/**", "", "sglang attention backends"),
]

LOG_METHODS = {
    "info": "INFO", "info_once": "INFO",
    "warning": "WARNING", "warn": "WARNING", "warning_once": "WARNING",
    "warning_advice": "WARNING", "warn_once": "WARNING",
    "error": "ERROR", "exception": "ERROR",
    "critical": "CRITICAL", "fatal": "CRITICAL",
}
LOGGER_RECEIVER = re.compile(r"(^|[._])(_*log|_*logger|logging|_*LOG|_*LOGGER|log_|logger_)$|logger", re.I)
SELF_LOG_METHODS = {"warning", "warning_once"}
# Functions called by bare name that print a notice (Lightning's rank-zero helpers, torch's warn_once
# helpers): name -> (kind, exception, index of the message argument, its keyword).
NOTICE_FUNCTIONS = {
    "rank_zero_warn": ("warn", "UserWarning", 0, "message"),
    "rank_zero_deprecation": ("warn", "LightningDeprecationWarning", 0, "message"),
    "rank_zero_info": ("log", "INFO", 0, "msg"),
    "warn_once": ("warn", "UserWarning", 0, "msg"),
    "_warn_once": ("warn", "UserWarning", 1, "message"),  # torch's FlexAttention: _warn_once(warning_id, message, category)
    "warning_once": ("log", "WARNING", 1, "msg"),  # torch._logging: warning_once(logger, msg, *args)
}

CHECK_EXCEPTIONS = {
    "_check": "RuntimeError",
    "_check_is_size": "RuntimeError",
    "_check_index": "IndexError",
    "_check_value": "ValueError",
    "_check_type": "TypeError",
    "_check_not_implemented": "NotImplementedError",
}
MSG_KEYWORD_NAMES = ("msg", "message", "reason", "explanation", "error_message")

# --------------------------------------------------------------------------
# Message reconstruction
# --------------------------------------------------------------------------


class Ph:
    """A placeholder: an expression whose value is not known statically."""

    __slots__ = ("src",)

    def __init__(self, src: str):
        self.src = src


Seg = Union[str, Ph]
SENTINEL = "\x00"
MAX_SRC = 120


def _src(node: ast.AST) -> str:
    try:
        s = ast.unparse(node)
    except Exception:  # pragma: no cover - very defensive
        s = type(node).__name__
    s = " ".join(s.split())
    return s if len(s) <= MAX_SRC else s[: MAX_SRC - 3] + "..."


def _merge(segs: Sequence[Seg]) -> List[Seg]:
    out: List[Seg] = []
    for s in segs:
        if isinstance(s, str):
            if not s:
                continue
            if out and isinstance(out[-1], str):
                out[-1] = out[-1] + s
                continue
        out.append(s)
    return out


def _has_text(segs: Sequence[Seg]) -> bool:
    return any(isinstance(s, str) and s for s in segs)


def _join_sentinel(segs: Sequence[Seg]) -> Tuple[str, List[Ph]]:
    phs = [s for s in segs if isinstance(s, Ph)]
    text = "".join(s if isinstance(s, str) else SENTINEL for s in segs)
    return text, phs


def _restore(text: str, phs: List[Ph], k: int, out: List[Seg]) -> int:
    """Append `text` to `out` with each sentinel replaced by the next hidden placeholder (phs[k],
    phs[k + 1], ...); the index of the next one unused."""
    pieces = text.split(SENTINEL)
    for i, p in enumerate(pieces):
        out.append(p)
        if i < len(pieces) - 1:
            out.append(phs[k] if k < len(phs) else Ph("?"))
            k += 1
    return k


def _split_sentinel(text: str, phs: List[Ph]) -> List[Seg]:
    pieces = text.split(SENTINEL)
    out: List[Seg] = []
    for i, p in enumerate(pieces):
        out.append(p)
        if i < len(pieces) - 1:
            out.append(phs[i] if i < len(phs) else Ph("?"))
    return _merge(out)


_PRINTF = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?(?P<conv>[diouxXeEfFgGcrsa%])"
)


def _printf(segs: List[Seg], args: Optional[ast.AST], arg_list: Optional[List[ast.AST]] = None) -> List[Seg]:
    """Apply %-formatting: each conversion becomes a placeholder."""
    text, phs = _join_sentinel(segs)
    positional: List[ast.AST] = []
    mapping: Dict[str, ast.AST] = {}
    if arg_list is not None and len(arg_list) == 1 and isinstance(arg_list[0], ast.Dict):
        args, arg_list = arg_list[0], None
    if arg_list is not None:
        positional = list(arg_list)
    elif isinstance(args, ast.Tuple):
        positional = list(args.elts)
    elif isinstance(args, ast.Dict):
        for k, v in zip(args.keys, args.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                mapping[k.value] = v
    elif args is not None:
        positional = [args]
    out: List[Seg] = []
    pos = 0
    idx = 0
    for m in _PRINTF.finditer(text):
        out.append(text[pos:m.start()])
        pos = m.end()
        if m.group("conv") == "%":
            out.append("%")
            continue
        key = m.group("key")
        if key is not None:
            src = _src(mapping[key]) if key in mapping else key
        elif idx < len(positional):
            src = _src(positional[idx])
        elif args is not None and not positional and not mapping:
            src = _src(args)
        else:
            src = "%" + m.group("conv")
        idx += 1
        out.append(Ph(src))
    out.append(text[pos:])
    # restore the earlier placeholders hidden behind the sentinel
    final: List[Seg] = []
    k = 0
    for s in out:
        if isinstance(s, str) and SENTINEL in s:
            k = _restore(s, phs, k, final)
        else:
            final.append(s)
    return _merge(final)


def _format(segs: List[Seg], call: ast.Call) -> List[Seg]:
    """Apply str.format: each replacement field becomes a placeholder."""
    text, phs = _join_sentinel(segs)
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    pos_args = list(call.args)
    out: List[Seg] = []
    auto = 0
    k = 0
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return [Ph(_src(call))]
    for literal, field, _spec, _conv in parsed:
        if literal:
            k = _restore(literal, phs, k, out)
        if field is None:
            continue
        base = re.split(r"[.\[]", field, maxsplit=1)[0]
        if base == "":
            node = pos_args[auto] if auto < len(pos_args) else None
            auto += 1
        elif base.isdigit():
            i = int(base)
            node = pos_args[i] if i < len(pos_args) else None
        else:
            node = kw.get(base)
        src = _src(node) if node is not None else field
        if node is not None and field != base:
            src += field[len(base):]
        out.append(Ph(src or "{}"))
    return _merge(out)


class Resolver:
    """Turns a message expression into segments (literals and placeholders)."""

    def __init__(self, assigns_for_scope, module_assigns):
        # assigns_for_scope: callable(scope_node) -> {name: [(line, kind, value_node)]}
        self._assigns_for_scope = assigns_for_scope
        self._module_assigns = module_assigns
        self.via: Optional[str] = None

    def segments(self, node: ast.AST, scope: Optional[ast.AST], line: int, depth: int = 0) -> List[Seg]:
        if depth > 12:
            return [Ph(_src(node))]
        r = lambda n: self.segments(n, scope, line, depth + 1)  # noqa: E731

        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return [node.value] if node.value else []
            return [Ph(_src(node))]
        if isinstance(node, ast.JoinedStr):
            out: List[Seg] = []
            for v in node.values:
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    out.append(v.value)
                elif isinstance(v, ast.FormattedValue):
                    out.append(Ph(_src(v.value)))
                else:
                    out.append(Ph(_src(v)))
            return _merge(out)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return _merge(r(node.left) + r(node.right))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = r(node.left)
            if _has_text(left):
                return _printf(left, node.right)
            return [Ph(_src(node))]
        if isinstance(node, ast.Lambda):
            return r(node.body)
        if isinstance(node, ast.Tuple) and node.elts:
            # a tuple used as message (often a stray comma): shown as its repr
            out = ["("]
            for i, e in enumerate(node.elts):
                if i:
                    out.append(", ")
                inner = r(e)
                if isinstance(e, (ast.Constant, ast.JoinedStr)) and _has_text(inner):
                    out.extend(["'"] + inner + ["'"])
                else:
                    out.extend(inner)
            out.append(",)" if len(node.elts) == 1 else ")")
            return _merge(out)
        if isinstance(node, ast.Name):
            return self._resolve_name(node, scope, line, depth)
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute):
                if f.attr == "format":
                    recv = r(f.value)
                    if _has_text(recv):
                        return _format(recv, node)
                    return [Ph(_src(node))]
                if f.attr in ("strip", "rstrip", "lstrip") and len(node.args) <= 1:
                    recv = r(f.value)
                    arg = node.args[0] if node.args else None
                    if _has_text(recv) and (arg is None or isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                        text, phs = _join_sentinel(recv)
                        text = getattr(text, f.attr)(arg.value if arg is not None else None)
                        return _split_sentinel(text, phs)
                    return [Ph(_src(node))]
                if f.attr == "replace" and len(node.args) == 2 and all(
                        isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args):
                    recv = r(f.value)
                    if _has_text(recv):
                        text, phs = _join_sentinel(recv)
                        return _split_sentinel(text.replace(node.args[0].value, node.args[1].value), phs)
                    return [Ph(_src(node))]
                if f.attr == "join" and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
                    sep = r(f.value)
                    out = []
                    for i, e in enumerate(node.args[0].elts):
                        if i:
                            out.extend(sep)
                        out.extend(r(e))
                    return _merge(out)
                if f.attr in ("dedent", "cleandoc") and node.args:
                    return self._dedent(r(node.args[0]), f.attr)
            if isinstance(f, ast.Name):
                if f.id in ("dedent", "cleandoc") and node.args:
                    return self._dedent(r(node.args[0]), f.id)
                if f.id == "str" and len(node.args) == 1:
                    inner = r(node.args[0])
                    if _has_text(inner):
                        return inner
            return [Ph(_src(node))]
        return [Ph(_src(node))]

    @staticmethod
    def _dedent(segs: List[Seg], how: str) -> List[Seg]:
        text, phs = _join_sentinel(segs)
        text = textwrap.dedent(text) if how == "dedent" else inspect.cleandoc(text)
        return _split_sentinel(text, phs)

    def _resolve_name(self, node: ast.Name, scope, line: int, depth: int) -> List[Seg]:
        """Look `name` up in the enclosing functions (innermost first: nearest
        assignment above `line` plus later `+=`; or a parameter's str default),
        then at module level."""
        name = node.id
        chain = tuple(scope or ())
        for idx in range(len(chain) - 1, -1, -1):
            func = chain[idx]
            entries = [e for e in self._assigns_for_scope(func).get(name, []) if e[0] < line]
            if entries:
                where = "local" if idx == len(chain) - 1 else "enclosing-function"
                return self._from_entries(name, entries, chain[:idx + 1], where, depth, line)
            default = _param_default(func, name)
            if default is not None:
                if default is _NO_DEFAULT:
                    return [Ph(name)]
                segs = self.segments(default, chain[:idx], default.lineno, depth + 1)
                if _has_text(segs):
                    if self.via is None:
                        self.via = "default of parameter %s (line %d)" % (name, default.lineno)
                    return segs
                return [Ph(name)]
        entries = [e for e in self._module_assigns.get(name, []) if e[0] < line or chain]
        if entries:
            return self._from_entries(name, entries, (), "module", depth, line)
        return [Ph(name)]

    def _from_entries(self, name, entries, chain, where, depth, line) -> List[Seg]:
        # nearest plain assignment above, then any `+=` after it that runs on every path to the site
        base_i = None
        for i in range(len(entries) - 1, -1, -1):
            if entries[i][1] == "=":
                base_i = i
                break
        if base_i is None:
            return [Ph(name)]
        aline, _, value = entries[base_i]
        def joined(keep) -> List[Seg]:
            segs = self.segments(value, chain, aline, depth + 1)
            for eline, kind, evalue in entries[base_i + 1:]:
                if kind == "+=" and keep(evalue):
                    segs = _merge(segs + self.segments(evalue, chain, eline, depth + 1))
            return segs

        segs = joined(lambda v: where != "local" or _always_before(v, line))
        if not _has_text(segs):  # only its branches have words (msg = "" then msg += ... in an if): read them all
            segs = joined(lambda v: True)
        if _has_text(segs):
            if self.via is None:
                self.via = "%s variable %s (line %d)" % (where, name, aline)
            return segs
        return [Ph(name)]


_NO_DEFAULT = ast.Constant(value=None)


def _param_default(func: ast.AST, name: str):
    """The default expression of parameter `name` of `func`, _NO_DEFAULT if it
    is a parameter without default, None if it is not a parameter."""
    a = getattr(func, "args", None)
    if a is None:
        return None
    positional = list(getattr(a, "posonlyargs", [])) + list(a.args)
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, d in zip(positional, defaults):
        if arg.arg == name:
            return d if d is not None else _NO_DEFAULT
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        if arg.arg == name:
            return d if d is not None else _NO_DEFAULT
    for arg in (a.vararg, a.kwarg):
        if arg is not None and arg.arg == name:
            return _NO_DEFAULT
    return None


_BRANCHING = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


def _mark_branches(scope: ast.AST) -> None:
    """Give each `+=`'s value the line spans of the branches it sits in (`_branches`): a `+=` in a
    branch that does not hold the site (`if cuda: msg += " You need Ampere+ GPU"` above the raise)
    may not have run, so it is not part of the message the site always prints."""
    todo = [(child, ()) for child in ast.iter_child_nodes(scope)]
    while todo:
        n, spans = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.AugAssign):
            n.value._branches = spans
        for field, value in ast.iter_fields(n):
            if isinstance(n, _BRANCHING) and field in ("body", "orelse", "handlers", "finalbody"):
                if value:  # a block that may not run: its statements carry its span
                    span = (value[0].lineno, getattr(value[-1], "end_lineno", value[-1].lineno))
                    todo.extend((child, spans + (span,)) for child in value)
            else:
                todo.extend((child, spans) for child in (value if isinstance(value, list) else [value])
                            if isinstance(child, ast.AST))


def _always_before(value: ast.AST, line: int) -> bool:
    """Whether a `+=` whose value this is ran on every path to `line` (no branch of its own that
    `line` is outside)."""
    return all(start <= line <= end for start, end in getattr(value, "_branches", ()))


def _collect_assigns(body_owner: ast.AST) -> Dict[str, List[Tuple[int, str, ast.AST]]]:
    """Name -> [(line, '=' | '+=', value)] in a function/module body, not
    descending into nested defs, classes or lambdas."""
    _mark_branches(body_owner)
    table: Dict[str, List[Tuple[int, str, ast.AST]]] = {}
    for child in _walk_own(body_owner):
        if isinstance(child, ast.Assign):
            for t in child.targets:
                if isinstance(t, ast.Name):
                    table.setdefault(t.id, []).append((child.lineno, "=", child.value))
        elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name) and child.value is not None:
            table.setdefault(child.target.id, []).append((child.lineno, "=", child.value))
        elif isinstance(child, ast.AugAssign) and isinstance(child.target, ast.Name) and isinstance(child.op, ast.Add):
            table.setdefault(child.target.id, []).append((child.lineno, "+=", child.value))
    for v in table.values():
        v.sort(key=lambda e: (e[0], e[2].col_offset))
    return table


def _list_elements(value: ast.AST, out: List[ast.AST]) -> bool:
    """The element expressions of a list literal, a comprehension (its element) or a sum of them;
    False for anything else (a list read from elsewhere cannot be printed line by line)."""
    if isinstance(value, (ast.List, ast.Tuple)):
        out.extend(e for e in value.elts if not isinstance(e, ast.Starred))
        return True
    if isinstance(value, ast.ListComp):
        out.append(value.elt)
        return True
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        return _list_elements(value.left, out) and _list_elements(value.right, out)
    return False


def _walk_own(scope: ast.AST):
    """Every node of a function's body, not descending into nested defs, classes or lambdas."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield n
        todo.extend(ast.iter_child_nodes(n))


# --------------------------------------------------------------------------
# Site finding
# --------------------------------------------------------------------------


def _callee(f: ast.AST) -> str:
    return _src(f)


def _last_name(f: ast.AST) -> str:
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


class SiteVisitor(ast.NodeVisitor):
    def __init__(self):
        self.sites: List[dict] = []
        self.stack: List[str] = []
        self.scopes: List[ast.AST] = []
        self._assign_cache: Dict[int, Dict] = {}
        self.module_assigns: Dict = {}
        self.skipped_reraise = 0

    # -- scoping
    def assigns_for(self, scope: ast.AST):
        key = id(scope)
        if key not in self._assign_cache:
            self._assign_cache[key] = _collect_assigns(scope)
        return self._assign_cache[key]

    def visit_Module(self, node: ast.Module):
        self.module_assigns = _collect_assigns(node)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef):
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    def _visit_func(self, node):
        self.stack.append(node.name)
        self.scopes.append(node)
        self.generic_visit(node)
        self.scopes.pop()
        self.stack.pop()

    visit_FunctionDef = _visit_func
    visit_AsyncFunctionDef = _visit_func

    # -- helpers
    def _func_name(self) -> str:
        return ".".join(self.stack) if self.stack else "<module>"

    def _message(self, node: Optional[ast.AST], line: int, printf_args: Optional[List[ast.AST]] = None):
        if node is None:
            return None, None
        res = Resolver(self.assigns_for, self.module_assigns)
        segs = res.segments(node, tuple(self.scopes), line)
        if printf_args and _has_text(segs):
            segs = _printf(segs, None, printf_args)
        return segs, res.via

    def _add(self, node: ast.AST, kind: str, call: str, exception: str, msg_node: Optional[ast.AST],
             condition: Optional[ast.AST] = None, printf_args=None):
        lines = self._joined_lines(msg_node, node.lineno)
        if lines:
            # a message built as a list of lines and joined by a newline prints each line on its own:
            # each line (of either branch that appends it) is a message a user pastes
            name, aline = lines[0]
            for elt in lines[1]:
                segs, _ = self._message(elt, node.lineno)
                self._record(node, kind, call, exception, segs,
                             "line %d of list %s joined by newlines (line %d)" % (elt.lineno, name, aline), condition)
            return
        segs, via = self._message(msg_node, node.lineno, printf_args)
        self._record(node, kind, call, exception, segs, via, condition)

    def _joined_lines(self, msg_node: Optional[ast.AST], line: int):
        """`"\n".join(NAME)` where NAME is a list this function builds: (NAME, line of its
        assignment), and the expressions of its elements (the list's own, each `append`,
        `insert`, `extend([...])` and `+= [...]` after it and above the site)."""
        if not (isinstance(msg_node, ast.Call) and isinstance(msg_node.func, ast.Attribute)
                and msg_node.func.attr == "join" and len(msg_node.args) == 1
                and isinstance(msg_node.func.value, ast.Constant) and isinstance(msg_node.func.value.value, str)
                and "\n" in msg_node.func.value.value and isinstance(msg_node.args[0], ast.Name)):
            return None
        name = msg_node.args[0].id
        scope = self.scopes[-1] if self.scopes else None
        if scope is None:
            return None
        entries = [e for e in self.assigns_for(scope).get(name, []) if e[0] < line]
        base = next((e for e in reversed(entries) if e[1] == "="), None)
        if base is None or sum(1 for e in entries if e[1] == "=") > 1:
            return None  # a list assigned more than once (in branches): its lines cannot be told apart here
        aline = base[0]
        elts: List[ast.AST] = []
        if not _list_elements(base[2], elts):
            return None
        for eline, kind, value in entries:
            if kind == "+=" and eline > aline and not _list_elements(value, elts):
                return None
        for n in _walk_own(scope):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and isinstance(n.func.value, ast.Name) and n.func.value.id == name
                    and aline < n.lineno < line):
                if n.func.attr == "append" and len(n.args) == 1:
                    elts.append(n.args[0])
                elif n.func.attr == "insert" and len(n.args) == 2:
                    elts.append(n.args[1])
                elif n.func.attr == "extend" and len(n.args) == 1:
                    if not _list_elements(n.args[0], elts):
                        return None
        if not elts:
            return None  # filled elsewhere (a helper): the site stays one, unreadable, and is counted
        elts.sort(key=lambda e: (e.lineno, e.col_offset))
        return (name, aline), elts

    def _record(self, node, kind, call, exception, segs, via, condition):
        self.sites.append({
            "line": node.lineno,
            "col": node.col_offset,
            "function": self._func_name(),
            "kind": kind,
            "call": call,
            "exception": exception,
            "segs": segs,
            "via": via,
            "condition": _src(condition) if condition is not None else None,
        })

    @staticmethod
    def _pick_message_arg(call: ast.Call, skip: int = 0) -> Optional[ast.AST]:
        for k in call.keywords:
            if k.arg in MSG_KEYWORD_NAMES:
                return k.value
        args = [a for a in call.args[skip:] if not isinstance(a, ast.Starred)]
        if not args:
            return None
        # first positional argument that reads as text (e.g. triton's
        # `self._unsupported(node, "msg")`), else the first one
        for a in args:
            if isinstance(a, (ast.Constant, ast.JoinedStr)) and (not isinstance(a, ast.Constant) or isinstance(a.value, str)):
                return a
            if isinstance(a, ast.BinOp) and isinstance(a.op, (ast.Add, ast.Mod)):
                return a
            if isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr in ("format", "join"):
                return a
        return args[0]

    # -- sites
    def visit_Raise(self, node: ast.Raise):
        exc = node.exc
        if exc is None:
            self.skipped_reraise += 1
        elif isinstance(exc, ast.Call):
            self._add(node, "raise", _callee(exc.func), _callee(exc.func), self._pick_message_arg(exc))
        elif isinstance(exc, (ast.Name, ast.Attribute)) and _last_name(exc)[:1].isupper():
            self._add(node, "raise", _callee(exc), _callee(exc), None)
        else:
            self.skipped_reraise += 1
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert):
        self._add(node, "assert", "assert", "AssertionError", node.msg, condition=node.test)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call):
        f = node.func
        name = _last_name(f)
        recv = f.value if isinstance(f, ast.Attribute) else None
        recv_src = _src(recv) if recv is not None else ""
        callee = _callee(f)
        if name in ("warn", "warn_explicit") and (recv is None or recv_src == "warnings"):
            category = None
            for k in node.keywords:
                if k.arg == "category":
                    category = k.value
            if category is None and len(node.args) >= 2:
                category = node.args[1]
            cat = _src(category) if category is not None else "UserWarning"
            msg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "message"), None)
            self._add(node, "warn", callee, cat, msg)
        elif recv is not None and name in LOG_METHODS and (
                LOGGER_RECEIVER.search(recv_src) or (recv_src == "self" and name in SELF_LOG_METHODS)):
            msg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("msg", "message")), None)
            extra = [a for a in node.args[1:] if not isinstance(a, ast.Starred)]
            self._add(node, "log", callee, LOG_METHODS[name], msg, printf_args=extra or None)
        elif recv is None and name in NOTICE_FUNCTIONS:
            kind, exception, i, keyword = NOTICE_FUNCTIONS[name]
            msg = node.args[i] if len(node.args) > i else next((k.value for k in node.keywords if k.arg == keyword), None)
            if msg is not None:
                rest = [a for a in node.args[i + 1:] if not isinstance(a, ast.Starred)] if kind == "log" else []
                self._add(node, kind, callee, exception, msg, printf_args=rest or None)
        elif recv is None and name == "log_dist" and node.args:
            # DeepSpeed's log_dist(message, ranks=None, level=logging.INFO)
            level = "INFO"
            for k in node.keywords:
                if k.arg == "level":
                    level = _src(k.value).split(".")[-1].upper()
            self._add(node, "log", callee, level, node.args[0])
        elif name.startswith("_check") and (
                name in CHECK_EXCEPTIONS or name == "_check_with") and (
                recv is None or recv_src in ("torch", "torch._prims_common", "utils", "prims_common")):
            if name == "_check_with":
                exc = _src(node.args[0]) if node.args else "?"
                cond = node.args[1] if len(node.args) > 1 else None
                msg = node.args[2] if len(node.args) > 2 else next(
                    (k.value for k in node.keywords if k.arg in ("message", "msg")), None)
            else:
                exc = CHECK_EXCEPTIONS[name]
                cond = node.args[0] if node.args else None
                msg = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg in ("message", "msg")), None)
            if name != "_check_is_size" or msg is not None:
                self._add(node, "check", callee, exc, msg, condition=cond)
        self.generic_visit(node)


# --------------------------------------------------------------------------
# Scope
# --------------------------------------------------------------------------

_MSG_RES = [(label, re.compile(rx, re.I)) for label, rx in MESSAGE_KEYWORDS]
_EXC_RES = [(label, re.compile(rx, re.I)) for label, rx in EXCEPTION_KEYWORDS]


def _glob_re(pattern: str) -> "re.Pattern[str]":
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append(r"(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(r".*")
            i += 2
            continue
        if c == "*":
            out.append(r"[^/]*")
        elif c == "?":
            out.append(r"[^/]")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("^" + "".join(out) + "$")


_PATH_RES = [(_glob_re(p), [re.compile(_glob_re(g).pattern.replace("[^/]", "."), re.I) for g in f.split("|")] if f else None,
              p, f, why) for p, f, why in PATH_RULES]


def _keywords(text: str, table) -> List[str]:
    return [label for label, rx in table if rx.search(text)]


def _path_rule(path: str, function: str) -> Optional[str]:
    for prx, frxs, p, f, why in _PATH_RES:
        if not prx.match(path):
            continue
        if frxs is None:
            return "file path: %s (%s)" % (p, why)
        names = function.split(".")
        if any(frx.match(n) for frx in frxs for n in names):
            return "file path + function: %s::%s (%s)" % (p, function, why)
    return None


def decide_scope(rec: dict) -> Tuple[str, str]:
    if not rec["has_message"]:
        if rec["kind"] == "assert":
            return "out", "internal assertion without message"
        return "out", "no message"
    text = " ".join(rec["parts"])
    kws = _keywords(text, _MSG_RES)
    if kws:
        return "in", "message keywords: " + ", ".join(kws)
    exc_kws = _keywords(rec["exception"] or "", _EXC_RES)
    if exc_kws:
        return "in", "exception name %s: %s" % (rec["exception"], ", ".join(exc_kws))
    pr = _path_rule(rec["file"], rec["function"])
    if pr:
        return "in", pr
    ph_kws = _keywords(" ".join(rec["placeholders"]), _MSG_RES)
    if ph_kws:
        return "in", "placeholder expression: " + ", ".join(ph_kws)
    cond_kws = _keywords(rec["condition"] or "", _MSG_RES)
    if cond_kws:
        return "in", "checked condition: " + ", ".join(cond_kws)
    if rec["unreadable"]:
        return "out", "message unreadable and no attention/precision/kernel/version evidence"
    return "out", "no attention/precision/kernel/version words"


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------


def iter_files(root: str, prefixes: Sequence[str], excludes: Sequence[str]) -> List[str]:
    root = os.path.abspath(root)
    exc_res = [_glob_re(e) for e in excludes]
    found = set()

    def add(rel: str):
        rel = rel.replace(os.sep, "/")
        if rel.endswith(".py") and "__pycache__" not in rel.split("/") and not any(r.match(rel) for r in exc_res):
            found.add(rel)

    def walk(d: str):
        for dirpath, dirnames, filenames in os.walk(d):
            dirnames[:] = sorted(x for x in dirnames if x != "__pycache__")
            for fn in filenames:
                add(os.path.relpath(os.path.join(dirpath, fn), root))

    if not prefixes:
        walk(root)
    for p in prefixes:
        p = p.strip("/") if p not in ("", "/") else ""
        full = os.path.join(root, p)
        if any(ch in p for ch in "*?["):
            rx = _glob_re(p)
            # walk from the deepest folder without wildcards
            base = []
            for comp in p.split("/"):
                if any(ch in comp for ch in "*?["):
                    break
                base.append(comp)
            start = os.path.join(root, *base) if base else root
            if os.path.isfile(start):
                start = os.path.dirname(start)
            for dirpath, dirnames, filenames in os.walk(start):
                dirnames[:] = sorted(x for x in dirnames if x != "__pycache__")
                for fn in filenames:
                    rel = os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")
                    if rx.match(rel):
                        add(rel)
        elif os.path.isdir(full):
            walk(full)
        elif os.path.isfile(full):
            add(p)
        else:
            print("warning: prefix %r matches nothing under %s" % (p, root), file=sys.stderr)
    return sorted(found)


def finish_record(site: dict, library: str, version: str, rel: str) -> dict:
    segs = site.pop("segs")
    has_message = bool(segs)  # None (no message) or "" (empty message)
    segs = segs or []
    parts: List[str] = [""]
    placeholders: List[str] = []
    for s in segs:
        if isinstance(s, str):
            parts[-1] += s
        else:
            placeholders.append(s.src)
            parts.append("")
    unreadable = not any(parts)
    if unreadable:
        parts = []
    rec = {
        "library": library,
        "version": version,
        "source": "python",
        "file": rel,
        "line": site["line"],
        "col": site["col"],
        "function": site["function"],
        "kind": site["kind"],
        "call": site["call"],
        "exception": site["exception"],
        "parts": parts,
        "placeholders": placeholders,
        "text": "{}".join(parts),
        "unreadable": unreadable,
        "has_message": has_message,
        "via": site["via"],
        "condition": site["condition"],
    }
    rec["scope"], rec["scope_why"] = decide_scope(rec)
    return rec


def extract(root: str, files: Sequence[str], library: str, version: str):
    records = []
    stats = {"files_found": len(files), "files_parsed": 0, "parse_failures": [], "skipped_reraise": 0}
    for rel in files:
        path = os.path.join(root, rel)
        try:
            with open(path, "rb") as fh:
                src = fh.read()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid-escape SyntaxWarnings
                tree = ast.parse(src, filename=rel)
        except (SyntaxError, ValueError, UnicodeDecodeError) as e:
            stats["parse_failures"].append("%s: %s" % (rel, e.__class__.__name__ + ": " + str(e).splitlines()[0]))
            continue
        stats["files_parsed"] += 1
        v = SiteVisitor()
        v.visit(tree)
        stats["skipped_reraise"] += v.skipped_reraise
        for site in v.sites:
            records.append(finish_record(site, library, version, rel))
    records.sort(key=lambda r: (r["file"], r["line"], r["col"], r["kind"], r["call"]))
    stats["sites"] = len(records)
    stats["in_scope"] = sum(r["scope"] == "in" for r in records)
    stats["in_scope_unreadable"] = sum(r["scope"] == "in" and r["unreadable"] for r in records)
    stats["by_kind"] = {}
    for r in records:
        stats["by_kind"][r["kind"]] = stats["by_kind"].get(r["kind"], 0) + 1
    return records, stats


def _lists_epilog() -> str:
    lines = ["MESSAGE_KEYWORDS (label: regex, case-insensitive, on the message's literal text):"]
    lines += ["  %-18s %s" % (l + ":", rx) for l, rx in MESSAGE_KEYWORDS]
    lines.append("EXCEPTION_KEYWORDS (on the exception / warning category name):")
    lines += ["  %-18s %s" % (l + ":", rx) for l, rx in EXCEPTION_KEYWORDS]
    lines.append("PATH_RULES (file glob [:: function globs] -> reason):")
    lines += ["  %s%s  -> %s" % (p, ("::" + f) if f else "", why) for p, f, why in PATH_RULES]
    return "\n".join(lines)


def notices_only(records: List[dict], why: str) -> List[dict]:
    """The sites of a library's modules outside the ones read whole, kept for their warnings and info
    lines only: all marked out of scope, an in-scope raise (a model's own refusal) dropped."""
    kept = []
    for r in records:
        if r["scope"] == "in":
            if r["kind"] not in ("warn", "log"):
                continue
            r = dict(r, scope="out", scope_why="%s; by its words: %s" % (why, r["scope_why"]))
        kept.append(r)
    return kept


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, epilog=_lists_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--library", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--root", required=True, help="folder the reported file paths are relative to")
    ap.add_argument("--prefix", nargs="+", action="extend", default=[], help="folders / files / globs under --root to walk")
    ap.add_argument("--exclude", nargs="+", action="extend", default=[], help="globs under --root to leave out")
    ap.add_argument("--out", required=True, help="JSON-lines output file")
    ap.add_argument("--stats", help="also write the run's statistics as JSON here")
    ap.add_argument("--notices-only", metavar="WHY",
                    help="read the files for their notices only: every site is marked out of scope with this reason "
                         "(and the words that would have put it in), and the raises those words put in are dropped")
    a = ap.parse_args(argv)

    files = iter_files(a.root, a.prefix, a.exclude)
    records, stats = extract(a.root, files, a.library, a.version)
    if a.notices_only:
        records = notices_only(records, a.notices_only)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", encoding="utf-8", newline="\n") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n")
    stats.update({"library": a.library, "version": a.version, "python": "%d.%d.%d" % sys.version_info[:3]})
    if a.stats:
        os.makedirs(os.path.dirname(os.path.abspath(a.stats)), exist_ok=True)
        with open(a.stats, "w", encoding="utf-8") as fh:
            json.dump(stats, fh, indent=1, sort_keys=True)
            fh.write("\n")
    print("%s %s: %d files parsed (%d failed), %d sites, %d in scope, %d in-scope unreadable -> %s" % (
        a.library, a.version, stats["files_parsed"], len(stats["parse_failures"]), stats["sites"],
        stats["in_scope"], stats["in_scope_unreadable"], a.out))
    for f in stats["parse_failures"]:
        print("  parse failure: " + f, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
