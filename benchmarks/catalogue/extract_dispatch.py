"""Which dtypes each of torch's kernels was compiled for, read from its sources: every AT_DISPATCH_*
call of aten/src/ATen/native (the macro's type list plus the types named beside it), keyed by the
kernel name the call passes, which is the NAME of torch's `"NAME" not implemented for 'Half'`.

`explain` reads the table (recipes/support/torch_dispatch.json.gz) to tell an op whose CUDA kernel
has a half-precision instantiation in a later torch (the user's release predates it: upgrading
torch fixes it) from one that has none in any release read (the op must run in float32).

    python benchmarks/catalogue/extract_dispatch.py --source 1.13.1=/tmp/pt113/pytorch-1.13.1 \\
        --source 2.6.0=/tmp/pt26/pytorch-v2.6.0 [--out recipes/support/torch_dispatch.json.gz]

The sources are Debian's pytorch_<version>+dfsg.orig.tar.xz (deb.debian.org/debian/pool/main/p/
pytorch/), extracted with `tar -xJf FILE --wildcards '*/aten/src/ATen/native/*'`. Standard library
only; the output is byte-identical for the same sources.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "recipes" / "support" / "torch_dispatch.json.gz"
SUFFIXES = {".cu", ".cuh", ".cpp", ".h", ".hpp", ".mm"}

_CALL = re.compile(r"\bAT_DISPATCH_(?P<macro>[A-Z0-9_]+)\s*\(")
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
# the reduced-precision types a dispatch names beside its macro's list
_TYPES = {
    "Half": re.compile(r"\b(?:at::|c10::)?(?:ScalarType::Half|kHalf)\b"),
    "BFloat16": re.compile(r"\b(?:at::|c10::)?(?:ScalarType::BFloat16|kBFloat16)\b"),
}
# type lists a macro or an AT_EXPAND(...) carries by its name
_LIST_HALF = re.compile(r"REDUCED_FLOATING_TYPES|FLOATING_TYPES_AND_HALF|AT_FLOAT8_TYPES_AND_HALF")
_LIST_BF16 = re.compile(r"REDUCED_FLOATING_TYPES")


def _call_text(src: str, start: int, limit: int = 20000) -> str:
    """The balanced argument text of the call whose '(' is at `start`, its braced blocks (lambda
    bodies, where nested dispatches live) left out."""
    depth, brace, out = 0, 0, []
    i = start
    end = min(len(src), start + limit)
    while i < end:
        c = src[i]
        if c == '"':
            m = _STRING.match(src, i)
            if m:
                if brace == 0:
                    out.append(m.group(0))
                i = m.end()
                continue
        if c == "{":
            brace += 1
        elif c == "}":
            brace -= 1
        elif brace == 0:
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    out.append(c)
                    break
        if brace == 0 and c not in "{}":
            out.append(c)
        i += 1
    return "".join(out)


_DEFINE = re.compile(r"^#define\s+(AT_[A-Z0-9_]+)(?:\([^)]*\))?[ \t]+((?:.*\\\n)*.*)$", re.M)
_TYPE_LIST = re.compile(r"\bAT_[A-Z0-9_]*TYPES[A-Z0-9_]*\b")


def _defines(text: str) -> dict:
    return {m.group(1): m.group(2).replace("\\\n", " ") for m in _DEFINE.finditer(text)}


def _expanded(raw: dict) -> dict:
    """Each type-list macro's text with the lists it names expanded into it."""
    def expand(name, depth=0):
        body = raw.get(name, "")
        if depth > 8:
            return body
        return body + " " + " ".join(expand(n, depth + 1) for n in set(_TYPE_LIST.findall(body)) if n != name)

    return {name: expand(name) for name in raw if "TYPES" in name}


def type_lists(root: Path) -> dict:
    """The type-list macros of Dispatch_v2.h (AT_FLOATING_TYPES, AT_ALL_TYPES, ...) as their text;
    {} where the tree does not hold the header."""
    header = root / "aten" / "src" / "ATen" / "Dispatch_v2.h"
    return _defines(header.read_text(encoding="utf-8")) if header.is_file() else {}


# comments, and the string literals they could hide a quote in, read in one pass
_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"', re.S)


def _blank(m: re.Match) -> str:
    """A comment as blank lines (positions of the rest kept); a string literal as it is."""
    text = m.group(0)
    return text if text.startswith('"') else "\n" * text.count("\n")


def dispatches(root: Path):
    """(kernel name, device, {"Half": bool, "BFloat16": bool}) of every dispatch under root."""
    lists = type_lists(root)
    native = root / "aten" / "src" / "ATen" / "native"
    for path in sorted(native.rglob("*")):
        if path.suffix not in SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(native).as_posix()
        device = ("cuda" if path.suffix in (".cu", ".cuh") or rel.startswith(("cuda/", "cudnn/", "sparse/cuda/",
                                                                               "quantized/cuda/", "nested/cuda/",
                                                                               "transformers/cuda/"))
                  else "mps" if "mps/" in rel else "cpu")
        src = _COMMENT.sub(_blank, path.read_text(encoding="utf-8", errors="replace"))
        local = None
        for m in _CALL.finditer(src):
            macro = m.group("macro")
            if macro.startswith("CASE"):
                continue  # the cases of an AT_DISPATCH_SWITCH: read with the switch
            text = _call_text(src, m.end() - 1)
            names = _STRING.findall(text)
            if not names:
                continue
            name = names[0]
            if not re.fullmatch(r"[A-Za-z_][\w:]*", name):
                continue
            if macro == "V2":  # AT_DISPATCH_V2(dtype, "name", AT_WRAP(...), AT_EXPAND(AT_FLOATING_TYPES), kHalf, ...)
                if local is None:
                    local = _expanded({**lists, **_defines(src)})  # a file may define lists of its own
                text += " " + " ".join(local.get(n, "") for n in set(_TYPE_LIST.findall(text)))
            found = {t: bool(rx.search(text)) for t, rx in _TYPES.items()}
            found["Half"] = found["Half"] or bool(_LIST_HALF.search(macro)) or bool(_LIST_HALF.search(text))
            found["BFloat16"] = found["BFloat16"] or bool(_LIST_BF16.search(macro)) or bool(_LIST_BF16.search(text))
            yield name, device, found


def table(sources: list[tuple[str, Path]]) -> dict:
    """{"releases": [...], "kernels": {name: {device: {"Half": [release, ...], "BFloat16": [...], "read": [...]}}}}:
    for each kernel name and device, the releases read that dispatch it, and those where a dispatch
    of it carries Half (BFloat16)."""
    kernels: dict = {}
    for version, root in sources:
        seen: dict = {}
        for name, device, found in dispatches(root):
            entry = seen.setdefault((name, device), {"Half": False, "BFloat16": False})
            for t in ("Half", "BFloat16"):
                # a name dispatched in several branches (complex types in one, floating in another):
                # the branch of the floating types carries it
                entry[t] = entry[t] or found[t]
        for (name, device), entry in seen.items():
            slot = kernels.setdefault(name, {}).setdefault(device, {"read": [], "Half": [], "BFloat16": []})
            slot["read"].append(version)
            for t in ("Half", "BFloat16"):
                if entry[t]:
                    slot[t].append(version)
    return {"releases": [v for v, _ in sources], "kernels": {k: kernels[k] for k in sorted(kernels)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", action="append", required=True, help="VERSION=PATH of a pytorch source tree (oldest first)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    sources = []
    for item in args.source:
        version, _, path = item.partition("=")
        root = Path(path)
        if not (root / "aten" / "src" / "ATen" / "native").is_dir():
            print(f"extract_dispatch: {root}: no aten/src/ATen/native there", file=sys.stderr)
            return 2
        sources.append((version, root))
    doc = table(sources)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(args.out, "wb", mtime=0) as fh:
        fh.write(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    cuda = [k for k, v in doc["kernels"].items() if "cuda" in v]
    newest = doc["releases"][-1]
    for t in ("Half", "BFloat16"):
        has = sum(1 for k in cuda if newest in doc["kernels"][k]["cuda"][t])
        print(f"{t}: {has} of {len(cuda)} CUDA kernel names dispatch it in torch {newest}")
    print(f"wrote {len(doc['kernels'])} kernel names from {', '.join(doc['releases'])} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
