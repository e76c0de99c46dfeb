"""Facts: everything the probes learned about one machine and one Python environment.

One plain, serialisable structure. Probes fill it, rules read it, ``--from-report`` loads it back.
Every field has a default so that a report recorded by an older attn-doctor, or a partial one
(``check --quick``), still loads.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

import msgspec

ProbeStatus = Literal["ok", "failed", "timeout", "skipped"]
# ok: imported; missing: not installed; error: raised on import; crashed: killed by a signal;
# timeout: hung; skipped: not attempted (quick mode, or a prerequisite failed).
ImportStatus = Literal["ok", "missing", "error", "crashed", "timeout", "skipped"]
# Classification of an import failure, used by rules and by `explain`.
ErrorKind = Literal[
    "undefined_symbol",
    "missing_extension",
    "missing_library",
    "glibc",
    "cuda_init",
    "other",
]


class Struct(msgspec.Struct, kw_only=True, omit_defaults=False):
    pass


# A compute capability as the probes write it ("9.0"): the rules compare and parse it, so a
# report from elsewhere with anything else in its place is refused when it loads.
Capability = Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,3}\.[0-9]{1,3}$")]


class Platform(Struct):
    system: str = ""
    release: str = ""
    machine: str = ""
    libc: Optional[str] = None  # "glibc"
    libc_version: Optional[str] = None  # "2.36"
    python_version: str = ""
    python_implementation: str = ""
    python_executable: str = ""
    in_virtualenv: bool = False
    externally_managed: bool = False  # PEP 668 marker present: pip refuses to install here
    hostname: str = ""


class Tool(Struct):
    present: bool = False
    version: Optional[str] = None
    path: Optional[str] = None


class Package(Struct):
    version: str
    installer: Optional[str] = None
    # The wheel's URL when it was installed from one (flash-attn release wheels name the torch,
    # CUDA and C++ ABI they were built for); credentials are stripped.
    url: Optional[str] = None


class Leftover(Struct):
    """What an install or uninstall killed half-way left in site-packages (the env probe)."""

    path: str
    kind: Literal["stash", "no-metadata", "no-record", "missing-files"]
    package: Optional[str] = None  # canonical name, where it can be told
    version: Optional[str] = None
    detail: str = ""


class Gpu(Struct):
    index: int
    name: str
    capability: Optional[Capability] = None  # "9.0"
    memory_mib: Optional[int] = None


class GpuInfo(Struct):
    # nvml | nvidia-smi | none (looked, found nothing) | skipped | assumed (check --gpu: the catalogue's, not probed)
    source: str = "skipped"
    driver_version: Optional[str] = None
    cuda_driver_version: Optional[str] = None  # "13.0": the newest CUDA the driver supports
    devices: list[Gpu] = []
    error: Optional[str] = None


class ImportError_(Struct):
    type: str = ""
    message: str = ""
    kind: ErrorKind = "other"
    symbol: Optional[str] = None  # undefined symbol, mangled
    demangled: Optional[str] = None
    library: Optional[str] = None  # the .so that failed to load, or the one missing


class ImportResult(Struct):
    status: ImportStatus = "skipped"
    version: Optional[str] = None
    duration_s: Optional[float] = None
    error: Optional[ImportError_] = None
    signal: Optional[int] = None
    # Extra module-specific facts (e.g. flash_attn's extension module name).
    detail: dict[str, str] = {}


class ExtensionLibrary(Struct):
    """One shared library of a distribution, linked against torch, loaded next to this torch."""

    file: str  # relative to site-packages: xformers/_C.so
    # ok | error (the dynamic loader or its initialiser refused it) | unused (a build for another
    # torch release, or CPU vs CUDA, beside the one the package loads here)
    status: str = "ok"
    needed: list[str] = []  # DT_NEEDED: libc10.so, libcudart.so.12, ...
    torch_symbols: int = 0  # torch C++ symbols it leaves for torch to provide
    error: Optional[ImportError_] = None
    note: Optional[str] = None  # why it is unused


class BuiltFor(Struct):
    """What a distribution says it was built for, and where it says so."""

    torch: Optional[str] = None
    cuda: Optional[str] = None  # "12.8", or a bare major "12" from libcudart.so.12
    python: Optional[str] = None
    cxx11_abi: Optional[bool] = None
    source: Optional[str] = None  # "xformers/cpp_lib.json; needs libcudart.so.12"


class ExtensionBuild(Struct):
    """A distribution that ships compiled code linked against torch (xformers, vllm, apex...)."""

    version: str = ""
    built_for: BuiltFor = msgspec.field(default_factory=BuiltFor)
    extensions: list[ExtensionLibrary] = []


class TorchDevice(Struct):
    index: int
    name: str
    capability: Capability  # "9.0"
    bf16_native: bool  # compute capability >= 8.0
    bf16_api: Optional[bool] = None  # torch.cuda.is_bf16_supported(): True under emulation too
    multi_processor_count: Optional[int] = None
    shared_memory_per_block_optin: Optional[int] = None
    total_memory_mib: Optional[int] = None


class TorchInfo(Struct):
    status: ImportStatus = "skipped"
    version: Optional[str] = None
    cuda: Optional[str] = None  # torch.version.cuda
    hip: Optional[str] = None
    cudnn: Optional[str] = None
    cxx11_abi: Optional[bool] = None
    arch_list: list[str] = []  # torch.cuda.get_arch_list(): sm_80, sm_90, compute_90...
    cuda_available: Optional[bool] = None
    cuda_error: Optional[str] = None
    device_count: int = 0
    devices: list[TorchDevice] = []
    # SDPA backends compiled in and enabled: flash, mem_efficient, cudnn, math
    sdpa: dict[str, bool] = {}
    sdpa_probe_dtype: Optional[str] = None  # the dtype the usable-checks were asked about
    sdpa_reasons: dict[str, list[str]] = {}  # why torch refused a backend, in its own words
    sdpa_error: Optional[str] = None
    error: Optional[ImportError_] = None
    duration_s: Optional[float] = None
    # When reused from the cache: the time torch, the imports and the extensions were probed (they
    # are reused while the package set, the GPU architecture and the driver stay the same).
    cached: Optional[str] = None
    key: Optional[str] = None  # what they depend on (attn_doctor/probes/keys.py), hashed


class SampleRun(Struct):
    name: str  # sdpa_block, transformers_flash_attention_2, x_transformers, fla_layer, ...
    status: str  # ran | skipped | failed
    reason: Optional[str] = None
    summary: dict[str, int] = {}  # sinks, bad_sinks, errors, warnings, ops
    # The kernel each attention call site runs on the GPU judged for (name, label, source: "torch"
    # asked on the GPU or "emulated", for, file, line, count): attn_doctor/tracing/kernel_choice/kernels.py.
    kernels: list[dict[str, Any]] = []


class DtypePath(Struct):
    """The built-in sample forward pass (attn_doctor.tracing.runs.samples), run in the target interpreter."""

    status: str = "skipped"  # ok | failed | skipped
    device: Optional[str] = None
    dtype: Optional[str] = None
    autocast: Optional[str] = None
    capability: Optional[Capability] = None  # the GPU the kernels were judged for
    verdict: Optional[str] = None  # pass | warning | error | failed
    samples: list[SampleRun] = []
    # The tracer's findings (id AD6xx, severity, message, sink, chain, patch), as it wrote them.
    findings: list[dict[str, Any]] = []
    # whether the samples were measured against a float64 shadow (AD626, AD627 found only so)
    measured: bool = False
    error: Optional[str] = None
    cached: Optional[str] = None  # when reused from the cache: the time it was computed
    key: Optional[str] = None  # the cache key: everything the verdict depends on, hashed
    computed_by: Optional[str] = None  # "host:pid" of the process that computed it
    waited_s: Optional[float] = None  # how long this check waited for another process computing it


class SmokeResult(Struct):
    """One attention backend, one dtype: a tiny causal forward + backward on the GPU against a
    float64 reference."""

    backend: str  # sdpa-flash, sdpa-mem-efficient, sdpa-cudnn, sdpa-math, flash_attn, flash_attn_3, flash_attn_4, xformers
    dtype: str
    status: str  # ok | wrong (numbers off) | refused (the backend declined these inputs) | error | unavailable
    head_dim: Optional[int] = None
    seq: Optional[int] = None
    rel_err: Optional[float] = None  # ||out - ref|| / ||ref||
    rel_err_grad: Optional[float] = None  # worst of dq, dk, dv
    tolerance: Optional[float] = None
    kernel_ms: Optional[float] = None  # median forward + backward, CUDA events
    total_ms: Optional[float] = None  # the whole smoke test of this backend
    error: Optional[str] = None
    reasons: list[str] = []  # torch's "not used because" warnings
    sticky_error: Optional[str] = None


class SdpaChoice(Struct):
    dtype: str
    head_dim: int
    backend: str  # what SDPA's default dispatch picks: flash_attention, efficient_attention, cudnn_attention, math
    refused: dict[str, list[str]] = {}  # fused backends torch would not use, with its reasons
    source: Optional[str] = None  # the --config file this head dim and dtype came from (None: the smoke shape)


class NumericsDirection(Struct):
    """One direction (forward, dQ, dK, dV) of a kernel that failed a numerics case."""

    err: Optional[float] = None  # largest absolute error against float64 where both are finite
    plain: Optional[float] = None  # the same for attention written out in the same dtype: the yardstick
    scale: Optional[float] = None  # largest float64 value
    allowed: Optional[float] = None  # the tolerance: a multiple of `plain` plus a few roundings of `scale`
    roundings: Optional[float] = None  # err in roundings of `scale` in the dtype
    nonfinite: int = 0  # NaN or inf where float64 is finite
    size: Optional[int] = None
    missing: bool = False  # the kernel gave no gradient


class NumericsResult(Struct):
    """One kernel, one dtype, one case of the numerics sweep (attn_doctor/probes/target/numerics_child.py):
    forward and backward against float64."""

    backend: str  # sdpa-flash, sdpa-mem-efficient, sdpa-cudnn, sdpa-math, flash_attn, xformers, flex-compiled, ...
    dtype: str
    case: str  # a key of Smoke.numerics_cases
    # ok | wrong | refused | error | n/a (its API cannot express the case) | unavailable | timeout
    # (not run: its group's time ran out first)
    status: str
    default: Optional[str] = None  # for SDPA's kernels: the backend SDPA's default dispatch picks for this case
    worst: Optional[float] = None  # the largest error / tolerance of its directions (< 1 passes)
    ms: Optional[float] = None
    error: Optional[str] = None
    why: Optional[str] = None  # why the case is n/a for it
    directions: dict[str, NumericsDirection] = {}  # out | dq | dk | dv -> what failed


class NumericsCase(Struct):
    """A case of the numerics sweep: the class of shapes it stands for."""

    cls: str  # in words: "sequence length a multiple of 64 but not of 128, a boolean mask, ..."
    shape: list[int] = []  # batch, query heads, key/value heads, query length, key length, head dim
    mask: Optional[str] = None  # none | causal | bool-causal | float-causal | all-true | bool-padding | float-bias | fully-masked
    logits: Optional[str] = None  # normal | neglse | large


class Smoke(Struct):
    status: str = "skipped"  # ok | failed (the GPU probe died mid-way) | skipped
    choices: list[SdpaChoice] = []
    results: list[SmokeResult] = []
    # The numerics sweep: every kernel, forward and backward against float64, over the cases below.
    numerics: list[NumericsResult] = []
    numerics_cases: dict[str, NumericsCase] = {}
    error: Optional[str] = None
    group_seconds: dict[str, float] = {}  # wall time of each smoke process (main, cudnn:<dtype>)
    # where each smoke process's time went (CUDA's start, the float64 reference, imports, the tests), s
    group_phases: dict[str, dict[str, float]] = {}
    device_index: Optional[int] = None  # the GPU the tests ran on (a distributed rank's LOCAL_RANK)
    cached: Optional[str] = None  # when reused from the cache: the time SDPA's tests ran on this GPU (per boot)
    # when reused from the cache: the time the package set's kernel tests ran (compiled
    # flex_attention, FA2/3/4, xformers: per package set, GPU architecture and driver)
    capability_cached: Optional[str] = None
    key: Optional[str] = None  # what SDPA's results depend on (GPU, driver, code, shapes, boot), hashed


class PlanSetting(Struct):
    """One value of a training plan and where it came from: the file's own key, the framework's
    default where the key is absent, or an environment variable the framework reads."""

    value: Any  # normalised: a dtype ("bfloat16" | "float16" | "float32"), a bool, an implementation name
    source: str = "file"  # file | default | env
    key: Optional[str] = None  # the key as the file spells it ("bf16", "fsdp_config.mixed_precision_policy.param_dtype", "[training] mixed_precision_param")
    raw: Any = None  # the value as written ("auto", "bf16-mixed"), when it differs from `value`
    note: Optional[str] = None  # how the framework reads it ("auto: torch.cuda.is_bf16_supported(), True by emulation before Ampere")
    requires: Optional[str] = None  # the compute capability the framework itself demands for it (axolotl's fp8: "9.0")


class ConfigFile(Struct):
    """A training config given with --config: the framework it was read as, why, and the
    framework-neutral training plan its reader made of it (attn_doctor/probes/configs/)."""

    path: str  # absolute
    # llamafactory | axolotl | torchtune | trl | ms-swift | accelerate | deepspeed | torchtitan | litgpt |
    # lightning | transformers | unknown
    kind: str = "unknown"
    status: str = "ok"  # ok | error (unreadable, not YAML/JSON/TOML, not a mapping)
    error: Optional[str] = None
    format: Optional[str] = None  # yaml | json | toml
    why: Optional[str] = None  # what made the reader take it: "keys base_model, datasets, sequence_len"
    # The keys rules and fix read, dotted for nested ones (DeepSpeed "bf16.enabled"); absent when unset.
    settings: dict[str, Any] = {}
    # The training plan: compute_dtype, param_dtype, loss_scaling, tf32, fp8, fp8_backend, attention,
    # compile, distributed, reduce_dtype (attn_doctor/probes/configs/plan.py says what each holds).
    plan: dict[str, PlanSetting] = {}
    # Keys that look like precision or attention settings and that the reader does not understand.
    unread: list[str] = []
    # Values the framework itself rejects when it reads them: key -> the framework's message; where
    # only some releases reject it, key -> the requirement they match ("trl>=0.27"), judged against
    # the installed version.
    refused: dict[str, str] = {}
    refused_by: dict[str, str] = {}
    # Settings the framework refuses together (bf16 and fp16 both on): "bf16, fp16" (the keys as the
    # file spells them) -> the framework's own message, or "" where no framework's is known.
    conflicts: dict[str, str] = {}
    # Each remedy this file can take, in its own keys: intent ("precision=fp16") -> {dotted key: value};
    # an intent the framework cannot express (torchtune refuses fp16) is absent.
    edits: dict[str, dict[str, Any]] = {}


class AssumedGpu(Struct):
    """The GPU a check judged for without having it (check --gpu NAME / --capability X.Y)."""

    name: str
    capability: Capability
    given: str  # what the user asked for ("t4", "7.5")
    memory_mib: Optional[int] = None
    fp8: bool = False  # fp8 matrix multiplies (compute capability >= 8.9)
    source: str = ""  # where the catalogue's facts come from


class ProbeRun(Struct):
    name: str
    status: ProbeStatus
    duration_s: float = 0.0
    error: Optional[str] = None
    # What the probe's processes printed (third-party warnings at import...), by process: the
    # probe itself, then each forked job (import:xformers, cuda, smoke:...); its end, redacted.
    # Kept out of the user's terminal; shown with -v.
    stderr: dict[str, str] = {}


class Target(Struct):
    """The interpreter a check diagnosed and why that one: --python, the active venv or conda env,
    or the interpreter attn-doctor runs in (attn_doctor.options.resolve_target)."""

    python: str
    source: Literal["option", "venv", "conda", "self"]
    why: str  # "--python", "active venv ($VIRTUAL_ENV)", ... as the header says it
    ignored: Optional[str] = None  # an active-environment variable that named no environment


class OtherEnvironment(Struct):
    """Another Python environment on this machine (attn_doctor.probes.environments), read from its
    package metadata alone: nothing was run or imported in it."""

    python: str  # its interpreter as `check --python` takes it (a venv's bin/python, not resolved)
    found: list[str] = []  # where it was found: "python3 on PATH", "conda env train", "./.venv", "pyenv 3.11.9"
    python_version: Optional[str] = None  # "3.11", from its lib/pythonX.Y folder or pyvenv.cfg
    torch: Optional[str] = None  # the torch version its metadata names; None: no torch there
    command: str = ""  # the check of it, as this doctor was run: `attn-doctor check -p /x/bin/python`
    # why no command is offered for it ("" above): a Python older than the probes run in
    left_out: Optional[str] = None


class Environments(Struct):
    """Where else torch may be: looked for when the default target (no --python, no active venv or
    conda env) has none, the usual case of a doctor installed apart from the training venv."""

    searched: list[str] = []  # the places looked at, in words
    doctor: str = "attn-doctor"  # how this doctor was run, as the commands start: `.venv/bin/attn-doctor`
    candidates: list[OtherEnvironment] = []  # those with torch first
    duration_s: float = 0.0
    error: Optional[str] = None  # the search stopped early (a slow file system): what was found before


class Facts(Struct):
    quick: bool = False
    target: Optional[Target] = None  # None: facts recorded before the target was reported
    # other environments on this machine, with and without torch; None: not looked for (the
    # target was chosen by the user, or has torch)
    environments: Optional[Environments] = None
    platform: Platform = msgspec.field(default_factory=Platform)
    tools: dict[str, Tool] = {}
    packages: dict[str, Package] = {}  # canonical (PEP 503) names
    # Requires-Dist lines (markers kept) that decide a verdict, by distribution: torch's pin of the
    # triton it was built with (==, ~= from torch 2.15), read rather than looked up in a table.
    requires: dict[str, list[str]] = {}
    leftovers: list[Leftover] = []  # half-installed packages: pip's stash, folders without metadata
    gpu: GpuInfo = msgspec.field(default_factory=GpuInfo)
    torch: TorchInfo = msgspec.field(default_factory=TorchInfo)
    imports: dict[str, ImportResult] = {}  # flash_attn, xformers, triton, fla, ...
    # distributions with compiled extensions linked against torch: built for what, do they load
    builds: dict[str, ExtensionBuild] = {}
    builds_probed: bool = False
    env: dict[str, str] = {}  # allow-listed, redacted
    dtype_path: DtypePath = msgspec.field(default_factory=DtypePath)
    smoke: Smoke = msgspec.field(default_factory=Smoke)
    probes: list[ProbeRun] = []
    configs: list[ConfigFile] = []  # training configs given with --config (attn_doctor.probes.configs)
    # check --gpu: the GPU the job will get, assumed from the shipped catalogue (attn_doctor/gpus.py)
    # instead of probed; None when the GPUs are this machine's (or the recorded report's)
    assumed_gpu: Optional[AssumedGpu] = None

    # --- derived views used by rules; never serialised ---

    def version_of(self, name: str) -> Optional[str]:
        pkg = self.packages.get(canonical_name(name))
        return pkg.version if pkg else None

    def gpu_capabilities(self) -> Optional[list[str]]:
        """Compute capabilities of the GPUs, from torch when it saw them, else NVML.

        None when it is unknown whether there are GPUs (the GPU probe did not run).
        """
        if self.torch.devices:
            return [d.capability for d in self.torch.devices]
        if self.gpu.devices:
            return [d.capability for d in self.gpu.devices if d.capability]
        if self.gpu.source in ("none", "nvml", "nvidia-smi"):
            return []
        return None

    def module_installed(self, module: str) -> Optional[bool]:
        """Whether a distribution providing `module` is installed; None when packages were not read."""
        if not self.packages:
            return None
        return any(self.version_of(d) for d in MODULE_DISTRIBUTIONS.get(module, (module,)))

    def probe(self, name: str) -> Optional[ProbeRun]:
        return next((p for p in self.probes if p.name == name), None)


# Importable module -> the distributions that provide it: the one table (the import probes in the
# target interpreter receive it as JSON).
MODULE_DISTRIBUTIONS = {
    "flash_attn": ("flash-attn",),
    "flash_attn_interface": ("flash-attn-3", "flash_attn_3"),
    "flash_attn_4": ("flash-attn-4",),
    "xformers": ("xformers",),
    "triton": ("triton", "pytorch-triton", "pytorch-triton-rocm"),
    "fla": ("flash-linear-attention", "fla-core"),
    "liger_kernel": ("liger-kernel", "liger-kernel-nightly"),
}


# Compiled extension modules whose name is not their distribution's (a log shows the module or the
# library file, pip wants the distribution).
EXTENSION_DISTRIBUTIONS = {
    "flash_attn_2_cuda": "flash-attn", "flash_attn_cuda": "flash-attn", "flash_attn_gpu": "flash-attn",
    "fused_dense_lib": "flash-attn", "rotary_emb": "flash-attn", "dropout_layer_norm": "flash-attn",
    "flash_attn_3_cuda": "flash-attn-3", "flash_attn_3": "flash-attn-3", "flash_attn_interface": "flash-attn-3",
    "selective_scan_cuda": "mamba-ssm", "causal_conv1d_cuda": "causal-conv1d",
    "amp_C": "apex", "fused_layer_norm_cuda": "apex", "fused_adam_cuda": "apex",
    "_C_flashattention": "xformers", "awq_inference_engine": "autoawq", "exllamav2_ext": "exllamav2", "vllm_flash_attn": "vllm",
}


def distribution_of(module: str) -> str:
    """The distribution to reinstall for an importable or extension module name ("flash_attn_2_cuda",
    "xformers", "selective_scan_cuda", "fla"): pip's name for it."""
    top = module.strip().split(".")[0]
    if top in EXTENSION_DISTRIBUTIONS:
        return EXTENSION_DISTRIBUTIONS[top]
    lowered = top.lower()
    if lowered in MODULE_DISTRIBUTIONS:
        return MODULE_DISTRIBUTIONS[lowered][0]
    return canonical_name(top)


# bf16 is native from compute capability 8.0 (Ampere) on; before it, torch emulates it. Every
# decision about native bf16 goes through bf16_native(); the probes in the target interpreter
# receive the threshold with their configuration.
BF16_NATIVE_FROM = (8, 0)


def bf16_native(capability: str) -> bool:
    """Whether a GPU of this compute capability ("7.5", "9.0") has native bf16."""
    try:
        return tuple(int(x) for x in capability.split(".")[:2]) >= BF16_NATIVE_FROM
    except ValueError:
        return False


def canonical_name(name: str) -> str:
    # PEP 503 normalisation without importing packaging (kept cheap for --quick).
    out = []
    prev_sep = False
    for ch in name.lower():
        if ch in "-_.":
            if not prev_sep:
                out.append("-")
            prev_sep = True
        else:
            out.append(ch)
            prev_sep = False
    return "".join(out)
