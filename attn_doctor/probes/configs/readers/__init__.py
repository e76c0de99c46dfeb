"""One reader per training framework, each a module with NAME, LABEL, FORMATS, MARKERS (the keys that
suggest the framework, with how much each says), an optional recognise_extra(doc) for what keys alone
cannot say, DISTINCT (and an optional distinct(doc)): the evidence only that framework writes, and
read(doc, context) -> plan.Reading, in the sub-package of its kind (hf_trainers/, distributed/,
megatron/, diffusion/). A reader claims a file only on its DISTINCT evidence (distinct.py's evidence()): its
defaults are asserted only then; a file that merely looks like a framework's is read generically,
with no default assumed. Adding a framework is one module there, listed in READERS below, and its
real config files in tests/fixtures/configs/real/ (every other reader's tests read them too: none
may claim them). generic.py reads the rest; _hf.py and _megatron.py hold what several readers share."""

from __future__ import annotations

from . import generic
from .distinct import evidence  # noqa: F401  (what the probe asks of each reader)
from .diffusion import kohya, musubi, onetrainer, simpletuner
from .distributed import accelerate, composer, deepspeed, espnet, lightning, litgpt, llmfoundry, mmengine, nanotron, torchtitan, torchtune
from .hf_trainers import axolotl, h2ollmstudio, llamafactory, msswift, openinstruct, openrlhf, oumi, primerl, transformers, trl, verl
from .megatron import gptneox, megatron_bridge, nemo, nemo_rl

READERS = (llamafactory, axolotl, torchtune, trl, msswift, accelerate, deepspeed, torchtitan, litgpt, transformers,
           llmfoundry, verl, openrlhf, oumi, nanotron, openinstruct, h2ollmstudio, kohya, musubi, onetrainer, simpletuner,
           nemo, nemo_rl, megatron_bridge, lightning, composer, mmengine, gptneox, primerl, espnet)
# A file no framework reader recognises is read for the idioms every framework shares (generic.py).
FALLBACK = generic


def by_name(name: str):
    return next((reader for reader in READERS + (FALLBACK,) if reader.NAME == name), None)


def label(name: str) -> str:
    """A framework's name as the report writes it; "not recognised" for a file no reader took."""
    reader = by_name(name)
    return reader.LABEL if reader is not None else "not recognised" if name == "unknown" else name
