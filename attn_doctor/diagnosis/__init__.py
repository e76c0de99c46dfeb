"""Diagnosis: the recipes (attn_doctor/rules) evaluated against Facts into Results (the report's,
attn_doctor/report.py) with their remedies filled for the environment (attn_doctor/remedies.py):
engine.py, pure; fixtures.py runs each rule on its recorded fixtures through the engine.

May import (the layering contract, pyproject.toml): rules, report, remedies, probes, trace and the
bottom layer. Never the pipeline (core, options, gather), the API, fix, explain, fleet, render or
the CLI.
"""
