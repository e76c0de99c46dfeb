"""attn-doctor fix: findings -> plan -> confirm -> snapshot -> apply -> verify -> roll back; undo.

plan.py decides (pure, bar reading the files to diff), edits.py and patches.py compute file
changes, journal.py records the state before, apply.py is the only code that changes anything.
The CLI runs the check and the verification (core.run_check) and asks for the confirmation.

May import (the layering contract, pyproject.toml): the pipeline (core, options, gather), the
engine, rules, report, remedies, probes (the child runner, the config readers) and the ground
floor. Not fleet or explaining (its independent siblings), nor the API above it, render or the CLI.
"""
