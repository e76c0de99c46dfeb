"""The layering DESIGN.md asks for, read from the source: the CLI sits on top and nothing below imports it."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attn_doctor"


def _imports(path: Path) -> set[str]:
    """Absolute module names imported anywhere in the file (function-level imports included)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def test_nothing_below_the_cli_imports_it():
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "cli" or path.name == "__main__.py":
            continue
        bad = {n for n in _imports(path) if n == "attn_doctor.cli" or n.startswith("attn_doctor.cli.")}
        if bad:
            offenders[str(path.relative_to(PACKAGE))] = sorted(bad)
    assert offenders == {}


def test_one_module_per_command():
    from attn_doctor.cli import COMMANDS, app

    assert sorted(p.stem for p in (PACKAGE / "cli").glob("*.py") if not p.stem.startswith("_")) == sorted(COMMANDS)
    assert {c.name for c in app.registered_commands} == set(COMMANDS)


def test_the_measurement_sees_imports():
    # The checker itself: the CLI's own modules do import their shared helpers.
    assert "attn_doctor.cli._common" in _imports(PACKAGE / "cli" / "check.py")
