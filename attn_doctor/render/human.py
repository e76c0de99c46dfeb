"""The human report: one section per area, a mark per result, the remedy under each problem."""

from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.text import Text

from ..facts import MODULE_DISTRIBUTIONS, Facts, bf16_native
from ..gpus import memory_in_name
from ..report import STATUS_ORDER, Report, Result
from .remedy import remedy_lines

AREAS = [
    ("system", "System"),
    ("gpu", "GPU"),
    ("torch", "PyTorch"),
    ("kernels", "Attention kernels"),
    ("libraries", "Libraries"),
    ("dtype", "Dtype path"),
    ("config", "Configs"),
]

MARKS = {
    "pass": ("✓", "green"),
    "info": ("i", "cyan"),
    "warning": ("!", "yellow"),
    "error": ("✗", "red"),
    "skipped": ("-", "dim"),
    "crashed": ("✗", "magenta"),
}

LIBRARIES = [
    "transformers",
    "accelerate",
    "peft",
    "deepspeed",
    "flash-linear-attention",
    "fla-core",
    "x-transformers",
    "llamafactory",
    "vllm",
]


def worst(results: list[Result]) -> str:
    """A section's mark: the worst status of the results in it. A skipped check counts: a section
    whose checks could not all run is not shown as passed (torch absent: its checks skipped)."""
    if not results:
        return "skipped"  # nothing was judged there
    return min((r.status for r in results), key=lambda s: STATUS_ORDER[s])


def render(report: Report, console: Console, verbose: bool = False) -> None:
    render_header(report, console)
    for area, _title in AREAS:
        render_area(report, area, console, verbose)
    render_footer(report, console, verbose)


def render_header(report: Report, console: Console) -> None:
    """The report's first lines: the tool, and which interpreter was checked and why."""
    header_lines(console, report.tool.version, report.source, report.facts.target, report.facts.platform.hostname)


def header_lines(console: Console, version: str, source: str = "probed", target=None, hostname: Optional[str] = None) -> None:
    """render_header's lines from what is known before any probe runs (a streamed check prints
    them at once)."""
    header = Text("attn-doctor ", style="bold")
    header.append(version, style="dim")
    if source == "facts-file":
        header.append(f"  (diagnosing a recorded report from {hostname or 'another machine'}; nothing probed here)", style="dim")
    console.print(header)
    if source == "probed" and target is not None:
        console.print(target_line(target))


def render_area(report: Report, area: str, console: Console, verbose: bool = False) -> None:
    """One section: its line with a mark and a summary, then its problems and their remedies."""
    results = [r for r in report.results if r.area == area]
    summary = section_summary(area, report.facts, report.source)
    if not results and summary is None:
        return
    if summary is None and not verbose and all(r.status == "skipped" for r in results):
        return  # e.g. the config rules when no --config was given: nothing to say
    _section(console, dict(AREAS)[area], summary, results, report.facts, verbose)
    if area == "config":
        render_config_files(console, report.facts.configs)
    if area == "system":  # no torch in the doctor's own environment: where else it is
        from .environments import render_environments

        render_environments(console, report.facts.environments, verbose, _here(report))


def _here(report: Report) -> str:
    return "on this machine" if report.source == "probed" else f"on {report.facts.platform.hostname or 'that machine'}"


def target_line(target, verb: str = "checking") -> Text:
    """Which interpreter a command acts on and why that one (--python, the active venv or conda
    env, or the doctor's own): a pipx-installed doctor acts on the active venv, and says so.
    `check` and `fix` print this one line."""
    line = Text(f"{verb} ", style="dim")
    line.append(target.python)
    line.append(f" — {target.why}", style="dim")
    if target.ignored:
        line.append(f" ({target.ignored})", style="yellow")
    return line


def _line(console: Console, status: str, text: str, indent: int = 0, style: str = "") -> None:
    mark, colour = MARKS[status]
    line = Text(" " * indent)
    line.append(f"[{mark}] " if indent == 0 else f"{mark} ", style=f"bold {colour}")
    line.append(text, style=style)
    console.print(line)


def _section(console, title, summary, results, facts, verbose) -> None:
    status = worst(results)
    head = f"{title}" + (f": {summary}" if summary else "")
    _line(console, status, head)
    problems = sorted(
        (r for r in results if r.status in ("error", "warning", "info", "crashed")),
        key=lambda r: (STATUS_ORDER[r.status], r.rule),
    )
    for result in problems:
        _problem(console, result, facts, verbose)
    skipped = [r for r in results if r.status == "skipped"]
    passed = [r for r in results if r.status == "pass"]
    if verbose:
        for r in passed:
            _line(console, "pass", f"{r.rule} {r.message or r.title}", indent=4, style="dim")
        for r in skipped:
            _line(console, "skipped", f"{r.rule} {r.title}: skipped, {r.reason}", indent=4, style="dim")
    elif skipped:
        reasons = sorted({r.reason or "" for r in skipped})
        console.print(Text(f"    {len(skipped)} check(s) skipped: {'; '.join(reasons)}", style="dim"))


def _problem(console: Console, result: Result, facts: Facts, verbose: bool) -> None:
    if result.status == "crashed":
        _line(console, "crashed", f"{result.rule} {result.title}: the check itself crashed (a bug in attn-doctor)", indent=4)
        if verbose and result.traceback:
            console.print(Text(result.traceback, style="dim"))
        return
    _line(console, result.status, f"{result.message}", indent=4)
    console.print(Text(f"      {result.rule} {result.name}", style="dim"))
    for remedy in result.remedies:
        text = Text("      → ", style="bold")
        text.append(remedy.summary)
        if remedy.safety == "unsafe":
            text.append("  (unsafe: " + (remedy.why_unsafe or "needs care") + ")", style="yellow")
        console.print(text)
        for line, command in remedy_lines(remedy, "        "):
            console.print(line, soft_wrap=command)  # a command stays one line, to copy whole
    if verbose:
        if result.evidence:
            console.print(Text("      evidence: " + ", ".join(f"{k}={v}" for k, v in result.evidence.items()), style="dim"))
        for link in result.links:
            console.print(Text(f"      see {link}", style="dim"))


def render_footer(report: Report, console: Console, verbose: bool = False) -> None:
    """After the sections: the probes that could not run, notes, timings (-v), the summary line."""
    facts = report.facts
    failed = [p for p in facts.probes if p.status in ("failed", "timeout")]
    for probe in failed:
        _line(console, "crashed", f"probe {probe.name} could not run: {probe.error}")
    if verbose:
        timings = ", ".join(f"{p.name} {p.duration_s:.2f}s" for p in facts.probes)
        if timings:
            console.print(Text(f"probes: {timings}", style="dim"))
        for group, seconds in facts.smoke.group_seconds.items():
            phases = facts.smoke.group_phases.get(group) or {}
            spent = ", ".join(f"{name.removesuffix('_s')} {value:.2f}s" for name, value in phases.items())
            console.print(Text(f"smoke group {group}: {seconds:.2f}s" + (f" ({spent})" if spent else ""), style="dim"))
        for probe in facts.probes:
            for process, text in probe.stderr.items():
                console.print(Text(f"{process} printed (kept off your terminal):", style="dim"))
                console.print(Text("\n".join("    " + line for line in str(text).splitlines()), style="dim"))
    for probe in facts.probes:
        # What a check did without (no private bytecode folder; with -v, cache entries it ignored).
        if probe.status == "skipped" and probe.error and (verbose or probe.name != "cache"):
            console.print(Text(f"note: {probe.error}", style="dim"))
    if facts.quick:
        console.print(
            Text("Quick mode: torch was not imported; run `attn-doctor check` without --quick for the full diagnosis.", style="dim")
        )
    render_summary(report, console)


def render_quiet(report: Report, console: Console) -> None:
    """All of the report with -q: each problem's one line (what failed, by rule), then the counts."""
    marks = {"error": ("✗", "bold red"), "warning": ("!", "bold yellow"), "crashed": ("✗", "bold magenta")}
    order = {"error": 0, "crashed": 1, "warning": 2}
    for r in sorted((r for r in report.results if r.status in marks), key=lambda r: order[r.status]):
        if r.status in marks:
            mark, style = marks[r.status]
            console.print(Text.assemble((mark + " ", style), (f"{r.rule} {r.name}", "bold"), f": {r.title}"))
    render_summary(report, console)


def render_summary(report: Report, console: Console) -> None:
    """The last line of the report: the counts and the exit code."""
    s = report.summary
    parts = []
    for key, label in (("error", "error"), ("warning", "warning"), ("info", "note"), ("crashed", "crashed")):
        n = getattr(s, key)
        if n:
            parts.append(f"{n} {label}{'s' if n != 1 else ''}")
    parts.append(f"{s.passed} passed")
    if s.skipped:
        parts.append(f"{s.skipped} skipped")
    style = "bold red" if s.error or s.crashed else "bold yellow" if s.warning else "bold green"
    console.print(Text(", ".join(parts), style=style) + Text(f"  (exit code {report.exit_code})", style="dim"))


# ---------------------------------------------------------------- one-line area summaries


def section_summary(area: str, facts: Facts, source: str = "probed") -> Optional[str]:
    """What a section's line says after its title: what was found, or why a step has nothing to
    show (the reason the report recorded; never a cause guessed from what is missing)."""
    if area == "dtype":
        return _dtype_path(facts, source)
    fn = {
        "config": _configs,
        "system": _system,
        "gpu": _gpu,
        "torch": _torch,
        "kernels": _kernels,
        "libraries": _libraries,
    }.get(area)
    return fn(facts) if fn else None


def _configs(facts: Facts) -> Optional[str]:
    if not facts.configs:
        return None
    from ..probes.configs.readers import label
    from .console import inert

    read = [c.kind for c in facts.configs if c.status == "ok"]
    unread = [c for c in facts.configs if c.status != "ok"]
    parts = []
    if read:
        parts.append(f"{len(read)} file{'s' if len(read) != 1 else ''} read: " + ", ".join(dict.fromkeys(label(k) for k in read)))
    if unread:
        # a file not read is never counted as read; one alone says why in the header
        why = f" ({inert(unread[0].error or 'unreadable')})" if len(unread) == 1 else ""
        parts.append(f"{len(unread)} file{'s' if len(unread) != 1 else ''} not read{why}")
    return "; ".join(parts)


_PLAN_LABELS = (("compute_dtype", "compute"), ("param_dtype", "weights"), ("loss_scaling", "loss scaling"), ("tf32", "tf32"),
                ("fp8", "fp8"), ("fp8_backend", "fp8 backend"), ("attention", "attention"), ("compile", "compile"),
                ("distributed", "sharding"), ("reduce_dtype", "reduce"), ("quantization", "base stored as"),
                ("quant_compute_dtype", "base computes in"), ("adapter", "adapters"), ("adapter_dtype", "adapter weights"))


def plan_lines(config) -> list[str]:
    """A config as the doctor read it: the framework and why, each plan value and where it came
    from, the keys that look like precision settings and were not understood."""
    from .console import inert

    head = f"{inert(config.path)}: "
    if config.status == "error":
        return [head + "not read: " + inert(config.error or "unreadable")]
    if config.kind == "unknown":
        return [head + "not recognised"]
    from ..probes.configs.readers import label

    lines = [head + f"{label(config.kind)} ({inert(config.why or '')})"]
    for name, word in _PLAN_LABELS:
        setting = config.plan.get(name)
        if setting is None:
            continue
        value = setting.value if not isinstance(setting.value, bool) else ("on" if setting.value else "off")
        raw = setting.raw if setting.raw is not None else setting.value
        raw = ("true" if raw else "false") if isinstance(raw, bool) else raw
        where = (f"{setting.key}: {raw}" if setting.source == "file" and setting.key
                 else f"${setting.key}" if setting.source == "env" else "default")
        lines.append(f"  {word} {inert(str(value))}  [{inert(str(where))}]" + (f"  {inert(setting.note)}" if setting.note else ""))
    if config.unread:
        lines.append("  not understood: " + inert(", ".join(config.unread)))
    return lines


def render_config_files(console: Console, configs) -> None:
    for config in configs:
        for i, line in enumerate(plan_lines(config)):
            console.print(Text(("    · " if i == 0 else "      ") + line, style="" if i == 0 else "dim"), soft_wrap=False)


def _system(facts: Facts) -> str:
    p = facts.platform
    parts = [f"{p.system} {p.machine}".strip()]
    if p.libc_version:
        parts.append(f"{p.libc or 'libc'} {p.libc_version}")
    parts.append(f"Python {p.python_version} ({p.python_executable})")
    pip = facts.tools.get("pip")
    if pip is not None:
        parts.append(f"pip {pip.version}" if pip.present else "no pip")
    uv = facts.tools.get("uv")
    if uv is not None and uv.present:
        parts.append("uv")
    if p.in_virtualenv:
        parts.append("venv")
    return ", ".join(x for x in parts if x)


def _gpu(facts: Facts) -> str:
    devices = facts.torch.devices or facts.gpu.devices
    if not devices:
        if facts.gpu.source == "skipped":
            return "not probed"
        return "no NVIDIA GPU found"
    groups: dict[tuple, int] = {}
    for d in devices:
        cap = d.capability or "?"
        native = bf16_native(cap) if cap != "?" else None
        key = (d.name, cap, native)
        groups[key] = groups.get(key, 0) + 1
    parts = []
    for (name, cap, native), count in groups.items():
        bf16 = "bf16 native" if native else "no native bf16" if native is False else "bf16 unknown"
        prefix = f"{count}x " if count > 1 else ""
        parts.append(f"{prefix}{name} (sm{cap.replace('.', '')}, {bf16})")
    driver = ""
    if facts.gpu.driver_version:
        driver = f", driver {facts.gpu.driver_version}"
        if facts.gpu.cuda_driver_version:
            driver += f" (CUDA {facts.gpu.cuda_driver_version})"
    line = "; ".join(parts) + driver
    if facts.assumed_gpu is not None:
        a = facts.assumed_gpu
        memory = f"{a.memory_mib // 1024} GB" if a.memory_mib else ""
        named = memory and memory_in_name(a.given) is not None  # "Tesla V100-SXM2-16GB": the name says which variant
        traits = ", ".join(("fp8" if a.fp8 else "no fp8", "" if named else memory))
        line += (f" — assumed (--gpu {a.given}): capability {a.capability}, {traits.strip(', ')} from the shipped catalogue"
                 f"{f', {memory} as named' if named else ''}; nothing was tested on a GPU")
    return line


def _torch(facts: Facts) -> str:
    t = facts.torch
    if t.status == "skipped":
        version = facts.version_of("torch")
        return f"torch {version} (not imported)" if version else "not installed"
    if t.status == "missing":
        return "not installed"
    if t.status != "ok":
        return f"torch {facts.version_of('torch') or ''} does not import ({t.status})"
    parts = [f"torch {t.version}"]
    if t.cuda:
        parts.append(f"CUDA {t.cuda}")
    elif t.hip:
        parts.append(f"ROCm {t.hip}")
    else:
        parts.append("CPU-only build")
    if t.cudnn:
        parts.append(f"cuDNN {t.cudnn}")
    if t.cxx11_abi is not None:
        parts.append("C++11 ABI" if t.cxx11_abi else "pre-C++11 ABI")
    triton = facts.version_of("triton")
    if triton:
        parts.append(f"triton {triton}")
    backends = [(k.replace("_usable", ""), v) for k, v in t.sdpa.items() if k.endswith("_usable")]
    if backends:
        parts.append("SDPA " + " ".join(f"{k.replace('_', '-')} {'✓' if v else '✗'}" for k, v in backends))
    elif t.sdpa and t.cuda:
        parts.append("SDPA flash " + ("compiled in" if t.sdpa.get("flash_compiled") else "not compiled in"))
    line = ", ".join(parts)
    if t.cached:
        line += f" (imports probed {_when(t.cached)}, reused for this package set; --no-cache probes again)"
    return line


def _when(stamp: str) -> str:
    return stamp[:16].replace("T", " ")


_KERNEL_MODULES = [("flash_attn", "flash-attn"), ("flash_attn_interface", "FA3"), ("flash_attn_4", "FA4"), ("xformers", "xformers"), ("triton", "triton"), ("fla", "fla"), ("liger_kernel", "liger-kernel")]


_SHORT = {"flash_attention": "flash", "efficient_attention": "mem-efficient", "cudnn_attention": "cuDNN", "math": "math"}


def _smoke(facts: Facts) -> Optional[str]:
    """`smoke bf16: sdpa-flash ✓ 0.21 ms, ...; SDPA picks flash`"""
    smoke = facts.smoke
    if smoke.status == "skipped":
        return None
    parts = []
    for dtype in dict.fromkeys(r.dtype for r in smoke.results):
        marks = []
        for r in (r for r in smoke.results if r.dtype == dtype and r.status != "unavailable"):
            mark = {"ok": "✓", "refused": "declined", "wrong": "✗ wrong", "error": "✗"}.get(r.status, r.status)
            timing = f" {r.kernel_ms:.2f} ms" if r.status == "ok" and r.kernel_ms is not None else ""
            marks.append(f"{r.backend} {mark}{timing}")
        choice = next((c for c in smoke.choices if c.dtype == dtype and c.source is None), None)
        picked = f"; SDPA picks {_SHORT.get(choice.backend, choice.backend)}" if choice else ""
        parts.append(f"{dtype} (head dim {smoke.results[0].head_dim}): " + ", ".join(marks) + picked)
    if smoke.status == "failed":
        parts.append(f"stopped: {smoke.error}")
    reused = []
    if smoke.cached:
        reused.append(f"SDPA tested {_when(smoke.cached)}, reused until the machine reboots")
    if smoke.capability_cached and any(not r.backend.startswith("sdpa-") for r in smoke.results):
        reused.append(f"libraries and compiled kernels tested {_when(smoke.capability_cached)}, reused for this package set, "
                      "GPU architecture and driver")
    when = f" ({'; '.join(reused)}; --no-cache tests again)" if reused else ""
    return "\n    ".join([f"smoke{when} " + " | ".join(parts), *_numerics(smoke), *_model_choices(smoke)])


def _numerics(smoke) -> list[str]:
    """`numerics against float64, forward and backward: 20 cases, fp16 bf16: sdpa-cudnn ✗ 5 of 40
    (tile64-bool-mask-neglse, ...), sdpa-flash ✓ 24 (16 declined), ...`"""
    if not smoke.numerics:
        return []
    cases = dict.fromkeys(r.case for r in smoke.numerics)
    dtypes = dict.fromkeys(_DTYPE_SHORT.get(r.dtype, r.dtype) for r in smoke.numerics)
    marks = []
    for backend in dict.fromkeys(r.backend for r in smoke.numerics):
        mine = [r for r in smoke.numerics if r.backend == backend]
        ran = [r for r in mine if r.status in ("ok", "wrong")]
        wrong = [r for r in mine if r.status == "wrong"]
        errors = [r for r in mine if r.status == "error"]
        late = [r for r in mine if r.status == "timeout"]
        if not ran and not errors and not late:
            status = next((r.status for r in mine), "")
            marks.append(f"{backend} {'not run' if status != 'unavailable' else 'does not import'}")
            continue
        done = [f"✗ {len(wrong)} of {len(ran)} wrong ({', '.join(dict.fromkeys(r.case for r in wrong))})" if wrong
                else f"✓ {len(ran)}"] if ran else []
        if errors:
            done.append(f"{len(errors)} raised")
        if late:
            done.append(f"{len(late)} not reached in the sweep's time (measured by the next check)")
        marks.append(f"{backend} " + ", ".join(done))
    return [f"numerics against float64, forward and backward: {len(cases)} cases, {' '.join(dtypes)}: " + ", ".join(marks)]


_DTYPE_SHORT = {"float16": "fp16", "bfloat16": "bf16"}


_REFUSED = {"flash": "flash", "mem_efficient": "mem-efficient", "cudnn": "cuDNN"}


def _model_choices(smoke) -> list[str]:
    """`your model (config.json: bfloat16, head dim 256): SDPA picks flash (cuDNN refused: ...)`"""
    lines = []
    for c in (c for c in smoke.choices if c.source):
        refused = "; ".join(f"{_REFUSED.get(k, k)} refused: {v[0]}" for k, v in c.refused.items() if v)
        picked = _SHORT.get(c.backend, c.backend)
        lines.append(f"your model ({c.source}: {c.dtype}, head dim {c.head_dim}): SDPA picks {picked}" + (f" ({refused})" if refused else ""))
    return lines


def _kernels(facts: Facts) -> str:
    smoke = _smoke(facts)
    text = _kernel_imports(facts)
    return text + (f"\n    {smoke}" if smoke else "")


_DISTRIBUTION = {module: dists[0] for module, dists in MODULE_DISTRIBUTIONS.items()}


def _kernel_imports(facts: Facts) -> str:
    parts = []
    for module, label in _KERNEL_MODULES:
        result = facts.imports.get(module)
        if result is None or result.status == "missing":
            continue
        if result.status == "skipped":
            dist = _DISTRIBUTION.get(module)
            version = facts.version_of(dist) if dist else None
            if version:
                parts.append(f"{label} {version} (import not checked)")
            continue
        version = result.version or ""
        state = "imports" if result.status == "ok" else f"import {result.status}"
        build = facts.builds.get(_DISTRIBUTION.get(module, ""))
        if result.status == "ok" and build and any(e.status == "error" for e in build.extensions):
            state = "imports, but its compiled extension does not load"
        parts.append(f"{label} {version} {state}".replace("  ", " "))
    if not parts:
        if facts.quick:
            fa = facts.version_of("flash-attn")
            return f"flash-attn {fa} (import not checked)" if fa else "no flash-attn / xformers installed"
        return "no flash-attn / xformers / fla installed; SDPA only"
    return ", ".join(parts)


# The sample forward passes that call flash_attn: where it does not import, the tracer's stand-in
# (attn_doctor/tracing/standins/fa2.py, flash-attn's own checks and messages) takes its place.
_FLASH_ATTN_SAMPLES = ("flash_attn_block", "transformers_flash_attention_2")


def _standin_words(facts: Facts) -> Optional[str]:
    result = facts.imports.get("flash_attn")
    if result is None or result.status in ("ok", "skipped"):
        return None
    state = "not installed" if result.status == "missing" else "does not import"
    return f"flash-attn {state}: judged with a stand-in"


def _site_kernel(site: dict) -> str:
    # from a facts file too: bounded and printable only
    label = "".join(c for c in str(site.get("label") or "?")[:60] if c.isprintable())
    count = site.get("count")
    return label + (f" ×{count}" if isinstance(count, int) and count > 1 else "")


def _dtype_path(facts: Facts, source: str) -> Optional[str]:
    dp = facts.dtype_path
    if dp.status == "skipped":
        if dp.error:  # recorded with the facts: the option that turned it off, or torch absent
            return f"sample forward pass skipped: {dp.error}"
        if facts.quick:
            return "sample forward pass skipped: a quick check (--quick) imports no torch"
        if source == "facts-file":
            return "sample forward pass not recorded in this report"
        return "sample forward pass did not run (no reason recorded)"
    if dp.status == "failed":
        return f"sample forward pass could not run: {dp.error}"
    marks = {"ran": "✓", "failed": "✗"}
    standin = _standin_words(facts)
    ran = []
    for sample in dp.samples:
        if sample.status == "skipped":
            continue
        # judged by its findings as the check keeps them (a stand-in's verdict is a note, not a failure)
        mine = [f for f in dp.findings if isinstance(f, dict) and f.get("sample") == sample.name]
        bad = any(f.get("severity") in ("error", "warning") for f in mine)
        noted = any(f.get("severity") == "info" for f in mine)
        mark = "✗" if bad or sample.status == "failed" else ("i" if noted else marks.get(sample.status, "?"))
        text = f"{sample.name} {mark}"
        if standin and sample.name in _FLASH_ATTN_SAMPLES and sample.status == "ran":
            text += f" ({standin})"  # a ✓ is a claim about what ran: here, not flash-attn itself
        if sample.kernels:  # the kernel at each of its attention call sites
            text += " → " + ", ".join(_site_kernel(site) for site in sample.kernels[:4])
        ran.append(text)
    skipped = [s.name for s in dp.samples if s.status == "skipped"]
    where = f"{dp.device}, {dp.dtype}" + (f", autocast {dp.autocast}" if dp.autocast else "")
    if dp.capability:
        where += f", judged for sm{dp.capability.replace('.', '')}"
    if dp.cached:
        where += f", cached from {dp.cached[:16].replace('T', ' ')}"
    if dp.waited_s:  # another process was computing it: this check waited for that one
        where += f" (computed by {dp.computed_by or 'another process'}; waited {dp.waited_s:.1f} s)"
    text = f"sample forward ({where}): " + (", ".join(ran) if ran else "nothing ran")
    if skipped:
        text += f"; not installed: {', '.join(skipped)}"
    return text


def _libraries(facts: Facts) -> Optional[str]:
    parts = [f"{name} {facts.version_of(name)}" for name in LIBRARIES if facts.version_of(name)]
    return ", ".join(parts) if parts else "none of transformers, accelerate, peft, deepspeed, fla, x-transformers, LLaMA-Factory, vllm"
