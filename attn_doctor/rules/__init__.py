"""Rules: loaded from recipes (data, loader.py), evaluated purely against Facts (engine.py)."""
