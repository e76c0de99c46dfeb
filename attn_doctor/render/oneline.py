"""`check --oneline`: the verdict in one ASCII line of at most ONELINE_MAX_BYTES bytes.

For monitors that keep a few bytes of a command's output as a status message: node-problem-detector's
custom plugins keep the first `max_output_length` bytes of stdout (80 by default), cut anywhere,
so the line says the most useful thing first (the exit code's meaning, then the worst rule) and
fits on its own.
"""

from __future__ import annotations

from ..report import EXIT_FINDINGS, EXIT_OK, Report

ONELINE_MAX_BYTES = 80
_RANK = {"crashed": 0, "error": 1, "warning": 2, "info": 3}


def oneline(report: Report, limit: int = ONELINE_MAX_BYTES) -> str:
    s = report.summary
    fired = sorted((r for r in report.results if r.status in _RANK), key=lambda r: (_RANK[r.status], r.rule))
    if report.exit_code == EXIT_FINDINGS:
        worst = [r for r in fired if r.status in ("error", "crashed")] or fired
        head = f"FAIL {worst[0].rule} {worst[0].name}: {worst[0].title}"
        more = len(fired) - 1
    elif report.exit_code == EXIT_OK:
        counts = [f"{n} {word}{'s' if n != 1 else ''}" for n, word in ((s.warning, "warning"), (s.info, "note")) if n]
        head = "OK no errors" + (f"; {', '.join(counts)}: " + " ".join(r.rule for r in fired) if counts else "")
        more = 0
    else:
        failed = [p.name for p in report.facts.probes if p.status not in ("ok", "skipped")]
        crashed = [r.rule for r in fired if r.status == "crashed"]
        head = "UNKNOWN " + ("probe failed: " + ", ".join(failed) if failed else "check crashed: " + " ".join(crashed) if crashed else "incomplete check")
        more = 0
    text = head + (f" (+{more} more)" if more > 0 else "")
    return _fit(text, limit)


def oneline_unknown(reason: str, limit: int = ONELINE_MAX_BYTES) -> str:
    """The line for a check that could not run at all (a usage error, exit 2). Cut in the middle:
    such a message starts with what (a path) and ends with why."""
    text = _fit(f"UNKNOWN {reason}", 1 << 20)
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    return text[:head] + "..." + text[len(text) - (limit - 3 - head):]


def _fit(text: str, limit: int) -> str:
    """ASCII (a cut cannot split a character), one line, at most `limit` bytes."""
    text = " ".join(text.split()).encode("ascii", "replace").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."
