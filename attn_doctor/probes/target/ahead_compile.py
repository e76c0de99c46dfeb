"""Compiling a library's kernels ahead, in processes that start no CUDA context (the forward's reads
the SM count from the driver), for the one process that tests the library on the GPU
(jit_library.py): the compiles run side by side, and CUDA starts once.

FlashAttention 4 compiles each kernel from fake tensors (its cross-compilation path:
FLASH_ATTENTION_ARCH picks the kernel, the CuTe DSL's architecture is the one given at import) and
keeps it in its persistent cache, where the same call on the GPU finds it. Its backward needs no SM
count; its forward's split heuristics do (FLASH_ATTENTION_NUM_SMS), read from the driver (cuInit and
one attribute: no context).

A worker compiles one unit (a case's forward, and its backward in a child of its own, the two side by
side) and says so on its pipe. Where it cannot (a compile fails: the MLA shape FA4 refuses, an API
that changed), it starts CUDA and runs the unit itself, as a process per unit did before: what the
real call raises is what is said.

Standard library plus torch, Python 3.8+ syntax: loaded by path inside the target interpreter.
"""

from __future__ import annotations

import json
import os
import signal
import time

# The priority of the compiles: below the compiled flex test's (the cold check's floor, CPU-bound),
# as the numerics sweep's own.
NICE = 10


def _fake_bshd(torch, dtype, requires_grad=False):
    """make(b, s, h, d): a fake (batch, seq, heads, dim) view of (batch, heads, seq, dim) storage on
    a CUDA device, as the sweep's and the smoke test's calls give FA4 their tensors."""
    def make(b, s, h, d):
        leaf = torch.empty(b, h, s, d, device="cuda", dtype=dtype)
        return (leaf.requires_grad_(True) if requires_grad else leaf).transpose(1, 2)

    return make


def _fake_qkv(torch, case, dtype, requires_grad=False):
    """q, k, v as the sweep's call gives them for `case` (numerics_child.make_inputs): (batch, seq,
    heads, dim) views, of one (batch, seq, 3, heads, dim) buffer for a fused-QKV layout."""
    b, h, sq, sk, d = case["b"], case["h"], case["sq"], case["sk"], case["d"]
    hkv, dv = case.get("hkv", h), case.get("dv", d)
    if case.get("layout") == "fused-qkv":
        fused = torch.empty(b, sq, 3, h, d, device="cuda", dtype=dtype)
        views = [fused[:, :, i] for i in range(3)]
        if requires_grad:  # leaves in the same strides, as numerics_criterion.copy_leaf makes them
            views = [torch.empty_strided(t.shape, t.stride(), device="cuda", dtype=dtype).requires_grad_(True) for t in views]
        return views
    bshd = _fake_bshd(torch, dtype, requires_grad)
    return bshd(b, sq, h, d), bshd(b, sk, hkv, d), bshd(b, sk, hkv, dv)


def _fa4_backward(torch, case, dtype):
    """FlashAttention 4's backward for `case` in `dtype`, compiled from fake tensors laid out as the
    calls give them: q, k, v and the output's gradient (batch, seq, heads, dim) views of (batch,
    heads, seq, dim) storage, the output and logsumexp as its forward allocates them."""
    from torch._subclasses import fake_tensor
    from flash_attn.cute import interface

    _require_persistent()
    fake_tensor.init_gpu_context = lambda device: None  # the fake tensors name a CUDA device; nothing here starts it
    b, h, sq, d = case["b"], case["h"], case["sq"], case["d"]
    dv = case.get("dv", d)
    with fake_tensor.FakeTensorMode():
        bshd = _fake_bshd(torch, dtype)
        q, k, v = _fake_qkv(torch, case, dtype)
        out = torch.empty(b, sq, h, dv, device="cuda", dtype=dtype)
        lse = torch.empty(b, h, sq, device="cuda", dtype=torch.float32)
        # the arguments FlashAttnFunc.backward passes for flash_attn_func(q, k, v, causal=...)
        interface._flash_attn_bwd(q, k, v, out, bshd(b, sq, h, dv), lse, None, case["mask"] == "causal", 0.0,
                                  window_size_left=None, window_size_right=None, deterministic=False)


def _fa4_forward(torch, case, dtype):
    """FlashAttention 4's forward for `case` in `dtype`, compiled from fake tensors as the calls give
    it: flash_attn_func on (batch, seq, heads, dim) views of leaves that require grad."""
    from torch._subclasses import fake_tensor
    from flash_attn.cute import flash_attn_func

    _require_persistent()
    original = fake_tensor.init_gpu_context
    fake_tensor.init_gpu_context = lambda device: None
    try:
        with fake_tensor.FakeTensorMode():
            flash_attn_func(*_fake_qkv(torch, case, dtype, requires_grad=True), causal=case["mask"] == "causal")
    finally:
        fake_tensor.init_gpu_context = original  # a unit run here after a failed compile uses real tensors


def _require_persistent():
    from flash_attn.cute import cache_utils

    if not getattr(cache_utils, "CUTE_DSL_CACHE_ENABLED", False):
        raise RuntimeError("FlashAttention 4's persistent kernel cache is off: nothing compiled here would be found")


def sm_count(index):
    """The SM count of GPU `index` (as this process's CUDA_VISIBLE_DEVICES numbers it), from the
    driver: cuInit makes no context."""
    import ctypes

    libcuda = ctypes.CDLL("libcuda.so.1")
    device, count = ctypes.c_int(), ctypes.c_int()
    if libcuda.cuInit(0) or libcuda.cuDeviceGet(ctypes.byref(device), int(index)):
        raise RuntimeError("the CUDA driver did not answer")
    if libcuda.cuDeviceGetAttribute(ctypes.byref(count), 16, device) or count.value <= 0:  # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
        raise RuntimeError("the CUDA driver gave no SM count")
    return count.value


# library -> (compile its forward, compile its backward), each fn(torch, case, dtype)
COMPILERS = {"flash_attn_4": (_fa4_forward, _fa4_backward)}


def lower_priority(nice=NICE):
    """This process at `nice` or lower (absolute: a fork of a lowered process is not lowered twice)."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) < nice:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
    except (AttributeError, OSError):
        pass


def _die_with_parent(parent):
    """Killed when `parent` dies; gone now if it died already (between the fork and here)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _silenced():
    """Point fds 0, 1 and 2 at /dev/null (the compiler's warnings are not the group's output):
    restore() puts them back, for a unit this process then runs itself."""
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    def restore():
        for fd, copy in zip((0, 1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)

    return restore


def _backward_child(torch, compile_backward, case, dtype, arch, pipe):
    """Fork a process that compiles the backward with CUDA hidden: its pid. `pipe`: the worker's
    write end, closed there (the group's read ends when the worker's message is written, not when
    this child exits)."""
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.close(pipe)
        _die_with_parent(parent)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ["FLASH_ATTENTION_ARCH"] = arch
        compile_backward(torch, case, dtype)
        code = 0
    finally:
        os._exit(code)


def _stop(pid):
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass


def _exited_ok(pid, deadline):
    """Whether child `pid` exits 0 before `deadline` (time.monotonic()); killed at it if not."""
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return False
        if done:
            return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if time.monotonic() >= deadline:
            _stop(pid)
            return False
        time.sleep(0.02)


def start_worker(torch, library, case, dtype, capability, index, deadline, run_here):
    """Fork a worker for one unit: (pid, fd of its pipe). The worker compiles `library`'s forward and
    backward for `case` in `dtype` ahead and writes {"compiled": true, "phases"}; where it cannot (no
    compiler for the library, the GPU's architecture unknown, a compile failed) it runs the unit
    itself, run_here() -> a JSON-able dict, and writes {"ran": that, "why"} ({"ran_error": what it
    raised} where it raised). Call it before this process starts CUDA: a fork of it could neither
    use its CUDA nor start its own."""
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid:
        os.close(write_fd)
        return pid, read_fd
    code = 1
    try:
        os.close(read_fd)
        _die_with_parent(parent)
        lower_priority()
        # libgomp is not fork-safe: where this process's OpenMP team ever ran, a new team in the fork
        # waits at its barrier forever. One thread starts no team (a unit run here is small).
        torch.set_num_threads(1)
        message = _work(torch, library, case, dtype, capability, index, deadline, run_here, write_fd)
        data = json.dumps(message, default=str).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view):]
        code = 0
    finally:
        os._exit(code)


def _work(torch, library, case, dtype, capability, index, deadline, run_here, pipe):
    compilers = COMPILERS.get(library)
    why = None
    phases = {}
    try:
        major, minor = (int(x) for x in capability)
    except (TypeError, ValueError):
        why = "the GPU's architecture is not known here"
    if compilers is None:
        why = "no compile ahead for %s" % library
    if why is None:
        restore = _silenced()
        backward = None
        try:
            arch = "sm_%d%d" % (major, minor)
            mark = time.perf_counter()
            backward = _backward_child(torch, compilers[1], case, dtype, arch, pipe)
            if not os.environ.get("FLASH_ATTENTION_NUM_SMS"):
                os.environ["FLASH_ATTENTION_NUM_SMS"] = str(sm_count(index))
            before = os.environ.get("FLASH_ATTENTION_ARCH")
            os.environ["FLASH_ATTENTION_ARCH"] = arch
            try:
                compilers[0](torch, case, dtype)
            finally:
                if before is None:
                    os.environ.pop("FLASH_ATTENTION_ARCH", None)
                else:
                    os.environ["FLASH_ATTENTION_ARCH"] = before
            phases["forward_s"] = round(time.perf_counter() - mark, 3)
            ok, backward = _exited_ok(backward, deadline), None
            if not ok:
                raise RuntimeError("the backward's compile failed")
            phases["compile_s"] = round(time.perf_counter() - mark, 3)
            phases["cuda_in_worker"] = int(bool(torch.cuda.is_initialized()))  # a compile ahead should start no context
            return {"compiled": True, "phases": phases}
        except BaseException as exc:  # noqa: BLE001 - the unit then runs here, and says what the real call does
            why = said(exc)
            if backward is not None:  # its kernel is compiled for real by the run below
                _stop(backward)
        finally:
            restore()
    try:
        return {"ran": run_here(), "why": why, "phases": phases}
    except BaseException as exc:  # noqa: BLE001 - the unit's own failure, said for it
        return {"ran_error": said(exc), "why": why, "phases": phases}


def said(exc):
    text = str(exc).strip()
    return "%s: %s" % (type(exc).__name__, text.splitlines()[0][:200]) if text else type(exc).__name__


def read_worker(fd, pid):
    """The worker's message once its pipe closed, or {"crashed": signal} where it died without one."""
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = 0
    try:
        return json.loads(b"".join(chunks).decode())
    except ValueError:
        return {"crashed": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None}


def stop(pid, fd):
    """Kill a worker that is still running (the deadline) and close its pipe."""
    _stop(pid)
    try:
        os.close(fd)
    except OSError:
        pass
