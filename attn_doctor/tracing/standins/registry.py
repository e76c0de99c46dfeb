"""The stand-ins put in place before the model's code is imported, so that ``try: from LIB import
fn`` takes the branch it takes on the GPU: each library of LIBRARIES (one ``Library`` record in its
own module) that does not import here (a CPU machine, a build for another torch) gets its stand-in
modules in ``sys.modules``: ``flash_attn`` (fa2.py, bert_padding.py), ``flash_attn.cute`` where
flash-attn-4 is not installed (fa4.py), ``xformers`` where it is not installed (xformers.py),
``flash_attn_interface`` (FlashAttention 3, fa3.py), ``sageattention`` (sage.py) and the kernels
hub's ``kernels`` (hub.py). Each is also an installed distribution to ``importlib.metadata`` (a
``NAME-X.dist-info`` in a temporary folder on sys.path) where its record names one: libraries that
check availability by distribution (transformers 5.x indexes ``packages_distributions()
["flash_attn"]``, diffusers' ``is_xformers_available``) see a consistent install. The real
libraries that do import are wrapped instead (wrappers.py). A stand-in is said in the report only
when the model called it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types

from . import fa2, fa3, fa4, hub, sage, xformers

# Every attention library the tracer knows, each one record in its own module (library.Library).
# flash-attn 2 and flash-attn-4 share the package flash_attn (flash_attn.cute): they are put in
# place together, first; each of the others on its own, in this order.
LIBRARIES = (fa2.LIBRARY, fa4.LIBRARY, xformers.LIBRARY, fa3.LIBRARY, sage.LIBRARY, hub.LIBRARY)
_FLASH_ATTN = ("flash_attn", "flash_attn.cute")
OTHER_LIBRARIES = tuple(library for library in LIBRARIES if library.top not in _FLASH_ATTN)
_TOPS = frozenset(library.top.split(".", 1)[0] for library in LIBRARIES)  # the packages stand-ins live in

_INSTALLED = {}  # what this process installed: name -> "standin" | "wrapped"


def _module(name, is_package=False):
    mod = types.ModuleType(name)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=is_package)
    if is_package:
        mod.__path__ = []
    mod.__file__ = __file__
    mod.__attn_doctor_standin__ = True
    return mod


_DIST = {}  # the stand-ins' distribution metadata: {"dir": temporary sys.path entry, "names": [...]}


def _install_distribution(name, version, summary, top=None):
    """A ``NAME-VERSION.dist-info`` on a temporary sys.path entry, so ``importlib.metadata``
    (``version("flash-attn")``, ``packages_distributions()``) agrees with ``import TOP`` (TOP: the
    module the distribution installs, NAME's own by default; FlashAttention 3's flash_attn_3
    installs flash_attn_interface)."""
    top = top or name
    import atexit
    import importlib.metadata
    import shutil
    import tempfile

    if name in _DIST.get("names", ()):
        return
    try:
        importlib.metadata.version(name)
        return  # a broken real install keeps its own metadata
    except importlib.metadata.PackageNotFoundError:
        pass
    folder = _DIST.get("dir")
    if not folder:
        folder = tempfile.mkdtemp(prefix="attn-doctor-standin-")
        sys.path.append(folder)
        _DIST["dir"] = folder
        atexit.register(shutil.rmtree, folder, True)
    info = os.path.join(folder, "%s-%s.dist-info" % (name, version))
    os.makedirs(info, exist_ok=True)
    files = {
        "METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: attn-doctor stand-in for "
                    "%s (checks and messages only)\n" % (name, version, summary),
        "top_level.txt": "%s\n" % top,
        "INSTALLER": "attn-doctor\n",
        "RECORD": "",
    }
    for fname, text in files.items():
        with open(os.path.join(info, fname), "w") as fh:
            fh.write(text)
    importlib.invalidate_caches()
    _DIST.setdefault("names", []).append(name)
    # A transformers imported before the stand-in read the distributions already.
    iu = sys.modules.get("transformers.utils.import_utils")
    mapping = getattr(iu, "PACKAGE_DISTRIBUTION_MAPPING", None) if iu is not None else None
    if isinstance(mapping, dict) and top not in mapping:
        mapping[top] = [name]
        _DIST.setdefault("patched", []).append((mapping, top))


def _remove_distribution():
    import shutil

    folder = _DIST.pop("dir", None)
    if folder:
        if folder in sys.path:
            sys.path.remove(folder)
        shutil.rmtree(folder, ignore_errors=True)
    _DIST.pop("names", None)
    for mapping, name in _DIST.pop("patched", ()):
        mapping.pop(name, None)


def _importable(name):
    """Import ``name``; (True, None) or (False, one-line reason). A missing package is not an error,
    nor is a bare namespace package (flash-attn-4's flash_attn/cute/ holds no FlashAttention 2)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False, None
    if spec is None or (spec.origin in (None, "namespace") and spec.submodule_search_locations):
        return False, None  # the same test as probes/target/torch_probe.py's installed(), which needs no import here
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
        modules = fa2.LIBRARY.make(_module)
        modules["flash_attn"].__path__ = fa4_paths
        if "flash_attn.cute" in sys.modules:  # FlashAttention 4 imported already: the same modules
            modules["flash_attn"].cute = sys.modules["flash_attn.cute"]
        sys.modules.update(modules)
        _install_distribution(fa2.LIBRARY.distribution, fa2.LIBRARY.version, fa2.LIBRARY.release)
        _INSTALLED["flash_attn"] = "standin"
        _INSTALLED["flash_attn_note"] = (
            "flash_attn %s here; used a stand-in that enforces flash-attn %s's checks and messages"
            % ("does not import (" + reason + ")" if reason else "is not installed", fa2.LIBRARY.version))
    if not fa4_paths:
        _install_flash_attn_4_standin()
    for library in OTHER_LIBRARIES:
        _install_other(library)
    return notes


def _install_other(library):
    top = library.top
    mod = sys.modules.get(top)
    if mod is not None and getattr(mod, "__attn_doctor_standin__", False):
        return
    try:
        spec = importlib.util.find_spec(top) if mod is None else mod.__spec__
    except (ImportError, ValueError):
        spec = None
    reason = None
    if spec is not None or mod is not None:
        if not library.import_tested:
            return
        ok, reason = _importable(top)
        if ok:
            if top == "kernels":
                _wrap_real_hub(sys.modules["kernels"])
            return
        for key in list(sys.modules):  # a half-imported broken package must not shadow the stand-in
            if key == top or key.startswith(top + "."):
                del sys.modules[key]
    sys.modules.update(library.make(_module))
    if library.distribution:
        _install_distribution(library.distribution, library.version, top, top=top)
    if top == "kernels":
        _transformers_sees_no_hub()
    _INSTALLED[top] = "%s %s here; used a stand-in that enforces %s's checks and messages" % (
        top, "does not import (" + reason + ")" if reason else "is not installed", library.label)


def _wrap_real_hub(kernels):
    """The real ``kernels``: ``get_kernel`` returns the Hub's module with its attention functions
    recorded (run as they are on CUDA tensors, by the stand-in elsewhere); where the Hub has no
    build for this machine, or cannot be reached, the stand-in's module for a kernel the doctor
    knows, said in a note. Kept until remove_standins."""
    from . import hub as hub_standin
    from .wrappers import wrap_hub_module

    real = getattr(kernels, "get_kernel", None)
    if real is None or getattr(real, "__attn_doctor_wrapper__", False):
        return

    def get_kernel(repo_id, *args, **kwargs):
        try:
            module = real(repo_id, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - no build variant, no network: the stand-in stands in
            if hub_standin.kind_of(repo_id) is None:
                raise
            _INSTALLED["kernels"] = (
                "kernels.get_kernel(%r) cannot load here (%s: %s); used a stand-in that enforces the kernel's checks "
                "and messages" % (repo_id, type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else ""))
            return hub_standin.kernel_module(repo_id)
        return wrap_hub_module(module, repo_id)

    get_kernel.__wrapped__, get_kernel.__attn_doctor_wrapper__ = real, True
    kernels.get_kernel = get_kernel
    _REAL["kernels.get_kernel"] = (kernels, real)


_REAL = {}  # real functions replaced for the trace: key -> (module, original)
_HOOKS = []  # import hooks put on sys.meta_path for the trace


def _transformers_sees_no_hub():
    """The kernels stand-in answers the model's ``import kernels``; it is not an install.
    transformers 5.x asks ``is_kernels_available()`` before it swaps a requested
    ``flash_attention_N`` it finds unusable (always, off the GPU) for the Hub's kernel, which the
    GPU the trace stands for, without kernels, would never do: transformers is told the truth, now
    or as soon as it is imported."""
    iu = sys.modules.get("transformers.utils.import_utils")
    if iu is not None:
        _patch_kernels_check(iu)
    elif not _HOOKS:
        hook = _AfterImport("transformers.utils.import_utils", _patch_kernels_check)
        sys.meta_path.insert(0, hook)
        _HOOKS.append(hook)


def _patch_kernels_check(import_utils):
    original = vars(import_utils).get("is_kernels_available")
    if original is None or getattr(original, "__attn_doctor_wrapper__", False):
        return

    def is_kernels_available(*args, **kwargs):
        return False

    is_kernels_available.__wrapped__, is_kernels_available.__attn_doctor_wrapper__ = original, True
    _swap_in_transformers("is_kernels_available", original, is_kernels_available)
    _PATCHED.append(("is_kernels_available", original, is_kernels_available))


_PATCHED = []  # (name, original, replacement) bound in transformers' modules for the trace


def _swap_in_transformers(name, old, new):
    """Bind ``new`` where a transformers module holds ``old`` under ``name`` (those that imported it
    by name, also after the patch: remove_standins puts ``old`` back everywhere)."""
    for key, module in list(sys.modules.items()):
        # __dict__, not getattr(): transformers' lazy modules import on a missing attribute
        if (key == "transformers" or key.startswith("transformers.")) and \
                (getattr(module, "__dict__", None) or {}).get(name) is old:
            setattr(module, name, new)


class _AfterImport:
    """A meta path finder that runs ``then(module)`` right after module ``name`` is executed (before
    the modules importing it bind its names)."""

    def __init__(self, name, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = getattr(spec, "loader", None)
        if spec is None or not hasattr(loader, "exec_module"):
            return None
        then, real = self.then, loader.exec_module

        def exec_module(module):
            real(module)
            then(module)

        loader.exec_module = exec_module
        return spec


def standin_notes(sink_records):
    """The notes on the stand-ins a trace's model called (said only then: most models never import
    most attention libraries)."""
    called = {r.get("family") for r in sink_records if r.get("standin")}
    hub = any(r.get("standin") and ":" in (r.get("name") or "") for r in sink_records)
    notes = []
    if _INSTALLED.get("flash_attn_note") and _called_directly(sink_records, "flash_attn2"):
        notes.append(_INSTALLED["flash_attn_note"])
    for library in OTHER_LIBRARIES:
        family, note = library.family, _INSTALLED.get(library.top)
        if note and ((family == "hub" and hub) or (family != "hub" and family in called and not (
                family in ("flash_attn3", "sage") and hub and not _called_directly(sink_records, family)))):
            notes.append(note)
    return notes


def _called_directly(sink_records, family):
    return any(r.get("standin") and r.get("family") == family and ":" not in (r.get("name") or "")
               for r in sink_records)


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
    modules = fa4.LIBRARY.make(_module)
    sys.modules.update(modules)
    if parent is not None:
        parent.cute = modules["flash_attn.cute"]
    # said only by a trace that called it (fa4_standin_note): most models never import flash_attn.cute
    _INSTALLED["flash_attn.cute"] = (
        "flash_attn.cute (FlashAttention 4) is not installed here; used a stand-in that enforces flash-attn-4 %s's "
        "dtype checks and messages (its head-dim and GPU checks are judged by the tracer)" % fa4.LIBRARY.version)


def fa4_standin_note(sink_records):
    """The note on FlashAttention 4's stand-in, for a trace whose model called it."""
    note = _INSTALLED.get("flash_attn.cute")
    if note and any(r.get("standin") and r.get("family") == "flash_attn4" for r in sink_records):
        return [note]
    return []


def remove_standins():
    for key in list(sys.modules):
        mod = sys.modules[key]
        if (key.split(".", 1)[0] in _TOPS) and getattr(mod, "__attn_doctor_standin__", False):
            del sys.modules[key]
    for library in OTHER_LIBRARIES:
        _INSTALLED.pop(library.top, None)
    for key, (module, original) in list(_REAL.items()):
        setattr(module, key.rsplit(".", 1)[-1], original)
        del _REAL[key]
    while _PATCHED:
        name, original, replacement = _PATCHED.pop()
        _swap_in_transformers(name, replacement, original)
    while _HOOKS:
        hook = _HOOKS.pop()
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)
    parent = sys.modules.get("flash_attn")
    if parent is not None and getattr(getattr(parent, "cute", None), "__attn_doctor_standin__", False):
        del parent.cute
    _INSTALLED.pop("flash_attn", None)
    _INSTALLED.pop("flash_attn_note", None)
    _INSTALLED.pop("flash_attn.cute", None)
    _remove_distribution()


_NAMES = {}  # a public name of a library's modules ("memory_efficient_attention", "ops") -> those libraries' tops


def _library_names():
    if not _NAMES:
        for library in LIBRARIES:
            for name, mod in library.make(_module).items():
                for attr in [name.rsplit(".", 1)[-1]] + [a for a in vars(mod) if not a.startswith("_")]:
                    _NAMES.setdefault(attr, set()).add(library.top)
    return _NAMES


def missing_library_read(exc):
    """The attention library whose name ``exc`` read off None ("'NoneType' object has no attribute
    'memory_efficient_attention'"), where that library does not import here; else None. The model's
    ``try: import xformers.ops as xops`` / ``except ImportError: xops = None`` left None behind and
    its forward calls through it: the library is missing here (as installed, off the GPU), which is
    the environment's doing, not a fault of the model's line (as an ImportError is)."""
    import re

    if not isinstance(exc, AttributeError):
        return None
    read = re.match(r"'NoneType' object has no attribute '(\w+)'", str(exc))
    if read is None:
        return None
    for top in sorted(_library_names().get(read.group(1), ())):
        if top in _INSTALLED or not _importable(top)[0]:  # its stand-in stands here, or it does not import
            return top
    return None


def standin_installed(name=None):
    """A stand-in is in place in this process (an earlier trace put it there): ``name``'s
    ("flash_attn", "xformers", ...), or any."""
    if name == "flash_attn":
        return _INSTALLED.get("flash_attn") == "standin"
    if name is not None:
        return name in _INSTALLED
    if _INSTALLED.get("flash_attn") == "standin" or any(library.top in _INSTALLED for library in OTHER_LIBRARIES):
        return True
    # what a partial install left (a stand-in module or distribution without its _INSTALLED entry):
    # in place all the same, and remove_standins takes it away
    return bool(_DIST.get("dir")) or any(getattr(mod, "__attn_doctor_standin__", False) for key, mod in list(sys.modules.items())
                                         if key.split(".", 1)[0] in _TOPS)
