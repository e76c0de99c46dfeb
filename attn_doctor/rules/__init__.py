"""Rules: the recipes (recipes/*.toml: data, validated by loader.py against model.py), the
language they are written in (conditions.py, the named checks in checks/, signatures.py with the
analyzers they name, templates.py, the cause classes in causes.py), and the facts fixtures each
rule is tested on (fixtures.py). Evaluating them is the engine's (attn_doctor/diagnosis/), above.

May import (the layering contract, pyproject.toml): probes (what a probe child defines, such as the
smoke tests' libraries) and the bottom layer (facts, errors, failures, ...). Nothing that holds a
result: not report, remedies or the engine, the pipeline, the API, fix, explain, fleet, render or
the CLI.
"""
