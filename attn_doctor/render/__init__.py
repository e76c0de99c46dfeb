"""Rendering: the only code that prints. One module per command's human output (human.py for
check, explain_human, fix_human, fleet_human, trace_human, rules, oneline, prepare), json.py for
the JSON documents and their generated schemas, console.py for the one rich console setup.

May import (the layering contract, pyproject.toml) everything below it: the API and the commands
beside the check (the explaining, fleet and fix results it shows), the pipeline, the engine, rules,
report, remedies, facts, schemas.
Never the CLI, which calls it.
"""
