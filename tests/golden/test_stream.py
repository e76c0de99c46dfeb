"""`check` on a terminal streams its report: each section as soon as the probes it is judged from
are in, a live line beneath for what still runs. Two things hold that:

- every rule, on every recorded report, gives the same result on the facts of a partly finished
  check as on the whole facts, for each section the stream prints at that point (AREA_NEEDS);
- a golden recording of the terminal (a real pty, read back through a VT100 emulator) after each
  part of a check comes in, reviewed as text like the other golden files.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time

import msgspec
import pytest

from attn_doctor.facts import Facts
from attn_doctor.probes import PARTS
from attn_doctor.probes.torch_run import apply_node, apply_stack, values_of
from attn_doctor.render.stream import AREA_NEEDS
from attn_doctor.diagnosis.engine import evaluate
from attn_doctor.rules.loader import load_recipes

from .test_golden import FACTS, ROOT, compare

ENVIRONMENT = ("quick", "target", "platform", "tools", "packages", "requires", "leftovers", "env", "gpu", "configs")
PROBE_PART = {"environment": "environment", "gpu": "environment", "torch": "stack", "node": "node", "sample": "sample"}


def partial(full: Facts, parts: set) -> Facts:
    """The facts a check holds when `parts` are in, assembled the way the probes fold them."""
    facts = Facts()
    for name in ENVIRONMENT:
        setattr(facts, name, getattr(full, name))
    node, stack = values_of(full)
    if "node" in parts:
        apply_node(facts, node, full.smoke.cached)
    if "stack" in parts:
        apply_stack(facts, stack, full.smoke.capability_cached)
    if "sample" in parts:
        facts.dtype_path = full.dtype_path
    facts.probes = [p for p in full.probes if PROBE_PART.get(p.name, "environment") in parts]
    return facts


@pytest.mark.parametrize("report", FACTS, ids=lambda p: p.stem)
def test_a_streamed_section_is_final_when_printed(report):
    recipes = load_recipes()
    full = msgspec.convert(json.loads(report.read_text()), Facts)
    final = {r.rule: r for r in evaluate(recipes, full)}
    for n in range(1, len(PARTS) + 1):
        parts = set(PARTS[:n])
        for result in evaluate(recipes, partial(full, parts)):
            if AREA_NEEDS[result.area] <= parts:
                expected = final[result.rule]
                assert (result.status, result.message, result.reason) == (expected.status, expected.message, expected.reason), (
                    f"{result.rule} ({result.area}) with only {sorted(parts)} in")


def test_the_needs_name_every_area_and_only_known_parts():
    from attn_doctor.render.human import AREAS

    assert set(AREA_NEEDS) == {area for area, _ in AREAS}
    assert all(needs <= set(PARTS) and "environment" in needs for needs in AREA_NEEDS.values())


def _screen(data: bytes, columns: int, lines: int) -> str:
    import pyte

    screen = pyte.Screen(columns, lines)
    stream = pyte.ByteStream(screen)
    stream.feed(data)
    rows = [row.rstrip() for row in screen.display]
    while rows and not rows[-1]:
        rows.pop()
    return "\n".join(rows)


def _drain(master: int, quiet_s: float = 0.3, at_most_s: float = 1.0) -> bytes:
    """What the terminal has been sent, until it has been quiet for quiet_s (the live line redraws
    itself several times a second: never longer than at_most_s)."""
    out = b""
    end = time.monotonic() + at_most_s
    while time.monotonic() < end:
        ready, _, _ = select.select([master], [], [], quiet_s)
        if not ready:
            return out
        try:
            chunk = os.read(master, 65536)
        except OSError:
            return out
        if not chunk:
            return out
        out += chunk
    return out


def test_the_terminal_as_a_check_streams(request, tmp_path):
    pytest.importorskip("pyte")
    columns, lines = 110, 60
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    env.update(TERM="xterm-256color", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "helpers" / "stream_driver.py"),
                             str(ROOT / "tests" / "fixtures" / "facts" / "h100.json"), str(go_r), str(done_w)],
                            stdin=slave, stdout=slave, stderr=slave, env=env, pass_fds=(go_r, done_w), cwd=str(tmp_path))
    os.close(slave)
    recorded, snapshots = b"", []
    try:
        for part in PARTS:
            deadline = time.monotonic() + 60
            while not select.select([done_r], [], [], 0.05)[0]:
                recorded += _drain(master, 0.0)
                assert proc.poll() is None and time.monotonic() < deadline, _screen(recorded, columns, lines)
            os.read(done_r, 1)
            recorded += _drain(master)
            snapshots.append(f"== the terminal once `{part}` is in\n" + _spinner_free(_screen(recorded, columns, lines)))
            os.write(go_w, b".")
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:  # reading on: a full terminal blocks its writer
            recorded += _drain(master, 0.05)
        recorded += _drain(master)
    finally:
        proc.kill()
        os.close(master)
    snapshots.append("== the terminal when the check has ended\n" + _screen(recorded, columns, lines))
    assert proc.returncode == 0
    compare(request, "check/stream-h100.txt", "\n\n".join(snapshots) + "\n")


def _spinner_free(screen: str) -> str:
    # The live line's first character is a spinner frame: which one depends on the moment.
    rows = screen.splitlines()
    if rows and rows[-1][:1] and not rows[-1][:1].isascii():
        rows[-1] = "*" + rows[-1][1:]
    return "\n".join(rows)
