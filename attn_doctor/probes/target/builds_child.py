"""Compiled extensions linked against torch: what each was built for, and whether it loads.

Runs inside the *target* interpreter (loaded by torch_probe.py from its own folder), so: standard
library only, Python 3.8+ syntax. For every installed distribution that ships a shared library
linked against torch (its ELF dynamic section needs libc10 / libtorch*, or it leaves torch's C++
symbols undefined), it records:

- what the distribution says it was built for: a build record (xformers' cpp_lib.json), an exact
  `torch==` requirement, a local version tag (`+cu124torch2.4cxx11abiTRUE`), the wheel's file
  name, and the CUDA runtime its libraries need (libcudart.so.12 -> CUDA 12);
- whether each library loads next to this torch (in a fork per distribution, after
  `import torch`): the dynamic loader checks every undefined symbol and needed library, which is
  exactly what an import that falls back to "kernels disabled" hides.
"""

from __future__ import annotations

import json
import os
import re
import struct

TORCH_LIBS = ("libc10", "libtorch", "libshm")
TORCH_SYMBOL_PREFIXES = (b"_ZN3c10", b"_ZNK3c10", b"_ZN2at", b"_ZNK2at", b"_ZN5torch", b"_ZNK5torch")
# Distributions that ship torch itself or libraries torch links, never an extension of it.
SKIP = re.compile(r"^(torch|triton|pytorch-triton.*|nvidia-.*|cuda-.*|numpy|scipy)$")
MAX_LIBS = 40  # per distribution
# Built against torch without saying so in their metadata (source builds of apex and friends).
KNOWN = re.compile(r"^(apex|flash-attn.*|xformers|vllm.*|flashinfer.*|deepspeed|mamba-ssm|causal-conv1d|bitsandbytes|"
                   r"torchvision|torchaudio|torch-scatter|torch-sparse|detectron2|mmcv.*|transformer-engine.*|"
                   r"auto-gptq|autoawq.*|exllama.*|liger-kernel|sageattention|natten|megablocks|grouped-gemm)$")


def _needs_torch(dist) -> bool:
    """Only a distribution that requires torch (or is known to build against it) is read further:
    an environment's hundreds of other packages cost no ELF parsing."""
    for requirement in dist.metadata.get_all("Requires-Dist") or []:
        name = re.split(r"[\s;<>=!~\[(]", requirement.strip(), 1)[0].lower()
        if name in ("torch", "pytorch") and "extra ==" not in requirement:
            return True
    return False

_TAG_TORCH = re.compile(r"torch[-_]?(\d+\.\d+(?:\.\d+)?)", re.I)
_TAG_CUDA = re.compile(r"(?:^|[+._-])cu(\d{2,3})(?![\d])", re.I)
_TAG_ABI = re.compile(r"cxx11abi(TRUE|FALSE)", re.I)
_PIN = re.compile(r"^torch\s*(?:\(\s*)?==\s*([\w.+]+)", re.I)


# ---------------------------------------------------------------- ELF, the parts we need


def elf_dynamic(path):
    """(needed libraries, count of undefined torch C++ symbols, a few of them) of an ELF64
    little-endian shared library, reading only its section headers, .dynamic and .dynsym.
    None when the file is not such an ELF."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            shoff, = struct.unpack_from("<Q", head, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
            if not shoff or shentsize != 64 or not shnum or shnum > 10000:
                return None
            fh.seek(shoff)
            table = fh.read(shentsize * shnum)
            sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * 64) for i in range(shnum)]

            def read(index):
                _n, _t, _f, _a, offset, size, _l, _i, _al, _e = sections[index]
                if size > 256 << 20:
                    return b""
                fh.seek(offset)
                return fh.read(size)

            needed, undefined = [], []
            for index, sh in enumerate(sections):
                sh_type, link = sh[1], sh[6]
                if sh_type == 6 and link < shnum:  # SHT_DYNAMIC
                    strtab, data = read(link), read(index)
                    for i in range(0, len(data) - 15, 16):
                        tag, val = struct.unpack_from("<qQ", data, i)
                        if tag == 0:
                            break
                        if tag == 1:  # DT_NEEDED
                            needed.append(strtab[val:strtab.index(b"\0", val)].decode("utf-8", "replace"))
            for index, sh in enumerate(sections):
                sh_type, link = sh[1], sh[6]
                if sh_type == 11 and link < shnum and not links_torch(needed, 0):  # SHT_DYNSYM
                    # only read when the needed libraries do not already say "torch": the symbol
                    # table of a large library is megabytes
                    strtab, data = read(link), read(index)
                    for i in range(24, len(data) - 23, 24):
                        name, _info, _other, shndx = struct.unpack_from("<IBBH", data, i)
                        if shndx == 0 and name:
                            symbol = strtab[name:strtab.index(b"\0", name)]
                            if symbol.startswith(TORCH_SYMBOL_PREFIXES):
                                undefined.append(symbol)
            return needed, len(undefined), [s.decode("utf-8", "replace") for s in undefined[:3]]
    except (OSError, struct.error, ValueError, IndexError):
        return None


def links_torch(needed, torch_symbols):
    return torch_symbols > 0 or any(lib.startswith(TORCH_LIBS) for lib in needed)


# ---------------------------------------------------------------- what a distribution was built for


def _cuda_from_digits(digits):
    # cu124 -> 12.4, cu118 -> 11.8, cu92 -> 9.2, cu13 -> 13
    if len(digits) == 3:
        return digits[:2] + "." + digits[2]
    if len(digits) == 2 and digits.startswith(("1",)):
        return digits  # a bare major (cu12, cu13)
    return digits[0] + "." + digits[1:]


def built_for(dist, top_levels, site):
    """What the distribution's own metadata says it was built for, with where each fact came from."""
    out, sources = {}, []
    version = dist.metadata.get("Version") or ""
    for requirement in dist.metadata.get_all("Requires-Dist") or []:
        req = requirement.split(";")[0].strip()
        m = _PIN.match(req)
        if m:
            out["torch"] = m.group(1)
            sources.append("Requires-Dist: " + req)
    local = version.partition("+")[2]
    texts = [("local version +" + local, local)] if local else []
    try:
        url = json.loads(dist.read_text("direct_url.json") or "{}").get("url") or ""
    except ValueError:
        url = ""
    if url.endswith(".whl"):
        texts.append(("wheel " + url.rsplit("/", 1)[-1], url.rsplit("/", 1)[-1].split("-", 2)[1] if "-" in url else url))
    for source, text in texts:
        found = False
        m = _TAG_TORCH.search(text)
        if m and "torch" not in out:
            out["torch"], found = m.group(1), True
        m = _TAG_CUDA.search(text)
        if m and "cuda" not in out:
            out["cuda"], found = _cuda_from_digits(m.group(1)), True
        m = _TAG_ABI.search(text)
        if m and "cxx11_abi" not in out:
            out["cxx11_abi"], found = m.group(1).upper() == "TRUE", True
        if found:
            sources.append(source)
    for top in top_levels:  # xformers writes its build record beside its library
        path = os.path.join(site, top, "cpp_lib.json")
        try:
            with open(path, encoding="utf-8") as fh:
                record = json.load(fh).get("version") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if record.get("torch"):
            out["torch"] = str(record["torch"])
        cuda = record.get("cuda")
        if isinstance(cuda, int) and cuda > 0:
            out["cuda"] = "%d.%d" % (cuda // 100, cuda % 100)  # 1208: CUDA 12.8
        if record.get("python"):
            out["python"] = str(record["python"])
        sources.append(top + "/cpp_lib.json")
    if out:
        out["source"] = "; ".join(sources)
    return out


# ---------------------------------------------------------------- discovery and loading


def extension_distributions():
    """name -> (distribution, [(relative path, absolute path, needed, torch symbol count, sample)])."""
    import importlib.metadata

    found = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata.get("Name") or "").strip()
        key = name.lower().replace("_", "-").replace(".", "-")
        if not name or key in found or SKIP.match(key) or not (KNOWN.match(key) or _needs_torch(dist)):
            continue
        try:
            record = dist.read_text("RECORD") or ""
        except (OSError, UnicodeDecodeError):
            continue
        libs = []
        for line in record.splitlines():
            rel = line.split(",", 1)[0]
            base = rel.rsplit("/", 1)[-1]
            if not (base.endswith((".so", ".pyd")) or ".so." in base) or rel.startswith(".."):
                continue
            path = str(dist.locate_file(rel))
            info = elf_dynamic(path)
            if info and links_torch(info[0], info[1]):
                libs.append((rel, path, info[0], info[1], info[2]))
            if len(libs) >= MAX_LIBS:
                break
        if libs:
            found[key] = (dist, libs)
    return found


def load_library(rel, path):
    """Load one library as the process that uses it would: a Python extension through its
    module initialiser, any other shared library with dlopen."""
    import importlib.machinery
    import importlib.util

    name = rel.replace("\\", "/")
    for suffix in sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    else:
        name = name.rsplit(".so", 1)[0]
    module_name = name.replace("/", ".")
    try:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            raise ImportError("not a Python extension")
        importlib.util.module_from_spec(spec)
        return None
    except ImportError as exc:
        text = str(exc)
        if "export function" not in text and "not a Python extension" not in text:
            return {"type": type(exc).__name__, "message": text[:2000]}
    import ctypes

    try:
        ctypes.CDLL(path)
        return None
    except OSError as exc:
        return {"type": "OSError", "message": str(exc)[:2000]}


# A library named for one torch release (libfoo_torch29-cuda.so, foo_torch2.10.so): a distribution
# that ships several picks the one for the installed torch at run time.
_VARIANT = re.compile(r"torch[-_.]?(\d)[._]?(\d{1,2})(?![\d.])", re.I)


def torch_variant(rel):
    """'2.9' for .../libx_torch29-cpu.so, None for a library named for no torch release."""
    m = _VARIANT.search(rel.replace("\\", "/").rsplit("/", 1)[-1])
    return "%s.%d" % (m.group(1), int(m.group(2))) if m else None


def probe_distribution(dist, libs):
    """Runs in a fork after `import torch`: load each library, report what loads.

    A distribution that ships one build per torch release (and per CPU / CUDA) loads one of them:
    only the builds for this torch are loaded, and it is enough that one of them loads. The others
    are reported `unused`; where none is for this torch, the package decides at run time (it may
    need none: torch-c-dlpack-ext does not from torch 2.10), so nothing is failed for it."""

    def job():
        import torch

        this = ".".join(torch.__version__.split("+")[0].split(".")[:2])
        variants = {torch_variant(rel) for rel, _p, _n, _t, _s in libs} - {None}
        results = []
        for rel, path, needed, torch_symbols, sample in libs:
            item = {"file": rel, "needed": needed, "torch_symbols": torch_symbols, "status": "ok"}
            variant = torch_variant(rel) if len(variants) > 1 else None
            if variant is not None and variant != this:
                item["status"] = "unused"
                item["note"] = "built for torch %s; the package loads the build for torch %s" % (variant, this)
            else:
                error = load_library(rel, path)
                if error:
                    item["status"], item["error"] = "error", error
                item["variant"] = variant
            results.append(item)
        mine = [r for r in results if r.pop("variant", None) is not None]
        if any(r["status"] == "ok" for r in mine):
            for r in mine:
                if r["status"] == "error":  # another build for this torch (CPU vs CUDA) is the one it loads
                    r["status"] = "unused"
                    r["note"] = "another build for torch %s loads; the package picks one" % this
        return {"status": "ok", "extensions": results}

    return job


def jobs(found):
    """One isolated job per distribution (isolation.py runs them in parallel forks)."""
    return [("build:" + name, probe_distribution(dist, libs)) for name, (dist, libs) in found.items()]


def assemble(found, results):
    """Every torch-linked extension distribution: built for what, and does each library load here."""
    out = {}
    for name, (dist, libs) in found.items():
        tops = sorted({rel.split("/", 1)[0] for rel, _p, _n, _t, _s in libs if "/" in rel})
        site = str(dist.locate_file(""))
        entry = {"version": dist.metadata.get("Version") or "", "built_for": built_for(dist, tops, site)}
        result = results.get("build:" + name) or {}
        if result.get("extensions"):
            entry["extensions"] = result["extensions"]
        else:
            status = result.get("status", "timeout")
            why = "timed out" if status == "timeout" else "crashed (signal %s)" % result.get("signal")
            error = result.get("error") or {"type": status, "message": "loading it " + why}
            entry["extensions"] = [{"file": rel, "needed": needed, "torch_symbols": symbols, "status": "error", "error": error}
                                   for rel, _p, needed, symbols, _s in libs]
        cudart = [lib for ext in entry["extensions"] for lib in ext["needed"] if lib.startswith("libcudart.so.")]
        if cudart and "cuda" not in entry["built_for"]:
            entry["built_for"]["cuda"] = cudart[0].split(".so.", 1)[1].split(".")[0]
            entry["built_for"]["source"] = "; ".join(filter(None, [entry["built_for"].get("source"), "needs " + cudart[0]]))
        out[name] = entry
    return out


