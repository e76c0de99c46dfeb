"""Whether a module Python cannot find is a package's compiled part, told by the text's own words:
the module's name (a project's `grouped_gemm_backend`, `droid_backends`), or the traceback's code
line that imports it (`import curope as _kernels  # run python setup.py install`). A project names
its compiled module in many ways, but the words it uses for one are few. Pure: the lines only."""

from __future__ import annotations

import re
from typing import Optional

# a word of the module's own name that names a compiled part, joined to the project's name by "_"
# (a bare "backend" is too often a Python module of that name; "_cpp" and "_kernel" name bindings
# and Jupyter kernels as often: llama_cpp, bash_kernel)
_COMPILED_WORD = r"(?:backends?|cuda|csrc|cext|C)"
_NAMED = re.compile(r"^[A-Za-z]\w*_" + _COMPILED_WORD + r"$")
# packages of that shape that are pure Python, or have rules of their own (flash-attn's, mamba's)
_OTHER = re.compile(r"^(?:torch|triton|xformers|vllm|flash_attn|sgl_kernel|selective_scan|causal_conv1d|mamba_ssm|"
                    r"torchvision|torchaudio|tensorflow|tf|keras|jax|numba|pycuda|cupy|matplotlib|celery|django|"
                    r"sqlalchemy|langchain|llama_index|my|your|the|test|tests|custom|common|default)_")
# the name the code gives it on import, or a comment on the import line that says it is built
_ALIAS = re.compile(r"^\s+as\s+_?(?:\w+_)?(?:backends?|kernels?|cuda|cpp|csrc|native|ext|C|lib)\b")
_BUILT = re.compile(r"#.*\b(?:setup\.py|build_ext|make\.sh|compiled?|build|nvcc|CUDA extension|C\+\+ extension)\b", re.I)


def compiled_module_named(groups: dict, before: list[str], after: list[str]) -> Optional[dict]:
    """"No module named 'M'" where M is a package's compiled part: its top-level name joins the
    project's name to a word for one (x_backend, x_cuda, x_C), or the code line just
    above imports M under such a name or with a comment that it is built. {}; None otherwise."""
    module = groups.get("module") or ""
    if not module or len(module) > 120:
        return None
    if "." not in module and _NAMED.match(module) and not _OTHER.match(module):
        return {}
    last = re.escape(module.rsplit(".", 1)[-1])
    imported = re.compile(r"^\s*(?:import\s+" + re.escape(module) + r"\b|from\s+[\w.]+\s+import\s+(?:\(?\s*)?(?:\w+\s*,\s*)*"
                          + last + r"\b)(?P<rest>.{0,300})")
    for line in before[-4:]:
        m = imported.match(line)
        if m is not None and (_ALIAS.match(m.group("rest")) or _BUILT.search(m.group("rest"))):
            return {}
    return None
