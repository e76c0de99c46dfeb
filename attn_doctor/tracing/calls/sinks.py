"""Attention sinks: which calls the tracer stops at, how it reads q/k/v, and the kernels' rules.

A sink is a call into an attention kernel. For each one the tracer records the dtypes, shapes,
head dim and layout of q, k and v, and ``judge`` says what the kernel would do with them, with
the kernel's own message (KNOWLEDGE.md section 4). Rule ids:

- AD601 (error/warning): an implicit promotion in the model's code (half in, fp32 out) makes a
  sink input fp32; the finding carries the chain back to it. Severity is that of the failed check.
- AD602 (error): q, k and v reach the kernel with different dtypes (no promotion found to blame);
  FlexAttention (``flex_attention``) too: compiled, it refuses the mix.
- AD603 (error for flash-attn, warning for SDPA): head dim over the kernel's limit (256).
- AD604 (error at a half-only kernel, warning at SDPA): fp32 inputs; flash-attn raises, SDPA
  silently falls back to a slower kernel.
- AD605 (error): the GPU's compute capability is below what the kernel needs (only when the
  capability is known: ``--capability`` or a CUDA trace).
- AD606 (error): an attention mask or bias in a dtype the kernel refuses (SDPA: a float mask of
  another half dtype than q, a float64 mask; flash-attn: ALiBi slopes not fp32).
- AD607 (error): the attention call raised an error the rules above did not predict; the
  kernel's own message is the finding.

Standard library only; tensors are read through duck typing.
"""

from __future__ import annotations

HALF = ("float16", "bfloat16")
FA2_MAX_HEAD_DIM = 256

C10_NAMES = {"float32": "float", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float64": "double",
             "bool": "bool", "int64": "long int", "int32": "int", "uint8": "unsigned char"}
SCALAR_NAMES = {"float32": "Float", "float16": "Half", "bfloat16": "BFloat16", "float64": "Double"}
# Floating dtypes wider than the half ones: what a promotion produces.
WIDE = ("float32", "float64")


class SinkSpec(object):
    """How to read one attention entry point.

    ``roles`` maps q/k/v to (position, keyword) of the argument; a packed tensor serves several
    roles. ``autocast`` is True for torch ops that autocast casts (SDPA): their effective input
    dtype inside an autocast region is the autocast dtype.
    """

    __slots__ = ("name", "family", "layout", "roles", "autocast", "outer", "head_dim_from", "extras", "unwrap")

    def __init__(self, name, family, layout, roles, autocast=False, outer=False, head_dim_from=None, extras=None,
                 unwrap=None):
        self.name = name
        self.family = family
        self.layout = layout
        self.roles = roles
        self.autocast = autocast
        self.outer = outer
        self.head_dim_from = head_dim_from
        # Other tensor inputs the kernel checks (a mask, a bias, ALiBi slopes): role -> (pos, key).
        self.extras = extras or {}
        # An extra input given inside an object (xformers' LowerTriangularMaskWithTensorBias): the
        # tensor in it, read by this function.
        self.unwrap = unwrap

    def tensors(self, args, kwargs, roles=None):
        out = {}
        for role, (pos, key) in (self.roles if roles is None else roles).items():
            value = kwargs.get(key) if key in kwargs else (args[pos] if pos is not None and pos < len(args) else None)
            out[role] = value
        return out

    def extra_tensors(self, args, kwargs):
        out = self.tensors(args, kwargs, self.extras)
        if self.unwrap is not None:
            out = {role: self.unwrap(value) for role, value in out.items()}
        return out

    def head_dims(self, args, kwargs, tensors):
        if self.head_dim_from is not None:
            return self.head_dim_from(args, kwargs, tensors)
        q, v = tensors.get("q"), tensors.get("v")
        dq = int(q.shape[-1]) if q is not None and q.dim() else None
        dv = int(v.shape[-1]) if v is not None and v.dim() else None
        return dq, dv


QKV = {"q": (0, "q"), "k": (1, "k"), "v": (2, "v")}
QKV_LONG = {"q": (0, "query"), "k": (1, "key"), "v": (2, "value")}


def _mha_head_dim(args, kwargs, tensors):
    embed = kwargs.get("embed_dim_to_check", args[3] if len(args) > 3 else None)
    heads = kwargs.get("num_heads", args[4] if len(args) > 4 else None)
    try:
        d = int(embed) // int(heads)
    except (TypeError, ValueError, ZeroDivisionError):
        d = None
    return d, d


# torch functions, recognised by identity inside the TorchFunctionMode (see tracer.torch_sinks).
SDPA = SinkSpec("F.scaled_dot_product_attention", "sdpa", "B,H,S,D", QKV_LONG, autocast=True,
                extras={"attn_mask": (3, "attn_mask")})
MHA = SinkSpec("F.multi_head_attention_forward", "mha", "S,B,E", QKV_LONG, autocast=True,
               head_dim_from=_mha_head_dim)

# flash-attn 2.x public functions (flash_attn/flash_attn_interface.py), layout (batch, seqlen,
# nheads, headdim); varlen: (total_tokens, nheads, headdim).
FLASH_ATTN2 = {
    "flash_attn_func": SinkSpec("flash_attn_func", "flash_attn2", "B,S,H,D", QKV,
                                extras={"alibi_slopes": (8, "alibi_slopes")}),
    "flash_attn_varlen_func": SinkSpec("flash_attn_varlen_func", "flash_attn2", "T,H,D", QKV),
    "flash_attn_qkvpacked_func": SinkSpec(
        "flash_attn_qkvpacked_func", "flash_attn2", "B,S,3,H,D",
        {"q": (0, "qkv"), "k": (0, "qkv"), "v": (0, "qkv")}),
    "flash_attn_varlen_qkvpacked_func": SinkSpec(
        "flash_attn_varlen_qkvpacked_func", "flash_attn2", "T,3,H,D",
        {"q": (0, "qkv"), "k": (0, "qkv"), "v": (0, "qkv")}),
    "flash_attn_kvpacked_func": SinkSpec(
        "flash_attn_kvpacked_func", "flash_attn2", "B,S,H,D + B,S,2,H,D",
        {"q": (0, "q"), "k": (1, "kv"), "v": (1, "kv")}),
    "flash_attn_varlen_kvpacked_func": SinkSpec(
        "flash_attn_varlen_kvpacked_func", "flash_attn2", "T,H,D + T,2,H,D",
        {"q": (0, "q"), "k": (1, "kv"), "v": (1, "kv")}),
    "flash_attn_with_kvcache": SinkSpec(
        "flash_attn_with_kvcache", "flash_attn2", "B,S,H,D (cache B,S_cache,H,D)",
        {"q": (0, "q"), "k": (1, "k_cache"), "v": (2, "v_cache")}),
}

# flash-attn >= 2.7 registers its kernels as torch custom ops, called as
# torch.ops.flash_attn._flash_attn_forward(q, k, v, ...) from the autograd Functions. The forward
# names below are in flash_attn_interface.py (2.7+) [src]; the varlen name follows the same
# pattern [unverified]. A call that reaches them through a wrapped public function is recorded
# once, at the public function.
FLASH_ATTN2_CUSTOM_OPS = {
    "flash_attn::_flash_attn_forward": SinkSpec("flash_attn::_flash_attn_forward", "flash_attn2", "B,S,H,D", QKV),
    "flash_attn::_flash_attn_varlen_forward": SinkSpec(
        "flash_attn::_flash_attn_varlen_forward", "flash_attn2", "T,H,D", QKV),
}

# FlashAttention-3 (hopper/, module flash_attn_interface) and FlashAttention-4 (flash-attn-4,
# flash_attn.cute, defined in flash_attn.cute.interface): same (q, k, v, ...) leading arguments.
FLASH_ATTN3 = {
    "flash_attn_func": SinkSpec("flash_attn_interface.flash_attn_func", "flash_attn3", "B,S,H,D", QKV),
    "flash_attn_varlen_func": SinkSpec("flash_attn_interface.flash_attn_varlen_func", "flash_attn3", "T,H,D", QKV),
    "flash_attn_qkvpacked_func": SinkSpec(
        "flash_attn_interface.flash_attn_qkvpacked_func", "flash_attn3", "B,S,3,H,D",
        {"q": (0, "qkv"), "k": (0, "qkv"), "v": (0, "qkv")}),
    "flash_attn_with_kvcache": SinkSpec(
        "flash_attn_interface.flash_attn_with_kvcache", "flash_attn3", "B,S,H,D",
        {"q": (0, "q"), "k": (1, "k_cache"), "v": (2, "v_cache")}),
}
FLASH_ATTN4 = {
    "flash_attn_func": SinkSpec("flash_attn.cute.flash_attn_func", "flash_attn4", "B,S,H,D", QKV),
    "flash_attn_varlen_func": SinkSpec("flash_attn.cute.flash_attn_varlen_func", "flash_attn4", "T,H,D", QKV),
}


def _sage_layout(args, kwargs):
    layout = kwargs.get("tensor_layout", args[3] if len(args) > 3 and isinstance(args[3], str) else "HND")
    return "B,S,H,D" if layout == "NHD" else "B,H,S,D"


# SageAttention 2.x (sageattention): sageattn(q, k, v, tensor_layout="HND", is_causal=False, ...) and
# the per-architecture kernels it dispatches to, which check the same; layout HND [B, H, N, D] or NHD.
SAGE = {name: SinkSpec("sageattention." + name, "sage", "B,H,S,D (tensor_layout HND; NHD: B,S,H,D)", QKV)
        for name in ("sageattn", "sageattn_qk_int8_pv_fp16_cuda", "sageattn_qk_int8_pv_fp8_cuda",
                     "sageattn_qk_int8_pv_fp8_cuda_sm90", "sageattn_qk_int8_pv_fp16_triton")}
SAGE["sageattn_varlen"] = SinkSpec("sageattention.sageattn_varlen", "sage", "T,H,D", QKV)


def _xformers_bias(value):
    """The tensor an xformers attn_bias carries: a tensor itself, or LowerTriangularMaskWithTensorBias'
    ``_bias`` (``_subtensor`` in xformers 0.0.27-0.0.31)."""
    for attr in ("_bias", "_subtensor"):
        inner = getattr(value, attr, None)
        if inner is not None and type(inner).__name__ in ("Tensor", "Parameter"):
            return inner
    return value


XFORMERS = {
    name: SinkSpec("xformers.ops." + name, "xformers", "B,S,H,D", QKV_LONG,
                   extras={"attn_bias": (3, "attn_bias")}, unwrap=_xformers_bias)
    for name in ("memory_efficient_attention", "memory_efficient_attention_forward",
                 "memory_efficient_attention_forward_requires_grad")
}


def hub_specs(repo, kind):
    """The attention functions of a kernel loaded from the Hugging Face kernels hub (``get_kernel``):
    the FlashAttention 2 / 3 and SageAttention APIs, under the repository's name."""
    family = {"fa2": "flash_attn2", "fa3": "flash_attn3", "vllm_fa3": "flash_attn3", "sage": "sage"}[kind]
    table = {"fa2": FLASH_ATTN2, "fa3": FLASH_ATTN3, "vllm_fa3": FLASH_ATTN3, "sage": SAGE}[kind]
    return {name: SinkSpec("%s:%s" % (repo, name), family, spec.layout, spec.roles, extras=spec.extras)
            for name, spec in table.items()}


def flex_spec(autocast):
    """torch.nn.attention.flex_attention.flex_attention(query, key, value, score_mod, block_mask,
    ...), layout (batch, heads, seq, head_dim). ``autocast``: this torch's flex_attention casts
    q/k/v to the autocast dtype itself (its higher-order op has an autocast rule in newer torch)."""
    return SinkSpec("flex_attention", "flex", "B,H,S,D", QKV_LONG, autocast=autocast)


def transformers_spec(impl):
    # transformers' attention interface: fn(module, query, key, value, attention_mask, ...),
    # layout (batch, heads, seq, head_dim). Recorded as an outer sink: the kernel call inside it
    # (SDPA, flash_attn_func) is the one judged when the tracer sees it.
    family = "transformers_flash" if "flash" in impl else "transformers"
    return SinkSpec("transformers:" + impl, family, "B,H,S,D",
                    {"q": (1, "query"), "k": (2, "key"), "v": (3, "value")}, outer=True)


def eager_spec(qualname):
    # transformers' eager_attention_forward(module, query, key, value, attention_mask, ...): plain
    # matmul / softmax / matmul, layout (batch, heads, seq, head_dim). Autocast casts both matmuls'
    # inputs, so inside an autocast region a q/k/v mix reaches them in one dtype.
    return SinkSpec(qualname, "eager", "B,H,S,D", {"q": (1, "query"), "k": (2, "key"), "v": (3, "value")},
                    autocast=True)


def fla_spec(qualname, param_names):
    # fla chunk/fused ops take (q, k, v, ...) or, for RWKV-7, (r, w, k, v, ...); layout
    # (batch, time, heads, dim) since head_first was removed (fla 0.5.0).
    names = list(param_names)
    roles = {}
    for role, candidates in (("q", ("q", "r")), ("k", ("k",)), ("v", ("v",))):
        for cand in candidates:
            if cand in names:
                roles[role] = (names.index(cand), cand)
                break
    if len(roles) != 3:
        return None
    return SinkSpec(qualname, "fla", "B,T,H,D", roles)


# ---------------------------------------------------------------- rules


def _problem(pid, severity, check, message):
    return {"id": pid, "severity": severity, "check": check, "kernel_message": message}


def judge(family, dtypes, head_dims, capability=None, extras=None):
    """What the kernel does with these inputs: a list of problems (empty when it accepts them).

    ``dtypes``: {"q": "bfloat16", ...} as the kernel sees them (after autocast's cast, if any);
    ``head_dims``: (qk, v); ``capability``: (major, minor) or None when unknown; ``extras``: the
    dtypes of the other tensor inputs it checks ({"attn_mask": "bfloat16"}).
    """
    q, k, v = dtypes.get("q"), dtypes.get("k"), dtypes.get("v")
    extras = extras or {}
    problems = []
    dq, dv = head_dims
    widest = max(d for d in (dq, dv, 0) if d is not None)
    if family == "flash_attn4":
        problems.extend(judge_fa4(dtypes, head_dims, capability))
    elif family == "flash_attn3":
        problems.extend(judge_fa3(dtypes, head_dims, capability))
    elif family == "flash_attn2":
        if capability is not None and tuple(capability) < (8, 0):
            problems.append(_problem("AD605", "error", "arch", "FlashAttention only supports Ampere GPUs or newer."))
        # flash_api.cpp checks q's dtype first, then k against q, then v against q.
        if q not in HALF:
            problems.append(_problem("AD604", "error", "dtype", "FlashAttention only support fp16 and bf16 data type"))
        elif k != q:
            problems.append(_problem("AD602", "error", "same_dtype", "query and key must have the same dtype"))
        elif v != q:
            problems.append(_problem("AD602", "error", "same_dtype", "query and value must have the same dtype"))
        if widest > FA2_MAX_HEAD_DIM:
            problems.append(_problem("AD603", "error", "head_dim",
                                     "FlashAttention forward only supports head dimension at most 256"))
        slopes = extras.get("alibi_slopes")
        if slopes is not None and slopes != "float32":
            problems.append(_problem("AD606", "error", "mask_dtype", "ALiBi slopes must have dtype fp32"))
    elif family == "sage":
        problems.extend(judge_sage(dtypes, head_dims, capability))
    elif family == "xformers":
        problems.extend(judge_xformers(dtypes, head_dims, capability, extras))
    elif family == "eager":
        # q @ k^T and weights @ v are plain (batched) matmuls: one dtype, any dtype.
        w = dtypes.get("weights", v)
        if k != q or v != q:
            other = k if k != q else v
            problems.append(_problem("AD602", "error", "same_dtype", "expected scalar type %s but found %s"
                                     % (SCALAR_NAMES.get(q, q), SCALAR_NAMES.get(other, other))))
        elif w != v:
            problems.append(_problem("AD602", "error", "same_dtype", "expected scalar type %s but found %s"
                                     % (SCALAR_NAMES.get(w, w), SCALAR_NAMES.get(v, v))))
    elif family in ("sdpa", "mha", "transformers"):
        if not (q == k == v):
            problems.append(_problem(
                "AD602", "error", "same_dtype",
                "Expected query, key, and value to have the same dtype, but got query.dtype: %s key.dtype: %s "
                "and value.dtype: %s instead." % tuple(C10_NAMES.get(d, d) for d in (q, k, v))))
        elif q not in HALF:
            problems.append(_problem(
                "AD604", "warning", "dtype",
                "Expected query, key and value to all be of dtype: {Half, BFloat16}. Got Query dtype: %s, "
                "Key dtype: %s, and Value dtype: %s instead. (the flash kernel is skipped; SDPA falls back to "
                "a slower kernel)" % tuple(C10_NAMES.get(d, d).replace("c10::", "") for d in (q, k, v))))
        if widest > FA2_MAX_HEAD_DIM:
            problems.append(_problem(
                "AD603", "warning", "head_dim",
                "Flash attention requires q,k,v to have the same last dimension and to be less than or equal "
                "to 256. Got Query.size(-1): %s (SDPA falls back to a slower kernel)" % dq))
        mask = extras.get("attn_mask")
        if family == "sdpa" and mask is not None and mask not in ("bool", "float32", q):
            # torch's validate_sdpa_input, on every device and backend.
            problems.append(_problem(
                "AD606", "error", "mask_dtype",
                "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: "
                "%s and  query.dtype: %s instead." % (C10_NAMES.get(mask, mask), C10_NAMES.get(q, q))))
    elif family == "flex":
        # flex_attention checks no dtypes itself (it lets k/v be of a lower precision than q):
        # Inductor's lowerings for CPU and for its flash (CuTe) backend refuse a mix, its backward
        # refuses one on every device (torch/_higher_order_ops/flex_attention.py and Inductor's
        # backward lowering). Compiled for CUDA, and eager, the forward computes in q's dtype, so a
        # float32 q gives a float32 output that the next half-precision layer refuses.
        if not (q == k == v):
            problems.append(_problem(
                "AD602", "error", "same_dtype",
                "Mixed query, key, and value dtype is not supported on this platform, got query.dtype: torch.%s, "
                "key.dtype: torch.%s, and value.dtype: torch.%s. (compiled flex_attention on CPU; its backward on "
                "any device raises 'Backward pass with mixed query, key, and value dtype is not supported'; on CUDA "
                "and eager the forward computes in q's dtype, and the next half-precision layer then raises 'mat1 "
                "and mat2 must have the same dtype')" % (q, k, v)))
    elif family == "fla":
        # fla accepts fp32, but not a mix: old fla asserted q.dtype == k.dtype == v.dtype, newer
        # fla computes silently in fp32 (and can overflow shared memory sized for half inputs).
        if not (q == k == v):
            problems.append(_problem(
                "AD602", "error", "same_dtype",
                "q, k and v have different dtypes (query %s, key %s, value %s)" % (q, k, v)))
    return problems


FA4_DTYPES = HALF + ("float8_e4m3fn", "float8_e5m2")
FA3_DTYPES = HALF + ("float8_e4m3fn",)


def sdpa_kernel_mask_problem(kernel, dtypes, mask):
    """SDPA's validation takes a float32 mask beside half q/k/v; the memory-efficient kernel then
    refuses it in its own check (attention.cu, and xformers' cutlass kernel the same); cuDNN and
    math take it. ``kernel``: the one SDPA picked; ``mask``: the mask's dtype as the kernel gets it."""
    q = dtypes.get("q")
    if kernel != "mem_efficient" or mask in (None, "bool") or mask == q or q not in HALF:
        return None
    return _problem("AD606", "error", "mask_dtype", "invalid dtype for bias - should match query's dtype")


def judge_fa3(dtypes, head_dims, capability):
    """FlashAttention 3 (hopper/flash_api.cpp, mha_fwd, as of 3.0.0 and since 2025-01: Ampere and
    newer), its checks in their order: architecture, q's dtype (fp8 on Hopper only), k and v
    against q, head dim at most 256 and a multiple of 8 (16 for fp8)."""
    q, k, v = dtypes.get("q"), dtypes.get("k"), dtypes.get("v")
    problems = []
    if capability is not None and tuple(capability) < (8, 0):
        problems.append(_problem("AD605", "error", "arch", "FlashAttention only supports Ampere GPUs or newer."))
    if q not in FA3_DTYPES:
        problems.append(_problem("AD604", "error", "dtype", "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type"))
    elif q not in HALF and capability is not None and tuple(capability) < (9, 0):
        problems.append(_problem("AD605", "error", "arch", "FlashAttention on Ampere/Ada cards only supports fp16 and bf16 "
                                                           "data type"))
    elif k != q:
        problems.append(_problem("AD602", "error", "same_dtype", "query and key must have the same dtype"))
    elif v != q:
        problems.append(_problem("AD602", "error", "same_dtype", "query and value must have the same dtype"))
    dq, dv = head_dims
    if dq is not None and dq > FA2_MAX_HEAD_DIM:
        problems.append(_problem("AD603", "error", "head_dim", "FlashAttention forward only supports head dimension at most 256"))
    elif dq is not None:
        align = 16 if q == "float8_e4m3fn" else 8
        if dq % align:
            problems.append(_problem("AD603", "error", "head_dim", "head_size should be a multiple of %d" % align))
    return problems


# SageAttention 2.x's sageattn dispatches by architecture (sageattention/core.py): these have a kernel.
SAGE_ARCHS = ((8, 0), (8, 6), (8, 9), (9, 0), (12, 0), (12, 1))
SAGE_MAX_HEAD_DIM = 128


def judge_sage(dtypes, head_dims, capability):
    """SageAttention 2.x (sageattention 2.2.0's sageattn and its per-architecture kernels), in its
    order: the architecture (ValueError), q's dtype, the same dtype (AssertionError), head dim."""
    q, k, v = dtypes.get("q"), dtypes.get("k"), dtypes.get("v")
    problems = []
    if capability is not None and tuple(capability) not in SAGE_ARCHS:
        problems.append(_problem("AD605", "error", "arch", "Unsupported CUDA architecture: sm%d%d" % tuple(capability)))
    if q not in HALF:
        problems.append(_problem("AD604", "error", "dtype", "Input tensors must be in dtype of torch.float16 or "
                                                             "torch.bfloat16"))
    elif not (q == k == v):
        problems.append(_problem("AD602", "error", "same_dtype", "All tensors must have the same dtype."))
    dq = head_dims[0]
    if dq is not None and dq > SAGE_MAX_HEAD_DIM:
        problems.append(_problem("AD603", "error", "head_dim", "Unsupported head_dim: %d" % dq))
    return problems


def judge_xformers(dtypes, head_dims, capability, extras):
    """xformers' memory_efficient_attention (0.0.32-0.0.35): validate_inputs refuses q/k/v of mixed
    dtypes; a tensor attn_bias of another dtype than q is refused by the cutlass kernel, the only
    one that takes a bias; bf16 below sm80 has no operator; fp32 runs cutlass (no flash)."""
    q, k, v = dtypes.get("q"), dtypes.get("k"), dtypes.get("v")
    problems = []
    if not (q == k == v):
        problems.append(_problem(
            "AD602", "error", "same_dtype",
            "Query/Key/Value should either all have the same dtype, or (in the quantized case) Key/Value should have "
            "dtype torch.int32 (query.dtype: torch.%s, key.dtype: torch.%s, value.dtype: torch.%s)" % (q, k, v)))
    elif q not in HALF:
        problems.append(_problem(
            "AD604", "warning", "dtype",
            "dtype=torch.%s (supported: {torch.float16, torch.bfloat16}) (xformers' flash operators refuse it; the "
            "cutlass kernel runs, slower)" % q))
    elif q == "bfloat16" and capability is not None and tuple(capability) < (8, 0):
        problems.append(_problem("AD605", "error", "arch", "No operator found for `memory_efficient_attention_forward`: "
                                                           "bf16 is only supported on A100+ GPUs"))
    bias = extras.get("attn_bias")
    if bias is not None and bias != q and q in (HALF + ("float32",)):
        problems.append(_problem("AD606", "error", "mask_dtype", "invalid dtype for bias - should match query's dtype"))
    return problems


def fa4_head_dim_refusal(dq, dv, major, dtype):
    """FlashAttention 4's head-dim check (flash_attn/cute/interface.py, _validate_head_dims, as of
    4.0.0b36): its message, or None where the dims pass. It validates SM90 and SM100/SM110 only."""
    if dq is None or dv is None:
        return None
    align = 16 if str(dtype).startswith("float8") else 8  # 16 bytes / element size
    aligned = dq % align == 0 and dv % align == 0
    if major == 9:
        if 8 <= dq <= 256 and 8 <= dv <= 256 and aligned:
            return None
        return ("(head_dim, head_dim_v)=(%d, %d) is not supported on SM90. head_dim and head_dim_v must be between "
                "8 and 256 and divisible by %d." % (dq, dv, align))
    if major in (10, 11):
        ok = ((8 <= dq <= 128 and 8 <= dv <= 128) or (dq, dv) in ((192, 128), (256, 256))
              or ((dq == 64 or dq == dv) and dv == 512))
        if ok and aligned:
            return None
        return ("(head_dim, head_dim_v)=(%d, %d) is not supported on SM100/SM110. head_dim and head_dim_v must be "
                "between 8 and 128 and divisible by %d, or (192, 128) for DeepSeek, or (256, 256) for hd256."
                % (dq, dv, align))
    return None


def judge_fa4(dtypes, head_dims, capability):
    """FlashAttention 4's forward checks in its order (v's dtype, then q/k against v, then the
    architecture, then the head dims for it), with its AssertionError messages. An unknown
    capability (meta, CPU) is judged for SM90, the Hopper GPU FlashAttention 4 targets first."""
    q, k, v = dtypes.get("q"), dtypes.get("k"), dtypes.get("v")
    problems = []
    if v not in FA4_DTYPES:
        problems.append(_problem("AD604", "error", "dtype", "inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2"))
    elif q != v or k != v:
        problems.append(_problem("AD602", "error", "same_dtype", "q, k, v, and qv must have the same dtype"))
    major = int(capability[0]) if capability is not None else None
    if major is not None and major not in (8, 9, 10, 11, 12):
        problems.append(_problem("AD605", "error", "arch",
                                 "Unsupported compute capability. Supported: 8.x, 9.x, 10.x, 11.x, 12.x"))
        return problems
    refusal = fa4_head_dim_refusal(head_dims[0], head_dims[1], 9 if major is None else major, v)
    if refusal:
        problems.append(_problem("AD603", "error", "head_dim", refusal + (
            " (the GPU's capability is unknown here: judged for SM90; --capability sets it)" if major is None else "")))
    return problems


def target_dtype(dtypes, preferred=None):
    """The dtype to cast q/k/v to when continuing past a bad sink: a half dtype already among
    the inputs (v first: it is the one promotions usually miss), else ``preferred``."""
    for role in ("v", "q", "k"):
        if dtypes.get(role) in HALF:
            return dtypes[role]
    return preferred if preferred in HALF else None
