"""`check --prepare`: what was stored in the cache, as lines or JSON (attn-doctor/prepare v1)."""

from __future__ import annotations

import sys

import msgspec

PREPARE_SCHEMA = "attn-doctor/prepare"


def render_prepared(prepared, json_out: bool) -> int:
    """Print the verdicts; returns the exit code: 0 when every one was stored, 3 when one failed."""
    folder, verdicts = prepared
    code = 0 if all(v.status == "ok" and v.verdict != "failed" for v in verdicts) else 3
    if json_out:
        doc = {"schema": PREPARE_SCHEMA, "schema_version": 1, "cache_dir": str(folder),
               "verdicts": [msgspec.to_builtins(v) for v in verdicts], "exit_code": code}
        sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n")
        sys.stdout.flush()
        return code
    from .console import make_console
    from rich.markup import escape

    console = make_console()
    console.print(f"attn-doctor: sample verdicts in {escape(str(folder))}")
    for v in verdicts:
        judged = f"sm{v.capability.replace('.', '')}" if v.capability else "no GPU"
        if v.status != "ok" or v.verdict == "failed":
            mark, how = "[red]✗[/]", f"failed: {escape(v.error or 'a sample failed')}"
        else:
            mark = "[green]✓[/]"
            how = f"already cached ({v.cached[:16].replace('T', ' ')})" if v.cached else "computed and stored"
        ran = ", ".join(s.name for s in v.samples if s.status == "ran") or "no sample ran"
        console.print(f"{mark} {judged:7} {v.dtype or '?':5} {v.verdict or '?':8} {how}; ran: {ran}  [dim](key {v.key})[/]")
    console.print(f"{len(verdicts)} verdicts  (exit code {code})")
    return code
