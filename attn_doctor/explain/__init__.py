"""`attn-doctor explain`: from an error message or a whole training log to the cause and the fix.

scan.py streams the input through the recipes' compiled signatures (rules/signatures.py);
versions.py reads the versions a log prints; core.py turns matches into explained findings;
report.py is its JSON document; fixtures.py runs the recipes' log-snippet fixtures through the
real scanner.

May import (the layering contract, pyproject.toml): its layer's siblings (api, results, fleet,
fix, integrations), the pipeline, rules (the recipes and their signature language), report,
remedies, probes and the bottom layer. Never render or the CLI.
"""

# attn_doctor.explain(text) is the Python API's explain (attn_doctor/api.py).
from .._callable import make_callable  # noqa: E402

make_callable(__name__)
