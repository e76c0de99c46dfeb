"""Understanding import failures: classify the message, demangle the symbol, say which side; and
which way a kernel's refusal of mixed q/k/v dtypes says to cast.

Shared by the probes (an import that failed here) and by `explain` (a message from a log).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
import shutil
import subprocess
from typing import Optional

from .facts import EXTENSION_DISTRIBUTIONS, ImportError_

# Each kind names one cause, the one `explain` gives for the same message (the rule each kind
# fires in `check`; tests/test_knowledge_agrees.py holds them to it). A message that fits none of
# them is "other", and the generic import-failure rule shows it verbatim.
_UNDEFINED = re.compile(r"(?:(?P<lib>\S+\.so[\w.\-]*):\s*)?undefined symbol:\s*(?P<sym>[A-Za-z_$][\w$.@]*)")
_NO_MODULE = re.compile(r"No module named '(?P<mod>[\w.]+)'")
# missing_library: a CUDA runtime library of another CUDA major than torch's. Not libc10.so /
# libtorch*.so (the extension was loaded without torch) nor libcuda.so (no driver): other causes.
_NO_LIB = re.compile(
    r"(?P<lib>lib(?:cudart|cublas|cublasLt|cusparse|cufft|curand|nvrtc|nvJitLink)\.so\.\d+[\d.]*): cannot open shared object file"
)
# glibc: the C library is older than the one the wheel was built against. The loader writes
# "version `GLIBC_2.32' not found"; launchers and quoting often drop "version" or the backquote.
# libstdc++'s GLIBCXX_/CXXABI_ versions are another cause (an old libstdc++, not an old OS).
_GLIBC = re.compile(r"(?:version\s+)?[`'‘]?\b(?P<need>GLIBC_\d+\.\d+(?:\.\d+)?)['’]?\s+(?:was\s+)?not found(?: \(required by (?P<lib>\S+)\))?")
_LIBSTDCXX = re.compile(r"[`'‘]?\b(?P<need>(?:GLIBCXX|CXXABI)_[\d.]*\d)['’]?\s+(?:was\s+)?not found(?: \(required by (?P<lib>\S+)\))?")
_EXTENSION_MODULES = (*EXTENSION_DISTRIBUTIONS, "_C")


def classify(type_name: str, message: str) -> ImportError_:
    """Turn an exception's type and text into a structured import error."""
    err = ImportError_(type=type_name, message=message)
    m = _UNDEFINED.search(message)
    if m:
        err.kind = "undefined_symbol"
        err.symbol = m.group("sym")
        err.library = m.group("lib")
        err.demangled = demangle(err.symbol)
        return err
    m = _GLIBC.search(message)
    if m:
        err.kind = "glibc"
        err.symbol = m.group("need")
        err.library = m.group("lib")
        return err
    m = _LIBSTDCXX.search(message)
    if m:  # kept as evidence; the kind stays "other"
        err.symbol = m.group("need")
        err.library = m.group("lib")
        return err
    m = _NO_LIB.search(message)
    if m:
        err.kind = "missing_library"
        err.library = m.group("lib")
        return err
    m = _NO_MODULE.search(message)
    leaf = m.group("mod").split(".")[-1] if m else ""
    if m and (leaf in _EXTENSION_MODULES or leaf.endswith(("_cuda", "_gpu"))):
        err.kind = "missing_extension"
        err.library = m.group("mod")
        return err
    if "CUDA driver" in message or "cudaGetDeviceCount" in message or "CUDA initialization" in message:
        err.kind = "cuda_init"
    return err


_TORCH_SYMBOL = re.compile(r"^_ZN?K?(?:3c10|2at|5torch|6caffe2)")
_CPYTHON_TAG = re.compile(r"cpython-(?P<major>3)(?P<minor>\d+)")
_ANY_LIB = re.compile(r"(?P<lib>[^\s:'\"]+\.so[\w.]*): cannot open shared object file")


def import_cause(module: str, status: str, err: Optional[ImportError_], python_version: str = "",
                 signal: Optional[int] = None) -> tuple[str, str]:
    """Why an installed library does not import, as a cause class and its words: ("other_torch",
    "built for another torch (undefined symbol c10::...)"). The classes: other_torch, other_python,
    missing_library, glibc, missing_part, missing_dependency, crashed, hung, other."""
    if status == "crashed":
        return "crashed", f"the import crashed the process (signal {signal})" if signal else "the import crashed the process"
    if status == "timeout":
        return "hung", "the import hung and was stopped"
    if err is None:
        return "other", "it raised"
    message = err.message or ""
    top = module.split(".")[0]
    tag = _CPYTHON_TAG.search(message)
    running = "".join(python_version.split(".")[:2])
    if tag and running and tag.group("major") + tag.group("minor") != running:
        return "other_python", f"built for another Python (a cpython-{tag.group('major')}{tag.group('minor')} library; this is Python {python_version})"
    if err.kind == "undefined_symbol":
        symbol = err.symbol or ""
        if symbol.startswith(("Py", "_Py")):
            return "other_python", f"built for another Python (undefined symbol {symbol})"
        if _TORCH_SYMBOL.match(symbol):
            return "other_torch", f"built for another torch (undefined symbol {err.demangled or symbol})"
        return "other_torch", f"built against other library versions (undefined symbol {err.demangled or symbol})"
    if err.kind == "glibc":
        return "glibc", f"built for a newer C library than this OS has ({err.symbol} not found)"
    lib = _ANY_LIB.search(message)
    if err.kind == "missing_library" or lib:
        return "missing_library", f"a shared library it loads is missing ({err.library or lib.group('lib')})"
    if err.type == "SyntaxError":
        return "other_python", "written for a newer Python (SyntaxError)"
    missing = _NO_MODULE.search(message)
    if missing:
        name = missing.group("mod")
        if name.split(".")[0] == top:
            return "missing_part", f"part of the package is missing ({name}: an incomplete install, or a build for another Python)"
        return "missing_dependency", f"a dependency is missing ({name.split('.')[0]})"
    return "other", err.type or "it raised"


@functools.lru_cache(maxsize=256)
def demangle(symbol: str) -> Optional[str]:
    """Itanium C++ demangling via libstdc++'s __cxa_demangle, else c++filt, else None."""
    if not symbol.startswith("_Z"):
        return None
    result = _demangle_ctypes(symbol)
    if result is None:
        result = _demangle_cxxfilt(symbol)
    return result


def _demangle_ctypes(symbol: str) -> Optional[str]:
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        fn = lib.__cxa_demangle
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    status = ctypes.c_int()
    ptr = fn(symbol.encode(), None, None, ctypes.byref(status))
    if not ptr or status.value != 0:
        return None
    try:
        return ctypes.string_at(ptr).decode(errors="replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(ptr))


def _demangle_cxxfilt(symbol: str) -> Optional[str]:
    exe = shutil.which("c++filt")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, symbol], capture_output=True, text=True, timeout=5, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out if out and out != symbol else None


def symbol_abi(symbol: str) -> Optional[bool]:
    """Which C++ ABI a mangled symbol was compiled with: True = C++11 ABI, False = old, None = no std::string in it."""
    if "B5cxx11" in symbol or "__cxx11" in symbol:
        return True
    demangled = demangle(symbol)
    if demangled is not None:
        # The old ABI's std::string demangles as std::string / std::basic_string<...> without __cxx11.
        return False if re.search(r"std::(basic_)?string\b", demangled) else None
    # No demangler: old-ABI std::string is the substitution "Ss", which follows a type qualifier
    # or the end of a name (ESs, RKSs, PSs, NSs); std::__cxx11::basic_string never uses it.
    return False if re.search(r"[EKRPN]Ss", symbol[2:]) else None


# The types whose mangled names differ between the two C++ ABIs (libstdc++'s dual ABI: std::string,
# std::list, the locale facets, ios_base::failure, string streams); a symbol without any is spelled
# the same under both, so the ABI cannot be why it is missing.
_ABI_DEPENDENT = re.compile(r"__cxx11|std::(?:basic_string|w?string|list|ios_base|locale|basic_\w*stream|\w*stringbuf|\w*facet)\b")


def abi_neutral(symbol: str) -> bool:
    """True when the symbol demangles and holds no type whose name the C++ ABI changes; False where
    it does or where nothing here can demangle it (then the ABI is not ruled out)."""
    demangled = demangle(symbol)
    return demangled is not None and symbol_abi(symbol) is None and not _ABI_DEPENDENT.search(demangled)


def explain_undefined_symbol(symbol: str, torch_cxx11_abi: Optional[bool]) -> str:
    """One sentence on which side is off: the C++ ABI or the torch version. Where torch's ABI is
    unknown (a log with no torch to compare) and the symbol's name depends on the ABI, both causes
    are said, with what tells them apart."""
    abi = symbol_abi(symbol)
    if abi is not None and torch_cxx11_abi is not None and abi != torch_cxx11_abi:
        built = "the C++11 ABI (cxx11abiTRUE)" if abi else "the old pre-C++11 ABI (cxx11abiFALSE)"
        has = "the C++11 ABI" if torch_cxx11_abi else "the old ABI"
        return f"the extension was compiled with {built}, but this torch uses {has}"
    release = "the extension was compiled against a different torch release: this symbol exists in that torch's libraries and not in this one's"
    if torch_cxx11_abi is not None:
        return release
    if abi_neutral(symbol):
        return release + " (its name is spelled the same under both C++ ABIs, so an ABI mismatch would not make it missing)"
    built = {True: " the C++11 ABI (cxx11abiTRUE)", False: " the old pre-C++11 ABI (cxx11abiFALSE)"}.get(abi, "")
    return ("the text does not show which side is off: either the extension was compiled against a different torch release, "
            f"or with{built or ' the other C++ ABI'}{' while torch uses the other one' if built else ' than torch'}; "
            "`attn-doctor explain --check --python` with the training environment's interpreter decides it, reading that "
            "torch's release and ABI (`torch._C._GLIBCXX_USE_CXX11_ABI`, True for the C++11 ABI)")


# A line break inside a mangled name (a terminal or a log viewer wrapping at a column): the next
# line holds the name's tail and nothing before it.
_SYMBOL_TAIL = re.compile(r"(?P<tail>[A-Za-z0-9_$]{1,400})(?=$|[\s,;)'\"])")
_SOURCE_NAME = re.compile(r"(?<![0-9ST])(?P<n>[1-9]\d*)")


def _cut_short(symbol: str) -> bool:
    """A length-prefixed source name (`9SetDevice`) that runs past the symbol's end: the name was cut.
    The check for when nothing here demangles."""
    i = 2
    while True:
        m = _SOURCE_NAME.search(symbol, i)
        if m is None:
            return False
        end = m.end() + int(m.group("n"))
        if end > len(symbol):
            return True
        i = end


def rejoined_symbol(cut: str, following: list[str]) -> Optional[tuple[str, int]]:
    """(the whole symbol, how many of `following` it took) where `cut` is a mangled name broken at a
    line's end and the next lines begin with its tail; None otherwise. A name that demangles whole is
    never extended (a word on the next line would demangle too: lower-case letters are types)."""
    if not cut.startswith("_Z"):
        return None
    have_demangler = demangle("_ZN3c104cuda9SetDeviceEi") is not None
    if (demangle(cut) is not None) if have_demangler else not _cut_short(cut):
        return None
    whole = cut
    for used, line in enumerate(following[:3], 1):
        m = _SYMBOL_TAIL.match(line)
        if m is None:
            return None
        whole += m.group("tail")
        if not have_demangler:
            return whole, used  # the name was shown cut; no demangler to say where it ends
        if demangle(whole) is not None:
            return whole, used
        if m.end() < len(line):
            return None  # the tail stopped inside this line and the name is still not whole
    return None


def undefined_symbol_evidence(symbol: str, torch_cxx11_abi: Optional[bool]) -> dict[str, str]:
    """What an undefined symbol says, for a probed import and for a log alike: the symbol
    demangled, which side is off, and which C++ ABI the symbol was compiled with."""
    out = {"side": explain_undefined_symbol(symbol, torch_cxx11_abi)}
    demangled = demangle(symbol)
    if demangled is not None:  # a name cut short, or no demangler here: never the raw name under "demangled"
        out["demangled"] = demangled
    abi = symbol_abi(symbol)
    if abi is not None:
        out["symbol_abi"] = "C++11 ABI (cxx11abiTRUE)" if abi else "old ABI (cxx11abiFALSE)"
    return out


def wheel_tag(
    flash_attn_version: Optional[str],
    torch_version: Optional[str],
    cuda_version: Optional[str],
    cxx11_abi: Optional[bool],
    python_version: Optional[str],
) -> Optional[str]:
    """The name of the flash-attn release wheel that matches this torch, in upstream's naming, which
    changed over the releases (flash-attention's setup.py, get_wheel_url, at each tag): from 2.7.0 the
    CUDA major (cu11, cu12); 2.6.1-2.6.3 cu118 / cu123; 2.4.0-2.6.0 cu118 / cu122; 2.2.3-2.3.x torch's
    own CUDA (cu118, cu121), cu122 for torch 2.1; before that torch's own CUDA."""
    if not (flash_attn_version and torch_version and cuda_version and python_version and cxx11_abi is not None):
        return None
    try:
        from packaging.version import Version

        fa = Version(flash_attn_version)
        torch_v = Version(torch_version.split("+")[0])
        cuda = Version(cuda_version)
    except ValueError:
        return None
    if fa >= Version("2.7.0"):
        cuda_tag = f"{cuda.major}"
    elif fa >= Version("2.4.0"):
        cuda_tag = "118" if cuda.major == 11 else "123" if fa >= Version("2.6.1") else "122"
    elif fa >= Version("2.2.3") and (torch_v.major, torch_v.minor) == (2, 1):
        cuda_tag = "122"
    else:
        cuda_tag = f"{cuda.major}{cuda.minor}"
    torch_mm = f"{torch_v.major}.{torch_v.minor}"
    py = "cp" + "".join(python_version.split(".")[:2])
    abi = "TRUE" if cxx11_abi else "FALSE"
    return f"flash_attn-{flash_attn_version}+cu{cuda_tag}torch{torch_mm}cxx11abi{abi}-{py}-{py}-linux_x86_64.whl"


_WHEEL_BUILD = re.compile(r"\+cu(?P<cuda>\d+)torch(?P<torch>[\d.]+)cxx11abi(?P<abi>TRUE|FALSE)", re.IGNORECASE)


def wheel_build(url: Optional[str]) -> Optional[dict]:
    """What a flash-attn release wheel's file name says it was built for."""
    if not url:
        return None
    m = _WHEEL_BUILD.search(url)
    if not m:
        return None
    return {"cuda": m.group("cuda"), "torch": m.group("torch"), "cxx11_abi": m.group("abi").upper() == "TRUE"}


# FlashAttention 4 (flash-attn-4) runs on NVIDIA's CuTe DSL, whose native libraries come per CUDA
# major: nvidia-cutlass-dsl always brings nvidia-cutlass-dsl-libs-cu12, and its `cu13` extra (also
# flash-attn-4's `cu13` extra) brings -libs-cu13. flash-attn-4 4.0.0b36 has no `cu12` extra: the
# plain install is the CUDA 12 one.
CUTE_DSL_LIBS = {12: "nvidia-cutlass-dsl-libs-cu12", 13: "nvidia-cutlass-dsl-libs-cu13"}


def cuda_major(cuda_version: Optional[str]) -> Optional[int]:
    """'13.0' -> 13; None for a CPU or ROCm build or a version that does not parse."""
    try:
        return int(str(cuda_version).split(".")[0])
    except (TypeError, ValueError):
        return None


def fa4_extra(cuda_version: Optional[str]) -> Optional[str]:
    """The flash-attn-4 extra that installs the CuTe DSL libraries for torch's CUDA: "[cu13]" for
    CUDA 13; None for CUDA 12 (the plain install) and where the CUDA version is unknown."""
    return "[cu13]" if cuda_major(cuda_version) == 13 else None


# A dtype as attention kernels' refusals print it (SDPA: `c10::BFloat16`, `float`, `struct c10::Half`
# on Windows; flex_attention: `torch.float32`), as torch names it.
_DTYPE_NAMES = {"float": "float32", "float32": "float32", "double": "float64", "float64": "float64",
                "bfloat16": "bfloat16", "half": "float16", "float16": "float16"}


def qkv_cast(query: Optional[str], key: Optional[str], value: Optional[str]) -> dict[str, str]:
    """What a refusal of mixed q/k/v dtypes says to cast: the fp32 ones among them to the one half
    dtype beside them, the dtype the model computes in (the fp32 ones came out of a promotion: an
    fp32 norm, rotary table or parameter). {} unless the message shows one half dtype and fp32."""
    named = {}
    for role, text in (("q", query), ("k", key), ("v", value)):
        name = re.sub(r"^(?:struct\s+)?(?:c10::|torch\.)", "", (text or "").strip()).lower()
        if name not in _DTYPE_NAMES:
            return {}
        named[role] = _DTYPE_NAMES[name]
    halves = {d for d in named.values() if d in ("bfloat16", "float16")}
    promoted = [r for r, d in named.items() if d in ("float32", "float64")]
    if len(halves) != 1 or not promoted:
        return {}
    half = halves.pop()
    kept = [r for r, d in named.items() if d == half]
    whose = f"{kept[0]}'s dtype" if len(kept) == 1 else f"the dtype of {' and '.join(kept)}"
    return {"cast_which": " and ".join(promoted), "cast_to": f"{half} ({whose})"}
