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


def _called(func: ast.AST) -> str:
    """`sys.stdout.write`, `console.status`, `make_console().status` for a call's function."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return f"{_called(func.value)}.{func.attr}"
    if isinstance(func, ast.Call):
        return f"{_called(func.func)}()"
    return "?"


def _dotted_calls(path: Path) -> set[str]:
    return {_called(node.func) for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)}


# Writing stdout, encoding JSON, or starting a spinner of its own: what a command does only through
# cli/_common.py (emit / write_json / show / write_text, Progress), so that every format and every
# progress display behaves alike. cli/__init__.py prints --version and the bare usage itself.
OWN_OUTPUT = ("sys.stdout.", "typer.echo", "json.dumps", "msgspec.json.", "make_console", "Console")
OWN_OUTPUT_METHODS = (".print", ".status")  # console.print(...), console.status(...): a spinner


def test_commands_write_output_and_progress_only_through_the_common_seam():
    offenders = {}
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        if path.name in ("_common.py", "__init__.py"):
            continue
        bad = sorted(c for c in _dotted_calls(path) if c.startswith(OWN_OUTPUT) or c == "print" or c.endswith(OWN_OUTPUT_METHODS))
        if bad:
            offenders[path.name] = bad
    assert offenders == {}
    # the measurement itself: _common does write stdout and start the spinner
    assert {"sys.stdout.buffer.write", "stderr_console().status"} <= _dotted_calls(PACKAGE / "cli" / "_common.py")


def test_no_module_over_600_lines():
    # a module past this has grown two concerns: split it along the seam between them
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 600}
    assert not long, long


def test_the_tracers_and_readers_rooms_hold_at_most_15_modules_and_say_what_they_hold():
    readers = PACKAGE / "probes" / "configs" / "readers"
    folders = [PACKAGE / "tracing", readers]
    folders += [p for f in list(folders) for p in f.iterdir() if p.is_dir() and p.name != "__pycache__"]
    for folder in folders:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= 15, (folder.name, len(modules))
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        assert doc and len(doc) > 80, folder  # one paragraph: what the room holds and may import


def test_no_package_folder_holds_more_than_15_modules():
    for init in PACKAGE.rglob("__init__.py"):
        folder = init.parent
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        name = str(folder.relative_to(PACKAGE)) if folder != PACKAGE else "."
        assert len(modules) <= 15, (name, len(modules))
