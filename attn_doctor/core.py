"""The core of `check`: facts in, report out. Returns values; never prints, never exits."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import msgspec

from .facts import Facts
from .report import Report, exit_code, now, summarise
from .rules.engine import evaluate
from .rules.loader import Recipes, load_recipes


class FactsFileError(Exception):
    """A --facts / --from-report file that cannot be used: the message says why, in one line."""


def diagnose(facts: Facts, recipes: Recipes, fail_on: str = "error", source: str = "probed") -> Report:
    results = evaluate(recipes, facts)
    results.sort(key=lambda r: r.rule)
    summary = summarise(results, facts)
    return Report(
        created=now(),
        source=source,
        facts=facts,
        results=results,
        summary=summary,
        exit_code=exit_code(summary, fail_on),
    )


def load_facts_file(path: Path) -> Facts:
    """Facts from a JSON report written by `check --json` (or a bare facts document)."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise FactsFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise FactsFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise FactsFileError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise FactsFileError(f"{path}: expected a JSON object from `attn-doctor check --json`")
    if "schema" in doc:
        if doc.get("schema") != "attn-doctor/report":
            raise FactsFileError(f"{path}: not an attn-doctor report (schema {doc.get('schema')!r})")
        if not isinstance(doc.get("schema_version"), int) or doc["schema_version"] > 1:
            raise FactsFileError(
                f"{path}: report schema version {doc.get('schema_version')} is newer than this attn-doctor understands (1); upgrade attn-doctor"
            )
        doc = doc.get("facts")
        if not isinstance(doc, dict):
            raise FactsFileError(f"{path}: the report has no facts")
    elif not ({"platform", "packages", "gpu", "torch"} & set(doc)):
        raise FactsFileError(f"{path}: not an attn-doctor report or facts file (none of its keys are facts)")
    try:
        return msgspec.convert(doc, Facts)
    except msgspec.ValidationError as exc:
        raise FactsFileError(f"{path}: invalid facts: {exc}") from None


def run_check(
    *,
    python: Optional[str] = None,
    quick: bool = False,
    facts_file: Optional[Path] = None,
    recipes_dir: Optional[Path] = None,
    fail_on: str = "error",
    timeout: float = 120.0,
    progress=None,
    configs: Optional[list[str]] = None,
    sample: bool = True,
    smoke: bool = True,
    use_cache: bool = True,
    sample_wait: float = 0.0,
    gpu_index: int = 0,
) -> Report:
    recipes = load_recipes(recipes_dir)  # first: an invalid recipe is a usage error, before any probing
    if facts_file is not None:
        facts = load_facts_file(facts_file)
        if configs:
            # Config files are read here even for a recorded report: they are the files to judge
            # (and to fix) against that machine's facts.
            facts.configs = _probe_configs(configs)
        return diagnose(facts, recipes, fail_on, source="facts-file")
    from .probes import collect_facts
    from .probes.configs import attention_shapes

    # Configs first (file reads): a usage error before any probing, and the model's head dim and
    # dtype for the smoke probe's question "which kernel will these inputs get?".
    config_files = _probe_configs(configs) if configs else []
    facts = collect_facts(python=python, quick=quick, timeout=timeout, progress=progress, sample=sample, smoke=smoke,
                          use_cache=use_cache, sample_wait=sample_wait, gpu_index=gpu_index,
                          shapes=attention_shapes(config_files))
    facts.configs = config_files
    return diagnose(facts, recipes, fail_on)


class ConfigFileError(FactsFileError):
    """A --config file that cannot be read or is not a config: judging the machine without it
    would pass a broken training config as fine."""


def _probe_configs(paths: list[str]):
    from .probes.configs import probe_configs

    configs = probe_configs(paths)
    for config in configs:
        if config.status == "error":
            raise ConfigFileError(f"--config {config.path}: {config.error}")
    return configs
