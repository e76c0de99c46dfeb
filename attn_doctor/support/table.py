"""The support matrix of the attention stack (recipes/support/matrix.toml): what each attention
kernel supports, by release: GPU architectures (NVIDIA sm, AMD gfx), dtypes, head sizes, features,
each row with its source. One table the doctor reads everywhere: explain judges a text's facts by it,
check's and trace's kernel rules take their floors and limits from it.

Standard library only, with no import from the rest of the package: the tracer reads it inside the
traced interpreter too, which may lack the doctor's dependencies, and on Python 3.10 may have no
TOML parser; there the doctor hands it a JSON copy (``MATRIX_ENV``).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Optional, Union

JSON_NAME = "support-matrix.json"  # a validated copy the doctor puts beside the package it lends a traced interpreter
PLATFORMS = ("cuda", "rocm", "mps", "cpu", "xpu", "any")
DTYPES = ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "fp4")
FEATURES = ("gqa", "sliding_window", "softcap", "alibi", "dropout", "varlen", "paged_kv", "fp8", "attn_mask", "backward")
FEATURE_WORDS = {
    "gqa": "grouped-query attention (GQA)", "sliding_window": "sliding-window attention", "softcap": "logit soft-capping",
    "alibi": "ALiBi", "dropout": "dropout", "varlen": "variable-length (packed) sequences", "paged_kv": "a paged KV cache",
    "fp8": "fp8", "attn_mask": "an arbitrary attention mask", "backward": "the backward pass",
}
DTYPE_WORDS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn",
               "fp8_e5m2": "float8_e5m2", "int8": "int8", "fp4": "fp4"}
_KERNEL_KEYS = {"id", "name", "library", "platform", "names", "modules", "doctor", "row"}
_ROW_KEYS = {"versions", "archs", "dtypes", "dtype_archs", "head_dim_max", "head_dim_min", "head_dim_multiple",
             "head_dims", "features", "source", "read_at", "note"}
_ARCH = re.compile(r"^(?:sm(?P<lo>\d{2,3})(?:(?P<plus>\+)|-sm(?P<hi>\d{2,3}))?|(?P<gfx>gfx[0-9a-f]{2,4}\*?)|(?P<other>mps|cpu))$")
_SPEC = re.compile(r"^\s*(?P<op>>=|<=|==|!=|~=|>|<)\s*(?P<v>\d+(?:\.\d+)*(?:\.\*)?(?:(?:a|b|rc|\.post|\.dev)\d+)?)\s*$")
_SOURCE = re.compile(r"^https://\S+$")


class SupportMatrixError(ValueError):
    """The matrix file is unreadable or breaks its schema; the message names the file and the row."""


# ---------------------------------------------------------------- versions and architectures


def _vkey(version: str) -> tuple:
    """A sortable key for a release ("2.7.3", "4.0.0b36", "2.9.0+cu128"): pre-releases before the release."""
    m = re.match(r"v?(\d+(?:\.\d+)*)(?:\.?(a|b|rc|dev)(\d*))?", str(version).strip())
    if not m:
        return ()
    release = tuple(int(p) for p in m.group(1).split("."))
    release = release + (0,) * (4 - len(release)) if len(release) < 4 else release
    pre = ((0, {"dev": 0, "a": 1, "b": 2, "rc": 3}[m.group(2)], int(m.group(3) or 0)) if m.group(2) else (1, 0, 0))
    return release + pre


def version_matches(version: Optional[str], spec: str) -> Optional[bool]:
    """Whether a release satisfies a comma-separated specifier ("" = every release); None when the
    release is unknown or unreadable."""
    if not spec.strip():
        return True
    if not version or not _vkey(version):
        return None
    have = _vkey(version)
    for part in spec.split(","):
        m = _SPEC.match(part)
        if m is None:
            return None
        op, text = m.group("op"), m.group("v")
        if text.endswith(".*"):  # ==2.5.*: the release's leading parts
            prefix = tuple(int(p) for p in text[:-2].split("."))
            same = have[:len(prefix)] == prefix
            if (op == "==" and not same) or (op == "!=" and same):
                return False
            continue
        want = _vkey(text)
        ok = {">=": have >= want, "<=": have <= want, ">": have > want, "<": have < want, "==": have == want,
              "!=": have != want, "~=": have >= want}[op]
        if not ok:
            return False
    return True


def arch_of(text: Union[str, tuple, None]) -> Optional[tuple]:
    """An architecture as the matrix compares it: ("nvidia", (8, 6)) for "8.6", "sm_86", "sm86", (8, 6);
    ("amd", "gfx942") for "gfx942" or "gfx942:sramecc+:xnack-"; ("mps",) / ("cpu",); None for what is none."""
    if text is None:
        return None
    if isinstance(text, tuple):
        return ("nvidia", (int(text[0]), int(text[1])))
    t = str(text).strip().lower()
    m = re.match(r"^(gfx[0-9a-f]{3,4})", t)
    if m:
        return ("amd", m.group(1))
    if t in ("mps", "cpu"):
        return (t,)
    m = re.match(r"^(?:sm_?)?(\d{1,2})\.(\d)$", t) or re.match(r"^(?:sm_?)(\d{1,2})(\d)[af]?$", t)
    if m:
        return ("nvidia", (int(m.group(1)), int(m.group(2))))
    return None


def _sm(digits: str) -> tuple:
    return (int(digits[:-1]), int(digits[-1]))


def sm_name(cap: tuple) -> str:
    return "sm%d%d" % tuple(cap)


class ArchRange:
    """One entry of a row's `archs`: an NVIDIA range, one AMD target (or a glob), mps or cpu."""

    __slots__ = ("text", "vendor", "lo", "hi", "gfx")

    def __init__(self, text: str):
        m = _ARCH.match(text)
        if m is None:
            raise ValueError(text)
        self.text, self.gfx, self.lo, self.hi = text, None, None, None
        if m.group("lo"):
            self.vendor = "nvidia"
            self.lo = _sm(m.group("lo"))
            self.hi = (99, 9) if m.group("plus") else _sm(m.group("hi")) if m.group("hi") else self.lo
            if self.hi < self.lo:
                raise ValueError(text)
        elif m.group("gfx"):
            self.vendor, self.gfx = "amd", m.group("gfx")
        else:
            self.vendor = m.group("other")

    def holds(self, arch: tuple) -> Optional[bool]:
        """True / False for an architecture of this entry's vendor; None for another vendor's."""
        if arch[0] != self.vendor:
            return None
        if self.vendor == "nvidia":
            return self.lo <= arch[1] <= self.hi
        if self.vendor == "amd":
            return fnmatch.fnmatchcase(arch[1], self.gfx)
        return True


# ---------------------------------------------------------------- rows and kernels


class Row:
    """What one kernel supports over some of its releases (and, where it says, some architectures)."""

    def __init__(self, kernel: "Kernel", raw: dict):
        self.kernel = kernel
        self.versions: str = raw.get("versions", "")
        self.archs = [ArchRange(a) for a in raw.get("archs", [])]
        self.dtypes: list[str] = list(raw.get("dtypes", []))
        self.dtype_archs = {d: [ArchRange(a) for a in v] for d, v in (raw.get("dtype_archs") or {}).items()}
        self.head_dim_max: Optional[int] = raw.get("head_dim_max")
        self.head_dim_min: Optional[int] = raw.get("head_dim_min")
        self.head_dim_multiple: Optional[int] = raw.get("head_dim_multiple")
        self.head_dims: list[int] = list(raw.get("head_dims", []))
        self.features: dict = dict(raw.get("features") or {})
        self.source: str = raw["source"]
        self.read_at: str = raw["read_at"]
        self.note: str = raw.get("note", "")

    def covers(self, version: Optional[str]) -> bool:
        """Whether this row speaks of `version` (an unknown version: the rows of the newest releases)."""
        if version is None:
            return self.kernel.newest_rows_spec(self)
        return version_matches(version, self.versions) is not False

    def arch_holds(self, arch: tuple) -> Optional[bool]:
        if not self.archs:
            return None
        verdicts = [a.holds(arch) for a in self.archs]
        if any(v is True for v in verdicts):
            return True
        if all(v is None for v in verdicts):
            # another vendor than any listed: a CUDA kernel on an AMD GPU, unless the platform says "any"
            return None if self.kernel.platform == "any" else False
        return False

    def dtype_holds(self, dtype: str, arch: Optional[tuple] = None) -> Optional[bool]:
        if not self.dtypes:
            return None
        if dtype not in self.dtypes:
            return False
        narrowed = self.dtype_archs.get(dtype)
        if narrowed and arch is not None:
            verdicts = [a.holds(arch) for a in narrowed]
            if not any(v is True for v in verdicts):
                return False if any(v is False for v in verdicts) else None
        return True

    def head_dim_holds(self, d: int) -> Optional[bool]:
        has_range = self.head_dim_max is not None
        if not has_range and not self.head_dims:
            return None
        if d in self.head_dims:
            return True
        if not has_range:
            return False
        if d > self.head_dim_max or (self.head_dim_min is not None and d < self.head_dim_min):
            return False
        return not (self.head_dim_multiple and d % self.head_dim_multiple)

    def head_dim_words(self) -> str:
        parts = []
        if self.head_dim_max is not None:
            lo = self.head_dim_min
            parts.append(("%d to %d" % (lo, self.head_dim_max) if lo else "up to %d" % self.head_dim_max)
                         + (" (multiples of %d)" % self.head_dim_multiple if self.head_dim_multiple else ""))
        if self.head_dims:
            parts.append(", ".join(map(str, self.head_dims)))
        return " and ".join(parts)

    def feature(self, name: str):
        """True / False, the first release with it (a string), or None where the row does not say."""
        return self.features.get(name)

    def arch_words(self) -> str:
        return ", ".join(a.text for a in self.archs)


class Kernel:
    def __init__(self, raw: dict):
        self.id: str = raw["id"]
        self.name: str = raw["name"]
        self.library: str = raw["library"]
        self.platform: str = raw["platform"]
        self.names: list[str] = list(raw.get("names", []))
        self.modules: list[str] = list(raw.get("modules", []))
        self.doctor: list[str] = list(raw.get("doctor", []))  # what the doctor's own code calls it
        self.rows = [Row(self, r) for r in raw["row"]]

    def newest_rows_spec(self, row: Row) -> bool:
        """With no version known, the rows of the newest releases speak: those without an upper bound."""
        return "<" not in row.versions or all("<" in r.versions for r in self.rows)

    def rows_for(self, version: Optional[str] = None, arch: Optional[tuple] = None) -> list[Row]:
        """The rows for a release (unknown: the newest) and, where given, an architecture (the rows
        that hold it, else every row of the release: a refusal then comes from any of them)."""
        rows = [r for r in self.rows if r.covers(version)]
        if arch is not None:
            holding = [r for r in rows if r.arch_holds(arch) is True]
            return holding or rows
        return rows

    def supports_arch(self, arch: tuple, version: Optional[str] = None) -> Optional[bool]:
        verdicts = [r.arch_holds(arch) for r in self.rows_for(version)]
        if any(v is True for v in verdicts):
            return True
        return False if any(v is False for v in verdicts) else None

    def supports_dtype(self, dtype: str, version: Optional[str] = None, arch: Optional[tuple] = None) -> Optional[bool]:
        verdicts = [r.dtype_holds(dtype, arch) for r in self.rows_for(version, arch)]
        if any(v is True for v in verdicts):
            return True
        return False if any(v is False for v in verdicts) else None

    def supports_head_dim(self, d: int, version: Optional[str] = None, arch: Optional[tuple] = None) -> Optional[bool]:
        verdicts = [r.head_dim_holds(d) for r in self.rows_for(version, arch)]
        if any(v is True for v in verdicts):
            return True
        return False if any(v is False for v in verdicts) else None

    def feature(self, name: str, version: Optional[str] = None):
        """(supported, the first release with it): (None, None) where no row says."""
        values = [r.feature(name) for r in self.rows_for(version) if r.feature(name) is not None]
        if not values:
            return None, None
        value = values[-1]
        if isinstance(value, str):
            return (version_matches(version, ">=" + value) if version else None), value
        return bool(value), None

    # the numbers the tracer's rules read (the newest release's rows)

    def limit(self, key: str, version: Optional[str] = None) -> Optional[int]:
        values = [getattr(r, key) for r in self.rows_for(version) if getattr(r, key) is not None]
        return max(values) if values else None

    def nvidia_range(self, version: Optional[str] = None) -> Optional[tuple]:
        """(lowest, highest) compute capability the rows list, as (major, minor) pairs."""
        ranges = [a for r in self.rows_for(version) for a in r.archs if a.vendor == "nvidia"]
        if not ranges:
            return None
        return min(a.lo for a in ranges), max(a.hi for a in ranges)

    def nvidia_archs(self, version: Optional[str] = None) -> tuple:
        """The single architectures the rows list (for a kernel built for a list, not a range)."""
        return tuple(sorted({a.lo for r in self.rows_for(version) for a in r.archs if a.vendor == "nvidia" and a.lo == a.hi}))

    def dtype_floor(self, dtype: str, version: Optional[str] = None) -> Optional[tuple]:
        """The lowest NVIDIA architecture a dtype is narrowed to (bf16 -> (8, 0)), or None."""
        floors = [a.lo for r in self.rows_for(version) for a in r.dtype_archs.get(dtype, []) if a.vendor == "nvidia"]
        return min(floors) if floors else None


class Matrix:
    def __init__(self, kernels: list[Kernel], path: str = ""):
        self.kernels = {k.id: k for k in kernels}
        self.path = path
        self._names = sorted(((n.lower(), k) for k in kernels for n in k.names), key=lambda p: -len(p[0]))
        words = "|".join(re.escape(n) for n, _ in self._names)
        self._named = re.compile(r"(?<![\w.-])(?:%s)(?![\w-])" % words, re.IGNORECASE) if words else None

    def kernel(self, kernel_id: str) -> Kernel:
        return self.kernels[kernel_id]

    def get(self, kernel_id: str) -> Optional[Kernel]:
        return self.kernels.get(kernel_id)

    def find(self, name: str) -> Optional[Kernel]:
        """The kernel a name (an id, one of its names, a module, the doctor's own name for it) stands for, any case."""
        low = (name or "").strip().lower()
        if low in self.kernels:
            return self.kernels[low]
        for k in self.kernels.values():
            if low in (d.lower() for d in k.doctor):
                return k
        for n, k in self._names:
            if n == low:
                return k
        for k in self.kernels.values():
            if low in (m.lower() for m in k.modules):
                return k
        return None

    def named_in(self, text: str) -> list[Kernel]:
        """The kernels a text names, in the order it first names them."""
        if self._named is None:
            return []
        out: list[Kernel] = []
        for m in self._named.finditer(text):
            k = self.find(m.group(0))
            if k is not None and k not in out:
                out.append(k)
        return out

    def for_module(self, module: str) -> Optional[Kernel]:
        low = (module or "").lower()
        for k in self.kernels.values():
            if any(low == m.lower() or low.startswith(m.lower() + ".") for m in k.modules):
                return k
        return None


# ---------------------------------------------------------------- loading and validation


def default_path() -> Path:
    package_dir = Path(__file__).resolve().parent.parent
    shipped = package_dir / "recipes" / "support" / "matrix.toml"  # inside an installed wheel
    return shipped if shipped.is_file() else package_dir.parent / "recipes" / "support" / "matrix.toml"


def _lent_copy() -> Optional[Path]:
    """The JSON copy beside the package where the doctor lent it to another interpreter
    (tracing/runs/launch.py: TMP/attn_doctor -> the package, TMP/support-matrix.json)."""
    copy = Path(os.path.abspath(__file__)).parent.parent.parent / JSON_NAME  # unresolved: the lent folder
    return copy if copy.is_file() else None


def _parse_toml(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            from pip._vendor import tomli as tomllib  # type: ignore[no-redef]  # pip vendors one
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise SupportMatrixError("%s: cannot read: %s" % (path.name, exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise SupportMatrixError("%s: not valid TOML: %s" % (path.name, exc)) from None


def validate(raw: dict, where: str = "matrix.toml") -> list[Kernel]:
    """Every key known, every value of its type and vocabulary; the kernels, or SupportMatrixError
    naming the file, the kernel and the row."""
    if not isinstance(raw, dict) or set(raw) - {"kernel"} or not isinstance(raw.get("kernel"), list):
        raise SupportMatrixError("%s: expected [[kernel]] tables only" % where)
    seen: set[str] = set()
    kernels = []
    for i, k in enumerate(raw["kernel"]):
        at = "%s: kernel #%d" % (where, i + 1)
        if not isinstance(k, dict):
            raise SupportMatrixError("%s: not a table" % at)
        at = "%s: kernel %s" % (where, k.get("id", "#%d" % (i + 1)))
        _keys(k, _KERNEL_KEYS, {"id", "name", "library", "platform", "row"}, at)
        for key in ("id", "name", "library"):
            _string(k[key], at, key)
        if not re.match(r"^[a-z0-9][a-z0-9-]*$", k["id"]) or k["id"] in seen:
            raise SupportMatrixError("%s: id must be unique, lower case letters, digits and -" % at)
        seen.add(k["id"])
        if k["platform"] not in PLATFORMS:
            raise SupportMatrixError("%s: platform %r is not one of %s" % (at, k["platform"], ", ".join(PLATFORMS)))
        for key in ("names", "modules", "doctor"):
            if not isinstance(k.get(key, []), list) or not all(isinstance(x, str) and x for x in k.get(key, [])):
                raise SupportMatrixError("%s: %s must be a list of strings" % (at, key))
        if not isinstance(k["row"], list) or not k["row"]:
            raise SupportMatrixError("%s: needs at least one [[kernel.row]]" % at)
        for j, row in enumerate(k["row"]):
            _row(row, "%s row %d" % (at, j + 1))
        kernels.append(Kernel(k))
    return kernels


def _keys(table, allowed, required, at):
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SupportMatrixError("%s: unknown key %s" % (at, ", ".join(unknown)))
    missing = sorted(required - set(table))
    if missing:
        raise SupportMatrixError("%s: missing %s" % (at, ", ".join(missing)))


def _string(value, at, key):
    if not isinstance(value, str) or not value.strip():
        raise SupportMatrixError("%s: %s must be a non-empty string" % (at, key))


def _int(value, at, key):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SupportMatrixError("%s: %s must be a positive integer" % (at, key))


def _archs(values, at, key):
    if not isinstance(values, list):
        raise SupportMatrixError("%s: %s must be a list" % (at, key))
    for a in values:
        try:
            ArchRange(a)
        except (ValueError, TypeError):
            raise SupportMatrixError("%s: %s: %r is no architecture (sm80, sm80+, sm80-sm90, gfx942, gfx11*, mps, cpu)"
                                     % (at, key, a)) from None


def _row(row, at):
    if not isinstance(row, dict):
        raise SupportMatrixError("%s: not a table" % at)
    _keys(row, _ROW_KEYS, {"source", "read_at"}, at)
    _string(row["source"], at, "source")
    if not _SOURCE.match(row["source"]):
        raise SupportMatrixError("%s: source must be the https address of the code or docs read" % at)
    _string(row["read_at"], at, "read_at")
    spec = row.get("versions", "")
    if not isinstance(spec, str) or (spec.strip() and any(_SPEC.match(p) is None for p in spec.split(","))):
        raise SupportMatrixError("%s: versions %r is no specifier (>=2.7.3,<2.8)" % (at, spec))
    _archs(row.get("archs", []), at, "archs")
    dtypes = row.get("dtypes", [])
    if not isinstance(dtypes, list) or any(d not in DTYPES for d in dtypes):
        raise SupportMatrixError("%s: dtypes must be among %s" % (at, ", ".join(DTYPES)))
    for d, archs in (row.get("dtype_archs") or {}).items():
        if d not in dtypes:
            raise SupportMatrixError("%s: dtype_archs narrows %r, which dtypes does not list" % (at, d))
        _archs(archs, at, "dtype_archs." + d)
    for key in ("head_dim_max", "head_dim_min", "head_dim_multiple"):
        if key in row:
            _int(row[key], at, key)
    heads = row.get("head_dims", [])
    if not isinstance(heads, list):
        raise SupportMatrixError("%s: head_dims must be a list" % at)
    for h in heads:
        _int(h, at, "head_dims")
    features = row.get("features") or {}
    if not isinstance(features, dict):
        raise SupportMatrixError("%s: features must be a table" % at)
    for name, value in features.items():
        if name not in FEATURES:
            raise SupportMatrixError("%s: unknown feature %r (known: %s)" % (at, name, ", ".join(FEATURES)))
        if not isinstance(value, bool) and not (isinstance(value, str) and _vkey(value)):
            raise SupportMatrixError("%s: feature %s must be true, false or the release that added it" % (at, name))


def load(path: Optional[Union[str, Path]] = None) -> Matrix:
    """The matrix at `path` (default: the shipped one; in an interpreter the doctor lent its package
    to, the JSON copy beside it), validated."""
    copy = _lent_copy() if path is None else None
    if copy is not None:
        try:
            raw = json.loads(copy.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SupportMatrixError("%s: cannot read: %s" % (copy.name, exc)) from None
        return Matrix(validate(raw, copy.name), str(copy))
    target = Path(path) if path is not None else default_path()
    return Matrix(validate(_parse_toml(target), target.name), str(target))


@lru_cache(maxsize=1)
def matrix() -> Matrix:
    """The shipped matrix, loaded once per process."""
    return load()


def write_json(destination: Union[str, Path]) -> str:
    """The shipped matrix as JSON at `destination` (for an interpreter that cannot read TOML)."""
    raw = _parse_toml(default_path())
    validate(raw, default_path().name)
    Path(destination).write_text(json.dumps(raw), encoding="utf-8")
    return str(destination)
