"""Which module-level names and modules each torch release has, read from its Python sources with
`ast` (no import): every module's top-level functions, classes, assignments and imports, its
`__all__`, and its submodules; and the keyword arguments of its public functions (their Python
signatures, and the C functions' signatures torch's argument parser holds in libtorch_python).
`explain` reads the table (recipes/support/torch_api.json.gz) to tell code that calls a torch API a
later release added (`module 'torch.library' has no attribute 'register_fake'`, `No module named
'torch.profiler'`, `compile() got an unexpected keyword argument 'recompile_limit'`: the torch in
use predates it, upgrading fixes it) from a name every release read has (a shadowing file, a broken
install: not a version question) or none has (removed, or never torch's).

    python benchmarks/catalogue/extract_torch_api.py \\
        --source 1.7.1=torch-1.7.1-cp38-none-macosx_10_9_x86_64.whl ... \\
        --source 2.13.0=.venv-dev/lib/python3.11/site-packages [--out recipes/support/torch_api.json.gz]

A source is a wheel (any platform's: only its .py files and libtorch_python are read; macOS wheels
are the small ones, `pip download torch==X --no-deps --platform macosx_11_0_arm64 --only-binary=:all:
--python-version 3.11`) or a site-packages folder. Standard library only; the output is
byte-identical for the same sources.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import re
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "recipes" / "support" / "torch_api.json.gz"
# names are kept for public modules and for the private ones code outside torch imports by name
PRIVATE_KEPT = ("torch._dynamo", "torch._inductor", "torch._C")
SKIPPED = ("torch.testing._internal", "torch.include", "torch.share", "torch.bin", "torch.lib")


def _files(source: str):
    """(module name, source text, is a package) for each torch/**/*.py of a wheel or a site-packages folder."""
    path = Path(source)
    if path.is_file():
        with zipfile.ZipFile(path) as whl:
            for name in sorted(whl.namelist()):
                if name.startswith("torch/") and name.endswith(".py"):
                    yield _module(name), whl.read(name).decode("utf-8", "replace"), name.endswith("/__init__.py")
    else:
        for file in sorted((path / "torch").rglob("*.py")):
            yield _module(file.relative_to(path).as_posix()), file.read_text("utf-8", "replace"), file.name == "__init__.py"


def _module(relpath: str) -> str:
    parts = relpath[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _under(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _kept(module: str) -> bool:
    if _under(module, SKIPPED):
        return False
    parts = module.split(".")
    private = [p for p in parts[1:] if p.startswith("_")]
    return not private or _under(module, PRIVATE_KEPT)


def _called(module: str) -> bool:
    """A public module, whose functions code calls by keyword (the caller skips SKIPPED)."""
    return not any(p.startswith("_") for p in module.split(".")[1:])


# The C functions' signatures as torch's Python argument parser holds them in libtorch_python (the
# text it checks keywords against: "scaled_dot_product_attention(Tensor query, ..., bool
# is_causal=False)"). The .pyi stubs are not read: some were written by hand and ran ahead of the
# binding (2.0.1's stub has SDPA's scale, its parser does not).
_BINDING = re.compile(rb"(?<![\w.:])([a-z][a-z0-9_]*)\(((?:Tensor|int|SymInt|float|double|bool|Scalar|ScalarType|Dimname|Generator|"
                      rb"Layout|Device|MemoryFormat|c10|at|std|IntArrayRef|TensorList|Storage|Stream|PyObject|QScheme|"
                      rb"std::string|c10::string_view|str|\*)[^()\x00\n]{0,600})\)(?=\x00)")
_LIB = ("torch/lib/libtorch_python.so", "torch/lib/libtorch_python.dylib", "torch/lib/torch_python.dll")


def _bound_signatures(source: str) -> dict[str, set[str] | None]:
    """{C function name: its keywords} from a wheel's or a site-packages folder's libtorch_python;
    None for a function of several overloads, whose parser says "received an invalid combination
    of arguments" for an unknown keyword, never "got an unexpected keyword argument"; empty where
    there is no libtorch_python."""
    path = Path(source)
    data = b""
    if path.is_file():
        with zipfile.ZipFile(path) as whl:
            for name in whl.namelist():
                if name in _LIB:
                    data = whl.read(name)
    else:
        for name in _LIB:
            if (path / name).is_file():
                data = (path / name).read_bytes()
    overloads: dict[str, set[str]] = {}
    found: dict[str, set[str]] = {}
    for m in _BINDING.finditer(data):
        func, params = m.group(1).decode(), m.group(2).decode("ascii", "replace")
        overloads.setdefault(func, set()).add(params)
        named = set()
        for param in params.split(", "):
            words = param.split("=")[0].split()
            if len(words) >= 2 and words[-1].isidentifier():
                named.add(words[-1])
        found[func] = found.get(func, set()) | named
    return {func: (named if len(overloads[func]) == 1 else None) for func, named in found.items()}


def _top_nodes(body):
    """The statements run at a module's top level, those inside its if / try / with blocks included
    (torch defines names under `if sys.platform ...` and `try: ... except ImportError`)."""
    for node in body:
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            yield from _top_nodes(node.body)
            yield from _top_nodes(getattr(node, "orelse", []))
            for handler in getattr(node, "handlers", []):
                yield from _top_nodes(handler.body)
            yield from _top_nodes(getattr(node, "finalbody", []))
        else:
            yield node


def _top_names(text: str, module: str = "") -> tuple[set[str], list[str]]:
    """The module-level names a module defines, and the modules it star-imports (resolved later)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set(), []
    names: set[str] = set()
    stars: list[str] = []
    for node in _top_nodes(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(t.id for t in ast.walk(target) if isinstance(t, ast.Name))
                if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                    names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*" and isinstance(node, ast.ImportFrom):
                    stars.append(_absolute(module, node.module or "", node.level))
                elif alias.name != "*":
                    names.add(alias.asname or alias.name.split(".")[0])
                    # `import torch.cuda` inside torch makes cuda one of torch's attributes
                    if isinstance(node, ast.Import) and not alias.asname and module and alias.name.startswith(module + "."):
                        names.add(alias.name[len(module) + 1:].split(".")[0])
    return {n for n in names if not n.startswith("__")}, stars


def _signatures(text: str) -> dict[str, set[str] | None]:
    """The keyword arguments of each public module-level function of a module (a stub's overloads
    together); None for a function that takes **kwargs, which no keyword makes fail."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, set[str] | None] = {}
    for node in _top_nodes(tree.body):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
            continue
        args = node.args
        named = {a.arg for a in [*args.args, *args.kwonlyargs] if not a.arg.startswith("_")} - {"self", "cls"}
        if args.kwarg is not None or found.get(node.name, set()) is None:
            found[node.name] = None
        else:
            found[node.name] = found.get(node.name, set()) | named
    return found


def _absolute(module: str, target: str, level: int) -> str:
    if not level:
        return target
    base = module.split(".")[: len(module.split(".")) - level + 1] if module else []
    return ".".join([*base, target] if target else base)


def read(source: str) -> tuple[set[str], dict[str, set[str]], dict[str, set[str] | None]]:
    """The modules, each kept module's names, and the keyword arguments of each public function code
    calls ("torch.nn.functional.pad": its keywords, None where it takes **kwargs)."""
    modules: set[str] = set()
    kwargs: dict[str, set[str] | None] = {}
    names: dict[str, set[str]] = {}
    stars: dict[str, list[str]] = {}
    packages: set[str] = set()
    for module, text, is_package in _files(source):
        if _under(module, SKIPPED):
            continue
        if _called(module):
            for func, named in _signatures(text).items():
                key = f"{module}.{func}"
                known = kwargs.get(key, set())
                kwargs[key] = None if named is None or (key in kwargs and known is None) else known | named
        modules.add(module)
        if is_package:
            packages.add(module)
        # relative imports resolve against the package: the module itself for an __init__, else its parent
        own, starred = _top_names(text, module if is_package else module.rpartition(".")[0])
        names[module] = own
        stars[module] = starred
    # `from .x import *` brings x's public names (its __all__, or what it defines): resolved to a fixed point
    changed = True
    while changed:
        changed = False
        for module, targets in stars.items():
            for target in targets:
                extra = {n for n in names.get(target, set()) if not n.startswith("_")} - names[module]
                if extra:
                    names[module] |= extra
                    changed = True
    # a submodule is not an attribute of its package until something imports it: not listed as one
    return modules, {m: ns for m, ns in names.items() if _kept(m)}, kwargs


def build(sources: list[tuple[str, str]]) -> dict:
    releases = [r for r, _ in sources]
    modules: dict[str, list[int]] = {}
    names: dict[str, dict[str, list[int]]] = {}
    kwargs: dict[str, list[set[str] | None | bool]] = {}  # per function, per release: False where absent
    for i, (_, source) in enumerate(sources):
        mods, found, signatures = read(source)
        for func, named in [*signatures.items(), *((f"torch._C.{f}", k) for f, k in _bound_signatures(source).items())]:
            kwargs.setdefault(func, [False] * len(sources))[i] = named
        for m in mods:
            modules.setdefault(m, []).append(i)
        for m, ns in found.items():
            for n in ns:
                names.setdefault(m, {}).setdefault(n, []).append(i)
    last = len(releases) - 1
    # only what the newest release has and the oldest lacks can say "added later"; the rest is left out
    keep = lambda present: last in present and 0 not in present  # noqa: E731
    return {
        "kwargs": _kwargs_added(kwargs),
        "releases": releases,
        "modules": {m: min(p) for m, p in sorted(modules.items()) if keep(p)},
        "names": {m: {n: min(p) for n, p in sorted(ns.items()) if keep(p)}
                  for m, ns in sorted(names.items()) if any(keep(p) for p in ns.values())},
    }


def _kwargs_added(kwargs: dict[str, list]) -> dict[str, dict[str, int]]:
    """{function's bare name (what a TypeError prints: `compile() got an unexpected keyword argument`):
    {keyword: the first release read that takes it}} for the keywords a later release added to a
    function: the newest release takes it, the first release with the function does not, and no
    release between takes **kwargs or is one of several overloads (which accept anything, or fail
    in other words). A keyword is left out where another public function of that name in the newest
    release does not take it at all, or took it from another release: the message alone does not say
    which of them raised it."""
    by_name: dict[str, dict[str, list]] = {}
    for qualified, per_release in kwargs.items():
        by_name.setdefault(qualified.rpartition(".")[2], {})[qualified] = per_release
    added: dict[str, dict[str, int]] = {}
    sinces: dict[tuple[str, str], set[int]] = {}
    for func, functions in sorted(by_name.items()):
        # the functions of that name in the newest release that refuse a keyword they lack
        strict = [per_release[-1] for per_release in functions.values() if isinstance(per_release[-1], set)]
        for per_release in functions.values():
            present = [i for i, named in enumerate(per_release) if named is not False]
            newest = per_release[-1]
            if not present or not isinstance(newest, set) or not isinstance(per_release[present[0]], set):
                continue
            for key in sorted(newest - per_release[present[0]]):
                since = min(i for i in present if per_release[i] is None or key in per_release[i])
                if any(per_release[i] is None for i in present if i <= since):
                    continue  # a release before it took it through **kwargs, or failed in other words
                if not all(key in named for named in strict):
                    continue  # another function of this name never takes it
                sinces.setdefault((func, key), set()).add(since)
    for (func, key), found in sorted(sinces.items()):
        if len(found) == 1:  # functions of that name that took it from different releases: which one raised?
            added.setdefault(func, {})[key] = found.pop()
    return added


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", action="append", required=True, help="RELEASE=WHEEL_OR_SITE_PACKAGES, oldest first")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    sources = []
    for spec in args.source:
        release, _, where = spec.partition("=")
        if not where or not Path(where).exists():
            print(f"extract_torch_api: no such source: {spec}", file=sys.stderr)
            return 2
        sources.append((release, where))
    doc = build(sources)
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")
    with open(args.out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(data)
    added = sum(len(v) for v in doc["names"].values())
    keywords = sum(len(v) for v in doc["kwargs"].values())
    print(f"wrote {args.out}: {len(doc['releases'])} releases, {len(doc['modules'])} modules and {added} names "
          f"added after {doc['releases'][0]}; {keywords} keyword arguments of {len(doc['kwargs'])} functions added "
          f"after the first release read that has the function")
    return 0


if __name__ == "__main__":
    sys.exit(main())
