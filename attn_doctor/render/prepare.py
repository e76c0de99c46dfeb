"""`check --prepare`: what was stored in the cache, as lines or JSON (attn-doctor/prepare v1)."""

from __future__ import annotations

import msgspec
from rich.console import Console
from rich.markup import escape


def prepared_ok(prepared) -> bool:
    """Whether every verdict, and the stack's results where a GPU was there, were computed and
    stored (the exit code's question)."""
    _folder, verdicts, stack = prepared
    return all(v.status == "ok" and v.verdict != "failed" for v in verdicts) and (stack is None or _stack_ok(stack))


def _stack_ok(facts) -> bool:
    return facts.torch.status == "ok" and facts.smoke.status != "failed"


def _stack_doc(facts) -> dict:
    return {"key": facts.torch.key, "cached": facts.torch.cached, "torch": facts.torch.version, "status": facts.torch.status,
            "architectures": sorted({d.capability for d in facts.gpu.devices if d.capability}), "driver": facts.gpu.driver_version,
            "kernel_tests": [{"backend": r.backend, "dtype": r.dtype, "status": r.status} for r in facts.smoke.results
                             if not r.backend.startswith("sdpa-")], "error": facts.smoke.error}


def prepared_json(prepared, exit_code: int) -> bytes:
    folder, verdicts, stack = prepared
    from ..schemas import envelope

    doc = envelope("prepare", {"cache_dir": str(folder), "verdicts": [msgspec.to_builtins(v) for v in verdicts],
                               "stack": _stack_doc(stack) if stack is not None else None, "exit_code": exit_code})
    return msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n"


def render_prepared(prepared, exit_code: int, console: Console) -> None:
    folder, verdicts, stack = prepared
    console.print(f"attn-doctor: sample verdicts in {escape(str(folder))}")
    for v in verdicts:
        judged = f"sm{v.capability.replace('.', '')}" if v.capability else "no GPU"
        if v.status != "ok" or v.verdict == "failed":
            mark, how = "[red]✗[/]", f"failed: {v.error or 'a sample failed'}"
        else:
            # the mark is the verdict's (what a check there will report), the words say it was stored
            mark = {"pass": "[green]✓[/]", "warning": "[yellow]![/]"}.get(v.verdict or "", "[red]✗[/]")
            how = f"already cached ({v.cached[:16].replace('T', ' ')})" if v.cached else "computed and stored"
        ran = ", ".join(s.name for s in v.samples if s.status == "ran") or "no sample ran"
        # dtype, verdict and sample names may come from a cache entry: escaped as markup
        line = f"{judged:7} {v.dtype or '?':5} verdict {v.verdict or '?':8} {how}; ran: {ran}"
        console.print(f"{mark} {escape(line)}  [dim](key {escape(str(v.key))})[/]")
    if stack is not None:
        doc = _stack_doc(stack)
        how = f"already cached ({doc['cached'][:16].replace('T', ' ')})" if doc["cached"] else "computed and stored"
        tests = ", ".join(f"{t['backend']} {t['dtype']} {t['status']}" for t in doc["kernel_tests"]) or "no kernel test installed"
        mark = "[green]✓[/]" if _stack_ok(stack) else "[red]✗[/]"
        line = (f"stack for {', '.join('sm' + a.replace('.', '') for a in doc['architectures'])}, driver {doc['driver']}: torch "
                f"{doc['torch'] or doc['status']}; {tests}; {how}" + (f"; {doc['error']}" if doc["error"] else ""))
        console.print(f"{mark} {escape(line)}  [dim](key {escape(str(doc['key']))})[/]")
    console.print(f"{len(verdicts)} verdicts" + (", the stack's results" if stack is not None else "") + f"  (exit code {exit_code})")
