"""The facts step of the check pipeline (attn_doctor/core.py): the Facts one check judges.

Probed from the check's target (attn_doctor.probes: the probe children and the cache of their
results), or, with `--from-report` / `--facts`, loaded from a report written by `check --json`:
a recorded report enters the pipeline here and goes through the same steps after it. Either way the
training configs (`--config`) are read here: the files to judge, and to fix, against those facts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import msgspec

from .errors import UsageError
from .facts import Facts, Target
from .options import CheckOptions
from .report import Report


class FactsFileError(Exception):
    """A --facts / --from-report file that cannot be used: the message says why, in one line."""


def gather_facts(options: CheckOptions, progress=None, previous: Optional[Report] = None, ready=None) -> Facts:
    """The facts of a check of validated `options` (attn_doctor.options.validate). Raises
    UsageError or FactsFileError for bad input; never for a broken environment. A --config file that
    cannot be read is kept with its reason (a finding), and the check goes on.

    previous: an earlier check of the same options in this session (fix's plan, when fix verifies):
    its smoke results and sample verdict are reused wherever nothing they depend on changed (their
    cache keys: a fix that changed packages or the shapes asked runs them again)."""
    configs = list(options.configs)
    if options.facts_file is not None:
        facts = load_facts_file(options.facts_file)
        if configs:
            # Config files are read here even for a recorded report: they are the files to judge
            # (and to fix) against that machine's facts.
            facts.configs = _probe_configs(configs)
        return facts
    from .probes import collect_facts
    from .probes.configs import attention_shapes

    # Configs first (file reads): the model's head dim and dtype for the smoke probe's question
    # "which kernel will these inputs get?".
    config_files = _probe_configs(configs) if configs else []

    found = []  # the environments search, once: a streamed check completes its facts at each part
    assumed = _assumed_gpu(options)

    def complete(facts: Facts, parts=None) -> None:  # what the probes do not know, on the facts so far too
        facts.configs = config_files
        if assumed is not None:
            _assume(facts, assumed)
        facts.target = target_facts(options.target)
        _record_steps_turned_off(facts, options)
        if parts is None or {"environment", "stack"} <= set(parts):  # whether torch imports is known
            if not found:
                found.append(_other_environments(facts, options))
            facts.environments = found[0]

    def arrived(parts, facts):
        complete(facts, parts)
        ready(parts, facts)

    facts = collect_facts(python=options.python, quick=options.quick, timeout=options.timeout, progress=progress,
                          sample=options.sample, smoke=options.smoke, use_cache=options.use_cache,
                          gpu_index=options.gpu_index, shapes=attention_shapes(config_files),
                          cache_root=str(options.cache_dir) if options.cache_dir else None,
                          known=_known(previous), cache_trust=options.cache_trust, ready=arrived if ready else None,
                          assume=_gpu_info(assumed) if assumed is not None else None)
    complete(facts)
    environment = facts.probe("environment")
    if options.python and environment and environment.status != "ok":
        from .probes.runner import TOO_OLD

        if TOO_OLD in (environment.error or ""):  # a working interpreter, too old for the probes to run in
            raise UsageError(f"{options.target.named()}: {environment.error}")
        raise UsageError(f"{options.target.named()}: not a working Python interpreter ({environment.error})")
    return facts


def _assumed_gpu(options: CheckOptions):
    if options.gpu is None and options.capability is None:
        return None
    from .gpus import lookup

    return lookup(options.gpu, options.capability)


def _gpu_info(assumed):
    from .facts import Gpu, GpuInfo

    return GpuInfo(source="assumed", devices=[Gpu(index=0, name=assumed.name, capability=assumed.capability,
                                                  memory_mib=assumed.memory_mib)])


def _assume(facts: Facts, assumed) -> None:
    """The GPU facts of check --gpu: the catalogue's, said as assumed; torch's view of this machine's
    own GPUs (if any) is not the job's."""
    from .facts import TorchDevice, bf16_native

    facts.assumed_gpu = assumed
    facts.gpu = _gpu_info(assumed)
    facts.torch.devices = [TorchDevice(index=0, name=assumed.name, capability=assumed.capability,
                                       bf16_native=bf16_native(assumed.capability), total_memory_mib=assumed.memory_mib)]


def _other_environments(facts: Facts, options: CheckOptions):
    """Where else torch is, when the doctor checked its own environment by default (nothing given,
    nothing activated) and found none there: a newcomer's first check, run from the venv the
    doctor was installed into, is then about the training environments, not the doctor's."""
    target = options.target
    environment = facts.probe("environment")
    if target is None or target.source != "self" or environment is None or environment.status != "ok":
        return None
    if facts.version_of("torch") is not None or facts.torch.status not in ("missing", "skipped"):
        return None
    from .probes.environments import find_environments

    return find_environments(target.python)


def load_facts_file(path: Path) -> Facts:
    """Facts from a JSON report written by `check --json` (or a bare facts document); '-' reads
    stdin. Bounded (attn_doctor/boundary/inputs.py): a regular file or stdin, REPORT_MAX_BYTES, MAX_DEPTH."""
    from .boundary.inputs import REPORT_MAX_BYTES, InputError, decode_json, read_bounded, shown

    try:
        doc = decode_json(read_bounded(path, REPORT_MAX_BYTES))
    except InputError as exc:
        raise FactsFileError(f"{shown(path)}: {exc}") from None
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


def _probe_configs(paths: list[str]):
    import os

    from .probes.configs import probe_configs

    return probe_configs(paths, os.environ)


def _record_steps_turned_off(facts: Facts, options: CheckOptions) -> None:
    """A step the caller turned off is recorded with the option that did it: the report, read here
    or on another machine, then says why the step is missing instead of guessing a cause."""
    if options.quick:
        return  # recorded as facts.quick
    if not options.sample and facts.dtype_path.status == "skipped" and not facts.dtype_path.error:
        facts.dtype_path.error = f"not asked for ({options.naming.off('sample')})"
    if not options.smoke and facts.smoke.status == "skipped" and not facts.smoke.error:
        facts.smoke.error = f"not asked for ({options.naming.off('smoke')})"


def _known(previous: Optional[Report]) -> Optional[Facts]:
    """The previous check's facts whose smoke results and sample verdict may be reused, each saying
    when it ran (the previous check's time where it was computed then, not reused itself)."""
    if previous is None or previous.source != "probed":
        return None
    facts = previous.facts
    return msgspec.structs.replace(
        facts,
        torch=msgspec.structs.replace(facts.torch, cached=facts.torch.cached or previous.created),
        smoke=msgspec.structs.replace(facts.smoke, cached=facts.smoke.cached or previous.created,
                                      capability_cached=facts.smoke.capability_cached or previous.created),
        dtype_path=msgspec.structs.replace(facts.dtype_path, cached=facts.dtype_path.cached or previous.created),
    )


def target_facts(target) -> Optional[Target]:
    """The report's record of options.Target (the options stay standard library only)."""
    if target is None:
        return None
    return Target(python=target.python, source=target.source, why=target.why, ignored=target.ignored)
