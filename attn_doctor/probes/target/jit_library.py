"""A library that compiles each kernel at its first call (FlashAttention 4), tested in one process that
holds CUDA, its kernels compiled ahead in processes that never start it (ahead_compile.py).

A unit is what shares one compile: the smoke test in one dtype, or a part of the numerics sweep
(numerics_cases.LIBRARY_PARTS). Each unit gets a worker, forked before this process starts CUDA;
this process then starts CUDA once and runs each unit as its compile lands, loading the kernels from
the library's persistent cache. CUDA's start (a second or more per process, serialised in the
driver where a dozen processes start it at once) is paid once instead of once per unit, and a
unit's forward and backward compile side by side.

A unit whose compile fails runs in its worker, which starts CUDA itself: what the real call
raises is what is said. A unit still compiling at the deadline is said as not measured.

Standard library plus torch, Python 3.8+ syntax: loaded by path beside numerics_child.py.
"""

from __future__ import annotations

import select
import time


def units(smoke_case, smoke_dtypes, sweep_dtype, parts):
    """[(unit name, the case its compile is made from, dtype name)]: the smoke test per dtype, then
    each part of the sweep (its first case: the others share its compile)."""
    out = [("smoke:" + d, smoke_case, d) for d in smoke_dtypes]
    if sweep_dtype:
        out += [("part:%d" % (i + 1), part[0], sweep_dtype) for i, part in enumerate(parts)]
    return out


def run_group(name, index, groups, capability, budget_s, nc, bf16_native, smoke_at, shape):
    """The group "lib:<name>": the library's smoke tests (smoke_at(torch, name, call, dtype, device),
    gpu_child's, at `shape`) and, where the split `groups` has the sweep, its cases of it (nc:
    numerics_child). `capability`: "9.0", or None (nothing compiles ahead: each unit runs in a
    process of its own that starts CUDA)."""
    import torch

    digits = str(capability or "").split(".")
    known = tuple(int(d) for d in digits) if len(digits) == 2 and all(d.isdigit() for d in digits) else None
    # Unknown capability: plan for bf16; a unit finds out from the device and runs no bf16 test.
    dtypes = ["float16"] + (["bfloat16"] if known is None or bf16_native(known) else [])

    def native(device):
        return bf16_native(tuple(torch.cuda.get_device_capability(device)))

    def smoke(torch, call, dtype, device):
        return None if dtype == torch.bfloat16 and not native(device) else smoke_at(torch, name, call, dtype, device)

    b, h, s, d = shape
    smoke.case = {"name": "smoke", "b": b, "h": h, "sq": s, "sk": s, "d": d, "mask": "causal"}
    numerics = any(str(g).startswith("num:") for g in groups or ())
    return run(torch, name, nc, index, known, budget_s, smoke, dtypes, numerics, native)


class Cuda:
    """The GPU a run tests on (the tests stand the CPU in for it)."""

    def __init__(self, torch, native):
        self.torch, self.native = torch, native

    def available(self):
        return self.torch.cuda.is_available()

    def start(self, index):
        """CUDA started on GPU `index` (clamped to those here): its device name."""
        cuda = self.torch.cuda
        index = min(max(int(index), 0), cuda.device_count() - 1)
        cuda.set_device(index)
        cuda.synchronize()
        return "cuda:%d" % index

    def sync(self):
        self.torch.cuda.synchronize()


def run(torch, name, nc, index, capability, budget_s, smoke, smoke_dtypes, numerics, native, gpu=None):
    """The library's smoke tests (smoke_dtypes, each run by smoke(torch, call, dtype, device) -> a
    result row, or None where the GPU has no such dtype; smoke.case: the shape its compile is made
    from) and, with `numerics`, its cases of the sweep (nc: numerics_child), on GPU `index`:
    {"status", "results", "numerics", "cases", "phases"}. capability: (9, 0) where known (nothing
    compiles ahead without it: each unit then runs in its worker). native(device): whether the GPU
    computes bf16 natively (the sweep runs in fp16 where not). gpu: Cuda(torch, native) unless given."""
    gpu = gpu or Cuda(torch, native)
    ahead = nc._AHEAD  # ahead_compile.py, loaded beside numerics_child
    started = time.perf_counter()
    deadline = time.monotonic() + budget_s - nc.TIME_MARGIN_S if budget_s else time.monotonic() + 3600
    phases = {}
    parts = nc.LIBRARY_PARTS.get(name, ()) if numerics else ()
    # the sweep runs in one dtype, the one training would use: the last smoke dtype (bf16 where native)
    sweep_dtype = (smoke_dtypes[-1] if smoke_dtypes else "float16") if numerics else None
    plan = units(smoke.case if smoke else None, smoke_dtypes if smoke else (), sweep_dtype, parts)
    every = nc.CASES + nc.LIBRARY_CASES.get(name, ())

    def run_unit(unit, call_box):
        """The unit's rows, run in this process (CUDA started here if it is not yet)."""
        unit_name, _case, dtype_name = unit
        if "cuda" not in call_box:
            call_box["cuda"] = gpu.start(index)
        device = call_box["cuda"]
        if "call" not in call_box:
            try:
                call_box["call"] = nc.library_call(torch, name)
            except BaseException as exc:  # noqa: BLE001 - the import probe reports it; here just not tested
                call_box["call"] = exc
        call = call_box["call"]
        dtype = getattr(torch, dtype_name)
        if unit_name.startswith("smoke:"):
            if isinstance(call, BaseException):
                return {"results": [{"backend": name, "dtype": dtype_name, "status": "unavailable",
                                     "error": ("%s: %s" % (type(call).__name__, call))[:300]}]}
            row = smoke(torch, lambda q, k, v: call(q, k, v, None, True, False), dtype, device)
            return {"results": [row] if row else []}
        if dtype == torch.bfloat16 and not gpu.native(device):  # planned without the GPU's capability
            dtype, dtype_name = torch.float16, "float16"
        part = parts[int(unit_name.split(":")[1]) - 1]
        cases = tuple(c for c in every if c["name"] in part)
        return {"numerics": nc.sweep(torch, [(name, call)], [dtype], device, cases=cases, sync=gpu.sync, deadline=deadline)}

    pending, inline = {}, []  # fd of a worker's pipe -> (unit, its pid); the units no worker could be forked for
    for unit in plan:
        case = nc.CASE_BY_NAME.get(unit[1]) if isinstance(unit[1], str) else unit[1]

        def in_worker(unit=unit):
            return run_unit(unit, {})

        try:
            pid, fd = ahead.start_worker(torch, name, case, getattr(torch, unit[2]), capability, index, deadline, in_worker)
        except OSError:  # out of processes: this one runs the unit when its turn comes
            phases.setdefault("fork_error", 1)
            inline.append(unit)
            continue
        pending[fd] = (unit, pid)
    ahead.lower_priority()
    torch.set_num_threads(1)
    box = {}
    out = {"status": "ok", "results": [], "numerics": [], "phases": phases, "device_index": index}
    if not gpu.available():
        for fd, (_unit, pid) in pending.items():
            ahead.stop(pid, fd)
        out.update(status="error", error={"type": "RuntimeError", "message": "CUDA is not available to torch"})
        return out
    box["cuda"] = gpu.start(index)
    if sweep_dtype == "bfloat16" and not gpu.native(box["cuda"]):  # planned without the GPU's capability
        sweep_dtype = "float16"
    phases["cuda_init_s"] = round(time.perf_counter() - started, 3)
    mark = time.perf_counter()
    try:
        box["call"] = nc.library_call(torch, name)
    except BaseException as exc:  # noqa: BLE001
        box["call"] = exc
    phases["library_import_s"] = round(time.perf_counter() - mark, 3)
    got = {}
    counts = {"units_compiled_ahead": 0, "units_run_in_worker": 0, "units_lost": 0, "workers_with_cuda": 0}
    timing = {"wait": 0.0, "run": 0.0, "last": (0.0, None)}

    def lose(unit, why, status="error"):
        """A unit not measured: rows that say why, and an error of the group (its result is not kept)."""
        counts["units_lost"] += 1
        smoke_unit = unit[0].startswith("smoke:")
        got[unit[0]] = _lost(name, unit if smoke_unit else (unit[0], unit[1], sweep_dtype), parts, every, why, status)
        if smoke_unit or status != "timeout":  # timeout rows keep the sweep from being cached by themselves
            out.setdefault("errors", []).append("smoke group lib:%s (%s) %s" % (name, unit[0], why))

    def here(unit):
        """The unit run in this process; what it raises is its result. False where CUDA is left unusable."""
        mark = time.perf_counter()
        try:
            got[unit[0]] = run_unit(unit, box)
        except BaseException as exc:  # noqa: BLE001 - one unit's failure is its own result
            lose(unit, "raised in the group's process: " + ahead.said(exc))
        timing["run"] += time.perf_counter() - mark
        done_at = time.perf_counter() - started
        if done_at > timing["last"][0]:
            timing["last"] = (done_at, unit[0])
        try:
            gpu.sync()
            return True
        except BaseException as exc:  # noqa: BLE001 - a sticky CUDA error: no later unit can run here
            box["sticky"] = ahead.said(exc)
            return False

    def settle(fd):
        unit, pid = pending.pop(fd)
        message = ahead.read_worker(fd, pid)
        phases["at_" + unit[0]] = round(time.perf_counter() - started, 3)  # when its worker was done: the slow compiles
        for key, value in (message.get("phases") or {}).items():  # the slowest compile of each kind
            if key.endswith("_s") and isinstance(value, (int, float)):
                phases["worker_" + key] = max(phases.get("worker_" + key, 0.0), round(value, 3))
        counts["workers_with_cuda"] += int(bool((message.get("phases") or {}).get("cuda_in_worker")))
        if message.get("compiled"):
            counts["units_compiled_ahead"] += 1
            return here(unit)
        if message.get("why"):
            out.setdefault("not_ahead", {})[unit[0]] = str(message["why"])[:200]
        if isinstance(message.get("ran"), dict):
            counts["units_run_in_worker"] += 1
            got[unit[0]] = message["ran"]
        elif message.get("ran_error"):
            lose(unit, "raised in its own process: %s" % str(message["ran_error"])[:200])
        else:
            lose(unit, "its process died (signal %s)" % message.get("crashed"))
        return True

    for unit in inline:
        if not here(unit):
            break
    while pending and "sticky" not in box:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        mark = time.perf_counter()
        ready, _, _ = select.select(list(pending), [], [], min(remaining, 1.0))
        timing["wait"] += time.perf_counter() - mark
        for fd in ready:
            if not settle(fd):
                break
    if pending and "sticky" not in box:  # the time limit: what arrived meanwhile is still kept
        for fd in select.select(list(pending), [], [], 0)[0]:
            settle(fd)
    for fd, (unit, pid) in list(pending.items()):
        ahead.stop(pid, fd)
        if "sticky" in box:
            lose(unit, "not run: an earlier unit left CUDA unusable here (%s)" % box["sticky"][:160])
        else:
            lose(unit, "did not finish in the group's %.0f s" % (budget_s or 0), "timeout")
    for unit in inline:
        if unit[0] not in got:
            lose(unit, "not run: an earlier unit left CUDA unusable here (%s)" % box.get("sticky", "")[:160])
    for unit in plan:
        part = got.get(unit[0]) or {}
        out["results"] += [r for r in part.get("results", []) if isinstance(r, dict)]
        out["numerics"] += [r for r in part.get("numerics", []) if isinstance(r, dict)]
    if numerics:
        ran_names = {c for part in parts for c in part}
        untested = tuple(c for c in every if c["name"] not in ran_names)
        call = box.get("call")
        if untested and not isinstance(call, BaseException) and call is not None:  # n/a rows: nothing runs
            out["numerics"] += nc.sweep(torch, [(name, call)], [getattr(torch, sweep_dtype)], box["cuda"], cases=untested)
        order = {c["name"]: i for i, c in enumerate(every)}
        out["numerics"].sort(key=lambda r: order.get(r.get("case"), len(order)))
        out["cases"] = {c["name"]: nc.case_facts(c) for c in every}
    phases.update(counts)
    phases["wait_s"] = round(timing["wait"], 3)
    phases["run_s"] = round(timing["run"], 3)
    if timing["last"][1]:
        phases["last_unit_s"] = round(timing["last"][0], 3)
        out["last_unit"] = timing["last"][1]
    phases["total_s"] = round(time.perf_counter() - started, 3)
    phases.update(nc._cpu_seconds())
    if budget_s:
        phases["budget_s"] = round(budget_s, 3)  # with the job's limit: when in the check this group started
    return out


def _lost(name, unit, parts, every, why, status="error"):
    """Rows saying a unit was not measured, and why (a smoke test has none: the group's error says it)."""
    unit_name, _case, dtype_name = unit
    if unit_name.startswith("smoke:"):
        return {}
    part = parts[int(unit_name.split(":")[1]) - 1]
    said = {"why": "not run: " + why} if status == "timeout" else {"error": why}
    return {"numerics": [dict({"backend": name, "dtype": dtype_name, "case": c["name"], "status": status}, **said)
                         for c in every if c["name"] in part]}
