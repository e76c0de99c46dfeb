"""A library part's backward compiled ahead in a process of its own (probes/target/ahead_compile.py):
the part starts it before CUDA, its first call waits for it after the forward, a late one is killed
at the deadline, a failed one costs nothing, and which case and dtype a part compiles. Real forks;
the compile itself is the one thing stood in for (FlashAttention 4 needs a GPU machine: its own run
is tests/gpu/test_gpu_fa4.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

TARGET = Path(__file__).resolve().parent.parent / "attn_doctor" / "probes" / "target"


def _load(stem):
    name = "attn_doctor_" + stem
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TARGET / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


ahead = _load("ahead_compile")
numerics = _load("numerics_child")

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() only")


@pytest.fixture
def compile_writes(tmp_path, monkeypatch):
    """A stand-in compile: sleeps, then writes what it was asked (the case, the dtype, the
    environment it ran with) into a file, or raises."""
    def compile_backward(torch, case, dtype):
        time.sleep(float(case.get("sleep", 0)))
        if case.get("fail"):
            raise RuntimeError("no kernel for this case")
        (tmp_path / case["name"]).write_text("%s %s %r %s" % (case["name"], dtype, os.environ.get("CUDA_VISIBLE_DEVICES"),
                                                              os.environ.get("FLASH_ATTENTION_ARCH")))

    monkeypatch.setitem(ahead.BACKWARD, "lib_x", compile_backward)
    return tmp_path


def test_the_compile_ahead_runs_in_its_own_process_with_cuda_hidden_and_the_first_call_waits_for_it(compile_writes):
    pids = ahead.start(torch, "lib_x", {"name": "c1", "sleep": 0.5}, torch.bfloat16, (9, 0))
    assert len(pids) == 1 and pids[0] != os.getpid()
    phases, calls = {}, []

    def call(*args):
        calls.append(args)
        return "out"

    call.only_cases = ("c1",)
    waiting = ahead.after_first_forward(call, pids, time.monotonic() + 30, phases)
    assert waiting.only_cases == ("c1",)
    assert waiting(1, 2) == "out"
    # the forward returned, then the compile ahead was waited for: its kernel is there for the backward
    assert (compile_writes / "c1").read_text() == "c1 torch.bfloat16 '' sm_90"
    assert phases["ahead_ok"] == 1 and phases["ahead_failed"] == 0 and phases["ahead_wait_s"] > 0.2
    assert pids == []  # waited for once
    mark = time.perf_counter()
    assert waiting(3, 4) == "out" and time.perf_counter() - mark < 0.2
    assert calls == [(1, 2), (3, 4)]


def test_a_compile_ahead_that_fails_or_is_late_costs_nothing_but_its_cpu(compile_writes):
    failed = ahead.start(torch, "lib_x", {"name": "bad", "fail": True}, torch.float16, (9, 0))
    assert ahead.wait(failed, time.monotonic() + 30) == {"ahead_ok": 0, "ahead_failed": 1}
    late = ahead.start(torch, "lib_x", {"name": "slow", "sleep": 30}, torch.float16, (9, 0))
    mark = time.monotonic()
    assert ahead.wait(late, mark + 0.5) == {"ahead_ok": 0, "ahead_failed": 1}
    assert time.monotonic() - mark < 5
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(late[0], os.WNOHANG)
    assert not (compile_writes / "slow").exists()


def test_nothing_is_compiled_ahead_where_it_cannot_be_done_safely(compile_writes):
    assert ahead.start(torch, "not_a_library", {"name": "c"}, torch.float16, (9, 0)) == []
    assert ahead.start(torch, "lib_x", {"name": "c"}, torch.float16, None) == []  # architecture unknown
    assert ahead.start(torch, "lib_x", {"name": "c"}, torch.float16, ("9", "x")) == []


def test_a_part_compiles_its_first_case_in_the_dtype_the_part_runs(monkeypatch):
    started = []
    monkeypatch.setattr(numerics._AHEAD, "start", lambda torch, name, case, dtype, capability: started.append(
        (name, case["name"], dtype, capability)) or [])
    parts = numerics.LIBRARY_PARTS["flash_attn_4"]
    numerics._start_ahead(torch, "num:lib:flash_attn_4:1", "9.0", None)
    numerics._start_ahead(torch, "num:lib:flash_attn_4:%d" % len(parts), "9.0", None)
    assert started == [("flash_attn_4", parts[0][0], torch.bfloat16, (9, 0)),
                       ("flash_attn_4", parts[-1][0], torch.bfloat16, (9, 0))]
    started.clear()
    # fp16 where bf16 is not native; nothing for SDPA's groups, an unknown part or an unknown GPU
    numerics._start_ahead(torch, "num:lib:flash_attn_4:1", "7.5", lambda cap: cap >= (8, 0))
    assert started == [("flash_attn_4", parts[0][0], torch.float16, (7, 5))]
    started.clear()
    for group, capability in (("num:sdpa:float16", "9.0"), ("num:sdpa-cudnn:bfloat16", "9.0"),
                              ("num:lib:flash_attn_4:%d" % (len(parts) + 1), "9.0"), ("num:lib:flash_attn_4:1", None),
                              ("num:lib:flash_attn_4:1", "9.x"), ("num:lib:xformers", "9.0")):
        assert numerics._start_ahead(torch, group, capability, None) == []
    assert started == []


def test_a_compile_ahead_is_waited_for_at_most_wait_s_even_without_a_deadline(compile_writes, monkeypatch):
    monkeypatch.setattr(ahead, "WAIT_S", 0.5)
    late = ahead.start(torch, "lib_x", {"name": "slow2", "sleep": 30}, torch.float16, (9, 0))
    mark = time.monotonic()
    assert ahead.wait(late) == {"ahead_ok": 0, "ahead_failed": 1}
    assert time.monotonic() - mark < 5
