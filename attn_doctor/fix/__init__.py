"""attn-doctor fix: findings -> plan -> confirm -> snapshot -> apply -> verify -> roll back; undo.

plan.py decides (pure, bar reading the files to diff), edits.py and patches.py compute file
changes, journal.py records the state before, apply.py is the only code that changes anything.
"""
