"""`attn-doctor explain`: from an error message or a whole training log to the cause and the fix.

signatures.py compiles the recipes' signatures and derives the literal anchors the scanner
pre-filters with; scan.py streams the input; versions.py reads the versions a log prints;
core.py turns matches into explained findings; fixtures.py runs the recipes' signature fixtures.
"""

# attn_doctor.explain(text) is the Python API's explain (attn_doctor/api.py).
from .._callable import make_callable  # noqa: E402

make_callable(__name__)
