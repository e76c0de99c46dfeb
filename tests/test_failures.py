"""Import-failure classification, demangling and flash-attn wheel naming, on real messages
(KNOWLEDGE.md section 4 and the flash-attn release assets)."""

from __future__ import annotations

import shutil

import pytest

from attn_doctor.failures import (
    _demangle_cxxfilt,
    classify,
    demangle,
    explain_undefined_symbol,
    symbol_abi,
    wheel_build,
    wheel_tag,
)

SITE = "/home/alice/venvs/train/lib/python3.11/site-packages"
FA_SO = f"{SITE}/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"

# c10::Error::Error(c10::SourceLocation, std::string), as referenced by an extension built with
# the C++11 ABI (std::__cxx11::basic_string) and with the old ABI (the "Ss" substitution).
CXX11_SYMBOL = "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
OLD_ABI_SYMBOL = "_ZN3c105ErrorC2ENS_14SourceLocationESs"
OLD_ABI_REF_SYMBOL = "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"  # ..., std::string const&)
# A symbol with no std::string in it: only a torch version mismatch explains it missing.
NO_STRING_SYMBOL = "_ZN3c104cuda9SetDeviceEi"
ABI_TAG_SYMBOL = "_ZNK3c1010TensorImpl4sizeB5cxx11Ev"


# ------------------------------------------------------------------ classify


def test_undefined_symbol_with_library():
    err = classify("ImportError", f"{FA_SO}: undefined symbol: {CXX11_SYMBOL}")
    assert err.type == "ImportError"
    assert err.kind == "undefined_symbol"
    assert err.library == FA_SO
    assert err.symbol == CXX11_SYMBOL
    assert err.demangled == (
        "c10::Error::Error(c10::SourceLocation, "
        "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >)"
    )
    assert err.message.endswith(CXX11_SYMBOL)


def test_undefined_symbol_without_library():
    err = classify("ImportError", f"undefined symbol: {NO_STRING_SYMBOL}")
    assert err.kind == "undefined_symbol"
    assert err.library is None
    assert err.symbol == NO_STRING_SYMBOL
    assert err.demangled == "c10::cuda::SetDevice(int)"


def test_undefined_c_symbol_is_not_demangled():
    err = classify("ImportError", f"{FA_SO}: undefined symbol: cudaGetDriverEntryPointByVersion, version libcudart.so.12")
    assert err.kind == "undefined_symbol"
    assert err.symbol == "cudaGetDriverEntryPointByVersion"
    assert err.demangled is None


def test_missing_extension_module():
    err = classify("ModuleNotFoundError", "No module named 'flash_attn_2_cuda'")
    assert err.kind == "missing_extension"
    assert err.library == "flash_attn_2_cuda"
    assert err.symbol is None


@pytest.mark.parametrize("module", ["flash_attn_3_cuda", "xformers._C", "rotary_emb", "my_ops_cuda"])
def test_other_missing_extensions(module):
    assert classify("ModuleNotFoundError", f"No module named '{module}'").kind == "missing_extension"


@pytest.mark.parametrize("module", ["torch", "einops", "flash_attn.ops.triton"])
def test_missing_pure_python_module_is_not_an_extension(module):
    err = classify("ModuleNotFoundError", f"No module named '{module}'")
    assert err.kind == "other"
    assert err.library is None


@pytest.mark.parametrize("lib", ["libcudart.so.12", "libcudart.so.11.0", "libcublasLt.so.12", "libnvrtc.so.13"])
def test_missing_cuda_runtime_library(lib):
    err = classify("ImportError", f"{lib}: cannot open shared object file: No such file or directory")
    assert err.kind == "missing_library"
    assert err.library == lib


# torch's own libraries (the extension was loaded without torch) and the driver's libcuda are
# other causes than a CUDA runtime of another major: not "missing_library".
@pytest.mark.parametrize("lib", ["libc10_cuda.so", "libc10.so", "libtorch_cpu.so", "libcuda.so.1"])
def test_missing_non_runtime_library_is_not_a_cuda_mismatch(lib):
    assert classify("ImportError", f"{lib}: cannot open shared object file: No such file or directory").kind == "other"


def test_glibc_too_old():
    message = f"/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by {FA_SO})"
    err = classify("ImportError", message)
    assert err.kind == "glibc"
    assert err.symbol == "GLIBC_2.32"
    assert err.library == FA_SO


def test_libstdcxx_too_old():
    # An old libstdc++ (often a conda env's own), not an old OS: not "glibc", whose rule would
    # blame the OS's C library; the versions stay as evidence.
    message = f"/usr/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by {FA_SO})"
    err = classify("ImportError", message)
    assert err.kind == "other"
    assert err.symbol == "GLIBCXX_3.4.32"
    assert err.library == FA_SO


@pytest.mark.parametrize(
    "message",
    [
        "CUDA driver version is insufficient for CUDA runtime version",
        "CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). "
        "Please update your GPU driver by downloading and installing a new version from the URL: "
        "http://www.nvidia.com/Download/index.aspx",
        "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
        "NumCudaDevices() that might have already set an error? Error 804: forward compatibility was "
        "attempted on non supported HW",
    ],
)
def test_cuda_init_failures(message):
    assert classify("RuntimeError", message).kind == "cuda_init"


def test_unknown_failure_is_other_and_keeps_the_message():
    err = classify("AttributeError", "module 'torch.library' has no attribute 'custom_op'")
    assert err.kind == "other"
    assert err.type == "AttributeError"
    assert err.message == "module 'torch.library' has no attribute 'custom_op'"
    assert (err.symbol, err.library, err.demangled) == (None, None, None)


# ------------------------------------------------------------------ demangle


def test_demangle():
    assert demangle(NO_STRING_SYMBOL) == "c10::cuda::SetDevice(int)"
    assert demangle(OLD_ABI_SYMBOL) == "c10::Error::Error(c10::SourceLocation, std::string)"
    assert demangle(ABI_TAG_SYMBOL) == "c10::TensorImpl::size[abi:cxx11]() const"


@pytest.mark.parametrize("symbol", ["cudaMalloc", "_ZN3c10", "PyInit_flash_attn_2_cuda"])
def test_demangle_gives_none_for_what_is_not_a_mangled_name(symbol):
    assert demangle(symbol) is None


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="no c++filt")
def test_cxxfilt_fallback_agrees_with_libstdcxx():
    assert _demangle_cxxfilt(CXX11_SYMBOL) == demangle(CXX11_SYMBOL)
    assert _demangle_cxxfilt("not_mangled") is None


# ------------------------------------------------------------------ which ABI, which side


def test_symbol_abi_cxx11():
    assert symbol_abi(CXX11_SYMBOL) is True
    assert symbol_abi(ABI_TAG_SYMBOL) is True


def test_symbol_abi_unknown_without_strings():
    assert symbol_abi(NO_STRING_SYMBOL) is None


# Regression: the old-ABI "Ss" substitution follows a letter (ESs, RKSs), and an earlier
# look-behind rejected exactly those, so the classic ...SourceLocationESs gave None.
@pytest.mark.parametrize("symbol", [OLD_ABI_SYMBOL, OLD_ABI_REF_SYMBOL])
def test_symbol_abi_old(symbol):
    assert symbol_abi(symbol) is False


def test_explain_abi_mismatch():
    text = explain_undefined_symbol(CXX11_SYMBOL, torch_cxx11_abi=False)
    assert "C++11 ABI (cxx11abiTRUE)" in text
    assert "this torch uses the old ABI" in text


def test_explain_old_abi_extension_on_cxx11_torch():
    # flash-attn built with cxx11abiFALSE on a torch 2.6+cu126 / 2.7+ (C++11 ABI) wheel.
    text = explain_undefined_symbol(OLD_ABI_SYMBOL, torch_cxx11_abi=True)
    assert "cxx11abiFALSE" in text
    assert "this torch uses the C++11 ABI" in text


@pytest.mark.parametrize(
    ("symbol", "torch_abi"),
    [(CXX11_SYMBOL, True), (NO_STRING_SYMBOL, True), (NO_STRING_SYMBOL, False)],
)
def test_explain_version_mismatch(symbol, torch_abi):
    text = explain_undefined_symbol(symbol, torch_cxx11_abi=torch_abi)
    assert "different torch release" in text
    assert "ABI" not in text


def test_an_unknown_torch_abi_leaves_both_sides_open_for_a_symbol_the_abi_spells():
    # a log with no torch to compare: the C++11-ABI string in the name may be the cause, or the release
    text = explain_undefined_symbol(CXX11_SYMBOL, torch_cxx11_abi=None)
    assert "either" in text and "different torch release" in text and "C++11 ABI (cxx11abiTRUE)" in text


@pytest.mark.skipif(demangle(NO_STRING_SYMBOL) is None, reason="no C++ demangler here")
def test_an_unknown_torch_abi_rules_the_abi_out_for_a_symbol_spelled_the_same_under_both():
    text = explain_undefined_symbol(NO_STRING_SYMBOL, torch_cxx11_abi=None)
    assert "different torch release" in text and "same under both C++ ABIs" in text and "either" not in text


# ------------------------------------------------------------------ wheel names


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("2.7.4.post1", "2.6.0+cu124", "12.4", False, "3.11.7"),
            "flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl",
        ),
        (
            ("2.8.3", "2.7.1+cu126", "12.6", True, "3.12.3"),
            "flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp312-cp312-linux_x86_64.whl",
        ),
        (
            ("2.7.0.post2", "2.4.1", "12.1", False, "3.10.14"),
            "flash_attn-2.7.0.post2+cu12torch2.4cxx11abiFALSE-cp310-cp310-linux_x86_64.whl",
        ),
    ],
)
def test_wheel_tag(args, expected):
    assert wheel_tag(*args) == expected


@pytest.mark.parametrize(
    "args",
    [
        (None, "2.6.0+cu124", "12.4", False, "3.11"),
        ("2.7.4.post1", None, "12.4", False, "3.11"),
        ("2.7.4.post1", "2.6.0+cpu", None, False, "3.11"),  # CPU torch: there is no matching wheel
        ("2.7.4.post1", "2.6.0+cu124", "12.4", None, "3.11"),
        ("2.7.4.post1", "2.6.0+cu124", "12.4", False, None),
    ],
)
def test_wheel_tag_needs_every_fact(args):
    assert wheel_tag(*args) is None


# flash-attn releases up to 2.6.3 name the CUDA build with major and minor, each range its own
# (setup.py's get_wheel_url at each tag; v2.6.3 assets: +cu123torch2.4 / +cu118torch2.4); 2.7.0 on +cu12.
@pytest.mark.parametrize("fa, torch, cuda, expected", [
    ("2.6.3", "2.4.1+cu121", "12.1", "flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp310-cp310-linux_x86_64.whl"),
    ("2.6.3", "2.3.1+cu118", "11.8", "flash_attn-2.6.3+cu118torch2.3cxx11abiFALSE-cp310-cp310-linux_x86_64.whl"),
    ("2.5.8", "2.3.0+cu121", "12.1", "flash_attn-2.5.8+cu122torch2.3cxx11abiFALSE-cp310-cp310-linux_x86_64.whl"),
    ("2.3.6", "2.1.2+cu121", "12.1", "flash_attn-2.3.6+cu122torch2.1cxx11abiFALSE-cp310-cp310-linux_x86_64.whl"),
    ("2.3.6", "2.0.1+cu118", "11.8", "flash_attn-2.3.6+cu118torch2.0cxx11abiFALSE-cp310-cp310-linux_x86_64.whl"),
])
def test_wheel_tag_in_each_releases_naming(fa, torch, cuda, expected):
    assert wheel_tag(fa, torch, cuda, False, "3.10.14") == expected


RELEASES = "https://github.com/Dao-AILab/flash-attention/releases/download"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            f"{RELEASES}/v2.7.4.post1/flash_attn-2.7.4.post1+cu12torch2.6cxx11abiTRUE-cp311-cp311-linux_x86_64.whl",
            {"cuda": "12", "torch": "2.6", "cxx11_abi": True},
        ),
        (
            f"{RELEASES}/v2.6.3/flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp310-cp310-linux_x86_64.whl",
            {"cuda": "123", "torch": "2.4", "cxx11_abi": False},
        ),
        # bdashore3's Windows builds name the full torch version.
        (
            "https://github.com/bdashore3/flash-attention/releases/download/v2.7.0.post2/"
            "flash_attn-2.7.0.post2+cu124torch2.5.1cxx11abiFALSE-cp310-cp310-win_amd64.whl",
            {"cuda": "124", "torch": "2.5.1", "cxx11_abi": False},
        ),
    ],
)
def test_wheel_build(url, expected):
    assert wheel_build(url) == expected


def test_wheel_tag_and_wheel_build_agree():
    name = wheel_tag("2.7.4.post1", "2.6.0+cu124", "12.4", False, "3.11.7")
    assert wheel_build(f"{RELEASES}/v2.7.4.post1/{name}") == {"cuda": "12", "torch": "2.6", "cxx11_abi": False}


@pytest.mark.parametrize(
    "url",
    [
        None,
        "",
        "https://files.pythonhosted.org/packages/ab/cd/flash_attn-2.7.4.post1.tar.gz",
        "https://github.com/mjun0812/flash-attention-prebuild-wheels/releases/download/v0.7.16/"
        "flash_attn-2.6.3+cu128torch2.10-cp311-cp311-linux_x86_64.whl",
    ],
)
def test_wheel_build_of_other_sources(url):
    assert wheel_build(url) is None


@pytest.mark.parametrize(("status", "type_name", "message", "signal", "cause"), [
    ("error", "ImportError", "/v/lib/python3.11/site-packages/xx/_C.so: undefined symbol: _ZN3c104cuda9SetDeviceEi", None, "other_torch"),
    ("error", "ImportError", "/v/site-packages/xx/_C.so: undefined symbol: PyCode_NewWithPosOnlyArgs", None, "other_python"),
    ("error", "ModuleNotFoundError", "No module named 'triton._C.libtriton' (/v/triton/_C/libtriton.cpython-310-x86_64-linux-gnu.so)", None, "other_python"),
    ("error", "ImportError", "/lib64/libc.so.6: version `GLIBC_2.32' not found (required by /v/triton/_C/libtriton.so)", None, "glibc"),
    ("error", "ImportError", "libtriton.so: cannot open shared object file: No such file or directory", None, "missing_library"),
    ("error", "ModuleNotFoundError", "No module named 'triton._C.libtriton'", None, "missing_part"),
    ("error", "ModuleNotFoundError", "No module named 'einops'", None, "missing_dependency"),
    ("crashed", None, None, 11, "crashed"),
    ("timeout", None, None, None, "hung"),
])
def test_import_cause_classes(status, type_name, message, signal, cause):
    from attn_doctor.failures import classify, import_cause

    err = classify(type_name, message) if type_name else None
    got, words = import_cause("triton", status, err, "3.12.3", signal)
    assert got == cause, words
    assert words and "None" not in words
