"""Whether a module Python cannot find is a package's compiled part, told by the text's own words:
the module's name (a project's `knn_cuda`, `dcn_C`), or the traceback's code line that imports it
(`import curope as _kernels  # run python setup.py install`). A project names its compiled module
in many ways, but the words it uses for one are few. Pure: the lines only."""

from __future__ import annotations

import re
from typing import Optional

# a word of the module's own name that names a compiled part, joined to the project's name by "_"
# ("_backend(s)", "_kernel", "_cpp" name Python modules, bindings and Jupyter kernels as often:
# storage_backends, llm_backend, bash_kernel, llama_cpp)
_NAMED = re.compile(r"^[A-Za-z]\w*_(?:(?i:cuda|csrc|cext)|C)$")
# packages installed from an index (pure Python, or with rules of their own): missing, they are to
# install, not to build
_INSTALLED = re.compile(r"^(?:torch|triton|xformers|vllm|flash_attn|sgl_kernel|selective_scan|causal_conv1d|mamba_ssm|"
                        r"torchvision|torchaudio|torch_tensorrt|tensorrt|tensorflow|tf|keras|jax|jaxlib|numba|pycuda|cupy|"
                        r"numpy|scipy|pybind11|ninja|cmake|setuptools|onnx|onnxruntime|ctranslate2|apex|deepspeed|"
                        r"bitsandbytes|transformers|accelerate|matplotlib|celery|django|sqlalchemy|langchain|"
                        r"llama_index|my|your|the|test|tests|custom|common|default)(?:_|$)", re.I)
# the name the code gives it on import (private, and a word for a compiled part), or a comment on the
# import line that says the module is built by the project's build step
_ALIAS = re.compile(r"^(?:\.\w+)*\s+as\s+_(?:\w+_)?(?:backends?|kernels?|cuda|cpp|csrc|native|ext|C|lib)\b")
# a package's folder of Cython-compiled modules (pandas._libs, a project's data._libs.rolling): a
# module under it is compiled by the package's build step, never written in Python
_LIBS_SEGMENT = "_libs"
_BUILT = re.compile(r"#.*(?:\bsetup\.py\b|\bbuild_ext\b|\bmake\.sh\b|\bnvcc\b|\b(?:CUDA|C\+\+) extension\b)", re.I)


def compiled_module_named(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """"No module named 'M'" where M is a package's compiled part: its top-level name joins the
    project's name to a word for one (x_cuda, x_C, x_csrc), or the code line just above imports M
    under a private name for one (`as _kernels`, `as _C`) or with a comment that the project's
    build step makes it. {}; None otherwise, and for a package one installs from an index."""
    module = groups.get("module") or ""
    if not module or len(module) > 120 or _INSTALLED.match(module):
        return None
    if "." not in module and _NAMED.match(module):
        return {}
    if _LIBS_SEGMENT in module.split(".")[1:-1]:
        return {}
    last = re.escape(module.rsplit(".", 1)[-1])
    imported = re.compile(r"^\s*(?:import\s+" + re.escape(module) + r"\b|from\s+[\w.]+\s+import\s+(?:\(?\s*)?(?:\w+\s*,\s*)*"
                          + last + r"\b)(?P<rest>.{0,300})")
    for line in before[-4:]:
        m = imported.match(line)
        if m is not None and (_ALIAS.match(m.group("rest")) or _BUILT.search(m.group("rest"))):
            return {}
    return None
