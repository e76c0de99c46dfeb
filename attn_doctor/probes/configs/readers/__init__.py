"""One reader per training framework, each a module with NAME, LABEL, FORMATS, MARKERS (the keys that
show the framework, with how much each says), an optional recognise_extra(doc) for what keys alone
cannot say, and read(doc, context) -> plan.Reading. Adding a framework is one module here, listed
below, and its real config files in tests/fixtures/configs/real/. generic.py reads the rest."""

from __future__ import annotations

from . import (accelerate, axolotl, deepspeed, generic, h2ollmstudio, kohya, litgpt, llamafactory, llmfoundry, megatron_bridge,
               msswift, musubi, nanotron, nemo, nemo_rl, onetrainer, openinstruct, openrlhf, oumi, simpletuner, torchtitan, torchtune,
               transformers, trl, verl)

READERS = (llamafactory, axolotl, torchtune, trl, msswift, accelerate, deepspeed, torchtitan, litgpt, transformers,
           llmfoundry, verl, openrlhf, oumi, nanotron, openinstruct, h2ollmstudio, kohya, musubi, onetrainer, simpletuner,
           nemo, nemo_rl, megatron_bridge)
# A file no framework reader recognises is read for the idioms every framework shares (generic.py).
FALLBACK = generic


def by_name(name: str):
    return next((reader for reader in READERS + (FALLBACK,) if reader.NAME == name), None)


def label(name: str) -> str:
    """A framework's name as the report writes it; "not recognised" for a file no reader took."""
    reader = by_name(name)
    return reader.LABEL if reader is not None else "not recognised" if name == "unknown" else name
