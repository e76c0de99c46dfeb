"""A minimal patch for a bad sink: cast q/k/v back to one half dtype right before the call.

The promotion itself may stay (VAR's fix, commit 74138aa, did exactly this); the cast is the
smallest change that makes the kernel accept its inputs. Returned as unified diff text that
``patch -p1`` / ``git apply`` accept, or None where the call cannot be found or its arguments
are not plain names.
"""

from __future__ import annotations

import ast
import difflib
import os


def _call_name(func):
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _find_call(tree, line, names):
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno <= line <= getattr(node, "end_lineno", node.lineno):
            if _call_name(node.func) in names:
                if best is None or node.lineno >= best.lineno:
                    best = node
    return best


def _enclosing_statement(tree, call):
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With,
                       ast.Try, ast.AsyncWith, ast.AsyncFor)):
            if node.lineno <= call.lineno and getattr(node, "end_lineno", node.lineno) >= getattr(
                    call, "end_lineno", call.lineno):
                if best is None or node.lineno >= best.lineno:
                    best = node
    return best


def _arg(call, pos, key):
    for kw in call.keywords:
        if kw.arg == key:
            return kw.value
    if pos is not None and pos < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
        return call.args[pos]
    return None


def display_path(path, cwd=None):
    cwd = os.path.abspath(cwd or os.getcwd())
    apath = os.path.abspath(path)
    if apath.startswith(cwd + os.sep):
        return os.path.relpath(apath, cwd)
    return apath


def parsed_source(file):
    """(the text, its AST) of a source file a patch edits; (None, None) where it cannot be read
    or parsed (a patch is then not offered)."""
    if not file or not os.path.isfile(file):
        return None, None
    try:
        with open(file, encoding="utf-8") as fh:
            text = fh.read()
        return text, ast.parse(text)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None, None


# Calls that keep a tensor's dtype: casting the name they start from casts the argument.
_SAME_DTYPE_METHODS = frozenset({"transpose", "permute", "contiguous", "view", "reshape", "flatten", "unflatten",
                                 "unsqueeze", "squeeze", "expand", "movedim", "swapaxes", "narrow", "clone"})


def _root_name(node):
    """The variable an argument is made from by dtype-keeping steps (``q``, ``q.transpose(1, 2)``,
    ``q[:, :n].contiguous()``), or None."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Subscript):
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _SAME_DTYPE_METHODS):
            node = node.func.value
        else:
            return None


def sink_patch(file, line, call_names, roles, dtypes, target, cwd=None, rule_id="AD601"):
    """Diff text casting the q/k/v arguments whose dtype differs from ``target`` to it.

    ``roles``: {"q": (pos, keyword), ...}; ``dtypes``: role -> dtype name; ``target``: dtype name.
    """
    if target is None:
        return None
    text, tree = parsed_source(file)
    if tree is None:
        return None
    call = _find_call(tree, line, set(call_names))
    if call is None:
        return None
    stmt = _enclosing_statement(tree, call)
    if stmt is None:
        return None
    exprs = {}
    for role, (pos, key) in roles.items():
        name = _root_name(_arg(call, pos, key))
        if name is None:
            return None
        exprs[role] = name
    # A name that already holds the target dtype gives the cast its dtype; else spell it out.
    source_name = next((exprs[r] for r in ("v", "q", "k") if r in exprs and dtypes.get(r) == target), None)
    if source_name is not None:
        dtype_expr = source_name + ".dtype"
    elif "import torch" in text:
        dtype_expr = "torch." + target
    else:
        return None
    to_cast = []
    for role in ("q", "k", "v"):
        if role in exprs and dtypes.get(role) != target and exprs[role] not in to_cast:
            to_cast.append(exprs[role])
    if not to_cast:
        return None
    lines = text.splitlines(True)
    first = lines[stmt.lineno - 1]
    indent = first[: len(first) - len(first.lstrip())]
    new_line = "%s%s = %s  # attn-doctor %s: the kernel needs one half dtype\n" % (
        indent, ", ".join(to_cast), ", ".join("%s.to(%s)" % (n, dtype_expr) for n in to_cast), rule_id)
    new_lines = lines[: stmt.lineno - 1] + [new_line] + lines[stmt.lineno - 1:]
    path = display_path(file, cwd)
    # Relative paths get git's a/ b/ prefixes (git apply, patch -p1); absolute ones stay as they are.
    old, new = (path, path) if os.path.isabs(path) else ("a/" + path, "b/" + path)
    diff = difflib.unified_diff(lines, new_lines, fromfile=old, tofile=new, n=3)
    out = "".join(diff)
    return out or None


def line_patch(file, line, old, new, cwd=None):
    """Diff text replacing ``old`` by ``new`` on one line of ``file`` (the first occurrence), or
    None where the line does not hold ``old``: a one-line fix as `git apply` / `patch -p1` take it."""
    if not file or not os.path.isfile(file):
        return None
    try:
        with open(file, encoding="utf-8") as fh:
            lines = fh.readlines()
    except (OSError, UnicodeDecodeError):
        return None
    if not (0 < line <= len(lines)) or old not in lines[line - 1]:
        return None
    new_lines = list(lines)
    new_lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path = display_path(file, cwd)
    a, b = (path, path) if os.path.isabs(path) else ("a/" + path, "b/" + path)
    return "".join(difflib.unified_diff(lines, new_lines, fromfile=a, tofile=b, n=3)) or None
