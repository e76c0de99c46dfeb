"""Real environments from real registry packages (pytest -m realenv)."""
