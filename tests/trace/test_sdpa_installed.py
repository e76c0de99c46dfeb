"""SDPA's kernel choice is emulated off the GPU (tracing/kernel_choice/sdpa_select.py, written from sdp_utils.cpp):
these tests hold the emulation's words and architecture ranges against the installed torch's own
binaries, where its checks live as string literals (libtorch_cpu.so has the checks shared with the
CPU; libtorch_cuda.so, in CUDA builds, the GPU ones). CI's newest-torch run installs a CUDA build:
a release that moves a range ("[sm80, sm121]") or rewords a refusal fails here, not for a user."""
import ast
import inspect
import mmap
import os
import re
import textwrap

import pytest
import torch

from attn_doctor.tracing.kernel_choice import sdpa_select

LIB = os.path.join(os.path.dirname(torch.__file__), "lib")
CPU_LIB = os.path.join(LIB, "libtorch_cpu.so")
CUDA_LIB = os.path.join(LIB, "libtorch_cuda.so")
RANGE = re.compile(r"range ?\[sm(\d+)(\d), sm(\d+)(\d)\]")  # the minor is one digit: sm121 is 12.1
PLACEHOLDER = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?[sdrf]")
PREFIX = 30  # a message's literal pieces are matched by their first characters (torch splits them at <<)

pytestmark = pytest.mark.skipif(not os.path.isfile(CPU_LIB), reason="this torch has no libtorch_cpu.so to read")


def _templates():
    """(check function, message template) for every message sdpa_select's checks return."""
    out = []
    for name, fn in inspect.getmembers(sdpa_select, inspect.isfunction):
        if not name.startswith("check_") or not _applies_here(name):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= PREFIX:
                out.append((name, node.value))
    return out


def _applies_here(name):
    """Whether a check of sdpa_select is one it applies for the installed torch (CHECKS' releases)."""
    version = sdpa_select.version_tuple(torch.__version__)
    entries = [e for e in sdpa_select.CHECKS.values() if getattr(e[0], "__qualname__", "").split(".")[0] == name]
    return not entries or any(sdpa_select._applies(e, version) for e in entries)


def _pieces(template):
    return [p for p in PLACEHOLDER.split(template.replace("%%", "%")) if len(p.strip()) >= PREFIX]


class _Binary:
    def __init__(self, path):
        self.fh = open(path, "rb")
        self.map = mmap.mmap(self.fh.fileno(), 0, access=mmap.ACCESS_READ)

    def has(self, text):
        return self.map.find(text.encode("utf-8")) >= 0


@pytest.fixture(scope="module")
def binaries():
    libs = {"cpu": _Binary(CPU_LIB)}
    if os.path.isfile(CUDA_LIB):
        libs["cuda"] = _Binary(CUDA_LIB)
    return libs


def test_every_refusal_the_emulation_words_is_in_the_installed_torch(binaries):
    found, missing = [], []
    for name, template in _templates():
        for piece in _pieces(template):
            head = piece.lstrip()[:PREFIX]
            (found if any(b.has(head) for b in binaries.values()) else missing).append((name, head))
    assert found, "no message of sdpa_select was found in %s: the test reads nothing" % CPU_LIB
    if "cuda" not in binaries:
        # a CPU build carries the shared checks only: the GPU ones are held in CI's newest-torch (CUDA) run
        assert any(name == "check_tensor_shapes" for name, _ in found), found
        pytest.skip("%d of the emulation's messages found in libtorch_cpu.so; %d are GPU checks this CPU build does "
                    "not carry (CI's CUDA torch checks them)" % (len(found), len(missing)))
    assert not missing, "torch %s no longer words these as sdpa_select does: %s" % (torch.__version__, missing)


HARDWARE_CHECKS = [sdpa_select.check_flash_hardware, sdpa_select.check_mem_efficient_hardware,
                   sdpa_select.check_cudnn_hardware]


def _stated_ranges():
    """(check, the words that state its range) as each hardware check words its refusal: the ranges are
    the support matrix's rows, put into the template when it refuses, so the refusal itself is read."""
    out = [(fn.__name__, fn({}, {"capability": (1, 0)})) for fn in HARDWARE_CHECKS]
    out += [(name, template) for name, template in _templates()]
    ranges = set()
    for name, text in out:
        for m in RANGE.finditer(text or ""):
            ranges.add((name, text[max(0, m.start() - 25):m.end()]))
    return ranges


def test_every_architecture_range_is_the_installed_torchs(binaries):
    ranges = _stated_ranges()
    assert {name for name, _ in ranges} >= {fn.__name__ for fn in HARDWARE_CHECKS}, ranges
    if "cuda" not in binaries:
        pytest.skip("a CPU build of torch carries no GPU architecture ranges (CI's CUDA torch checks them)")
    moved = [(name, text) for name, text in ranges if not binaries["cuda"].has(text)]
    assert not moved, "torch %s states other GPU ranges than sdpa_select: %s" % (torch.__version__, moved)


@pytest.mark.parametrize("check", HARDWARE_CHECKS)
def test_each_hardware_check_refuses_exactly_outside_the_range_its_message_states(check):
    call = {}
    message = check(call, {"capability": (1, 0)})
    low_major, low_minor, high_major, high_minor = (int(g) for g in RANGE.search(message).groups())
    low, high = (low_major, low_minor), (high_major, high_minor)
    assert check(call, {"capability": low}) is None and check(call, {"capability": high}) is None
    below = (low[0], low[1] - 1) if low[1] else (low[0] - 1, 9)
    assert check(call, {"capability": below}) is not None
    assert check(call, {"capability": (high[0], high[1] + 1)}) is not None
