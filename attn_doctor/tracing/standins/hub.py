"""The Hugging Face kernels hub's attention kernels, off the GPU. ``get_kernel(repo_id, ...)``
returns a module built for the machine it runs on, downloaded from the Hub: on a machine without a
GPU (or without network) there is none (``Cannot find a build variant for this system``). The
stand-in ``kernels`` package (registry.py puts it in place where ``kernels`` is not installed) and
the wrapper of a real one (wrappers.py) give, for the attention kernels the doctor knows, a module
with the kernel's own functions, checks and return values, each call recorded under the
repository's name: kernels-community/flash-attn (and flash-attn2: FlashAttention 2's API),
flash-attn3 (FlashAttention 3's), vllm-flash-attn3 (FA3's checks; its flash_attn_func returns
(out, lse) always), sage-attention (SageAttention's sageattn).
"""

from __future__ import annotations

import contextlib
import enum
import types

from ..calls import sinks
from .library import Library

STANDIN_KERNELS_VERSION = "0.16.0"

KNOWN = {
    "kernels-community/flash-attn": "fa2",
    "kernels-community/flash-attn2": "fa2",
    "kernels-community/flash-attn3": "fa3",
    "kernels-community/vllm-flash-attn3": "vllm_fa3",
    "kernels-community/sage-attention": "sage",
    "kernels-community/sage_attention": "sage",
}


def kind_of(repo_id):
    """The API family of a Hub attention kernel ("fa2", "fa3", "vllm_fa3", "sage"), or None."""
    if not isinstance(repo_id, str):
        return None
    base = repo_id.split(":", 1)[0].split("@", 1)[0].strip()
    return KNOWN.get(base)


def hub_specs(repo, kind):
    """The attention functions of a kernel loaded from the Hugging Face kernels hub (``get_kernel``):
    the FlashAttention 2 / 3 and SageAttention APIs (``kind``: kind_of's), under the repository's
    name, judged by the rules of the library whose API they have."""
    from . import fa3, sage

    table = {"fa2": sinks.FLASH_ATTN2, "fa3": fa3.SPECS, "vllm_fa3": fa3.SPECS, "sage": sage.SPECS}[kind]
    return {name: spec.renamed("%s:%s" % (repo, name)) for name, spec in table.items()}


def kernel_module(repo_id):
    """A module standing for the Hub kernel ``repo_id`` (one the doctor knows)."""
    from . import fa2 as fa2_standin, fa3 as fa3_standin, sage as sage_standin

    kind = kind_of(repo_id)
    base = repo_id.split(":", 1)[0].split("@", 1)[0].strip()
    specs = hub_specs(base, kind)
    mod = types.ModuleType(base.split("/")[-1].replace("-", "_"))
    mod.__attn_doctor_standin__ = True
    mod.__attn_doctor_hub__ = base
    if kind == "fa2":
        functions = {}
        for fn in fa2_standin.STANDIN_FUNCTIONS:
            spec = specs.get(fn.__name__)
            if spec is None:
                continue
            functions[fn.__name__] = _recorded(fn, spec)
    elif kind in ("fa3", "vllm_fa3"):
        functions = fa3_standin.functions_for(specs, always_lse=kind == "vllm_fa3")
    else:
        functions = sage_standin.functions_for(specs)
    for name, fn in functions.items():
        setattr(mod, name, fn)
    return mod


def _recorded(fn, spec):
    """``fn`` (a stand-in that records itself under its own library's name) recorded under ``spec``
    instead: the call is the hub kernel's."""
    from .. import state

    def hub_fn(*args, **kwargs):
        tracer = state.ACTIVE[0]
        if tracer is None:
            return fn(*args, **kwargs)
        return tracer.sink_call(spec, fn, args, kwargs, standin=True)

    hub_fn.__name__ = fn.__name__
    hub_fn.__wrapped__ = fn  # inspect.signature sees the kernel's parameters (transformers filters by them)
    return hub_fn


class UnknownKernel(FileNotFoundError):
    pass


def _unknown(repo_id):
    return UnknownKernel(
        "attn-doctor's stand-in for the kernels hub knows the attention kernels %s; %r is not one of them, and "
        "no Hub kernel can run here: trace on the GPU node (--device cuda) with `kernels` installed"
        % (", ".join(sorted(KNOWN)), repo_id))


def get_kernel(repo_id, revision=None, version=None, backend=None, user_agent=None, trust_remote_code=False):
    if kind_of(repo_id) is None:
        raise _unknown(repo_id)
    return kernel_module(repo_id)


def has_kernel(repo_id, revision=None, version=None, backend=None):
    return kind_of(repo_id) is not None


def get_local_kernel(repo_path, package_name=None, backend=None):
    raise _unknown(str(repo_path))


# kernels' layer API (kernelize, the kernel mappings, the hub-forward decorators), which libraries
# such as transformers import beside get_kernel: inert here, so that every layer keeps its own
# forward, as where no Hub kernel applies.
class Mode(enum.Flag):
    INFERENCE = 1
    TRAINING = 2
    TORCH_COMPILE = 4
    FALLBACK = 8


class _Record(object):
    """A value object of the layer API (Device, CUDAProperties, LayerRepository, ...): keeps what it
    was given."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs
        for key, value in kwargs.items():
            setattr(self, key, value)


def _named(name):
    return type(name, (_Record,), {})


def _keep(*args, **kwargs):
    """A decorator factory of the layer API (use_kernel_forward_from_hub("RMSNorm"),
    use_kernelized_func(fn)): the decorator it returns gives back what it decorates."""
    return lambda obj: obj


def kernelize(model, *args, **kwargs):
    return model


def register_kernel_mapping(*args, **kwargs):
    return None


def replace_kernel_forward_from_hub(*args, **kwargs):
    return None


@contextlib.contextmanager
def use_kernel_mapping(*args, **kwargs):
    yield


def make_kernels_standin(module):
    top = module("kernels", True)
    top.__version__ = STANDIN_KERNELS_VERSION
    top.get_kernel, top.has_kernel, top.get_local_kernel = get_kernel, has_kernel, get_local_kernel
    top.get_locked_kernel = top.load_kernel = top.install_kernel = get_kernel
    top.Mode = Mode
    for name in ("CUDAProperties", "ROCMProperties", "Device", "LayerRepository", "FuncRepository",
                 "LocalLayerRepository", "LocalFuncRepository", "LockedLayerRepository", "LockedFuncRepository"):
        setattr(top, name, _named(name))
    top.use_kernel_forward_from_hub = top.use_kernel_func_from_hub = _keep
    top.kernelize, top.register_kernel_mapping = kernelize, register_kernel_mapping
    top.replace_kernel_forward_from_hub, top.use_kernel_mapping = replace_kernel_forward_from_hub, use_kernel_mapping
    top.__getattr__ = _layer_api  # what a newer kernels adds (use_kernelized_func, ...): inert too
    return {"kernels": top}


def _layer_api(name):
    """A public name of kernels' layer API this stand-in does not list: a value class for a class
    name, else an inert decorator factory."""
    if name.startswith("_"):
        raise AttributeError("module 'kernels' has no attribute %r" % name)
    return _named(name) if name[:1].isupper() else _keep


# The real kernels' get_kernel is wrapped when it imports (registry), each module it returns then
# (wrappers.wrap_hub_module): no functions of its own to wrap here.
LIBRARY = Library(
    top="kernels", family="hub", release="the kernels hub", version=STANDIN_KERNELS_VERSION,
    label="the kernels hub (kernels %s)" % STANDIN_KERNELS_VERSION, kernel="the kernels hub",
    make=make_kernels_standin, distribution="kernels")
