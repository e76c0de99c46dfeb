"""``trace(...) -> dict``: load a model, run it under the dtype tracer, report findings.

The public entry (``attn_doctor.trace``'s core, the CLI, the trace child): one trace in this
process (run.py: loading the target through factory.py or hf_models.py, running it, every failure
a report), and where the flash_attn stand-in was called, the installed route traced again in a
fresh process and both reported (routes.py). Standard library and torch only; the report is plain
JSON-able data.
"""

from __future__ import annotations

import os
import sys

from .routes import ROUTE_INSTALLED, ROUTE_STANDIN, combine_routes, route_entry
from .run import _trace_once


def trace(target=None, model=None, inputs=None, hf=None, dtype=None, autocast=None, device="meta", train=False,
          capability=None, standins=None, emulate_autocast=None, seq_len=16, attn_implementation=None,
          continue_after_bad_sink=True, retry_on_cpu=True, cwd=None, factory_kwargs=None, routes=True,
          route_timeout=600, shadow=None):
    """Trace one forward (and, with ``train``, backward) pass; return the JSON-able report.

    target: "MODULE:FACTORY" (or pass ``model`` and ``inputs`` directly); factory_kwargs: keyword
    arguments for the factory; hf: a local transformers config file or checkpoint folder; dtype:
    cast the model ("bf16", "fp16", "fp32"); autocast: "bf16" / "fp16" region around the forward
    (CUDA's policy, emulated off CUDA); device: "meta", "cpu" or "cuda"; capability: (major, minor)
    of the GPU the kernels are judged for; routes: when the flash_attn stand-in changed the path the
    model takes, also trace the installed path (in a fresh process) and report both; shadow: measure
    each op's precision against a float64 shadow run on CPU (a meta trace runs it a second time there):
    None where it costs seconds, True always, False never.
    """
    kwargs = dict(target=target, hf=hf, dtype=dtype, autocast=autocast, device=device, train=train,
                  capability=list(capability) if capability else None, emulate_autocast=emulate_autocast,
                  seq_len=seq_len, attn_implementation=attn_implementation,
                  continue_after_bad_sink=continue_after_bad_sink, retry_on_cpu=retry_on_cpu, cwd=cwd,
                  factory_kwargs=factory_kwargs)
    report = _trace_once(target, model, inputs, hf, dtype, autocast, device, train, capability, standins,
                         emulate_autocast, seq_len, attn_implementation, continue_after_bad_sink, retry_on_cpu, cwd,
                         factory_kwargs, shadow=shadow)
    via_standin = report.pop("standin_route", False) or bool(report.get("standin_calls"))
    name = ROUTE_STANDIN if via_standin else ROUTE_INSTALLED
    if not (routes and name == ROUTE_STANDIN and model is None and report["status"] != "usage_error"):
        report["routes"] = [route_entry(report, name, "verdict")]
        if routes and name == ROUTE_STANDIN and model is not None:
            report["notes"].append("the flash_attn stand-in was called; the installed route cannot be traced for a "
                                   "model object (give MODULE:FACTORY to trace both)")
        return report
    from .launch import run_child

    # the installed route's numerics are the same model's: measured once, in the stand-in route
    child_kwargs = dict(kwargs, standins=False, routes=False, shadow=False)
    installed = run_child("trace", child_kwargs, python=sys.executable, timeout=route_timeout,
                          cwd=cwd or os.getcwd())
    installed.setdefault("notes", [])
    installed.setdefault("summary", {"sinks": 0, "bad_sinks": 0, "errors": 0, "warnings": 0, "ops": 0})
    return combine_routes(report, installed, device)
