"""Telling a package registry that cannot be reached (a test that installs from it skips: the
machine, not the code) from an install that fails for a reason of its own (a release gone, a
dependency that no longer resolves: the test fails, so a broken fixture is seen)."""

from __future__ import annotations

import re

_OUTAGE = re.compile(
    r"Temporary failure in name resolution|Name or service not known|nodename nor servname|Network is unreachable|"
    r"Failed to establish a new connection|Max retries exceeded|Connection (?:refused|reset|aborted)|"
    r"ConnectionError|ConnectTimeout|ReadTimeout|timed out|Read timed out|error sending request|failed to fetch|"
    r"dns error|tcp connect error|HTTP status server error \(50[234]|\b50[234] (?:Bad Gateway|Service Unavailable|"
    r"Gateway Time-?out)|Could not connect", re.I)


def unreachable(stderr: str) -> bool:
    """True where an installer's output says the registry could not be reached."""
    return bool(_OUTAGE.search(stderr or ""))


def skip_or_fail(what: str, stderr: str):
    """pytest.skip for a registry that cannot be reached, pytest.fail for any other install failure."""
    import pytest

    tail = (stderr or "").strip()[-400:]
    if unreachable(stderr):
        pytest.skip("the package registry cannot be reached (%s): %s" % (what, tail))
    pytest.fail("could not install %s, and not for want of the registry: %s" % (what, tail))
