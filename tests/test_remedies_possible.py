"""Every remedy possible: each rule's remedies, rendered over every recorded facts file (and with a
training config that exercises the config rules), never name a build that cannot exist for the facts:
a CUDA library (flash-attn, xformers, FlashAttention 3/4, a kernels-hub build) "built for" a CPU-only
torch, a wheel for a CUDA the torch does not have, or an install into an environment already said to be
another one's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attn_doctor.core import diagnose
from attn_doctor.gather import load_facts_file
from attn_doctor.probes.configs import probe_config
from attn_doctor.rules.loader import load_recipes

ROOT = Path(__file__).resolve().parents[1]
FACTS = sorted((ROOT / "tests" / "fixtures" / "facts").glob("*.json"))
CONFIGS = [ROOT / "tests" / "fixtures" / "configs" / "real" / "axolotl" / "config-7b-lora.yml",
           ROOT / "tests" / "golden" / "configs" / "llamafactory_fa2_bf16.yaml"]
CUDA_LIBRARIES = re.compile(r"(flash[-_]attn|xformers|flash_attn_interface|kernels-community)", re.IGNORECASE)


def _texts(result):
    yield result.message or ""
    for remedy in result.remedies:
        yield " ".join(x for x in (remedy.summary, remedy.detail or "", remedy.requirement or "",
                                   " ".join(remedy.command or [])) if x)


@pytest.mark.parametrize("path", FACTS, ids=lambda p: p.stem)
def test_no_remedy_names_an_impossible_build(path):
    recipes = load_recipes(None)
    facts = load_facts_file(path)
    facts.configs = [probe_config(str(c), {}) for c in CONFIGS if c.exists()]
    cpu_torch = bool(facts.torch.version) and not facts.torch.cuda and not facts.torch.hip
    for result in diagnose(facts, recipes).results:
        if result.status not in ("error", "warning", "info"):
            continue
        for text in _texts(result):
            for sentence in re.split(r"(?<=[.;])\s", text):
                if cpu_torch and CUDA_LIBRARIES.search(sentence):
                    # a CUDA library has no build for a CPU-only torch
                    assert not re.search(r"(built|build|wheel) for (this torch|torch [\w.]+\+cpu)", sentence), (result.rule, sentence)
                    assert "+cpu" not in sentence or "not" in sentence, (result.rule, sentence)
