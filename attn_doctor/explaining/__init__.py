"""The log explainer behind `attn-doctor explain` and the API's `attn_doctor.explain` (named apart
from it): from an error message or a whole training log to the cause and the fix.

scan.py streams the input through the recipes' compiled signatures (rules/signatures.py);
versions.py reads the versions a log prints; core.py turns matches into explained findings;
report.py is its JSON document; fixtures.py runs the recipes' log-snippet fixtures through the
real scanner.

May import (the layering contract, pyproject.toml): the pipeline, the engine (diagnosis), rules
(the recipes and their signature language), report, remedies, probes and the ground floor. Not
fleet or fix (its independent siblings), nor the API above it (results, findings, api,
integrations), render or the CLI.
"""
