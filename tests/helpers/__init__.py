"""Helpers shared by the tests (importable because tests/ is on sys.path via conftest)."""
