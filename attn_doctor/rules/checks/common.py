"""What the area modules share: the guard that skips a check when torch was not probed or did not
import, a version's major.minor, and the one line of an import error a message quotes.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from ...facts import Facts
from ..conditions import SkipRule


def _torch_ok(facts: Facts) -> None:
    if facts.torch.status == "skipped":
        raise SkipRule("torch was not probed (--quick)" if facts.quick else "the torch probe did not run")
    if facts.torch.status != "ok":
        raise SkipRule("torch did not import")


def _mm(version: str) -> str:
    """'2.11.0+cu130' -> '2.11'"""
    try:
        v = Version(version)
    except InvalidVersion:
        return ".".join(version.split("+")[0].split(".")[:2])
    return f"{v.major}.{v.minor}"


def _error_line(err) -> str:
    """`Type: the message's last line` of an import error (where Python puts the cause), bounded."""
    if err is None:
        return ""
    text = (err.message.strip().splitlines() or [""])[-1]
    return f"{err.type}: {text}"[:300] if text else err.type


def kernels_not_run(facts: Facts, what: str) -> str:
    """Why no kernel ran on a GPU here (the smoke tests, the numerics sweep), in the words of what
    the report knows: a GPU assumed with --gpu, no GPU found, a torch without CUDA, the option that
    turned them off; "the report does not say why" only for a report that truly does not."""
    if facts.smoke.error:
        return f"no {what} ran: {facts.smoke.error}"
    if facts.assumed_gpu is not None:
        return f"no {what} ran: the GPU is assumed (--gpu), judged from its catalogue entry; nothing ran on it here"
    if facts.gpu_capabilities() == []:
        return f"no {what} ran: no NVIDIA GPU found"
    if facts.torch.status == "ok" and not getattr(facts.torch, "cuda", None):
        return f"no {what} ran: this torch is not a CUDA build"
    return f"no {what} in this report (an attn-doctor before them made it)"
