"""A missing module read as a project's compiled part only where the text's words say so."""

from __future__ import annotations

import pytest

from attn_doctor.rules.compiled_modules import compiled_module_named


@pytest.mark.parametrize("module, before", [
    ("knn_cuda", []),
    ("dcn_C", []),
    ("DCN_CUDA", []),
    ("curope", ["    import curope as _kernels  # run `python setup.py install`"]),
    ("curope", ["    import curope as _kernels"]),
    ("curope", ["    import curope.kernels as _kernels"]),
    ("roi_align", ["    import roi_align  # built by make.sh"]),
    ("grid_ops", ["    from ops import grid_ops as _C"]),
    # a package's folder of Cython-compiled modules
    ("qlib.data._libs.rolling", []),
    ("pandas._libs.interval", []),
])
def test_a_compiled_part_by_its_name_or_its_import(module, before):
    assert compiled_module_named({"module": module}, before, []) == {}


@pytest.mark.parametrize("module, before", [
    # names that also name Python modules, bindings or packages one installs
    ("storage_backends", []),
    ("llm_backend", []),
    ("bash_kernel", []),
    ("llama_cpp", []),
    ("torch", ["    import torch  # required to build the CUDA extension"]),
    ("pybind11", ["    import pybind11  # needed to build the extension"]),
    ("onnxruntime", ["    import onnxruntime as _backend"]),
    # an import with no word for a compiled part: any module of the project
    ("curope", ["    import curope"]),
    ("utils", ["    import utils as backend  # compile the model"]),
    # the import is of another module
    ("curope", ["    import other as _kernels"]),
    # "_libs" as the top-level package or the module itself names no compiled folder
    ("_libs.rolling", []),
    ("project._libs", []),
    ("", []),
])
def test_no_compiled_part_without_such_words(module, before):
    assert compiled_module_named({"module": module}, before, []) is None
