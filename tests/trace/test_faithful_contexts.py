"""The trace ends as the plain forward ends, whatever context the forward enters (autocast regions
of every spelling, grad modes, SDPA's backend choice, a custom autograd Function, casts, attention
libraries imported at module import): the same outputs (dtypes and shapes), or the same refusal at
the same line of the model. The zoo is tests/trace/toys/contexts_toy.py.

The plain forward runs on CPU here. The trace stands for the GPU (CUDA autocast's policy, emulated),
so where CPU and GPU part ways the GPU's outcome is the expectation, stated in ON_THE_GPU with the
reason, and the plain CPU forward is held to the CPU's outcome stated beside it (so the reason is
checked too). The GPU outcomes are those of the same plain forwards on CUDA (an H200, torch 2.11):
every zoo model not in ON_THE_GPU ended there as it ends on CPU."""
import importlib.util
import os
import traceback
import warnings

import pytest

from conftest import TOYS, marker_line, toy_target, write_module

TOY = "contexts_toy.py"
PATH = os.path.join(TOYS, TOY)
BATCH, SEQ, DIM = 2, 8, 32  # the zoo's input: [batch, seq, dim]

# factory -> {"gpu": outcome on the GPU, "cpu": the plain CPU forward's, "devices": the trace devices
# that follow the GPU (the others follow the plain CPU forward), "why": ...}. An outcome is
# ("ok", dtypes of the outputs) or ("raise", the marker of the line that raises[, what it refuses]).
ON_THE_GPU = {
    "build_cuda_region": {
        "gpu": ("ok", ["bfloat16"]), "cpu": ("ok", ["float32"]),
        "why": "torch switches a `torch.autocast(\"cuda\")` region off where CUDA is not available (a warning "
               "says so): the plain CPU forward runs in float32; the trace treats \"cuda\" as the device it "
               "stands for, as it sends .cuda() there"},
    "build_decorated_cuda": {
        "gpu": ("ok", ["bfloat16"]), "cpu": ("ok", ["float32"]),
        "why": "the same region as a decorator, made when the module is imported: switched off on CPU"},
    "build_old_spelling": {
        "gpu": ("ok", ["float16"]), "cpu": ("ok", ["float32"]),
        "why": "torch.cuda.amp.autocast is a CUDA region: switched off on CPU"},
    "build_default_dtype_region": {
        "gpu": ("ok", ["float16"]), "cpu": ("ok", ["bfloat16"]),
        "why": "a region without dtype takes its device's default: float16 for CUDA, bfloat16 for CPU"},
    "build_custom_fwd": {
        "gpu": ("ok", ["bfloat16", "float32"]), "cpu": ("ok", ["bfloat16", "bfloat16"]),
        "why": "custom_fwd(device_type=\"cuda\", cast_inputs=float32) casts CUDA tensors to float32 and switches "
               "CUDA autocast off inside; on CPU the CPU region stays on and nothing is cast"},
    "build_fp32_island": {
        "gpu": ("ok", ["bfloat16", "float32"]), "cpu": ("ok", ["bfloat16", "bfloat16"]),
        "why": "the island `@torch.autocast(\"cuda\", enabled=False)` switches CUDA autocast off; on CPU it "
               "leaves the CPU region on, which casts the attention inside back to bf16"},
    "build_fp32_island_mixed": {
        "gpu": ("raise", "RAISES-ISLAND", "dtype"), "cpu": ("ok", ["bfloat16", "bfloat16"]),
        "why": "the same island: off on the GPU, so a bf16 q meets a float32 k in a matmul nothing casts; on "
               "CPU the CPU region stays on and casts both"},
    "build_norm_in_region": {
        "gpu": ("raise", "RAISES-NORM-ON-GPU", "dtype"), "cpu": ("ok", ["bfloat16"]),
        "why": "CUDA autocast runs layer_norm in float32, whose output the bf16 projection after the region "
               "refuses (mat1 and mat2 must have the same dtype); CPU autocast keeps a bf16 layer_norm in bf16"},
    "build_softmax_in_region": {
        "gpu": ("raise", "RAISES-SOFTMAX-ON-GPU", "dtype"), "cpu": ("ok", ["bfloat16"]),
        "why": "CUDA autocast runs softmax in float32, which then meets the bf16 v outside the region; CPU "
               "autocast keeps softmax in bf16"},
    "build_sdpa_efficient": {
        "gpu": ("ok", ["bfloat16"]), "cpu": ("raise", "RAISES-EFFICIENT-ON-CPU"),
        "why": "sdpa_kernel(EFFICIENT_ATTENTION): the GPU runs its memory-efficient kernel; CPU has none and "
               "refuses (No viable backend)"},
    "build_sdpa_cudnn": {
        "gpu": ("ok", ["bfloat16"]), "cpu": ("raise", "RAISES-CUDNN-ON-CPU"),
        "why": "sdpa_kernel([CUDNN_ATTENTION]): an sm90 GPU runs cuDNN's kernel; CPU has none"},
    "build_sdpa_flash_fp32": {
        "gpu": ("raise", "RAISES-FLASH-ON-GPU", "no kernel"), "cpu": ("ok", ["float32"]),
        "why": "sdpa_kernel([FLASH_ATTENTION]) in float32: the GPU's flash kernel takes half only, so no "
               "kernel is left (No available kernel. Aborting execution.); CPU's flash kernel takes float32"},
    "build_cpu_region": {
        "gpu": ("ok", ["float32"]), "cpu": ("ok", ["bfloat16"]), "devices": ("meta",),
        "why": "a `torch.autocast(\"cpu\")` region touches no CUDA tensor on the GPU, nor a meta tensor in a "
               "meta trace; in a CPU trace \"cpu\" is the trace device (x.device.type says \"cpu\" too), so "
               "that trace follows the plain CPU forward"},
    "build_decorated_cpu": {
        "gpu": ("ok", ["float32"]), "cpu": ("ok", ["bfloat16"]), "devices": ("meta",),
        "why": "the same \"cpu\" region as a decorator"},
}

# Every factory of the zoo; the ones whose plain forward raises (the same on CPU and GPU) with the
# marker of the line that raises.
FACTORIES = (
    "build_fill_fp16_autocast", "build_fill_fp16_autocast_fixed", "build_linear_bf16_autocast",
    "build_matmul_after_region", "build_norm_in_region", "build_softmax_in_region", "build_cuda_region",
    "build_cpu_region", "build_decorated_cuda", "build_decorated_cpu", "build_old_spelling", "build_fp32_island",
    "build_fp32_island_mixed", "build_nested", "build_disabled_inside", "build_disabled_inside_uncast",
    "build_fp16_region", "build_default_dtype_region", "build_custom_fwd", "build_no_grad", "build_inference_mode",
    "build_inference_mode_mixed", "build_sdpa_math", "build_sdpa_flash", "build_sdpa_efficient", "build_sdpa_cudnn",
    "build_sdpa_flash_fp32", "build_sdp_kernel_old",
    "build_sdpa_flash_autocast", "build_custom_function", "build_custom_function_autocast", "build_casts",
    "build_float_not_cast_back", "build_type_as_float32", "build_xformers_module", "build_xformers_top",
    "build_xformers_function", "build_xformers_from_import", "build_xformers_if_available", "build_flash_attn",
    "build_xformers_autocast",
)
RAISES = {
    "build_fill_fp16_autocast": "RAISES-FILL", "build_matmul_after_region": "RAISES-MATMUL",
    "build_disabled_inside_uncast": "RAISES-DISABLED", "build_inference_mode_mixed": "RAISES-SDPA",
    "build_float_not_cast_back": "RAISES-FLOAT", "build_type_as_float32": "RAISES-TYPE-AS",
}
# The models that import an attention library at module import (xformers, flash_attn), healthy.
LIBRARY_AT_IMPORT = ("build_xformers_module", "build_xformers_top", "build_xformers_function",
                     "build_xformers_from_import", "build_xformers_if_available", "build_flash_attn",
                     "build_xformers_autocast")


def _kind(message):
    """What an exception refuses, in the words CPU, CUDA and the trace's findings share."""
    text = message.lower()
    if "overflow" in text:
        return "overflow"
    if "no available kernel" in text:
        return "no kernel"
    if "dtype" in text or "scalar type" in text:
        return "dtype"
    return message


_PLAIN = {}


def plain(factory):
    """The plain forward on CPU: ("ok", [[path, dtype, shape], ...]) or ("raise", line, kind, message).
    The zoo is imported with the stand-ins in place, as a trace imports it: the library models then run
    as they run where the library is installed."""
    if factory not in _PLAIN:
        import torch

        from attn_doctor.tracing.runs.outputs import output_signature
        from attn_doctor.tracing.standins.registry import install_standins

        install_standins()
        if "module" not in _PLAIN:
            spec = importlib.util.spec_from_file_location("contexts_toy_plain", PATH)
            _PLAIN["module"] = importlib.util.module_from_spec(spec)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "CUDA is not available ... Disabling autocast"
                spec.loader.exec_module(_PLAIN["module"])
        model, inputs = getattr(_PLAIN["module"], factory)()
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                out = model(*inputs)
            _PLAIN[factory] = ("ok", output_signature(out)["tensors"])
        except Exception as exc:  # noqa: BLE001 - the model's own refusal
            line = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == PATH][-1]
            _PLAIN[factory] = ("raise", line, _kind(str(exc)), str(exc))
    return _PLAIN[factory]


def _autocast_state():
    import torch

    return [(torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in ("cpu", "cuda")]


def test_the_table_covers_the_zoo():
    with open(PATH) as fh:
        made = sorted(line.split("(")[0][4:] for line in fh if line.startswith("def build_"))
    assert sorted(FACTORIES) == made
    assert set(ON_THE_GPU) <= set(FACTORIES) and set(RAISES) <= set(FACTORIES)


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("factory", FACTORIES)
def test_the_trace_ends_as_the_forward_ends(trace, factory, device):
    outcome = plain(factory)
    gpu = ON_THE_GPU.get(factory)
    if gpu is not None:
        # the plain CPU forward ends as the reason says, so the GPU's outcome is what to expect
        cpu = gpu["cpu"]
        if cpu[0] == "ok":
            assert outcome[0] == "ok" and [t[1] for t in outcome[1]] == cpu[1], (gpu["why"], outcome)
        else:
            assert outcome[0] == "raise" and outcome[1] == marker_line(TOY, cpu[1]), (gpu["why"], outcome)
        if device in gpu.get("devices", ("cpu", "meta")):
            expected = gpu["gpu"]
            if expected[0] == "ok" and outcome[0] == "ok":
                outcome = ("ok", [[p, d, s] for (p, _, s), d in zip(outcome[1], expected[1])])
            elif expected[0] == "ok":  # the zoo's models return one tensor of their input's shape
                outcome = ("ok", [["output", expected[1][0], [BATCH, SEQ, DIM]]])
            else:
                outcome = ("raise", marker_line(TOY, expected[1]), expected[2], gpu["why"])
    if factory in RAISES:
        assert outcome[0] == "raise" and outcome[1] == marker_line(TOY, RAISES[factory]), outcome
    before = _autocast_state()
    r = trace(toy_target(TOY, factory), device=device, routes=False)
    assert _autocast_state() == before, "the trace left autocast switched"
    errors = [f for f in r["findings"] if f["severity"] == "error"]
    if outcome[0] == "ok":
        assert r["status"] == "ok" and r["exit_code"] == 0, (r["error"], errors)
        assert errors == [], errors
        assert r["outputs"] == {"tensors": outcome[1]}
    else:
        _, line, kind, message = outcome
        # the refusal at the model's line: AD621 (the forward raised there), AD623 (a fill the dtype
        # cannot hold), AD608 (operands a matmul or linear refuses: meta lets some through, the trace
        # goes on in the model's dtype), AD601/AD602 (an attention call refusing q/k/v's dtypes),
        # AD607 (an attention call no backend the model allowed takes on the GPU)
        assert errors, (message, r["findings"], r["error"])
        # the first error is where the forward raises; the trace goes on past an AD608 in the model's
        # dtype, so a later one is another place the job would fail once this one is fixed
        first = errors[0]
        assert (first["sink"]["file"], first["sink"]["line"]) == (PATH, line), (message, first)
        assert _kind(first["kernel_message"] or first["message"]) == kind, (message, first["kernel_message"])
        for f in errors[1:]:
            assert f["sink"]["line"] == line or (f["id"] == "AD608" and first["id"] == "AD608"), (message, f)
        assert r["exit_code"] == 1


def test_a_forward_that_raises_stops_the_cpu_trace_where_it_stops(trace):
    # the model's own fp16 region is emulated without --autocast: masked_fill(-1e9) on its fp16 scores
    # raises in a CPU trace where the plain forward raises (and the GPU's), and nothing after it runs
    r = trace(toy_target(TOY, "build_fill_fp16_autocast"), device="cpu", routes=False)
    assert r["status"] == "partial" and r["outputs"] == {
        "raised": "RuntimeError: value cannot be converted to type c10::Half without overflow"}
    (f,) = r["findings"]
    assert f["id"] == "AD623" and f["sink"]["line"] == marker_line(TOY, "RAISES-FILL")


def test_an_autocast_region_is_emulated_without_the_option_and_left_as_found(trace):
    # a bf16 model fed float32: the region casts at the projections (not emulated, the projection
    # would refuse float32 against its bf16 weight: "mat1 and mat2 must have the same dtype"); with
    # --autocast the model's region nests in the trace's and still decides
    for autocast in (None, "fp16"):
        r = trace(toy_target(TOY, "build_linear_bf16_autocast"), device="cpu", autocast=autocast, routes=False)
        assert r["exit_code"] == 0 and r["findings"] == [], r["findings"]
        assert r["outputs"]["tensors"][0][1] == "bfloat16"
    import torch

    cls = torch.amp.autocast_mode.autocast
    assert not hasattr(cls.__enter__, "__wrapped__") and cls.__enter__.__qualname__ == "autocast.__enter__"


@pytest.mark.parametrize("factory", LIBRARY_AT_IMPORT)
def test_a_library_imported_at_import_traces_clean_on_both_routes(trace, factory):
    # the healthy models that import xformers or flash_attn at module import: with the stand-in the
    # model takes the library's path; as installed here (no library) the forward reads the library's
    # function off the None its optional import left, which is this machine's doing: that route
    # could not run and is not counted, never an AD621 at the model's line
    r = trace(toy_target(TOY, factory))
    assert r["exit_code"] == 0 and [f for f in r["findings"] if f["severity"] == "error"] == [], r["findings"]
    routes = {route["name"]: route for route in r["routes"]}
    assert routes["standin"]["verdict"] == "clean"
    installed = routes.get("installed")
    if installed is not None:
        assert installed["verdict"] in ("clean", "could not run"), installed
        assert installed["verdict"] == "clean" or "'NoneType' object" in installed["error"]


def test_none_read_in_the_models_own_code_is_still_its_line(trace, tmp_path):
    # the rule above is about an attention library's names: a cache left None is the model's fault
    path = write_module(tmp_path, "cache_none.py", """
        import torch, torch.nn as nn, torch.nn.functional as F
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.cache = None
            def forward(self, x):
                q = self.proj(x).view(1, 2, 4, 4)
                F.scaled_dot_product_attention(q, q, q)
                return self.cache.keys  # RAISES
        def build():
            return M(), (torch.randn(1, 4, 8),)
        """)
    r = trace(path + ":build", device="cpu", routes=False)
    (f,) = [f for f in r["findings"] if f["id"] == "AD621"]
    assert f["sink"]["line"] == 11 and "'NoneType' object has no attribute 'keys'" in f["message"]
