"""Python config files, read statically: the mmengine / OpenMMLab family (a `_base_` list of files,
`with read_base():` imports, `dict(...)`), and any module of plain assignments (Open-Sora's,
ColossalAI's). Nothing is imported or executed: the file is parsed with `ast` and each module-level
assignment evaluated over a small part of Python (literals, `dict()` / `list()` / `tuple()`, names
assigned before, `**` merges, arithmetic on numbers and strings, `x.update(...)`, `x[k] = v`).
A dotted name that is not a value of the file (`torch.bfloat16`, an imported class as a `type=`) is
its dotted text, as the framework's registry would name it. Anything else (a call, a
comprehension, a conditional, an environment variable) is kept as `NotEvaluated` and said, never
guessed.

The result is the config as mmengine's Config.fromfile makes it: `_base_` files read first, in
order, their dicts merged key by key with the file's own (a dict with `_delete_=True` replaces the
base's instead); in a `read_base()` config the imported names are variables and the file's own
assignments replace them, as Python does.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any, Optional

# A _base_ chain of more files than this is not a config anyone writes: read as far as that.
MAX_FILES = 64
MAX_DEPTH = 16
# Names a config defines that are not settings (mmengine drops modules, functions and dunders too).
_PRIVATE = ("__",)


class PythonConfigError(Exception):
    """The file is not Python, or a base it names cannot be read (said in one line)."""


class NotEvaluated(str):
    """A value attn-doctor does not evaluate statically: its text is the expression, shown as
    `<not evaluated: EXPR>` wherever the value is printed."""

    def __new__(cls, expr: str):
        expr = " ".join(expr.split())
        shown = expr if len(expr) <= 80 else expr[:77] + "..."
        out = super().__new__(cls, f"<not evaluated: {shown}>")
        out.expr = shown
        return out


class Symbol(str):
    """A dotted name that is not one of the file's values (`torch.bfloat16`, `AmpOptimWrapper`)."""


class PyConfig(dict):
    """The config's settings; `not_evaluated` lists the dotted keys whose values are NotEvaluated,
    `skipped` the statements that change settings and were not evaluated, `files` the files read
    (the config first, then its bases)."""

    not_evaluated: list[str]
    skipped: list[str]
    files: list[str]
    missing_bases: list[str]  # _base_ files named but not there: the settings are the rest's


def load(path: Path, text: str, read_text=None) -> PyConfig:
    """The settings of the Python config at `path` whose text is `text`. read_text(path) -> str reads
    a base file (within the caller's bounds); PythonConfigError where the file or a base cannot be
    read."""
    reader = _Reader(read_text or (lambda p: Path(p).read_text(encoding="utf-8")))
    doc = reader.file(Path(path), text, depth=0)
    out = PyConfig(doc)
    out.not_evaluated = _not_evaluated(out, "")
    out.skipped = list(reader.skipped)
    out.files = list(reader.seen)
    out.missing_bases = list(reader.missing)
    return out


def _not_evaluated(node: Any, prefix: str) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _not_evaluated(value, f"{prefix}{key}.")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _not_evaluated(value, f"{prefix}{i}.")
    elif isinstance(node, NotEvaluated):
        found.append(prefix.rstrip("."))
    return found


def merge(base: dict, child: dict) -> dict:
    """mmengine's Config._merge_a_into_b: the child's keys over the base's, dicts merged key by key
    unless the child's says `_delete_=True`."""
    out = dict(base)
    for key, value in child.items():
        if isinstance(value, dict):
            value = dict(value)
            delete = value.pop("_delete_", False) is True
            if not delete and isinstance(out.get(key), dict):
                out[key] = merge(out[key], value)
                continue
        out[key] = value
    return out


class _Reader:
    def __init__(self, read_text):
        self.read_text = read_text
        self.seen: list[str] = []  # every file read, the config first
        self.stack: list[str] = []  # the files being read (a base naming one of them is a cycle)
        self.skipped: list[str] = []  # statements that change settings and were not evaluated
        self.missing: list[str] = []  # _base_ files named that are not there (a leaf copied alone)

    def file(self, path: Path, text: str, depth: int) -> dict:
        where = os.path.abspath(path)
        if depth > MAX_DEPTH:
            raise PythonConfigError(f"its _base_ files nest deeper than {MAX_DEPTH} levels")
        if where in self.stack:
            raise PythonConfigError(f"{path.name} is its own base (through its _base_ chain)")
        if len(self.seen) >= MAX_FILES:
            raise PythonConfigError(f"its _base_ chain names more than {MAX_FILES} files")
        self.seen.append(where)
        self.stack.append(where)
        try:
            return self._file(path, text, depth)
        finally:
            self.stack.pop()

    def _file(self, path: Path, text: str, depth: int) -> dict:
        try:
            tree = ast.parse(text, filename=str(path))
        except SyntaxError as exc:
            line = (exc.text or "").strip()
            raise PythonConfigError(f"Python syntax error in {path.name} at line {exc.lineno}: {line[:80]} ({exc.msg})") from None
        except (ValueError, RecursionError, MemoryError) as exc:
            raise PythonConfigError(f"not a Python config: {path.name} ({type(exc).__name__})") from None
        env = _Env(self, path, depth)
        for stmt in tree.body:
            env.statement(stmt)
        own = {k: v for k, v in env.names.items()
               if not k.startswith(_PRIVATE) and k not in env.imported and k != "_base_" and not isinstance(v, _Module)}
        base = env.base
        if base is not None:
            return merge(base, own)
        return own

    def base_file(self, origin: Path, name: str, depth: int) -> dict:
        path = (origin.parent / name) if not os.path.isabs(name) else Path(name)
        if path.suffix != ".py":
            raise PythonConfigError(f"{origin.name}: _base_ file {name} is not a Python config (only .py bases are read)")
        try:
            text = self.read_text(path)
        except FileNotFoundError:
            # A leaf copied without its repository's _base_ folder: its own keys still decide what
            # they set (they override the bases'); what only the bases set is unknown.
            self.missing.append(name)
            return {}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise PythonConfigError(f"{origin.name}: _base_ file {name}: {str(exc) or type(exc).__name__}") from None
        return self.file(path, text, depth + 1)


class _Module:
    """An imported module or a module-level function: not a setting."""


class _Env:
    def __init__(self, reader: _Reader, path: Path, depth: int):
        self.reader, self.path, self.depth = reader, path, depth
        self.names: dict[str, Any] = {}
        self.imported: set[str] = set()  # names that came from import statements (not settings of this file)
        self.base: Optional[dict] = None

    # ---------------------------------------------------------------- statements
    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            value = self.value(stmt.value)
            for target in stmt.targets:
                self.assign(target, value)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.assign(stmt.target, self.value(stmt.value))
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            left = self.names.get(stmt.target.id)
            self.names[stmt.target.id] = self.binop(stmt.op, left, self.value(stmt.value), stmt)
        elif isinstance(stmt, ast.With) and any(self.is_read_base(item.context_expr) for item in stmt.items):
            for inner in stmt.body:
                if isinstance(inner, ast.ImportFrom):
                    self.import_base(inner)
                else:
                    self.statement(inner)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name == "*":
                    continue  # what it brings is not known without importing it
                if isinstance(stmt, ast.ImportFrom):  # a class or function: a `type=` names it so
                    self.names[alias.asname or alias.name] = Symbol(alias.name)
                else:
                    self.names[alias.asname or alias.name.split(".")[0]] = _Module()
                self.imported.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.names[stmt.name] = _Module()
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self.method_call(stmt.value)
        # if / for / try / while at module level: not followed (what they set is not evaluated)
        elif isinstance(stmt, (ast.If, ast.For, ast.While, ast.Try)):
            for target in _assigned_names(stmt):
                self.names[target] = NotEvaluated(f"{target} set under {type(stmt).__name__.lower()} at line {stmt.lineno}")

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
            self.imported.discard(target.id)
            if target.id == "_base_":
                self.read_bases(value, target)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            holder = self.ref(target.value)
            key = self.value(target.slice) if isinstance(target, ast.Subscript) else target.attr
            if isinstance(holder, dict) and isinstance(key, (str, int)) and not isinstance(key, NotEvaluated):
                holder[key] = value
            elif isinstance(holder, list) and isinstance(key, int) and -len(holder) <= key < len(holder):
                holder[key] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value if isinstance(value, list) and len(value) == len(target.elts) else None
            for i, element in enumerate(target.elts):
                self.assign(element, values[i] if values is not None else NotEvaluated(ast.unparse(element)))

    def read_bases(self, value: Any, node: ast.AST) -> None:
        names = [value] if isinstance(value, str) else value if isinstance(value, list) else None
        if names is None or not all(isinstance(n, str) and not isinstance(n, NotEvaluated) for n in names):
            raise PythonConfigError(f"{self.path.name}: _base_ is not a file name or a list of them (line {node.lineno})")
        base: dict = dict(self.base or {})
        for name in names:
            got = self.reader.base_file(self.path, name, self.depth)
            # mmengine refuses two bases that set the same key; the later one is kept here
            base.update(got)
        self.base = base
        self.names["_base_"] = base

    def is_read_base(self, expr: ast.expr) -> bool:
        return isinstance(expr, ast.Call) and _dotted(expr.func) in ("read_base", "mmengine.config.read_base",
                                                                      "mmengine.read_base")

    def import_base(self, node: ast.ImportFrom) -> None:
        module = (node.module or "").split(".") if node.module else []
        if node.level:
            folder = self.path.parent
            for _ in range(node.level - 1):
                folder = folder.parent
            target = folder.joinpath(*module)
        else:
            # a package's config by its module name (mmagic.configs.x): the file in the source tree
            # the config sits in, where one of its folders holds that module
            target = next((parent.joinpath(*module) for parent in self.path.parents
                           if parent.joinpath(*module).with_suffix(".py").is_file()), None)
            if target is None:
                for alias in node.names:
                    name = alias.asname or alias.name
                    self.reader.skipped.append(f"from {node.module} import {alias.name} (line {node.lineno}): "
                                               "not a file in this source tree")
                    if name != "*":
                        self.names[name] = NotEvaluated(f"{alias.name} from {node.module}")
                return
        relative = os.path.relpath(target, self.path.parent) + ".py"
        got = self.reader.base_file(self.path, relative, self.depth)
        for alias in node.names:
            if alias.name == "*":
                for key, value in got.items():
                    self.names[key] = value
            elif alias.name in got:
                self.names[alias.asname or alias.name] = got[alias.name]

    def method_call(self, call: ast.Call) -> None:
        """`x.update(...)` / `x.merge(...)` on a dict of the file: mmengine's ConfigDict merges key by
        key in both."""
        if not (isinstance(call.func, ast.Attribute) and call.func.attr in ("update", "merge")):
            return
        holder = self.ref(call.func.value)
        if not isinstance(holder, dict):
            return
        update = self.call_dict(call)
        if not isinstance(update, dict):
            self.reader.skipped.append(f"{ast.unparse(call)[:80]} (line {call.lineno})")
            return
        merged = merge(holder, update)  # ConfigDict's update merges key by key, as merge does
        holder.clear()
        holder.update(merged)

    # ---------------------------------------------------------------- expressions
    def ref(self, node: ast.AST) -> Any:
        """The file's own dict or list that `node` names (a name, `x.key`, `x['key']`), to change in
        place; None where it names none."""
        if isinstance(node, ast.Name):
            got = self.names.get(node.id)
            return got if isinstance(got, (dict, list)) else None
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            holder = self.ref(node.value)
            key = node.attr if isinstance(node, ast.Attribute) else self.value(node.slice)
            if isinstance(holder, dict) and isinstance(key, (str, int)) and key in holder:
                got = holder[key]
            elif isinstance(holder, list) and isinstance(key, int) and -len(holder) <= key < len(holder):
                got = holder[key]
            else:
                return None
            return got if isinstance(got, (dict, list)) else None
        return None

    def value(self, node: ast.AST) -> Any:
        try:
            return self._value(node)
        except RecursionError:
            return NotEvaluated("(nested too deep)")

    def _value(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value if not isinstance(node.value, bytes) else NotEvaluated(ast.unparse(node))
        if (isinstance(node, ast.Set) and len(node.elts) == 1 and isinstance(node.elts[0], ast.Set)
                and len(node.elts[0].elts) == 1):
            # mmengine's `{{_base_.key}}`: the base's value, substituted before the file runs
            inner = node.elts[0].elts[0]
            dotted = _dotted(inner) or ""
            if dotted.startswith("_base_.") and isinstance(self.base, dict):
                got: Any = self.base
                for part in dotted.split(".")[1:]:
                    got = got.get(part) if isinstance(got, dict) else None
                return _copy(got) if got is not None else NotEvaluated(ast.unparse(node))
            return NotEvaluated(ast.unparse(node))
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    inner = self.value(element.value)
                    if not isinstance(inner, list):
                        return NotEvaluated(ast.unparse(node))
                    out.extend(inner)
                else:
                    out.append(self.value(element))
            return out
        if isinstance(node, ast.Dict):
            out: dict = {}
            for key, value in zip(node.keys, node.values):
                if key is None:  # {**other}
                    inner = self.value(value)
                    if not isinstance(inner, dict):
                        return NotEvaluated(ast.unparse(node))
                    out.update(inner)
                    continue
                k = self.value(key)
                if not isinstance(k, (str, int, float, bool)) or isinstance(k, NotEvaluated):
                    return NotEvaluated(ast.unparse(node))
                out[k] = self.value(value)
            return out
        if isinstance(node, ast.Name):
            if node.id in self.names:
                got = self.names[node.id]
                return NotEvaluated(node.id) if isinstance(got, _Module) else _copy(got)
            return NotEvaluated(node.id)
        if isinstance(node, ast.Attribute):
            holder = self.value(node.value) if not _is_symbolic(node.value, self.names) else None
            if isinstance(holder, dict) and node.attr in holder:
                return _copy(holder[node.attr])
            dotted = _dotted(node)
            if dotted is not None and (holder is None or isinstance(holder, Symbol)):
                return Symbol(dotted)
            return NotEvaluated(ast.unparse(node))
        if isinstance(node, ast.Subscript):
            holder = self.value(node.value)
            key = self.value(node.slice)
            if isinstance(holder, dict) and isinstance(key, (str, int)) and key in holder:
                return _copy(holder[key])
            if isinstance(holder, list) and isinstance(key, int) and -len(holder) <= key < len(holder):
                return _copy(holder[key])
            return NotEvaluated(ast.unparse(node))
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in ("dict", "ConfigDict", "mmengine.ConfigDict", "mmengine.config.ConfigDict"):
                return self.call_dict(node)
            if name in ("list", "tuple") and len(node.args) == 1 and not node.keywords:
                inner = self.value(node.args[0])
                return list(inner) if isinstance(inner, list) else NotEvaluated(ast.unparse(node))
            return NotEvaluated(ast.unparse(node))
        if isinstance(node, ast.UnaryOp):
            operand = self.value(node.operand)
            if isinstance(node.op, ast.USub) and _number(operand):
                return -operand
            if isinstance(node.op, ast.UAdd) and _number(operand):
                return operand
            if isinstance(node.op, ast.Not) and isinstance(operand, (bool, int)) and not isinstance(operand, NotEvaluated):
                return not operand
            return NotEvaluated(ast.unparse(node))
        if isinstance(node, ast.BinOp):
            return self.binop(node.op, self.value(node.left), self.value(node.right), node)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for piece in node.values:
                if isinstance(piece, ast.Constant):
                    parts.append(str(piece.value))
                elif isinstance(piece, ast.FormattedValue) and piece.format_spec is None and piece.conversion == -1:
                    got = self.value(piece.value)
                    if isinstance(got, NotEvaluated) or not isinstance(got, (str, int, float)):
                        return NotEvaluated(ast.unparse(node))
                    parts.append(str(got))
                else:
                    return NotEvaluated(ast.unparse(node))
            return "".join(parts)
        return NotEvaluated(ast.unparse(node))

    def call_dict(self, node: ast.Call) -> Any:
        out: dict = {}
        for arg in node.args:
            inner = self.value(arg)
            if not isinstance(inner, dict) or len(node.args) > 1:
                return NotEvaluated(ast.unparse(node))
            out.update(inner)
        for keyword in node.keywords:
            if keyword.arg is None:  # dict(**other)
                inner = self.value(keyword.value)
                if not isinstance(inner, dict):
                    return NotEvaluated(ast.unparse(node))
                out.update(inner)
            else:
                out[keyword.arg] = self.value(keyword.value)
        return out

    def binop(self, op: ast.operator, left: Any, right: Any, node: ast.AST) -> Any:
        if isinstance(left, NotEvaluated) or isinstance(right, NotEvaluated) or isinstance(left, Symbol) or isinstance(right, Symbol):
            return NotEvaluated(ast.unparse(node))
        try:
            if _number(left) and _number(right):
                if isinstance(op, ast.Pow) and abs(right) > 64:
                    return NotEvaluated(ast.unparse(node))
                ops = {ast.Add: lambda: left + right, ast.Sub: lambda: left - right, ast.Mult: lambda: left * right,
                       ast.Div: lambda: left / right, ast.FloorDiv: lambda: left // right, ast.Mod: lambda: left % right,
                       ast.Pow: lambda: left ** right}
                if type(op) in ops:
                    return ops[type(op)]()
            if isinstance(op, ast.Add) and type(left) in (str, list) and type(left) is type(right):
                if len(left) + len(right) <= 1 << 16:
                    return left + right
        except (ArithmeticError, ValueError):
            pass
        return NotEvaluated(ast.unparse(node))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _copy(value: Any) -> Any:
    """A fresh copy of a dict or list value (Python would share it; mmengine's merge copies)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _dotted(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def _is_symbolic(node: ast.AST, names: dict) -> bool:
    """A dotted name whose head is not one of the file's values: a module or an undefined name."""
    while isinstance(node, ast.Attribute):
        node = node.value
    if not isinstance(node, ast.Name):
        return False
    got = names.get(node.id)
    return got is None or isinstance(got, (_Module, Symbol))


def _assigned_names(stmt: ast.stmt) -> list[str]:
    out = []
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [t.id for t in targets if isinstance(t, ast.Name)]
    return out
