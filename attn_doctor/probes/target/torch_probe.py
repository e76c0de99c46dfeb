"""The `torch` probe: torch's build, then, each in an isolated fork (isolation.py) and all in
parallel, the import health of each attention library, the sample forward passes
(sample_probe.py), the CUDA facts and smoke tests (gpu_child.py) and whether each torch-linked
extension loads (builds_child.py). This process makes no CUDA call: its forks must stay clean.

Runs where attn-doctor may not be installed (child.py): standard library only, Python 3.8+.
"""

from __future__ import annotations

import os
import sys
import time

from . import library_bytecode
from .isolation import IMPORT_TIMEOUT_S, describe_exception, run_isolated
from .sample_probe import _merge_samples, _sample_names, finish_distributions_prefetch, sample_probe, start_distributions_prefetch

# Import probes: name (the facts key) -> distributions that provide it, given by the doctor with
# `--targets` (its table is attn_doctor.facts.MODULE_DISTRIBUTIONS). The name is the module,
# except flash_attn_4: FlashAttention 4 (CuTe DSL) is the subpackage flash_attn.cute.
IMPORT_TARGETS = {}

# What each import probe actually imports: the public entry point, so that a lazily loaded
# CUDA extension is loaded too.
IMPORT_STATEMENTS = {
    "flash_attn": ("flash_attn", "flash_attn.flash_attn_interface"),
    "flash_attn_interface": ("flash_attn_interface",),
    "flash_attn_4": ("flash_attn.cute",),
    "xformers": ("xformers", "xformers.ops"),
    "triton": ("triton", "triton.language"),
    "fla": ("fla",),
    "liger_kernel": ("liger_kernel", "liger_kernel.ops"),
}


def import_env(module, capability):
    """Variables an import probe sets while it imports, so that the import asks nothing of the GPU:
    its process is then one the library's groups can fork from (an initialised CUDA does not
    survive a fork). torch.cuda.is_available() asks NVML instead of initialising CUDA's driver
    where PYTORCH_NVML_BASED_CUDA_CHECK=1 (tvm_ffi, FlashAttention 4's, calls it at import).
    FlashAttention 4's CuTe DSL reads the GPU's architecture when imported unless CUTE_DSL_ARCH
    gives it ("sm_90a"), and quack, its dependency, unless QUACK_ARCH does ("90"): the values
    quack's own compile workers are given. `capability`: "9.0", or None."""
    env = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    parts = str(capability or "").split(".")
    if module == "flash_attn_4" and len(parts) == 2 and all(p.isdigit() for p in parts):
        major, minor = int(parts[0]), int(parts[1])
        env.update(QUACK_ARCH="%d%d" % (major, minor), CUTE_DSL_ARCH="sm_%d%d%s" % (major, minor, "a" if major >= 9 else ""))
    return env


def _before_import(fn, env, prepare=None):
    """fn() after prepare() (what the members need set before the import, and keep), with each
    variable of `env` that the user has not set, set while fn runs."""

    def run():
        if prepare is not None:
            prepare()
        added = [name for name in env if name not in os.environ]
        os.environ.update({name: env[name] for name in added})
        try:
            return fn()
        finally:
            for name in added:
                os.environ.pop(name, None)

    return run


def torch_build(torch):
    # Plain attributes only: nothing here may touch the CUDA runtime (see collect_cuda).
    return {
        "status": "ok",
        "version": getattr(torch, "__version__", None),
        "cuda": getattr(torch.version, "cuda", None),
        "hip": getattr(torch.version, "hip", None),
        "cxx11_abi": bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False)),
    }


def import_probe(module):
    def job():
        import importlib

        pycache = library_bytecode.folder()
        if pycache:  # in this fork and the groups forked from it: the library's bytecode kept there
            library_bytecode.redirect(pycache)
        statements = IMPORT_STATEMENTS.get(module, (module,))
        for statement in statements:
            importlib.import_module(statement)
        mod = sys.modules[statements[0]]
        version = str(getattr(mod, "__version__", "") or "")
        if version in ("", "0.0.0"):  # flash_attn.cute says 0.0.0: it asks for a distribution "fa4"
            version = _distribution_version(IMPORT_TARGETS.get(module, ()))
        result = {"status": "ok", "version": version or None}
        if module == "flash_attn":
            ext = [name for name in ("flash_attn_2_cuda", "flash_attn_cuda") if name in sys.modules]
            if ext:
                result["detail"] = {"extension": ext[0], "extension_file": getattr(sys.modules[ext[0]], "__file__", "")}
        return result

    def guarded():
        try:
            return job()
        except BaseException as exc:  # noqa: BLE001
            return {"status": "error", "error": describe_exception(exc)}

    return guarded


def _distribution_version(names):
    import importlib.metadata

    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def installed(module):
    """Whether the import probe `module` has something to import, found without importing it
    (an import can crash; this runs in the process that forks the probes).

    A bare namespace package does not count: flash-attn-4 installs flash_attn/cute/ only, which
    makes `flash_attn` a namespace without FlashAttention 2 in it."""
    import importlib.util

    top, _, sub = IMPORT_STATEMENTS.get(module, (module,))[0].partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    folders = list(spec.submodule_search_locations or [])
    if sub:
        return any(os.path.isfile(os.path.join(folder, *sub.split("."), "__init__.py")) for folder in folders)
    return spec.origin not in (None, "namespace") or not folders


def collect_torch(modules, sample=None, gpu=None, builds=None):
    """torch's build, then, each in its own fork and all in parallel: the import health of each
    module, (with `sample`) each of the tracer's sample forward passes, and (with `gpu`) the CUDA
    facts and the smoke test groups of gpu_child.py. This process never touches CUDA itself."""
    start = time.monotonic()
    if not installed("torch"):
        return {"torch": {"status": "missing"}, "imports": {m: {"status": "skipped"} for m in modules}}
    if sample is not None and sample.get("path") and sample["path"] not in sys.path:
        sys.path.insert(0, sample["path"])  # before the prefetch's fork: its sys.path is the samples'
    # Only transformers asks for the table: without it the samples would wait for nothing.
    prefetch = start_distributions_prefetch() if sample is not None and installed("transformers") else None
    # A library without bytecode beside it: compiled into the doctor's folder while torch imports
    pycache = library_bytecode.folder()
    precompile = None
    if pycache:
        precompile = library_bytecode.start_precompile(pycache, [d for m in modules if installed(m) for d in IMPORT_TARGETS.get(m, ())])
    try:
        return _collect_torch(modules, sample, gpu, builds, start, prefetch)
    finally:
        library_bytecode.stop(precompile)


def _collect_torch(modules, sample, gpu, builds, start, prefetch):
    try:
        import torch
    except BaseException as exc:  # noqa: BLE001
        finish_distributions_prefetch(prefetch, 0)
        return {
            "torch": {"status": "error", "error": describe_exception(exc)},
            "imports": {m: {"status": "skipped"} for m in modules},
        }
    info = torch_build(torch)
    info["duration_s"] = round(time.monotonic() - start, 3)
    jobs = []
    imports = {}
    for module in modules:
        if installed(module):
            jobs.append(("import:" + module, import_probe(module)))
        else:
            imports[module] = {"status": "missing"}
    builds_module, found, builds_error = None, {}, None
    if builds is not None:
        try:
            builds_module = _load_file_module("attn_doctor_builds_child", builds["script"])
            found = builds_module.extension_distributions()
            jobs += builds_module.jobs(found)
        except BaseException as exc:  # noqa: BLE001
            builds_error = describe_exception(exc)
    names, sample_error = [], None
    if sample is not None:
        names, sample_error = _sample_names(sample)
        distributions = finish_distributions_prefetch(prefetch)
        jobs += [("sample:" + name, sample_probe(name, sample, distributions)) for name in names]
    groups, gpu_error = [], None
    deadline = time.monotonic() + IMPORT_TIMEOUT_S  # every fork's, whenever it starts
    # gpu["part"]: "node" runs the CUDA facts and SDPA's groups, "stack" the libraries' and the
    # compiled groups (gpu_child.stack_group), absent: all of them.
    part = gpu.get("part") if gpu is not None else None
    if gpu is not None:
        try:
            gpu_module = _load_file_module("attn_doctor_gpu_child", gpu["script"])
            gpu_module.BF16_NATIVE_FROM = tuple(gpu["bf16_native_from"])  # before the forks: they inherit it
            gpu_module.compiled_archs = compiled_archs
            if part != "stack":
                jobs.append(("cuda", gpu_module.cuda_facts))
            if gpu.get("smoke"):
                libraries = [name for name, probe in gpu_module.LIBRARIES.items() if installed(probe)]
                compiled = [name for name, needs in gpu_module.COMPILED.items() if installed(needs)]
                only = [name for name, needs in getattr(gpu_module, "NUMERICS_ONLY", {}).items() if installed(needs)]
                groups = gpu.get("groups") or gpu_module.smoke_groups(gpu.get("capability"), libraries, compiled,
                                                                      numerics=gpu.get("numerics", True), numerics_only=only)
                if part is not None:
                    stack_group = getattr(gpu_module, "stack_group", lambda g: False)
                    groups = [g for g in groups if bool(stack_group(g)) == (part == "stack")]
                index = int(gpu.get("index") or 0)
                shapes = gpu.get("shapes") or []
                cache = gpu.get("kernel_cache")
                smoke = [("smoke:" + g, _bind_budget(gpu_module.run_smoke_group, deadline, g, index, groups, shapes, cache,
                                                     gpu.get("device_capability"))) for g in groups]
                # First: the slowest forks (a compile, a JIT library) start before the imports'.
                # the kernel compilers' cache folders are set before a family's import: FA4 reads them once, at import
                caches = getattr(gpu_module, "kernel_caches", None)
                jobs[:0] = _families(smoke, jobs, getattr(gpu_module, "group_library", None), gpu.get("device_capability"),
                                     prepare=(lambda: caches(cache)) if caches else None)
        except BaseException as exc:  # noqa: BLE001
            gpu_error = describe_exception(exc)
    results = run_isolated(jobs, max(0.1, deadline - time.monotonic()))
    for module in modules:
        if "import:" + module in results:
            imports[module] = results["import:" + module]
    out = {"torch": info, "imports": imports}
    printed = dict((name, r["stderr"]) for name, r in results.items() if isinstance(r, dict) and r.get("stderr"))
    if printed:
        out["stderr"] = printed  # what each forked job printed: evidence, kept apart from its result
    if builds_module is not None:
        try:
            out["builds"] = builds_module.assemble(found, results)
        except BaseException as exc:  # noqa: BLE001
            builds_error = describe_exception(exc)
    if builds_error:
        out["builds_error"] = builds_error
    if sample is not None:
        out["dtype_path"] = _merge_samples(names, results, sample, sample_error)
    if gpu is not None:
        if part != "stack":
            out["cuda"] = results.get("cuda") or {"status": "error", "error": gpu_error or {"message": "the CUDA probe did not run"}}
        elif gpu_error:
            out["smoke_error"] = gpu_error
        out["smoke"] = {g: results.get("smoke:" + g, {"status": "timeout"}) for g in groups}
    else:
        # no GPU here (a login node): the architectures the build carries, for --gpu to be judged
        # against. Asked only now: torch poisons fork() for CUDA once it is asked, and the forks are done.
        info["arch_list"] = compiled_archs(torch)
    return out


def compiled_archs(torch):
    """torch.cuda.get_arch_list() without its "CUDA is available" guard: the list the build was
    compiled for (TORCH_CUDA_ARCH_LIST), a constant of the binary; [] for a build without CUDA."""
    get = getattr(torch._C, "_cuda_getArchFlags", None)
    if get is None:
        return []
    try:
        flags = get()
    except Exception:  # noqa: BLE001
        return []
    return flags.split() if isinstance(flags, str) else []


def _bind_budget(fn, deadline, *args):
    """fn(*args, seconds left until `deadline`), the seconds counted when the job starts: a job
    forked late (after its family's import) has less of the common time limit left."""
    return lambda: fn(*(args + (max(1.0, deadline - time.monotonic()),)))


def _families(smoke, jobs, group_library, capability=None, prepare=None):
    """The smoke jobs, each group that tests a library moved under that library's import probe
    (taken out of `jobs`) as a family (isolation.run_isolated): the library is imported once, in
    the probe's own fork, and its groups run in forks of that one. FlashAttention 4's import (the
    CuTe DSL: 2-3 s alone, far more with a dozen processes importing it at once) is then paid once,
    not once per group. `prepare`: run in the family's fork before the import (the kernel caches'
    folders, which FA4 reads when imported). Families first, then the other smoke jobs."""
    if group_library is None:
        return smoke
    members, plain = {}, []
    for name, fn in smoke:
        module = group_library(name[len("smoke:"):])
        if module and any(job[0] == "import:" + module for job in jobs):
            members.setdefault("import:" + module, []).append((name, fn))
        else:
            plain.append((name, fn))
    families = []
    for probe, group in members.items():
        index = next(i for i, job in enumerate(jobs) if job[0] == probe)
        families.append((probe, _before_import(jobs.pop(index)[1], import_env(probe[len("import:"):], capability), prepare), group))
    return families + plain


def _load_file_module(name, path):
    """A standalone module from a file path (the doctor's gpu_child.py), without its package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
