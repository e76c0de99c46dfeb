"""Rules: the recipes (recipes/*.toml: data, validated by loader.py against model.py), the
language they are written in (conditions.py, the named checks in checks.py, signatures.py with the
analyzers they name, templates.py, the cause classes in causes.py), and the engine that evaluates
them against Facts, purely, into Results with their remedies (engine.py).

May import (the layering contract, pyproject.toml): its layer's siblings report (Result) and
remedies (a remedy's command for a target), probes (what a probe child defines, such as the smoke
tests' libraries), trace, and the bottom layer (facts, errors, failures, ...). Never the pipeline
(core, options, gather), the API, fix, explain, fleet, render or the CLI.
"""
