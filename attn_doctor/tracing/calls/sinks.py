"""Attention sinks: which calls the tracer stops at, how it reads q/k/v, and the kernels' rules.

A sink is a call into an attention kernel. For each one the tracer records the dtypes, shapes,
head dim and layout of q, k and v, and ``judge_call`` says what the kernel would do with them, with
the kernel's own message (KNOWLEDGE.md section 4): by the rules its spec carries (an attention
library's, from its module in standins/), else by ``judge`` here (torch's kernels, flash-attn 2's).
Rule ids:

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

from ...support import matrix as support_matrix  # the support matrix (recipes/support/matrix.toml); stand-ins read it through here

HALF = ("float16", "bfloat16")
# FlashAttention 2's limits and SDPA's flash kernel's, read from the support matrix (recipes/support/matrix.toml)
_FA2 = support_matrix().kernel("flash-attn-2")
FA2_MAX_HEAD_DIM = _FA2.limit("head_dim_max")
FA2_MIN_CAPABILITY = _FA2.nvidia_range()[0]
SDPA_FLASH_MAX_HEAD_DIM = support_matrix().kernel("sdpa-flash").limit("head_dim_max")

C10_NAMES = {"float32": "float", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float64": "double",
             "bool": "bool", "int64": "long int", "int32": "int", "uint8": "unsigned char"}
SCALAR_NAMES = {"float32": "Float", "float16": "Half", "bfloat16": "BFloat16", "float64": "Double"}
# Floating dtypes wider than the half ones: what a promotion produces.
WIDE = ("float32", "float64")


class SinkSpec(object):
    """How to read one attention entry point.

    ``roles`` maps q/k/v to (position, keyword) of the argument; a packed tensor serves several
    roles. ``autocast`` is True for torch ops that autocast casts (SDPA): their effective input
    dtype inside an autocast region is the autocast dtype. ``judge``: the kernel's rules,
    ``judge(dtypes, head_dims, capability, extras)`` -> problems, for a library whose rules live
    with its stand-in (standins/); None: ``judge`` below, by family.
    """

    __slots__ = ("name", "family", "layout", "roles", "autocast", "outer", "head_dim_from", "extras", "unwrap",
                 "judge")

    def __init__(self, name, family, layout, roles, autocast=False, outer=False, head_dim_from=None, extras=None,
                 unwrap=None, judge=None):
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
        self.judge = judge

    def renamed(self, name):
        """The same call under another name (a kernels-hub build of the library: "repo:function")."""
        return SinkSpec(name, self.family, self.layout, self.roles, extras=self.extras, judge=self.judge)

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
    # inputs, so inside an autocast region a q/k/v mix reaches them in one dtype. An outer sink: the
    # ops inside it are traced, so the attention written out there is judged where it is written
    # (its mask added, its softmax's dtype, a fill that overflows), at the model's own lines.
    return SinkSpec(qualname, "eager", "B,H,S,D", {"q": (1, "query"), "k": (2, "key"), "v": (3, "value")},
                    autocast=True, outer=True)


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


def problem(pid, severity, check, message):
    """One problem a kernel's rules find: the rule id, severity, the check and the kernel's own message."""
    return {"id": pid, "severity": severity, "check": check, "kernel_message": message}


def judge_call(spec, family, dtypes, head_dims, capability=None, extras=None):
    """The problems of one call: by its spec's own rules (a library's, standins/) where the call is
    judged as the spec's family, else by ``judge``'s."""
    if spec.judge is not None and family == spec.family:
        return spec.judge(dtypes, head_dims, capability, extras or {})
    return judge(family, dtypes, head_dims, capability, extras)


def judge(family, dtypes, head_dims, capability=None, extras=None):
    """What the kernel of torch's own families (and flash-attn 2's, which transformers' flash path
    reaches too) does with these inputs: a list of problems (empty when it accepts them).

    ``dtypes``: {"q": "bfloat16", ...} as the kernel sees them (after autocast's cast, if any);
    ``head_dims``: (qk, v); ``capability``: (major, minor) or None when unknown; ``extras``: the
    dtypes of the other tensor inputs it checks ({"attn_mask": "bfloat16"}).
    """
    q, k, v = dtypes.get("q"), dtypes.get("k"), dtypes.get("v")
    extras = extras or {}
    problems = []
    dq, dv = head_dims
    widest = max(d for d in (dq, dv, 0) if d is not None)
    if family == "flash_attn2":
        if capability is not None and tuple(capability) < FA2_MIN_CAPABILITY:
            problems.append(problem("AD605", "error", "arch", "FlashAttention only supports Ampere GPUs or newer."))
        # flash_api.cpp checks q's dtype first, then k against q, then v against q.
        if q not in HALF:
            problems.append(problem("AD604", "error", "dtype", "FlashAttention only support fp16 and bf16 data type"))
        elif k != q:
            problems.append(problem("AD602", "error", "same_dtype", "query and key must have the same dtype"))
        elif v != q:
            problems.append(problem("AD602", "error", "same_dtype", "query and value must have the same dtype"))
        if widest > FA2_MAX_HEAD_DIM:
            problems.append(problem("AD603", "error", "head_dim",
                                     "FlashAttention forward only supports head dimension at most %d" % FA2_MAX_HEAD_DIM))
        slopes = extras.get("alibi_slopes")
        if slopes is not None and slopes != "float32":
            problems.append(problem("AD606", "error", "mask_dtype", "ALiBi slopes must have dtype fp32"))
    elif family == "eager":
        # q @ k^T and weights @ v are plain (batched) matmuls: one dtype each, any dtype. Where the
        # weights' own dtype is known, scores may be computed wider than v (transformers' eager
        # paths upcast q and k, then cast the softmax back to v's dtype): each product is judged.
        w = dtypes.get("weights", v)
        if "weights" in dtypes and k == q and w == v:
            pass
        elif k != q or v != q:
            other = k if k != q else v
            problems.append(problem("AD602", "error", "same_dtype", "expected scalar type %s but found %s"
                                     % (SCALAR_NAMES.get(q, q), SCALAR_NAMES.get(other, other))))
        elif w != v:
            problems.append(problem("AD602", "error", "same_dtype", "expected scalar type %s but found %s"
                                     % (SCALAR_NAMES.get(w, w), SCALAR_NAMES.get(v, v))))
    elif family in ("sdpa", "mha", "transformers"):
        if not (q == k == v):
            problems.append(problem(
                "AD602", "error", "same_dtype",
                "Expected query, key, and value to have the same dtype, but got query.dtype: %s key.dtype: %s "
                "and value.dtype: %s instead." % tuple(C10_NAMES.get(d, d) for d in (q, k, v))))
        elif q not in HALF:
            problems.append(problem(
                "AD604", "warning", "dtype",
                "Expected query, key and value to all be of dtype: {Half, BFloat16}. Got Query dtype: %s, "
                "Key dtype: %s, and Value dtype: %s instead. (the flash kernel is skipped; SDPA falls back to "
                "a slower kernel)" % tuple(C10_NAMES.get(d, d).replace("c10::", "") for d in (q, k, v))))
        if widest > SDPA_FLASH_MAX_HEAD_DIM:
            problems.append(problem(
                "AD603", "warning", "head_dim",
                "Flash attention requires q,k,v to have the same last dimension and to be less than or equal "
                "to %d. Got Query.size(-1): %s (SDPA falls back to a slower kernel)" % (SDPA_FLASH_MAX_HEAD_DIM, dq)))
        mask = extras.get("attn_mask")
        if family == "sdpa" and mask is not None and mask not in ("bool", "float32", q):
            # torch's validate_sdpa_input, on every device and backend.
            problems.append(problem(
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
            problems.append(problem(
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
            problems.append(problem(
                "AD602", "error", "same_dtype",
                "q, k and v have different dtypes (query %s, key %s, value %s)" % (q, k, v)))
    return problems


def sdpa_kernel_mask_problem(kernel, dtypes, mask):
    """SDPA's validation takes a float32 mask beside half q/k/v; the memory-efficient kernel then
    refuses it in its own check (attention.cu, and xformers' cutlass kernel the same); cuDNN and
    math take it. ``kernel``: the one SDPA picked; ``mask``: the mask's dtype as the kernel gets it."""
    q = dtypes.get("q")
    if kernel != "mem_efficient" or mask in (None, "bool") or mask == q or q not in HALF:
        return None
    return problem("AD606", "error", "mask_dtype", "invalid dtype for bias - should match query's dtype")


def target_dtype(dtypes, preferred=None):
    """The dtype to cast q/k/v to when continuing past a bad sink: a half dtype already among
    the inputs (v first: it is the one promotions usually miss), else ``preferred``."""
    for role in ("v", "q", "k"):
        if dtypes.get(role) in HALF:
            return dtypes[role]
    return preferred if preferred in HALF else None
