"""Rendering: the only code that prints."""
