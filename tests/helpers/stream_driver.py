"""Runs the real streaming renderer (attn_doctor.render.stream) on a terminal, as `check` does, over
a recorded report whose parts arrive one at a time: what a user sees while a check runs.

    python stream_driver.py FACTS.json GO_FD DONE_FD

After each stage it writes one byte to DONE_FD and waits for one on GO_FD, so that the test reading
the terminal can take its screen at that moment. The clock is the stage's: elapsed seconds are the
same on every run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import msgspec

from attn_doctor.core import diagnose
from attn_doctor.facts import Facts, Target
from attn_doctor.probes.torch_run import apply_node, apply_stack, values_of
from attn_doctor.render.console import make_console
from attn_doctor.render.stream import CheckStream
from attn_doctor.rules.loader import load_recipes

ENVIRONMENT = ("quick", "platform", "tools", "packages", "requires", "leftovers", "env", "gpu", "configs")
STAGES = [("environment", 0.3), ("node", 2.4), ("stack", 3.1), ("sample", 5.6)]


def main() -> None:
    full = msgspec.convert(json.loads(Path(sys.argv[1]).read_text()), Facts)
    go, done = int(sys.argv[2]), int(sys.argv[3])
    recipes = load_recipes()
    now = {"t": 0.0}
    stream = CheckStream(make_console(), clock=lambda: now["t"])
    facts = Facts(target=Target(python="/srv/train/bin/python", source="active-venv", why="the active venv ($VIRTUAL_ENV)"))
    for name in ENVIRONMENT:
        setattr(facts, name, getattr(full, name))
    node, stack = values_of(full)
    parts: set = set()
    for part, at in STAGES:
        now["t"] = at
        if part == "node":
            apply_node(facts, node, None)
        elif part == "stack":
            apply_stack(facts, stack, None)
        elif part == "sample":
            facts.dtype_path = full.dtype_path
        parts.add(part)
        facts.probes = [p for p in full.probes if p.name in ("environment", "gpu") or {"torch": "stack"}.get(p.name, p.name) in parts]
        stream.partial(frozenset(parts), diagnose(facts, recipes))
        sys.stdout.flush()
        os.write(done, b".")
        os.read(go, 1)
    stream.finish(diagnose(facts, recipes))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
