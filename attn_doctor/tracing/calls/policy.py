"""CUDA autocast's cast policy, as data, and the names the tracer gives to torch callables.

CPU autocast and CUDA autocast disagree on exactly the ops that break flash attention: CUDA runs
norms, ``normalize``, ``softmax``, ``exp``, ``pow``, ``sum``... in float32 inside an fp16/bf16
region, CPU keeps several of them in half precision, and the ``meta`` device has no autocast at
all. To let a CPU or meta trace see what the GPU would do, the tracer applies this table itself
(see ``mode.TraceMode``). ``--device cuda`` uses the real CUDA autocast and not this table.

The policy moves between torch releases (``rms_norm`` joined the fp32 list in torch 2.12), so the
one applied is the *installed* torch's where it says: its own autocast op lists
(``torch/testing/_internal/autocast_test_lists.py``, read as text: importing it needs test-only
packages) are laid over the hand-written table below, which was read from torch 2.11's
``aten/src/ATen/autocast_mode.cpp`` (CUDA section) and still covers what those lists leave out
(composites, overloads). tests/trace/test_policy_installed.py holds the table against the installed
torch in CI's newest-torch run. The table is keyed by
the *short name* of the callable the tracer sees (``short_name``): ``F.layer_norm``,
``torch.layer_norm`` and ``Tensor.layer_norm`` are all ``layer_norm``. Python-level composites
that autocast never sees as one op (``F.normalize``, ``F.cross_entropy``) are listed with the
policy their result ends up with on the GPU (``normalize`` divides by an fp32 ``norm``, so its
result is fp32). ``EXPECTED_OUTPUT`` turns the table into what a GPU test can compare against
real CUDA autocast: ``tests/gpu`` can run each op on a half CUDA tensor under
``torch.autocast("cuda")`` and check the dtype of its output.

Standard library only; no torch import at module level.
"""

from __future__ import annotations

# Cast a floating input (fp32, fp16, bf16; never fp64) to the autocast dtype. Output: half.
LOWER_PRECISION = frozenset(
    """
    _convolution conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d
    convolution cudnn_convolution cudnn_convolution_transpose prelu addmm addmv addr matmul mm mv linear addbmm baddbmm bmm chain_matmul
    linalg_multi_dot linalg_vecdot lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell
    scaled_dot_product_attention _scaled_dot_product_flash_attention
    _scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention
    einsum
    """.split()
)
# einsum is not in autocast's list itself; it decomposes into bmm/mm, which are, so the result
# is half precision all the same. Listed so that the emulation gives the same output dtype.

# Cast half inputs to float32. Output: float32. ("fp32", "fp32_set_opt_dtype" and
# "fp32_append_dtype" in autocast_mode.cpp; composites whose GPU result is fp32 marked [c].)
FLOAT32 = frozenset(
    """
    acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow softplus
    layer_norm native_layer_norm group_norm frobenius_norm nuclear_norm cosine_similarity
    poisson_nll_loss cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss kl_div
    l1_loss smooth_l1_loss huber_loss mse_loss margin_ranking_loss multilabel_margin_loss
    soft_margin_loss triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits
    dist pdist cdist renorm logsumexp
    prod softmax log_softmax cumprod cumsum linalg_vector_norm linalg_matrix_norm vector_norm
    matrix_norm sum norm
    normalize cross_entropy
    """.split()
)
# [c] normalize: input / input.norm(...) -> fp32 on torch 2.11 under bf16 autocast [gpu].
# [c] cross_entropy: log_softmax then nll_loss, both fp32.
# Not listed on purpose: rms_norm (stays bf16 on torch 2.11 [gpu]; fp32 from torch 2.12, which the
# installed torch's own lists say), mean, add, mul, addcmul.

# Run in the widest input dtype. Ordinary type promotion already does this for these ops, so the
# emulation leaves them alone; listed for the GPU comparison test.
PROMOTE = frozenset(
    """
    addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put scatter_add tensordot
    """.split()
)

DUNDER_NAMES = {
    "__matmul__": "matmul",
    "__rmatmul__": "matmul",
    "__pow__": "pow",
    "__rpow__": "pow",
    "__ipow__": "pow",
}


def short_name(func):
    """``F.layer_norm`` / ``torch.layer_norm`` / ``Tensor.layer_norm`` -> ``layer_norm``."""
    name = getattr(func, "__name__", None)
    if not isinstance(name, str):
        name = str(func)
    if name.startswith("__"):
        return DUNDER_NAMES.get(name, name)
    if "." in name:  # torch.ops overloads: "add.Tensor"
        name = name.split(".", 1)[0]
    return name


# The release the hand-written table above was read from.
TABLE_TORCH = "2.11"
# The installed torch's lists (autocast_test_lists.py's AutocastTestLists) -> the policy they give.
_LISTS = {"torch_fp16": "lower", "nn_fp16": "lower", "linalg_fp16": "lower", "methods_fp16": "lower",
          "torch_fp32": "fp32", "nn_fp32": "fp32", "linalg_fp32": "fp32", "methods_fp32": "fp32",
          "torch_need_autocast_promote": "promote"}
_effective = None  # the merged policy, once torch is imported in this process


def installed_lists(torch_dir):
    """{"lower": {...}, "fp32": {...}, "promote": {...}} from the torch installed at `torch_dir`
    (its autocast_test_lists.py, read with ast: nothing imported), or None where it has none."""
    import ast
    from pathlib import Path

    path = Path(torch_dir) / "testing" / "_internal" / "autocast_test_lists.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    out = {"lower": set(), "fp32": set(), "promote": set()}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == "AutocastTestLists"):
            continue
        for st in ast.walk(node):
            if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Attribute)
                    and st.targets[0].attr in _LISTS and isinstance(st.value, ast.List)):
                continue
            for el in st.value.elts:
                if isinstance(el, ast.Tuple) and el.elts and isinstance(el.elts[0], ast.Constant) and isinstance(el.elts[0].value, str):
                    name = el.elts[0].value
                    out[_LISTS[st.targets[0].attr]].add(DUNDER_NAMES.get(name, name))
    return {k: frozenset(v) for k, v in out.items()} if out["fp32"] else None


def merged(installed):
    """The hand-written table with the installed torch's lists laid over it: an op the installed
    torch lists is in its category there, and in no other."""
    if not installed:
        return {"lower": LOWER_PRECISION, "fp32": FLOAT32, "promote": PROMOTE}
    listed = installed["lower"] | installed["fp32"] | installed["promote"]
    return {"lower": (LOWER_PRECISION - listed) | installed["lower"], "fp32": (FLOAT32 - listed) | installed["fp32"],
            "promote": (PROMOTE - listed) | installed["promote"]}


def _policy():
    global _effective
    if _effective is None:
        import sys

        torch = sys.modules.get("torch")  # the torch being traced, when this process has imported it
        if torch is None:
            return merged(None)
        import os

        _effective = merged(installed_lists(os.path.dirname(torch.__file__)))
    return _effective


def policy_for(name):
    """"lower", "fp32", "promote" or None for an op's short name, under the installed torch's policy."""
    policy = _policy()
    if name in policy["lower"]:
        return "lower"
    if name in policy["fp32"]:
        return "fp32"
    if name in policy["promote"]:
        return "promote"
    return None


def expected_output(name, input_dtype, autocast_dtype):
    """The dtype CUDA autocast gives an op's output, for a GPU test to compare against.

    Dtypes are strings ("float32", "bfloat16", "float16"); None where the table says nothing.
    """
    policy = policy_for(name)
    if policy == "lower":
        return autocast_dtype
    if policy == "fp32":
        return "float32"
    if policy == "promote":
        return input_dtype
    return None


def table():
    """The whole policy in force as a plain dict (JSON-able), for reports and tests."""
    policy = _policy()
    return {key: sorted(policy[key]) for key in ("lower", "fp32", "promote")}
