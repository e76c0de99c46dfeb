"""`check --prepare`: what was stored in the cache, as lines or JSON (attn-doctor/prepare v1)."""

from __future__ import annotations

import msgspec
from rich.console import Console
from rich.markup import escape


def prepared_ok(verdicts) -> bool:
    """Whether every verdict was computed and stored (the exit code's question)."""
    return all(v.status == "ok" and v.verdict != "failed" for v in verdicts)


def prepared_json(prepared, exit_code: int) -> bytes:
    folder, verdicts = prepared
    from ..schemas import envelope

    doc = envelope("prepare", {"cache_dir": str(folder), "verdicts": [msgspec.to_builtins(v) for v in verdicts],
                               "exit_code": exit_code})
    return msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n"


def render_prepared(prepared, exit_code: int, console: Console) -> None:
    folder, verdicts = prepared
    console.print(f"attn-doctor: sample verdicts in {escape(str(folder))}")
    for v in verdicts:
        judged = f"sm{v.capability.replace('.', '')}" if v.capability else "no GPU"
        if v.status != "ok" or v.verdict == "failed":
            mark, how = "[red]✗[/]", f"failed: {v.error or 'a sample failed'}"
        else:
            mark = "[green]✓[/]"
            how = f"already cached ({v.cached[:16].replace('T', ' ')})" if v.cached else "computed and stored"
        ran = ", ".join(s.name for s in v.samples if s.status == "ran") or "no sample ran"
        # dtype, verdict and sample names may come from a cache entry: escaped as markup
        line = f"{judged:7} {v.dtype or '?':5} {v.verdict or '?':8} {how}; ran: {ran}"
        console.print(f"{mark} {escape(line)}  [dim](key {escape(str(v.key))})[/]")
    console.print(f"{len(verdicts)} verdicts  (exit code {exit_code})")
