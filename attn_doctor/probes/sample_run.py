"""The sample forward pass as a cached computation: the verdict of tiny models of the installed
attention paths (attn_doctor.tracing.runs.samples, run by sample_probe.py in a child of the target), for
one GPU capability. Its key is keys.sample_inputs; attn_doctor.cache.Once computes it once per key
(single-flight across the processes and hosts sharing a cache folder)."""

from __future__ import annotations

import json
import os
import time
from typing import Optional

import msgspec

from ..cache import Done, Got
from ..facts import DtypePath, ProbeRun, SampleRun, bf16_native
from .runner import ProbeFailed, probe_output, start_child


def sample_config(weakest: Optional[str]) -> dict:
    """The sample forward pass runs on the CPU (tiny models: microseconds of compute, where meta
    would import torch._dynamo for its layer_norm decomposition, 1.3 s) with CUDA's autocast
    policy emulated, judged for this machine's weakest GPU, in bf16 where every GPU has it
    natively (or there is no GPU), else in fp16: the dtype a user here should train in."""
    dtype = "fp16" if weakest and not bf16_native(weakest) else "bf16"
    config = {"device": "cpu", "dtype": dtype, "autocast": None}
    if weakest:
        config["capability"] = [int(x) for x in weakest.split(".")]
    return config


def capability_of(config: dict) -> Optional[str]:
    return ".".join(str(x) for x in config["capability"]) if config.get("capability") else None


class SampleJob:
    """The sample child: started at once, with attn-doctor put on its sys.path through a temporary
    folder that goes when the job is closed."""

    def __init__(self, python: str, config: dict, child_env: Optional[dict]):
        from ..tracing.runs.launch import package_dir

        self.config, self.child_env = config, child_env
        self.folder = package_dir()
        try:
            self.child = start_child(python, ["torch", "--sample", json.dumps({**config, "path": self.folder})], child_env)
        except ProbeFailed:
            self._remove_folder()
            raise

    def finish(self, timeout: float) -> Done:
        start = self.child.started
        try:
            data = self.child.result(timeout)
        except ProbeFailed as exc:
            run = ProbeRun(name="sample", status=exc.status, duration_s=round(time.monotonic() - start, 3), error=str(exc),
                           stderr=probe_output("sample", self.child))
            value = DtypePath(status="failed", error=f"the sample forward pass did not finish: {exc}")
            return Done(msgspec.to_builtins(value), keep=False, error=str(exc), extra={"probe": _probe(run)}, local=run)
        run = ProbeRun(name="sample", status="ok", duration_s=round(time.monotonic() - start, 3),
                       stderr=probe_output("sample", self.child, data.get("stderr")))
        raw = data.get("dtype_path")
        if raw is None:
            torch_status = (data.get("torch") or {}).get("status", "failed")
            raw = {"status": "skipped", "error": f"torch is {torch_status} in the target environment"}
        value = dtype_path(raw, capability_of(self.config))
        # A failed run is shared with the processes waiting for it, never reused later.
        keep = value.status == "ok" and value.verdict != "failed"
        return Done(msgspec.to_builtins(value), keep=keep, error=None if keep else (value.error or "a sample failed"),
                    extra={"probe": _probe(run)}, local=run)

    def close(self) -> None:
        if self.child.proc.poll() is None:
            self.child.kill()
        self._remove_folder()

    def _remove_folder(self) -> None:
        from ..tracing.runs.launch import remove_package_dir

        if self.folder:
            remove_package_dir(self.folder, dict(os.environ, **(self.child_env or {})))
            self.folder = None


def _probe(run: ProbeRun) -> dict:
    return {"status": run.status, "error": run.error, "stderr": run.stderr}


def verdict_of(got: Got, key: str) -> tuple[DtypePath, Optional[ProbeRun]]:
    """The DtypePath and its probe's run from a cached computation's answer (attn_doctor.cache)."""
    if got.value is None:
        return DtypePath(status="skipped", error=got.error, key=key, waited_s=got.waited_s or None), got.local
    value = msgspec.convert(got.value, DtypePath)
    value.key, value.waited_s = key, got.waited_s or None
    value.computed_by = got.by
    if got.source in ("cache", "shared"):
        value.cached = got.computed
    return value, got.local if got.source == "computed" else stored_run("sample", got)


def stored_run(name: str, got: Got) -> ProbeRun:
    """The computing process's probe, as it ran (the same in every report sharing the result; its
    duration here: the wait)."""
    probe = got.entry.get("probe") if isinstance(got.entry.get("probe"), dict) else {}
    status = probe.get("status") if probe.get("status") in ("ok", "failed", "timeout", "skipped") else "ok"
    error = probe.get("error") if isinstance(probe.get("error"), str) else None
    return ProbeRun(name=name, status=status, duration_s=got.waited_s or 0.0, error=error[:2000] if error else None,
                    stderr=_printed(probe.get("stderr")))


def _printed(raw) -> dict[str, str]:
    """What the computing process's probes printed, from a cache entry: at most 64 processes, each
    text as bounded as runner.printed keeps it (an entry is data from outside: never trusted to be)."""
    if not isinstance(raw, dict):
        return {}
    from .runner import OUTPUT_KEEP

    return {str(k)[:100]: v[-(OUTPUT_KEEP + 10):] for k, v in list(raw.items())[:64] if isinstance(v, str)}


def dtype_path(raw: dict, capability: Optional[str]) -> DtypePath:
    samples = [
        SampleRun(name=str(e.get("name")), status=str(e.get("status")), reason=e.get("reason"), summary=e.get("summary") or {})
        for e in raw.get("samples", [])
    ]
    findings = list(raw.get("findings") or [])
    failed = [s for s in samples if s.status == "failed"]
    errors = [f for f in findings if f.get("severity") == "error"]
    warnings = [f for f in findings if f.get("severity") == "warning"]
    verdict = "error" if errors else "failed" if failed else "warning" if warnings else "pass"
    return DtypePath(
        status=raw.get("status", "ok"),
        device=raw.get("device", "cpu"),
        dtype=raw.get("dtype"),
        autocast=raw.get("autocast"),
        capability=capability,
        verdict=verdict,
        samples=samples,
        findings=findings,
        error=raw.get("error"),
    )
