"""Loading recipes: TOML files validated against the schema in model.py, with errors that name
the file, the rule and the key."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import msgspec
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from .checks import CHECKS
from .model import Condition, RecipeFile, Rule



class RecipeError(Exception):
    """A recipe file is not valid: the message names the file and what is wrong."""


@dataclass
class Recipes:
    rules: list[Rule] = field(default_factory=list)
    data: dict = field(default_factory=dict)
    sources: dict[str, Path] = field(default_factory=dict)  # rule id -> file
    raw: dict[str, dict] = field(default_factory=dict, repr=False)  # file name -> its parsed TOML

    def get(self, key: str) -> Optional[Rule]:
        key_l = key.lower()
        return next((r for r in self.rules if r.id.lower() == key_l or r.name == key_l), None)

    def unknown(self, keys, option: str) -> Optional[str]:
        """The one-line usage error for the first of keys (rule ids or names) that names no rule,
        with the closest ids and names; None when every key names a rule."""
        import difflib

        for key in keys:
            if self.get(key) is None:
                names = [r.id for r in self.rules] + [r.name for r in self.rules]
                close = difflib.get_close_matches(key.upper() if key[:2].lower() == "ad" else key.lower(), names, n=3, cutoff=0.6)
                hint = f"; did you mean {' or '.join(close)}?" if close else ""
                return f"{option} {key}: no such rule{hint} (`attn-doctor rules` lists them)"
        return None

    def select(self, only=(), skip=()) -> "Recipes":
        """These recipes with only the rules named in `only` (all when empty), less those in `skip`."""
        wanted = {self.get(k).id for k in only} if only else {r.id for r in self.rules}
        wanted -= {self.get(k).id for k in skip}
        return Recipes(rules=[r for r in self.rules if r.id in wanted], data=self.data,
                       sources={k: v for k, v in self.sources.items() if k in wanted})


def load_selected(directory: Optional[Path] = None, only=(), skip=()) -> Recipes:
    """The recipes a check judges by: those in `directory` (default: the shipped ones), validated,
    then only the rules `only` names (all when empty), less those `skip` names. Raises RecipeError
    for an invalid recipe and UsageError for an --only / --skip naming no rule."""
    from ..errors import UsageError

    recipes = load_recipes(directory)
    if only or skip:
        unknown = recipes.unknown(only, "--only") or recipes.unknown(skip, "--skip")
        if unknown:
            raise UsageError(unknown)
        recipes = recipes.select(only, skip)
    return recipes


def default_recipes_dir() -> Path:
    package_dir = Path(__file__).resolve().parent.parent
    shipped = package_dir / "recipes"  # inside an installed wheel
    if shipped.is_dir():
        return shipped
    return package_dir.parent / "recipes"  # a source checkout / editable install


def load_recipes(directory: Optional[Path] = None, *, signatures: Optional[bool] = None) -> Recipes:
    """The rules in directory (default: the shipped recipes), validated. signatures: also compile
    every error-message signature to validate it (~0.3 s of regular expressions); None: for a
    folder the caller names (--recipes DIR, someone's own rules), not for the shipped recipes,
    which the test suite validates (tests/test_recipes.py) and whose signatures only explain
    compiles, when it matches them."""
    if signatures is None:
        signatures = directory is not None
    directory = Path(directory) if directory else default_recipes_dir()
    if not directory.is_dir():
        raise RecipeError(f"recipes folder not found: {directory}")
    recipes = Recipes()
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise RecipeError(f"no recipe files (*.toml) in {directory}")
    parsed = _parsed_before(files)
    for path in files:
        _load_file(path, recipes, signatures, parsed.get(path.name) if parsed else None)
    if parsed is None:
        _keep_parsed(files, recipes.raw)
    ids = {r.id for r in recipes.rules}
    for rule in recipes.rules:
        unknown = [i for i in rule.supersedes if i not in ids or i == rule.id]
        if unknown:
            raise RecipeError(f"{recipes.sources[rule.id].name}: rule {rule.id}: supersedes {', '.join(unknown)}, not another rule")
    return recipes


# The recipes as tomllib parsed them, kept in the user's own private cache folder (beside the
# bytecode, never a shared cache: a recipe's remedies are commands that fix runs): parsing the
# shipped TOML is a quarter of a `check --quick` (0.1 s), decoding this copy 2 ms. Keyed by each
# file's name, size, mtime and inode and by the doctor's version; read only when this user (or root)
# wrote it and no one else can write it. Only the parse is kept: every load validates the rules again.
PARSED_FILE = "parsed.msgpack"
# explain's readings of a whole text's shape that a rule may name (explaining/notices.py reads them)
READINGS = frozenset({"notices-only"})
MAX_PARSED_BYTES = 16 * 1024 * 1024


def _files_key(files: list[Path]) -> Optional[str]:
    import hashlib
    import json

    from .. import __version__

    try:
        stamps = [(p.name, st.st_size, st.st_mtime_ns, st.st_ino) for p in files for st in [p.stat()]]
    except OSError:
        return None
    return hashlib.sha256(json.dumps([__version__, str(files[0].parent), stamps]).encode()).hexdigest()


def _kept_path(name: str) -> Optional[Path]:
    from ..bytecode import private_folder

    folder, _why = private_folder("recipes", "the parsed recipes are not kept")
    return Path(folder) / name if folder else None


def read_kept(name: str, key: str) -> Optional[dict]:
    """What keep(name, key, ...) kept in the user's private recipes cache, where a trusted copy with
    this very key is there; else None."""
    import os
    import stat

    path = _kept_path(name)
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid not in (os.geteuid(), 0) or st.st_mode & 0o022
                or st.st_size > MAX_PARSED_BYTES):
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            doc = msgspec.msgpack.decode(fh.read(MAX_PARSED_BYTES + 1))
    except (OSError, msgspec.DecodeError, RecursionError):
        return None
    finally:
        os.close(fd)
    if not isinstance(doc, dict) or doc.get("key") != key or not isinstance(doc.get("data"), dict):
        return None
    return doc["data"]


def keep(name: str, key: str, data: dict) -> None:
    """Keep `data` under `key` for the next read_kept; a cache folder that cannot be written is no error."""
    from ..cache import write_atomic

    path = _kept_path(name)
    if path is None:
        return
    try:
        encoded = msgspec.msgpack.encode({"key": key, "data": data})
    except (TypeError, ValueError):
        return
    write_atomic(path, encoded, 0o600)  # this user's alone


def _parsed_before(files: list[Path]) -> Optional[dict]:
    """file name -> its parsed TOML, where a trusted copy for these very files is kept; else None."""
    key = _files_key(files)
    files_doc = read_kept(PARSED_FILE, key) if key is not None else None
    if files_doc is None:
        return None
    if set(files_doc) != {p.name for p in files} or not all(isinstance(v, dict) for v in files_doc.values()):
        return None
    return files_doc


def _keep_parsed(files: list[Path], raw: dict) -> None:
    """Keep the parse of `files` (name -> parsed TOML) for the next load."""
    key = _files_key(files)
    if key is not None and set(raw) == {p.name for p in files}:
        keep(PARSED_FILE, key, raw)


def _load_file(path: Path, recipes: Recipes, signatures: bool = True, raw: Optional[dict] = None) -> None:
    try:
        _load_file_checked(path, recipes, signatures, raw)
    except RecursionError:  # a rule file nested thousands of levels deep: no recipe, a hostile file
        raise RecipeError(f"{path.name}: nested too deep to be a recipe") from None


def _load_file_checked(path: Path, recipes: Recipes, signatures: bool, raw: Optional[dict] = None) -> None:
    if raw is None:
        if sys.version_info >= (3, 11):  # imported here: a load from the kept parse needs no TOML parser
            import tomllib
        else:  # pragma: no cover
            import tomli as tomllib
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise RecipeError(f"{path.name}: cannot read: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise RecipeError(f"{path.name}: not valid TOML: {exc}") from None
    recipes.raw[path.name] = raw
    try:
        parsed = msgspec.convert(raw, RecipeFile)
    except msgspec.ValidationError as exc:
        raise RecipeError(f"{path.name}: {_where(raw, str(exc))}") from None
    for rule in parsed.rules:
        where = f"{path.name}: rule {rule.id}"
        if rule.id in recipes.sources:
            raise RecipeError(f"{where}: id already used in {recipes.sources[rule.id].name}")
        if any(r.name == rule.name for r in recipes.rules):
            raise RecipeError(f"{where}: name {rule.name!r} already used")
        if rule.when is not None:
            _check_condition(rule.when, where)
            if not rule.pass_:
                raise RecipeError(f"{where}: a rule with `when` needs `pass`: one line saying what holds when it passes")
        elif not rule.signatures and not rule.catalogue and not rule.reading:
            raise RecipeError(f"{where}: a rule without `when` must have `signatures`, `catalogue = true` or a "
                              "`reading` (it is recognised only by explain)")
        if rule.reading is not None and rule.reading not in READINGS:
            raise RecipeError(f"{where}: unknown reading {rule.reading!r} (known: {', '.join(sorted(READINGS))})")
        if signatures:
            _check_signatures(rule, where)
        recipes.rules.append(rule)
        recipes.sources[rule.id] = path
    for table, values in parsed.data.items():
        if table in recipes.data:
            raise RecipeError(f"{path.name}: data table {table!r} defined twice")
        recipes.data[table] = values


def _where(raw: dict, message: str) -> str:
    # msgspec says "... - at `$.rule[3].when`"; name the rule id as well, people search by it.
    if "$.rule[" in message:
        try:
            index = int(message.split("$.rule[", 1)[1].split("]", 1)[0])
            rule_id = raw["rule"][index].get("id", f"#{index + 1}")
            return f"rule {rule_id}: {message}"
        except (ValueError, IndexError, KeyError, AttributeError, TypeError):
            pass
    return message


def _check_signatures(rule: Rule, where: str) -> None:
    """Signatures compile, carry a literal the scanner can pre-filter on, and have fixtures."""
    if not rule.signatures:
        return
    from .signatures import SignatureError, compile_signature

    for signature in rule.signatures:
        try:
            compile_signature(rule.id, signature)
        except SignatureError as exc:
            raise RecipeError(f"{where}: signature {exc}") from None
    if not rule.signature_fixtures.match or not rule.signature_fixtures.no_match:
        raise RecipeError(f"{where}: a rule with signatures needs [rule.signature_fixtures] with `match` and `no_match` log snippets")


def _check_condition(cond: Condition, where: str) -> None:
    """What the schema cannot say: specifiers parse, markers parse, named checks exist."""
    for name, spec in cond.version.items():
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            raise RecipeError(f"{where}: invalid version specifier for {name}: {spec!r}") from None
    if cond.capability is not None:
        try:
            SpecifierSet(cond.capability)
        except InvalidSpecifier:
            raise RecipeError(f"{where}: invalid capability specifier {cond.capability!r}") from None
    if cond.marker is not None:
        # Imported only when a rule uses a marker: packaging.markers costs ~50 ms of regex compiling.
        from packaging.markers import InvalidMarker, Marker

        try:
            Marker(cond.marker)
        except InvalidMarker as exc:
            raise RecipeError(f"{where}: invalid marker {cond.marker!r}: {exc}") from None
    if cond.check is not None and cond.check not in CHECKS:
        raise RecipeError(f"{where}: unknown check {cond.check!r} (known: {', '.join(sorted(CHECKS))})")
    for sub in cond.any:
        _check_condition(sub, where)
    if cond.not_ is not None:
        _check_condition(cond.not_, where)
