"""The structure of attn_doctor, drawn from the code's own imports and from one traced check.

    python benchmarks/structure.py [--root DIR]

Run it on two trees (before and after a restructure) and compare the printouts. Every number is
defined here, so that both are measured the same way:

- imports: every import statement between attn_doctor's modules, as import-linter reads them
  (grimp, the graph the layering contract is checked on): function-level and `if TYPE_CHECKING:`
  imports included, the latter also counted on their own; `from pkg import name` is an import of
  pkg.name where that is a module, else of pkg.
- rooms: attn_doctor's top-level modules (not __init__) and its subpackages; a module belongs to the
  room it lies in. The package root (attn_doctor/__init__.py) is no room.
- floors: the room import graph with each cycle collapsed to one node; the number of rooms on its
  longest path (a room that imports nothing is floor 1).
- circles: strongly connected components of the module (file-level) import graph with more than one
  member.
- room circles (strict): strongly connected components of the room import graph (an edge for every
  import between two rooms, function-level and TYPE_CHECKING ones included) with more than one
  room, whatever the layering contract allows between siblings or exempts: rooms that can only be
  understood together.
- upward imports: imports from a room into a room of a higher layer of LAYERS below (the layering
  contract, kept the same as pyproject's [tool.importlinter]), or between rooms of one layer that
  the layer keeps independent. Rooms not named in LAYERS are reported as unplaced. The same LAYERS
  measure every tree.
- lines: physical lines of every module; the total and each module over 450 and over 900 lines.
- the walk of run_check: `attn_doctor.core.run_check` as `check --from-report FIXTURE --config
  CONFIG --output DIR/report-{host}.json` runs it (no probes, no GPU), under sys.setprofile. A call is recorded when one of
  its arguments (its frame's locals at call time) is the options' data: the options object given,
  or any CheckOptions returned by a call that received it (the validated copy), or a field value of
  one of those or an item of such a field (a Path, a Target, the configs tuple, a config's path, the
  --output template...; a list or tuple holding any of these counts too; not None, booleans, numbers, strings
  that are identifiers (interned, so shared), empty containers, nor a value also bound at an attn_doctor module's top level, such as
  the CLI Naming: those are shared by everything). The walk is the modules of the recorded calls
  in order, with consecutive calls in one module collapsed into one stay.
  stays: the walk's length; rooms: distinct modules in it; returns: stays in a module the walk had
  already left; climbs: stays in a module of a higher layer than the stay before (data going back
  up the layering).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "attn_doctor"
FIXTURE = "tests/fixtures/facts/h100.json"
CONFIG = "tests/fixtures/configs"

# The layering, lowest first. A layer is a list of groups; rooms of one group may import each other,
# groups of one layer may not (import-linter's `|`: independent siblings). Mirrors pyproject.toml,
# where every group is one room now (no `:`) and no import is exempted (no ignore_imports).
LAYERS = [
    [["errors"], ["facts"], ["boundary"], ["bytecode"], ["cache"], ["schemas"]],
    [["failures"], ["gpus"]],
    [["tracing"]],
    [["probes"]],
    [["rules"]],
    [["remedies"], ["report"]],
    [["diagnosis"]],
    [["options"]],
    [["gather"]],
    [["core"]],
    [["fleet"], ["fix"], ["explaining"]],
    [["results"]],
    [["findings"]],
    [["api"]],
    [["integrations"]],
    [["render"]],
    [["cli"]],
    [["__main__"]],
]


def module_name(path: Path, package_dir: Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def collect_modules(package_dir: Path) -> dict[str, Path]:
    return {module_name(p, package_dir): p for p in sorted(package_dir.rglob("*.py"))}


def import_edges(modules: dict[str, Path]) -> list[tuple[str, str, int, bool]]:
    """(importer, imported, line, under TYPE_CHECKING only) for each import statement between
    attn_doctor modules, as import-linter sees them (grimp: function-level imports included)."""
    import grimp

    full = grimp.build_graph(PACKAGE, cache_dir=None)
    plain = grimp.build_graph(PACKAGE, cache_dir=None, exclude_type_checking_imports=True)
    edges = []
    for importer in sorted(full.modules):
        if importer not in modules:
            raise SystemExit(f"grimp found {importer}, which is not a file under --root: run from that tree")
        for imported in sorted(full.find_modules_directly_imported_by(importer)):
            at_run_time = {d["line_number"] for d in plain.get_import_details(importer=importer, imported=imported)}
            for detail in full.get_import_details(importer=importer, imported=imported):
                edges.append((importer, imported, detail["line_number"], detail["line_number"] not in at_run_time))
    return edges


def room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def strict_room_circles(room_graph: dict[str, set[str]]) -> list[list[str]]:
    """The room graph's strongly connected components of more than one room: rooms that import one
    another, directly or around a circle, counting every import (in functions and under
    TYPE_CHECKING too) whatever the layering contract allows or exempts."""
    return [c for c in strongly_connected(room_graph) if len(c) > 1]


def floors(graph: dict[str, set[str]]) -> int:
    components = strongly_connected(graph)
    where = {m: i for i, c in enumerate(components) for m in c}
    dag: dict[int, set[int]] = defaultdict(set)
    for a, bs in graph.items():
        for b in bs:
            if where[a] != where[b]:
                dag[where[a]].add(where[b])
    memo: dict[int, int] = {}

    def height(node: int) -> int:  # the DAG is small: recursion is fine
        if node not in memo:
            memo[node] = 1 + max((height(n) for n in dag[node]), default=0)
        return memo[node]

    return max((height(i) for i in range(len(components))), default=0)


def layer_of(room: str) -> tuple[int, int] | None:
    for level, groups in enumerate(LAYERS):
        for group_index, group in enumerate(groups):
            if room in group:
                return level, group_index
    return None


def upward(a: str, b: str) -> bool:
    la, lb = layer_of(a), layer_of(b)
    if la is None or lb is None:
        return False
    return lb[0] > la[0] or (lb[0] == la[0] and lb[1] != la[1])


def static_structure(package_dir: Path) -> None:
    modules = collect_modules(package_dir)
    edges = import_edges(modules)
    module_graph: dict[str, set[str]] = {m: set() for m in modules}
    room_graph: dict[str, set[str]] = defaultdict(set)
    rooms = sorted({r for m in modules if (r := room_of(m))})
    for r in rooms:
        room_graph[r]
    for a, b, _line, _typing in edges:
        module_graph[a].add(b)
        ra, rb = room_of(a), room_of(b)
        if ra and rb and ra != rb:
            room_graph[ra].add(rb)
    packages = [r for r in rooms if (package_dir / r).is_dir()]
    print(f"rooms: {len(rooms)} ({len(rooms) - len(packages)} modules + {len(packages)} packages)")
    print(f"floors: {floors(room_graph)}")
    typing_edges = [(a, b) for a, b, _l, t in edges if t]
    print(f"imports between attn_doctor modules: {len(edges)} ({len(typing_edges)} under TYPE_CHECKING)")
    for a, b in sorted(typing_edges):
        print(f"  TYPE_CHECKING: {a} -> {b}")
    circles = [c for c in strongly_connected(module_graph) if len(c) > 1]
    print(f"circles: {len(circles)}")
    for circle in circles:
        print(f"  {' , '.join(circle)}")
    room_circles = strict_room_circles(room_graph)
    print(f"room circles (strict: every import between rooms, no sibling allowance, no exemption): {len(room_circles)}")
    for circle in room_circles:
        print(f"  {' , '.join(circle)}")
    unplaced = [r for r in rooms if layer_of(r) is None]
    if unplaced:
        print(f"unplaced rooms (not in LAYERS): {', '.join(unplaced)}")
    up = sorted({(a, b, line, t) for a, b, line, t in edges if room_of(a) and room_of(b) and upward(room_of(a), room_of(b))})
    print(f"upward imports: {len(up)} ({len({(a, b) for a, b, _l, _t in up})} module pairs)")
    for a, b, line, t in up:
        print(f"  {modules[a].relative_to(package_dir.parent)}:{line}  {a} -> {b}{'  (TYPE_CHECKING)' if t else ''}")
    counts = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules.items()}
    print(f"lines: {sum(counts.values())} in {len(counts)} files")
    for limit in (900, 450):
        over = sorted(((n, c) for n, c in counts.items() if c > limit), key=lambda x: -x[1])
        print(f"  over {limit}: {len(over)}" + "".join(f"\n    {c:5d} {n}" for n, c in over))


def walk_of_run_check(root: Path) -> None:
    from dataclasses import fields
    from types import ModuleType

    import attn_doctor
    from attn_doctor import core
    from attn_doctor.options import CheckOptions

    if not Path(attn_doctor.__file__).resolve().is_relative_to(root):
        sys.exit(f"attn_doctor imported from {attn_doctor.__file__}, not from {root}: run from that tree")

    import tempfile

    config = sorted((root / CONFIG).glob("*.json"))[:1]
    output = tempfile.mkdtemp(prefix="attn-doctor-structure-") + "/report-{host}.json"
    options = CheckOptions(facts_file=root / FIXTURE, configs=tuple(str(p) for p in config), output=output)
    skip_types = (type(None), bool, int, float, complex)

    # Everything bound at an attn_doctor module's top level (CLI, API, default constants) is shared
    # by every caller: its identity says nothing about where the options went.
    def shared() -> set[int]:
        ids = set()
        for name, module in list(sys.modules.items()):
            if name.startswith(PACKAGE) and isinstance(module, ModuleType):
                ids.update(id(v) for v in vars(module).values())
        return ids

    tracked: dict[int, object] = {}

    def track(value, constants: set[int]) -> None:
        if isinstance(value, skip_types) or id(value) in constants:
            return
        if isinstance(value, str) and value.isidentifier():  # a name such as "error": interned, shared
            return
        if isinstance(value, (tuple, list, dict, set, frozenset, str)) and not value:
            return
        tracked[id(value)] = value  # kept alive: its id is not reused while the walk runs
        if isinstance(value, CheckOptions):
            for f in fields(value):
                track(getattr(value, f.name), constants)
        elif isinstance(value, (tuple, list)):
            for item in value:
                track(item, constants)

    def carries(value) -> bool:
        """The options' data, or a list or tuple holding some (a copy of the configs tuple)."""
        if id(value) in tracked:
            return True
        return isinstance(value, (tuple, list)) and any(id(v) in tracked for v in value[:64])

    constants = shared()
    track(options, constants)
    walk: list[tuple[str, str]] = []
    received: set[int] = set()  # frames given the options' data, whose returned CheckOptions is tracked

    def profile(frame, event, arg):
        if event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(PACKAGE):
            return
        if event == "return":
            if id(frame) in received:
                received.discard(id(frame))
                if isinstance(arg, CheckOptions):
                    track(arg, constants)
            return
        if any(carries(v) for v in list(frame.f_locals.values())):
            received.add(id(frame))
            walk.append((module, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        core.run_check(options)
    finally:
        sys.setprofile(None)

    stays: list[tuple[str, list[str]]] = []
    for module, function in walk:
        short = module.removeprefix(PACKAGE + ".").replace(".", "/")
        if stays and stays[-1][0] == short:
            if function not in stays[-1][1]:
                stays[-1][1].append(function)
        else:
            stays.append((short, [function]))
    seen: set[str] = set()
    returns = climbs = 0
    previous = None
    for short, _functions in stays:
        if short in seen:
            returns += 1
        seen.add(short)
        room = short.split("/")[0]
        if previous is not None and layer_of(room) and layer_of(previous) and layer_of(room)[0] > layer_of(previous)[0]:
            climbs += 1
        previous = room
    given = f"--from-report {FIXTURE}" + (f" --config {config[0].relative_to(root)}" if config else "") + " --output DIR/report-{host}.json"
    print(f"walk of run_check ({given}):")
    for short, functions in stays:
        print(f"  {short}: {', '.join(functions)}")
    print(f"  {' -> '.join(s for s, _f in stays)}")
    print(f"  {len(stays)} stays in {len(seen)} rooms (modules), {climbs} climbs back up, {returns} returns")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository to measure (default: this one)")
    args = parser.parse_args()
    root = args.root.resolve()
    sys.path.insert(0, str(root))  # grimp and the walk import the package from the tree measured
    static_structure(root / PACKAGE)
    walk_of_run_check(root)


if __name__ == "__main__":
    main()
