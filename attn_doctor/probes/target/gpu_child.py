"""GPU work inside the *target* interpreter: CUDA facts and the attention smoke tests.

Standard library plus torch (and the attention libraries it tests), Python 3.8+ syntax. The torch
probe (torch_probe.py) loads this file by path and runs each function in a fork of its own:
`cuda_facts`, and `run_smoke_group` for each of `smoke_groups(capability, libraries, compiled)`,
in parallel with the import probes.
Every fork initialises CUDA itself; the parent never touches the CUDA runtime (not even
torch.backends.cudnn.version() or torch.cuda.get_arch_list(), which do, as seen on an H200), or
its forks could not use CUDA at all. A kernel that segfaults takes down its group only.
"""

from __future__ import annotations

import time

# The smoke problem: small enough to cost milliseconds, large enough to run the real kernels
# (several blocks per head, causal masking). [batch, heads, seq, head_dim]
SHAPE = (2, 4, 256, 128)
# The compiled test's problem: the least that still runs Inductor's flex_attention template over
# more than one key block with causal masking. Its compile is the test's cost (a third less than
# at SHAPE, cold), not its run.
COMPILE_SHAPE = (1, 1, 128, 16)
# ||out - ref|| / ||ref|| against a float64 reference; gradients get twice the room.
TOLERANCE = {"float16": 5e-3, "bfloat16": 4e-2}
TIMED_RUNS = 5

# The compute capability from which bf16 is native, as (major, minor). attn-doctor is not
# importable here, so torch_probe.py sets it from the doctor's configuration (facts.BF16_NATIVE_FROM)
# when it loads this file: one source for the fact, and no silent default that could drift.
BF16_NATIVE_FROM = None


def bf16_native(capability):
    """Whether a GPU of this capability ("8.6" or (8, 6)) has native bf16."""
    if BF16_NATIVE_FROM is None:
        raise RuntimeError("gpu_child.BF16_NATIVE_FROM was not set by the doctor's configuration")
    parts = str(capability).split(".") if isinstance(capability, str) else list(capability)
    return tuple(int(x) for x in (list(parts) + [0])[:2]) >= tuple(BF16_NATIVE_FROM)


def fused_verdicts(torch, q, is_causal=True, **call):
    """SDPA's verdict on its fused kernels for these inputs, with torch's reasons (sdpa_verdicts.py)."""
    return numerics_child()._sibling("sdpa_verdicts").fused_verdicts(torch, q, is_causal, **call)


# torch_probe.compiled_archs, which reads the architectures a torch build carries; torch_probe.py
# sets it when it loads this file (one reader for the login node and the GPU node alike).
compiled_archs = None


def cuda_facts():
    """CUDA devices, cuDNN and the SDPA backends, as torch sees them."""
    import torch

    out = {"status": "ok", "devices": [], "sdpa": {}, "sdpa_reasons": {}}
    try:
        out["cudnn"] = str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None
    except Exception:  # noqa: BLE001
        out["cudnn"] = None
    try:
        available = torch.cuda.is_available()
    except Exception as exc:  # noqa: BLE001
        out.update(cuda_available=False, cuda_error=str(exc)[:1000])
        return out
    out["cuda_available"] = bool(available)
    cuda_mod = torch.backends.cuda
    for key, fn in (
        ("flash_compiled", "is_flash_attention_available"),
        ("flash_enabled", "flash_sdp_enabled"),
        ("mem_efficient_enabled", "mem_efficient_sdp_enabled"),
        ("cudnn_enabled", "cudnn_sdp_enabled"),
        ("math_enabled", "math_sdp_enabled"),
    ):
        if hasattr(cuda_mod, fn):
            try:
                out["sdpa"][key] = bool(getattr(cuda_mod, fn)())
            except Exception:  # noqa: BLE001
                pass
    if not available:
        # the architectures the build carries are in the binary, not on a GPU: read without CUDA (a
        # login node judging --gpu v100 against a build without sm_70)
        out["arch_list"] = compiled_archs(torch) if compiled_archs is not None else []
        # Ask once more for the reason: lazy init raises with the driver's message.
        try:
            torch.cuda.init()
        except Exception as exc:  # noqa: BLE001
            out["cuda_error"] = str(exc)[:1000]
        return out
    try:
        out["arch_list"] = list(torch.cuda.get_arch_list())
    except Exception:  # noqa: BLE001
        out["arch_list"] = []
    count = torch.cuda.device_count()
    out["device_count"] = count
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        device = {
            "index": index,
            "name": props.name,
            "capability": "%d.%d" % (props.major, props.minor),
            "bf16_native": bf16_native((props.major, props.minor)),
            "multi_processor_count": getattr(props, "multi_processor_count", None),
            "shared_memory_per_block_optin": getattr(props, "shared_memory_per_block_optin", None),
            "total_memory_mib": int(props.total_memory // (1024 * 1024)),
        }
        try:
            with torch.cuda.device(index):
                device["bf16_api"] = bool(torch.cuda.is_bf16_supported())
        except Exception:  # noqa: BLE001
            pass
        out["devices"].append(device)
    if count:
        # Ask torch's own kernel selection whether the flash / efficient / cuDNN paths accept a
        # typical half-precision input on GPU 0, and keep its reasons when they do not.
        dtype = torch.bfloat16 if out["devices"][0]["bf16_native"] else torch.float16
        try:
            q = torch.zeros(1, 2, 16, 64, dtype=dtype, device="cuda:0")
            usable, reasons = fused_verdicts(torch, q, is_causal=False)
            out["sdpa"].update({key + "_usable": ok for key, ok in usable.items()})
            out["sdpa_reasons"] = {key + "_usable": why for key, why in reasons.items()}
            out["sdpa_probe_dtype"] = str(dtype).replace("torch.", "")
        except Exception as exc:  # noqa: BLE001
            out["sdpa_error"] = str(exc)[:500]
    return out


# ---------------------------------------------------------------- smoke tests


def _rel(a, b):
    import torch

    den = torch.linalg.vector_norm(b.double())
    num = torch.linalg.vector_norm(a.double() - b.double())
    return float(num / den) if float(den) > 0 else float(num)


def _sdpa_backends(torch):
    """SDPA backends that can be forced: name -> context manager factory."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch < 2.3
        ctx = torch.backends.cuda.sdp_kernel
        return {
            "sdpa-flash": lambda: ctx(enable_flash=True, enable_math=False, enable_mem_efficient=False),
            "sdpa-mem-efficient": lambda: ctx(enable_flash=False, enable_math=False, enable_mem_efficient=True),
            "sdpa-math": lambda: ctx(enable_flash=False, enable_math=True, enable_mem_efficient=False),
        }
    out = {
        "sdpa-flash": lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION),
        "sdpa-mem-efficient": lambda: sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION),
    }
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        out["sdpa-cudnn"] = lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
    out["sdpa-math"] = lambda: sdpa_kernel(SDPBackend.MATH)
    return out


# Attention libraries smoke-tested beside SDPA: backend name -> its import probe (torch_probe.py).
LIBRARIES = {"flash_attn": "flash_attn", "flash_attn_3": "flash_attn_interface", "flash_attn_4": "flash_attn_4", "xformers": "xformers"}
# Libraries the numerics sweep alone runs (no smoke test of their own): name -> the module it needs.
NUMERICS_ONLY = {"sageattention": "sageattention"}
# Libraries the numerics sweep runs its cases through (numerics_child.library_call). FlashAttention
# 4 compiles a kernel per shape: it runs the few shapes that share compiles and its known bugs'
# shapes, in one dtype, and its result is cached per package set (numerics_child.library_call says how).
NUMERICS_LIBRARIES = ("flash_attn", "flash_attn_3", "flash_attn_4", "xformers", "sageattention")
# Libraries that compile each kernel at its first call (FlashAttention 4: 2.5-3 s per dtype and
# pass on an H100): one group runs their smoke tests and sweep cases, each compile ahead in a process
# of its own (jit_library.py), so that the compiles run side by side and CUDA starts once.
JIT_LIBRARIES = ("flash_attn_4",)
# Attention compiled by torch.compile (Inductor, which writes triton kernels): backend name -> the
# module it needs installed. flex_attention is lowered by Inductor into a triton template: when it
# compiles, runs and matches float64, Inductor can compile attention here.
COMPILED = {"flex-compiled": "triton"}


def kernel_caches(folder):
    """Point the kernel compilers' on-disk caches at `folder` (the doctor's private one), for those
    the user has not pointed anywhere: FlashAttention 4 and the CuTe DSL, Inductor and triton.

    A compiled-kernel cache is code this process loads and runs; the compilers' defaults are
    shared /tmp paths (/tmp/torchinductor_<user>, /tmp/<user>/cutlass_python_cache) whose owner is
    whoever made them first. A warm cache also takes FA4's first-call compile (seconds per kernel)
    off every later check. The user's own settings stand: their jobs load from there already."""
    import os

    if not folder:
        return
    wanted = {
        "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR": "fa4",
        "CUTE_DSL_CACHE_DIR": "cute-dsl",
        "TORCHINDUCTOR_CACHE_DIR": "inductor",
        "TRITON_CACHE_DIR": "triton",
    }
    for name, sub in wanted.items():
        if not os.environ.get(name):
            os.environ[name] = os.path.join(folder, sub)
            if name == "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR":
                os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")


def _library_call(name):
    """fn(q, k, v) on [B, H, S, D] tensors, causal, for one attention library: the numerics sweep's
    adapter (numerics_child.library_call, one per library); raises if the library does not import."""
    import torch

    if name == "flex-compiled":
        import os

        from torch.nn.attention.flex_attention import flex_attention

        # One kernel to compile: Inductor's pool of compile workers would cost more to start (an
        # H100 node: 9.9 s for the whole first compiled call with one thread, 14.0 s with the pool).
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        compiled = torch.compile(flex_attention)

        def causal(score, b, h, q_idx, kv_idx):
            return torch.where(q_idx >= kv_idx, score, -float("inf"))

        return lambda q, k, v: compiled(q, k, v, score_mod=causal)
    call = numerics_child().library_call(torch, name)
    return lambda q, k, v: call(q, k, v, None, True, False)


def _library_backends(names):
    """name -> fn(q, k, v), or the exception its import raised (tested as unavailable)."""
    out = {}
    for name in names:
        try:
            out[name] = _library_call(name)
        except BaseException as exc:  # noqa: BLE001 - the import probe reports it; here just not tested
            out[name] = exc
    return out


def backward(out, grad_out):
    """out.backward(grad_out), without the 0.5 s of imports that costs in a fresh process.

    Given a gradient tensor, torch.autograd imports torch.fx.experimental.symbolic_shapes and
    sympy to compare shapes (0.55 s, in every smoke fork: seen on an H100 node and a 2-core CPU).
    The gradient of sum(out * grad_out) with respect to the inputs is the same, bit for bit.
    """
    out.mul(grad_out).sum().backward()


def _events_ms(torch, fn, runs):
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def smoke_one(torch, name, call, dtype, ref, inputs32, grad_out32):
    """Forward + backward of one backend in one dtype, against the float64 reference."""
    import warnings

    shape = tuple(inputs32[0].shape)
    result = {"backend": name, "dtype": str(dtype).replace("torch.", ""), "head_dim": shape[-1], "seq": shape[2]}
    started = time.perf_counter()
    q, k, v = (t.to(dtype).requires_grad_(True) for t in inputs32)
    grad_out = grad_out32.to(dtype)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = call(q, k, v)
            backward(out, grad_out)
            torch.cuda.synchronize()
    except BaseException as exc:  # noqa: BLE001
        message = str(exc).strip()
        reasons = [str(w.message).strip() for w in caught if "not used because" in str(w.message) or "Expected" in str(w.message) or "requires" in str(w.message)]
        result["status"] = "refused" if "No available kernel" in message else "error"
        result["error"] = (message.splitlines() or [type(exc).__name__])[0][:400]
        if reasons:
            result["reasons"] = [r.splitlines()[0][:300] for r in reasons[:6]]
        try:
            torch.cuda.synchronize()
        except BaseException as sticky:  # noqa: BLE001 - a sticky CUDA error poisons what follows
            result["sticky_error"] = str(sticky)[:300]
        result["total_ms"] = round((time.perf_counter() - started) * 1000, 3)
        return result
    ref_out, ref_grads = ref
    tol = TOLERANCE.get(result["dtype"], 1e-2)
    result["rel_err"] = _rel(out.detach(), ref_out)
    result["rel_err_grad"] = max(_rel(t.grad, g) for t, g in zip((q, k, v), ref_grads))
    bad = [x for x in (result["rel_err"], result["rel_err_grad"] / 2) if not (x <= tol)]  # NaN fails too
    result["status"] = "wrong" if bad else "ok"
    result["tolerance"] = tol

    def bare():
        q.grad = k.grad = v.grad = None
        backward(call(q, k, v), grad_out)

    result["kernel_ms"] = round(_events_ms(torch, bare, TIMED_RUNS), 4)
    result["total_ms"] = round((time.perf_counter() - started) * 1000, 3)
    return result


def _choice(torch, q, k, v):
    """The backend SDPA's default dispatch picks for these inputs (what `actually runs`)."""
    try:
        from torch.nn.attention import SDPBackend

        index = torch._fused_sdp_choice(q, k, v, None, 0.0, True)
        return SDPBackend(index).name.lower()
    except BaseException as exc:  # noqa: BLE001 - private API: report rather than guess
        return "unknown (%s)" % type(exc).__name__


def _refusals(torch, q):
    """torch's own reasons for not using each fused backend on these (causal) inputs."""
    return fused_verdicts(torch, q, is_causal=True)[1]


def stack_group(group):
    """Whether a group tests the package set (an attention library, a compiler, the numerics sweep:
    its result holds for every node of one GPU architecture and driver) rather than this node's GPU
    (SDPA's smoke tests)."""
    return group.startswith(("lib:", "compile:", "num:"))


def group_library(group):
    """The import probe (torch_probe.py) of the library whose tests a group runs ("lib:<name>...",
    "num:lib:<name>..."), for a library whose import costs seconds (FA4's CuTe DSL): torch_probe runs
    the group in a fork of that probe's process, the library imported; else None."""
    kind, _, rest = group.partition(":")
    kind, _, rest = rest.partition(":") if kind == "num" else (kind, "", rest)
    name = rest.split(":", 1)[0]
    return LIBRARIES.get(name) if kind == "lib" and name in JIT_LIBRARIES else None


def numerics_child():
    """numerics_child.py beside this file, loaded by path (this file is loaded so too, without its
    package)."""
    import os
    import sys

    name = "attn_doctor_numerics_child"
    module = sys.modules.get(name)
    if module is None:
        import importlib.util

        spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), "numerics_child.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return module


def smoke_groups(capability, libraries=(), compiled=(), numerics=True, numerics_only=()):
    """How the smoke tests are split across parallel processes, for a GPU of this capability
    ("8.6", (8, 6), or None when unknown), the attention `libraries` installed (names of
    LIBRARIES) and the `compiled` backends whose compiler is installed (names of COMPILED).

    Each library gets a process of its own ("lib:<name>"), and each compiled backend one
    ("compile:<name>"): a kernel that crashes takes down its own test only, and a slow first call
    cannot hold up the SDPA tests or run them into the time limit. A library that compiles each
    kernel at its first call (JIT_LIBRARIES) runs its smoke tests and, with the sweep, its cases of
    it in its group, their kernels compiled ahead in processes of their own (jit_library.py): a unit
    that raises there is its own result, one that crashes the group costs the library's results.

    cuDNN attention builds its plans at the first call: 1.4 s for bf16 and 1.7 s for fp16 on an
    H200 (0.23-0.25 s on an H100), against 0.2 s for every other backend and dtype together.
    bf16's cuDNN test gets a process of its own; fp16's runs in the main one. More processes cost
    more than they save: CUDA start-up grows with each process starting at once (H100: 0.22 s
    alone, 0.55-0.58 s four at a time).

    With `numerics`, the numerics sweep's groups follow ("num:...", numerics_child.numerics_groups):
    every SDPA backend and each library that takes its cases, forward and backward against float64.
    """
    # Unknown capability: plan for bf16; the group finds out from the device and runs no bf16 test.
    native = capability is None or bf16_native(capability)
    dtypes = ["float16"] + (["bfloat16"] if native else [])
    groups = ["main"] + (["cudnn:bfloat16"] if native else [])
    groups += ["lib:" + name for name in libraries]
    groups += ["compile:" + name for name in compiled]
    if numerics:  # a library that compiles per shape runs its cases of the sweep in its own group (jit_library.py)
        groups += numerics_child().numerics_groups(dtypes, [n for n in libraries if n in NUMERICS_LIBRARIES and n not in JIT_LIBRARIES]
                                                   + [n for n in numerics_only if n in NUMERICS_LIBRARIES])
    return groups


def _smoke_inputs(torch, shape):
    """q, k, v and the output's gradient of the smoke test, float32 on the CPU, from a fixed seed."""
    gen = torch.Generator().manual_seed(1234)
    return [torch.randn(shape, generator=gen) for _ in range(4)]


def _smoke_reference(torch, cpu32, device):
    """The float64 reference on the CPU (70 ms on 2 cores; on the GPU it would load cuBLAS into
    every group): (out, (dq, dk, dv)) on `device`."""
    q64, k64, v64 = (t.double().requires_grad_(True) for t in cpu32[:3])
    out64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, is_causal=True)
    backward(out64, cpu32[3].double())
    return out64.detach().to(device), tuple(g.to(device) for g in (q64.grad, k64.grad, v64.grad))


def _smoke_at(torch, name, call, dtype, device):
    """Library `name`'s smoke test in `dtype`: call(q, k, v) at SHAPE, causal, against float64."""
    cpu32 = _smoke_inputs(torch, SHAPE)
    inputs32 = [t.to(device) for t in cpu32[:3]]
    return smoke_one(torch, name, call, dtype, _smoke_reference(torch, cpu32, device), inputs32, cpu32[3].to(device))


def _shape_choices(torch, shape, dtypes, device):
    """SDPA's pick for the user's head dim and dtype (a --config's), with its reasons against the
    other fused kernels: no kernel runs, torch's dispatch is only asked."""
    native = {str(d).replace("torch.", ""): d for d in dtypes}
    wanted = [shape["dtype"]] if shape.get("dtype") in native else list(native)
    out = []
    for name in wanted:
        q = torch.zeros(SHAPE[:-1] + (int(shape["head_dim"]),), dtype=native[name], device=device)
        out.append({"dtype": name, "head_dim": int(shape["head_dim"]), "backend": _choice(torch, q, q, q),
                    "refused": _refusals(torch, q), "source": shape.get("source")})
    return out


def run_smoke_group(group, index=0, groups=None, shapes=None, kernel_cache=None, capability=None, budget_s=None):
    """One group of smoke tests on GPU `index`, in this process: {"choices": [...], "results": [...]}.

    `groups` is the whole split (smoke_groups' answer): "main" runs the SDPA tests that no
    "cudnn:<dtype>" group of it takes; "lib:<name>" one attention library's (a JIT library's
    with its cases of the sweep, jit_library.py; "lib:<name>:<dtype>" in one dtype); "compile:<name>" a compiled backend's, in one dtype (bf16 where native). `shapes`
    ({"head_dim", "dtype", "source"}: the user's model) get SDPA's choice too, in "main".
    `kernel_cache`: the folder for compiled kernels (kernel_caches). `capability`: "9.0", the compute
    capability every GPU here shares (None where they differ or it is unknown). `budget_s`: the seconds this
    process may run (its job's time limit): a numerics group reports what it measured within it.
    `phases` says where the group's time went.
    """
    kernel_caches(kernel_cache)
    if group.startswith("num:"):
        import torch

        return numerics_child().run_numerics_group(group, _sdpa_backends(torch), index, bf16_native, budget_s=budget_s)
    kind, _, what = group.partition(":")
    if kind == "lib" and what in JIT_LIBRARIES:
        return numerics_child()._sibling("jit_library").run_group(what, index, groups, capability, budget_s, numerics_child(),
                                                                   bf16_native, _smoke_at, SHAPE)
    started = time.perf_counter()
    phases = {}
    import threading

    import torch

    kind, _, what = group.partition(":")
    what, _, only = what.partition(":")
    # A library's import (FA4's: 2 s; Inductor's for the compiled test: 2 s) runs beside CUDA's
    # start and the float64 reference, in a thread: neither waits for the other.
    imported = {}
    importer = None
    if kind in ("lib", "compile"):
        def import_library():
            mark = time.perf_counter()
            imported.update(_library_backends([what]))
            phases["library_imports_s"] = round(time.perf_counter() - mark, 3)

        importer = threading.Thread(target=import_library, name="attn-doctor-library-import", daemon=True)
        importer.start()

    # The CPU work here is the float64 reference (milliseconds): a check's processes run side by
    # side, and torch's default thread pool per process would oversubscribe the cores.
    torch.set_num_threads(min(2, torch.get_num_threads()))
    out = {"status": "ok", "choices": [], "results": [], "device_index": index, "phases": phases}
    if not torch.cuda.is_available():
        out["status"] = "error"
        out["error"] = {"type": "RuntimeError", "message": "CUDA is not available to torch"}
        return out
    index = min(max(int(index), 0), torch.cuda.device_count() - 1)
    device = "cuda:%d" % index
    torch.cuda.set_device(index)
    capability = tuple(torch.cuda.get_device_capability(index))
    dtypes = [torch.float16] + ([torch.bfloat16] if bf16_native(capability) else [])
    if groups is None:
        groups = smoke_groups(capability)
    apart = [g.split(":", 1)[1] for g in groups if g.startswith("cudnn:")]  # dtypes whose cuDNN test has a group of its own
    if kind == "cudnn":
        only = what
    elif kind == "compile":
        only = str(dtypes[-1]).replace("torch.", "")  # one compile: the dtype training would use
    if only:
        dtypes = [d for d in dtypes if str(d).replace("torch.", "") == only]
    cpu32 = _smoke_inputs(torch, COMPILE_SHAPE if kind == "compile" else SHAPE)
    inputs32 = [t.to(device) for t in cpu32[:3]]
    grad_out32 = cpu32[3].to(device)
    torch.cuda.synchronize()
    phases["cuda_init_s"] = round(time.perf_counter() - started, 3)
    mark = time.perf_counter()
    ref = _smoke_reference(torch, cpu32, device)
    phases["reference_s"] = round(time.perf_counter() - mark, 3)

    def sdpa_call(make_ctx):
        def call(q, k, v):
            with make_ctx():
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

        return call

    sdpa = _sdpa_backends(torch)
    if importer is not None:
        mark = time.perf_counter()
        importer.join()
        phases["library_import_wait_s"] = round(time.perf_counter() - mark, 3)
    libraries = sorted(imported.items())
    for dtype in dtypes:
        name_of = str(dtype).replace("torch.", "")
        if kind == "main":
            backends = [(name, sdpa_call(ctx)) for name, ctx in sdpa.items() if name != "sdpa-cudnn" or name_of not in apart]
        elif kind == "cudnn":
            backends = [("sdpa-cudnn", sdpa_call(sdpa["sdpa-cudnn"]))] if "sdpa-cudnn" in sdpa else []
        else:
            backends = libraries
        if group == "main":
            mark = time.perf_counter()
            q, k, v = (t.to(dtype) for t in inputs32)
            out["choices"].append({"dtype": name_of, "head_dim": SHAPE[-1], "backend": _choice(torch, q, k, v), "refused": _refusals(torch, q)})
            phases["choice_" + name_of + "_s"] = round(time.perf_counter() - mark, 3)
        for name, call in backends:
            if isinstance(call, BaseException):
                out["results"].append({"backend": name, "dtype": name_of, "status": "unavailable", "error": ("%s: %s" % (type(call).__name__, call))[:300]})
                continue
            out["results"].append(smoke_one(torch, name, call, dtype, ref, inputs32, grad_out32))
    if kind == "compile" and not isinstance(dict(libraries).get(what), BaseException):
        # The compiled kernel on the sweep's adversarial logits, at the shape it was compiled for.
        mark = time.perf_counter()
        numerics = numerics_child()
        cases = numerics.compiled_cases(COMPILE_SHAPE)
        out["numerics"] = numerics.sweep(torch, [(what, numerics.compiled_call(dict(libraries)[what]))], dtypes, device,
                                         cases=cases, sync=torch.cuda.synchronize)
        out["cases"] = {c["name"]: numerics.case_facts(c) for c in cases}
        phases["numerics_s"] = round(time.perf_counter() - mark, 3)
    if group == "main" and shapes:
        mark = time.perf_counter()
        for shape in shapes:
            out["choices"] += _shape_choices(torch, shape, dtypes, device)
        phases["choice_shapes_s"] = round(time.perf_counter() - mark, 3)
    phases["total_s"] = round(time.perf_counter() - started, 3)
    return out
