"""Diagnosis: the recipes (attn_doctor/rules) evaluated against Facts into Results (the report's,
attn_doctor/report.py) with their remedies filled for the environment (attn_doctor/remedies.py):
engine.py, pure; fixtures.py runs each rule on its recorded fixtures through the engine.

May import (the layering contract, pyproject.toml): report, remedies, rules and the layers below
them (probes, tracing, the ground floor). Never the pipeline (core, options, gather), the API,
fix, explaining, fleet, render or the CLI.
"""
