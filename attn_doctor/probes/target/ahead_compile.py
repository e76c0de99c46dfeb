"""Compiling a library's backward kernel ahead, in a process of its own that never starts CUDA, while
the process that measures starts CUDA and compiles the forward: the two compiles of a case overlap
instead of following each other.

FlashAttention 4 compiles each kernel from fake tensors (its cross-compilation path:
FLASH_ATTENTION_ARCH picks the kernel, the CuTe DSL's architecture is the one given at import) and
keeps it in its persistent cache, where the same call on the GPU finds it. Its backward needs no SM
count (only its forward's split heuristics do), so it compiles ahead without asking the GPU.

Standard library plus torch, Python 3.8+ syntax: numerics_child.py loads this file by path inside
the target interpreter. A compile ahead that fails costs nothing but its CPU, one that is late its
CPU and at most WAIT_S of waiting: the measuring process then compiles the kernel itself, as it
would have.
"""

from __future__ import annotations

import os
import signal
import time

# How long the measuring process waits, once its forward ran, for a compile ahead still running: a
# backward compiles in 4-8 s (FA4 on an H100 or H200, a loaded node); past this, the child is
# killed and the process compiles the kernel itself.
WAIT_S = 20.0


def _fa4_backward(torch, case, dtype):
    """FlashAttention 4's backward for `case` in `dtype`, compiled from fake tensors laid out as the
    sweep's call gives them: q, k, v and the output's gradient (batch, seq, heads, dim) views of
    (batch, heads, seq, dim) storage, the output and logsumexp as its forward allocates them."""
    from torch._subclasses import fake_tensor
    from flash_attn.cute import interface

    if not _persistent():
        raise RuntimeError("FlashAttention 4's persistent kernel cache is off: nothing compiled here would be found")
    # the fake tensors name a CUDA device; nothing here may start it (CUDA is hidden from this process)
    fake_tensor.init_gpu_context = lambda device: None
    b, h, sq, sk, d = case["b"], case["h"], case["sq"], case["sk"], case["d"]
    hkv, dv = case.get("hkv", h), case.get("dv", d)
    with fake_tensor.FakeTensorMode():
        def bshd(*shape):
            return torch.empty(shape[0], shape[2], shape[1], shape[3], device="cuda", dtype=dtype).transpose(1, 2)

        q, k, v = bshd(b, sq, h, d), bshd(b, sk, hkv, d), bshd(b, sk, hkv, dv)
        out = torch.empty(b, sq, h, dv, device="cuda", dtype=dtype)
        lse = torch.empty(b, h, sq, device="cuda", dtype=torch.float32)
        # the arguments FlashAttnFunc.backward passes for flash_attn_func(q, k, v, causal=...)
        interface._flash_attn_bwd(q, k, v, out, bshd(b, sq, h, dv), lse, None, case["mask"] == "causal", 0.0,
                                  window_size_left=None, window_size_right=None, deterministic=False)


def _persistent():
    from flash_attn.cute import cache_utils

    return bool(getattr(cache_utils, "CUTE_DSL_CACHE_ENABLED", False))


BACKWARD = {"flash_attn_4": _fa4_backward}


def _die_with_parent(parent):
    """Killed when `parent` dies; gone now if it died already (between the fork and here)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def start(torch, library, case, dtype, capability):
    """Fork a process that compiles `library`'s backward for `case` ahead: [pid], or [] where it
    cannot be done safely (no such compile for the library, the GPU's architecture unknown, CUDA
    already started in this process: its fork could not use it, nor could a fork of it start its own)."""
    compile_backward = BACKWARD.get(library)
    if compile_backward is None or not capability or not hasattr(os, "fork"):
        return []
    try:
        major, minor = (int(x) for x in capability)
    except (TypeError, ValueError):
        return []
    if torch.cuda.is_initialized():
        return []
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        return []
    if pid:
        return [pid]
    code = 1
    try:
        _die_with_parent(parent)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # the compiler's warnings are not the group's output
            os.dup2(null, fd)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ["FLASH_ATTENTION_ARCH"] = "sm_%d%d" % (major, minor)
        try:
            os.nice(10)  # the sweep's own priority (run_numerics_group lowers its process the same way)
        except OSError:
            pass
        compile_backward(torch, case, dtype)
        code = 0
    except BaseException:  # noqa: BLE001 - the measuring process compiles it itself
        code = 1
    finally:
        os._exit(code)


def wait(pids, deadline=None):
    """Wait for the compiles ahead until `deadline` (time.monotonic()), at most WAIT_S from now; those
    still running then are killed (the measuring process compiles their kernels itself).
    {"ahead_ok": n, "ahead_failed": n}"""
    limit = time.monotonic() + WAIT_S
    deadline = limit if deadline is None else min(deadline, limit)
    ok = failed = 0
    pending = list(pids)
    while pending:
        for pid in list(pending):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pending.remove(pid)
                failed += 1
                continue
            if done:
                pending.remove(pid)
                if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
                    ok += 1
                else:
                    failed += 1
        if pending and deadline is not None and time.monotonic() >= deadline:
            for pid in pending:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except OSError:
                    pass
            failed += len(pending)
            break
        if pending:
            time.sleep(0.02)
    return {"ahead_ok": ok, "ahead_failed": failed}


def after_first_forward(call, pids, deadline, phases):
    """`call` whose first invocation, once its forward returned (compiled and run), waits for the
    compiles ahead (the list `pids`, emptied once waited for) before its backward runs: the backward
    then loads the kernel compiled ahead."""

    def waiting(*args, **kwargs):
        out = call(*args, **kwargs)
        if pids:
            mark = time.perf_counter()
            phases.update(wait(pids, deadline))
            phases["ahead_wait_s"] = round(time.perf_counter() - mark, 3)
            del pids[:]  # waited for: the caller's list says so too
        return out

    for name in ("only_cases", "one_dtype", "forward_only"):
        if hasattr(call, name):
            setattr(waiting, name, getattr(call, name))
    return waiting
