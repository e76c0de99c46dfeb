"""Property-based fuzzing of every parser of user input (hypothesis).

CI runs a bounded, derandomized (seeded) pass: each test has its own example budget, the whole
folder takes well under two minutes on 2 cores. A longer, random exploration:

    ATTN_DOCTOR_FUZZ_EXAMPLES=20000 python -m pytest tests/fuzz -q

(each test then runs that many examples, with a fresh random seed that hypothesis prints on a
failure; `--hypothesis-seed N` replays it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

LONG_RUN = int(os.environ.get("ATTN_DOCTOR_FUZZ_EXAMPLES", "0") or 0)


def fuzz_settings(ci_examples: int) -> settings:
    return settings(
        max_examples=LONG_RUN or ci_examples,
        derandomize=not LONG_RUN,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


@pytest.fixture(scope="module")
def work(tmp_path_factory, request) -> Path:
    """A folder for one module's files, under pytest's temporary root, which pytest prunes (a
    folder made at import time outlived every run). Module-scoped: hypothesis refuses
    function-scoped fixtures, whose one value every example of a test would share."""
    return tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])
