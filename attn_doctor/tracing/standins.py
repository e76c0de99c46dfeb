"""Stand-ins for the attention libraries that do not import here, put in place before the model's
code is imported: ``flash_attn`` not importable (a CPU machine, a broken build) gets a stand-in
package in ``sys.modules``, so ``try: from flash_attn import flash_attn_func`` takes the branch it
takes on the GPU (its functions: fa2_standin.py, bert_padding.py); ``flash_attn.cute`` not installed
gets FlashAttention 4's (fa4_standin.py). The flash_attn stand-in is also an installed distribution
to ``importlib.metadata`` (a ``flash_attn-X.dist-info`` in a temporary folder on sys.path):
libraries that check availability by distribution (transformers 5.x indexes
``packages_distributions()["flash_attn"]``) see a consistent install. The real libraries that do
import are wrapped instead (wrappers.py).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types

from . import bert_padding
from .fa2_standin import STANDIN_FLASH_ATTN_VERSION, STANDIN_FUNCTIONS
from .fa4_standin import FA4_RUNNERS, STANDIN_FLASH_ATTN_4_VERSION, fa4_standin

_INSTALLED = {}  # what this process installed: name -> "standin" | "wrapped"


def _module(name, is_package=False):
    mod = types.ModuleType(name)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=is_package)
    if is_package:
        mod.__path__ = []
    mod.__file__ = __file__
    mod.__attn_doctor_standin__ = True
    return mod


def make_flash_attn_standin():
    pkg = _module("flash_attn", is_package=True)
    iface = _module("flash_attn.flash_attn_interface")
    padding = _module("flash_attn.bert_padding")
    pkg.__version__ = STANDIN_FLASH_ATTN_VERSION
    for fn in STANDIN_FUNCTIONS:
        setattr(pkg, fn.__name__, fn)
        setattr(iface, fn.__name__, fn)
    for fn in (bert_padding.index_first_axis, bert_padding.unpad_input, bert_padding.pad_input):
        setattr(padding, fn.__name__, fn)
    pkg.flash_attn_interface = iface
    pkg.bert_padding = padding
    return {"flash_attn": pkg, "flash_attn.flash_attn_interface": iface, "flash_attn.bert_padding": padding}


def make_flash_attn_4_standin():
    cute = _module("flash_attn.cute", is_package=True)
    iface = _module("flash_attn.cute.interface")
    cute.__version__ = STANDIN_FLASH_ATTN_4_VERSION
    for name in FA4_RUNNERS:
        fn = fa4_standin(name)
        setattr(cute, name, fn)
        setattr(iface, name, fn)
    cute.interface = iface
    return {"flash_attn.cute": cute, "flash_attn.cute.interface": iface}


_DIST = {}  # the stand-in's distribution metadata: {"dir": temporary sys.path entry}


def _install_distribution():
    """A ``flash_attn-VERSION.dist-info`` on a temporary sys.path entry, so ``importlib.metadata``
    (``version("flash-attn")``, ``packages_distributions()``) agrees with ``import flash_attn``."""
    import atexit
    import importlib.metadata
    import shutil
    import tempfile

    if _DIST.get("dir"):
        return
    try:
        importlib.metadata.version("flash_attn")
        return  # a broken real install keeps its own metadata
    except importlib.metadata.PackageNotFoundError:
        pass
    folder = tempfile.mkdtemp(prefix="attn-doctor-standin-")
    info = os.path.join(folder, "flash_attn-%s.dist-info" % STANDIN_FLASH_ATTN_VERSION)
    os.makedirs(info)
    files = {
        "METADATA": "Metadata-Version: 2.1\nName: flash_attn\nVersion: %s\nSummary: attn-doctor stand-in for "
                    "flash-attn (checks and messages only)\n" % STANDIN_FLASH_ATTN_VERSION,
        "top_level.txt": "flash_attn\n",
        "INSTALLER": "attn-doctor\n",
        "RECORD": "",
    }
    for name, text in files.items():
        with open(os.path.join(info, name), "w") as fh:
            fh.write(text)
    sys.path.append(folder)
    importlib.invalidate_caches()
    _DIST["dir"] = folder
    atexit.register(shutil.rmtree, folder, True)
    # A transformers imported before the stand-in read the distributions already.
    iu = sys.modules.get("transformers.utils.import_utils")
    mapping = getattr(iu, "PACKAGE_DISTRIBUTION_MAPPING", None) if iu is not None else None
    if isinstance(mapping, dict) and "flash_attn" not in mapping:
        mapping["flash_attn"] = ["flash_attn"]
        _DIST["patched_mapping"] = mapping


def _remove_distribution():
    import shutil

    folder = _DIST.pop("dir", None)
    if folder:
        if folder in sys.path:
            sys.path.remove(folder)
        shutil.rmtree(folder, ignore_errors=True)
    mapping = _DIST.pop("patched_mapping", None)
    if mapping is not None:
        mapping.pop("flash_attn", None)


def _importable(name):
    """Import ``name``; (True, None) or (False, one-line reason). A missing package is not an error,
    nor is a bare namespace package (flash-attn-4's flash_attn/cute/ holds no FlashAttention 2)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False, None
    if spec is None or (spec.origin in (None, "namespace") and spec.submodule_search_locations):
        return False, None  # the same test as probes/torch_probe.py's installed(), which needs no import here
    try:
        importlib.import_module(name)
        return True, None
    except BaseException as exc:  # noqa: BLE001 - a broken extension may raise anything
        return False, "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "")


def install_standins():
    """Before the model's code is imported: a flash_attn stand-in where flash_attn does not import.

    Returns notes (one line each) saying what was put in place and why.
    """
    notes = []
    mod = sys.modules.get("flash_attn")
    if mod is not None and getattr(mod, "__attn_doctor_standin__", False):
        return notes
    # FlashAttention 4 first, found without importing it (its import costs seconds): flash-attn-4
    # alone installs flash_attn/cute/ in a namespace package flash_attn, which the flash_attn
    # stand-in below replaces; the folders holding cute/ then stay its __path__.
    fa4_paths = _fa4_locations()
    ok, reason = _importable("flash_attn")
    if not ok:
        for key in list(sys.modules):  # a half-imported broken package must not shadow the stand-in
            if (key == "flash_attn" or key.startswith("flash_attn.")) and not (
                    fa4_paths and (key == "flash_attn.cute" or key.startswith("flash_attn.cute."))):
                del sys.modules[key]
        modules = make_flash_attn_standin()
        modules["flash_attn"].__path__ = fa4_paths
        if "flash_attn.cute" in sys.modules:  # FlashAttention 4 imported already: the same modules
            modules["flash_attn"].cute = sys.modules["flash_attn.cute"]
        sys.modules.update(modules)
        _install_distribution()
        _INSTALLED["flash_attn"] = "standin"
        notes.append(
            "flash_attn %s here; using a stand-in that enforces flash-attn %s's checks and messages"
            % ("does not import (" + reason + ")" if reason else "is not installed", STANDIN_FLASH_ATTN_VERSION))
    if not fa4_paths:
        _install_flash_attn_4_standin()
    return notes


def _fa4_locations():
    """The folders of the installed flash_attn package that hold flash-attn-4's cute/ subpackage
    (an installed FlashAttention 4, importable or not: its import says which)."""
    try:
        spec = importlib.util.find_spec("flash_attn")
    except (ImportError, ValueError):
        return []
    locations = list(getattr(spec, "submodule_search_locations", None) or ()) if spec is not None else []
    return [p for p in locations if os.path.isfile(os.path.join(p, "cute", "__init__.py"))]


def _install_flash_attn_4_standin():
    mod = sys.modules.get("flash_attn.cute")
    if mod is not None and getattr(mod, "__attn_doctor_standin__", False):
        return
    parent = sys.modules.get("flash_attn")
    for key in list(sys.modules):
        if key == "flash_attn.cute" or key.startswith("flash_attn.cute."):
            del sys.modules[key]
    modules = make_flash_attn_4_standin()
    sys.modules.update(modules)
    if parent is not None:
        parent.cute = modules["flash_attn.cute"]
    # said only by a trace that called it (fa4_standin_note): most models never import flash_attn.cute
    _INSTALLED["flash_attn.cute"] = (
        "flash_attn.cute (FlashAttention 4) is not installed here; used a stand-in that enforces flash-attn-4 %s's "
        "dtype checks and messages (its head-dim and GPU checks are judged by the tracer)" % STANDIN_FLASH_ATTN_4_VERSION)


def fa4_standin_note(sink_records):
    """The note on FlashAttention 4's stand-in, for a trace whose model called it."""
    note = _INSTALLED.get("flash_attn.cute")
    if note and any(r.get("standin") and r.get("family") == "flash_attn4" for r in sink_records):
        return [note]
    return []


def remove_standins():
    for key in list(sys.modules):
        mod = sys.modules[key]
        if (key == "flash_attn" or key.startswith("flash_attn.")) and getattr(mod, "__attn_doctor_standin__", False):
            del sys.modules[key]
    parent = sys.modules.get("flash_attn")
    if parent is not None and getattr(getattr(parent, "cute", None), "__attn_doctor_standin__", False):
        del parent.cute
    _INSTALLED.pop("flash_attn", None)
    _INSTALLED.pop("flash_attn.cute", None)
    _remove_distribution()


def standin_installed():
    return _INSTALLED.get("flash_attn") == "standin"
