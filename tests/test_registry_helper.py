"""The install fixtures skip only when the registry cannot be reached (tests/helpers/registry.py),
on installers' real words for it; any other install failure is a failure."""

import pytest

from helpers.registry import skip_or_fail, unreachable


@pytest.mark.parametrize("stderr", [
    "WARNING: Retrying (Retry(total=4)) after connection broken by 'NewConnectionError(': Failed to establish a new "
    "connection: [Errno -3] Temporary failure in name resolution')': /simple/transformers/",
    "ERROR: Could not find a version that satisfies the requirement x (from versions: none)\nMax retries exceeded with url",
    "error: Failed to fetch: `https://pypi.org/simple/transformers/`\n  Caused by: error sending request for url",
    "HTTPSConnectionPool(host='pypi.org', port=443): Read timed out.",
])
def test_a_registry_that_cannot_be_reached_skips(stderr):
    assert unreachable(stderr)
    with pytest.raises(pytest.skip.Exception):
        skip_or_fail("x", stderr)


@pytest.mark.parametrize("stderr", [
    "ERROR: Could not find a version that satisfies the requirement x-transformers==9.9.9 (from versions: 0.1, 1.30.1)\n"
    "ERROR: No matching distribution found for x-transformers==9.9.9",
    "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/",
    "  × No solution found when resolving dependencies: Because transformers==4.46.3 depends on tokenizers>=0.20,<0.21",
])
def test_any_other_install_failure_fails(stderr):
    assert not unreachable(stderr)
    with pytest.raises(pytest.fail.Exception):
        skip_or_fail("x", stderr)
