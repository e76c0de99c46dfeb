"""Where a dtype was decided: a tensor made (``torch.zeros(..., dtype=dtype)``) or cast
(``x.to(self.dtype)``) with a dtype held in a variable got it from the line that set that variable
(``dtype = torch.bfloat16 if device.type == "cuda" else torch.float32``). That line, not the one
that made the tensor, is what a user changes. Read statically from the source (``ast``): the
variable's last assignment before the line in the same function, or ``self.NAME``'s assignment in
the class, followed through plain renames."""

from __future__ import annotations

import ast
import linecache
from typing import Optional

_FOLLOW = 4  # renames followed (dtype = self.dtype; self.dtype = config_dtype; ...)
_MAX_SOURCE = 2_000_000  # a generated file this large is not read


def _tree(file: str):
    lines = linecache.getlines(file)
    if not lines or sum(len(line) for line in lines) > _MAX_SOURCE:
        return None
    try:
        return ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None


_CACHE: dict = {}


def _parsed(file: str):
    if file not in _CACHE:
        _CACHE[file] = _tree(file)
    return _CACHE[file]


def _enclosing(tree, line: int):
    """The innermost function and class holding ``line``."""
    func = klass = None
    for node in ast.walk(tree):
        if not (getattr(node, "lineno", 0) <= line <= (getattr(node, "end_lineno", 0) or 0)):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (func is None or node.lineno > func.lineno):
            func = node
        elif isinstance(node, ast.ClassDef) and (klass is None or node.lineno > klass.lineno):
            klass = node
    return func, klass


def _dtype_expr(tree, line: int):
    """The dtype expression of the call on ``line``: a ``dtype=`` keyword, or ``.to(X)`` / ``.type(X)``'s
    argument."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not (node.lineno <= line <= (node.end_lineno or node.lineno)):
            continue
        for kw in node.keywords:
            if kw.arg == "dtype":
                return kw.value
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("to", "type") and node.args:
            arg = node.args[0]
            if isinstance(arg, (ast.Name, ast.Attribute)) and not _is_literal_dtype(arg):
                return arg
    return None


def _is_literal_dtype(expr) -> bool:
    """torch.float32, torch.bfloat16, ...: the line itself decides."""
    return (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "torch"
            and ("float" in expr.attr or expr.attr in ("half", "double")))


def _self_attr(expr) -> Optional[str]:
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return expr.attr
    return None


def _targets(node):
    if isinstance(node, ast.Assign):
        return node.targets, node.value
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
        return [node.target], node.value
    return [], None


def _assignment(scope, match, before: Optional[int]):
    """The last assignment in ``scope`` (before line ``before`` if given) whose target ``match`` accepts."""
    best = None
    for node in ast.walk(scope):
        targets, value = _targets(node)
        if value is None or (before is not None and node.lineno >= before):
            continue
        for target in targets:
            if match(target) and (best is None or node.lineno > best.lineno):
                best = node
    return best


def _argument(tree, line: int, func, param: str):
    """The expression a call on ``line`` passes for ``func``'s parameter ``param``."""
    names = [a.arg for a in func.args.posonlyargs + func.args.args]
    callee = func.name
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not (node.lineno <= line <= (node.end_lineno or node.lineno)):
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if callee != "__init__" and called != callee:
            continue
        for kw in node.keywords:
            if kw.arg == param:
                return kw.value
        offset = 1 if names and names[0] in ("self", "cls") else 0
        index = names.index(param) - offset if param in names else -1
        if 0 <= index < len(node.args) and not any(isinstance(a, ast.Starred) for a in node.args[:index + 1]):
            return node.args[index]
    return None


def decided_at(file: Optional[str], line: Optional[int], callers=()) -> Optional[dict]:
    """{"file", "line", "source", "variable", "test"} of the line that chose the dtype a tensor was made
    or cast with on ``file:line``, or None when that line names the dtype itself (or cannot be read).
    ``callers``: [(file, line)] of the calls above it, innermost first, for a dtype passed in as an
    argument. ``test``: the choice depends on a condition (``X if cond else Y``)."""
    if not file or not line:
        return None
    tree = _parsed(file)
    if tree is None:
        return None
    expr = _dtype_expr(tree, line)
    if expr is None or _is_literal_dtype(expr):
        return None
    found = None
    at = line
    callers = list(callers)
    for _ in range(_FOLLOW):
        func, klass = _enclosing(tree, at)
        node = None
        name = None
        if isinstance(expr, ast.Name) and func is not None:
            name = expr.id
            node = _assignment(func, lambda t, n=name: isinstance(t, ast.Name) and t.id == n, at)
            params = {a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs}
            if node is None and name in params and callers:
                # passed in: the caller's argument decides, read in the caller's file
                caller_file, caller_line = callers.pop(0)
                caller_tree = _parsed(caller_file)
                passed = _argument(caller_tree, caller_line, func, name) if caller_tree is not None else None
                if passed is None:
                    break
                if _is_literal_dtype(passed):
                    return {"file": caller_file, "line": caller_line,
                            "source": (linecache.getline(caller_file, caller_line) or "").strip(),
                            "variable": name, "test": False}
                file, tree, expr, at = caller_file, caller_tree, passed, caller_line
                continue
        elif _self_attr(expr) and klass is not None:
            name = "self." + _self_attr(expr)
            node = _assignment(klass, lambda t, a=_self_attr(expr): _self_attr(t) == a, None)
        if node is None:
            break
        found = {"file": file, "line": node.lineno, "source": (linecache.getline(file, node.lineno) or "").strip(),
                 "variable": name, "test": isinstance(node.value, (ast.IfExp, ast.BoolOp))}
        expr, at = node.value, node.lineno
        if not isinstance(expr, (ast.Name, ast.Attribute)) or _is_literal_dtype(expr):
            break
    return found
