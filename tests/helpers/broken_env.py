"""Build real broken Python environments on disk: fake packages that fail to import the way real
CUDA extensions do (undefined C++ symbols, missing extension modules, segfaults, hangs).

Everything here is real: the shared object is compiled by gcc and loaded by the dynamic linker,
the segfault is a real SIGSEGV, the hang is a real sleep. Only the package *names* are borrowed.
"""

from __future__ import annotations

import importlib.machinery
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Optional

# What flash-attn 2.x built with the C++11 ABI asks of a torch built with the old ABI.
CXX11_STRING_ERROR_SYMBOL = "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
EXTENSION_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]  # ".cpython-311-x86_64-linux-gnu.so"


def have_gcc() -> bool:
    return shutil.which("gcc") is not None


def write_module(root: Path, name: str, source: str) -> Path:
    """A package `name` (a folder with __init__.py) under root."""
    package = root / name
    package.mkdir(parents=True, exist_ok=True)
    init = package / "__init__.py"
    init.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return package


def write_dist_info(
    root: Path,
    dist_name: str,
    version: str,
    installer: Optional[str] = "pip",
    url: Optional[str] = None,
) -> Path:
    """The installed-distribution metadata importlib.metadata reads (what `pip install` leaves)."""
    folder = root / f"{dist_name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: {version}\n", encoding="utf-8")
    if installer:
        (folder / "INSTALLER").write_text(installer + "\n", encoding="utf-8")
    if url:
        (folder / "direct_url.json").write_text('{"archive_info": {}, "url": "%s"}' % url, encoding="utf-8")
    return folder


def compile_extension_with_undefined_symbol(root: Path, module: str, symbol: str = CXX11_STRING_ERROR_SYMBOL) -> Path:
    """Compile `<module><EXT_SUFFIX>` that references `symbol`, which nothing defines.

    Python dlopens extensions with RTLD_NOW, so importing it fails exactly like a flash-attn
    wheel built for another torch: `ImportError: <path>.so: undefined symbol: <symbol>`.
    """
    source = root / f"_{module}_src.c"
    source.write_text(
        textwrap.dedent(
            f"""
            /* The C name is arbitrary; the asm label makes the object reference the C++-mangled name. */
            extern void missing_symbol(void) __asm__("{symbol}");
            void call_missing_symbol(void) {{ missing_symbol(); }}
            int PyInit_{module}(void) {{ call_missing_symbol(); return 0; }}
            """
        ),
        encoding="utf-8",
    )
    target = root / f"{module}{EXTENSION_SUFFIX}"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(target), str(source)], check=True, capture_output=True)
    source.unlink()
    return target


# --- the packages the tests install -------------------------------------------------------

# flash_attn laid out as upstream: __init__ imports flash_attn_interface, which imports the
# compiled extension.
FLASH_ATTN_INIT = """
    __version__ = "2.7.4.post1"
    from flash_attn.flash_attn_interface import flash_attn_func
"""
FLASH_ATTN_INTERFACE = """
import flash_attn_2_cuda as flash_attn_gpu


def flash_attn_func(*args, **kwargs):
    return flash_attn_gpu.fwd(*args, **kwargs)
"""


def install_flash_attn(root: Path, extension: str) -> None:
    """flash_attn whose extension is `extension`: "undefined_symbol" (compiled, broken) or "missing"."""
    package = write_module(root, "flash_attn", FLASH_ATTN_INIT)
    (package / "flash_attn_interface.py").write_text(FLASH_ATTN_INTERFACE, encoding="utf-8")
    write_dist_info(
        root,
        "flash_attn",
        "2.7.4.post1",
        url="https://github.com/Dao-AILab/flash-attention/releases/download/v2.7.4.post1/"
        "flash_attn-2.7.4.post1+cu12torch2.6cxx11abiTRUE-cp311-cp311-linux_x86_64.whl",
    )
    if extension == "undefined_symbol":
        compile_extension_with_undefined_symbol(root, "flash_attn_2_cuda")
    elif extension != "missing":
        raise ValueError(extension)


def install_segfaulting_xformers(root: Path) -> None:
    write_module(
        root,
        "xformers",
        """
        __version__ = "0.0.29.post1"
        import ctypes

        ctypes.string_at(0)  # a real SIGSEGV, as a broken CUDA extension gives
        """,
    )
    write_dist_info(root, "xformers", "0.0.29.post1")


def install_hanging_fla(root: Path, pid_file: Path) -> None:
    write_module(
        root,
        "fla",
        f"""
        import os
        import time

        with open({str(pid_file)!r}, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(600)
        """,
    )
    write_dist_info(root, "flash-linear-attention", "0.2.2")


def install_noisy_flash_attn_interface(root: Path) -> None:
    """A working import (FA3's module name) that writes to stdout, as chatty CUDA libraries do."""
    (root / "flash_attn_interface.py").write_text(
        textwrap.dedent(
            """
            import os
            import sys

            __version__ = "3.0.0b1"
            print("flash_attn_interface: loading kernels")
            sys.stdout.flush()
            os.write(1, b"raw write to fd 1\\n")
            """
        ).lstrip(),
        encoding="utf-8",
    )
    write_dist_info(root, "flash_attn_3", "3.0.0b1")


def install_flash_attn_4_only(root: Path, broken: bool = False) -> None:
    """FlashAttention 4's layout: flash_attn/cute/ with no flash_attn/__init__.py (a namespace
    package, as flash-attn-4 installs it), and its dist-info. Its __version__ is the "0.0.0" that
    the real one reports (it asks for a distribution named "fa4"). `broken`: its CuTe DSL runtime
    is missing, as when nvidia-cutlass-dsl did not install."""
    cute = root / "flash_attn" / "cute"
    cute.mkdir(parents=True, exist_ok=True)
    (cute / "__init__.py").write_text(
        ("import cutlass.cute\n" if broken else "") + '__version__ = "0.0.0"\n\ndef flash_attn_func(q, k, v, causal=False):\n    raise NotImplementedError\n',
        encoding="utf-8",
    )
    write_dist_info(root, "flash-attn-4", "4.0.0b36")


def install_broken_triton_family(root: Path) -> None:
    """A triton whose compiled part is missing (its import fails as an interrupted install leaves
    it: `No module named 'triton._C.libtriton'`), a liger-kernel that imports it, and an fla whose
    dependency is not installed; each with its dist-info."""
    write_module(root, "triton", "from triton._C.libtriton import ir  # the compiled core\n__version__ = '3.6.0'\n")
    write_module(root / "triton", "_C", "")
    write_module(root / "triton", "language", "")
    write_dist_info(root, "triton", "3.6.0")
    write_module(root, "liger_kernel", "import triton\n")
    write_module(root / "liger_kernel", "ops", "")
    write_dist_info(root, "liger-kernel", "0.6.2")
    write_module(root, "fla", "import a_dependency_not_installed\n")
    write_dist_info(root, "fla-core", "0.3.2")
