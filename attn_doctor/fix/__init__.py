"""attn-doctor fix: findings -> plan -> confirm -> snapshot -> apply -> verify -> roll back; undo.

plan.py decides (pure, bar reading the files to diff), edits.py and patches.py compute file
changes, journal.py records the state before, apply.py is the only code that changes anything.
The CLI runs the check and the verification (core.run_check) and asks for the confirmation.

May import (the layering contract, pyproject.toml): its layer's siblings (api, results, fleet,
explain, integrations), the pipeline (core, options, gather), rules, report, remedies, probes (the
child runner, the config readers) and the bottom layer. Never render or the CLI.
"""
