"""What every attention library the tracer knows declares, in its own module (fa2.py, xformers.py,
...): one ``Library`` record, listed once in registry.LIBRARIES. The registry puts its stand-in in
place where the library does not import, the wrappers record the real one's functions where it
does, and the routes and notes name it, all from this record; the tracer judges each call with the
rules of the call's ``SinkSpec`` (``SinkSpec.judge``), which the library's specs carry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Tuple


@dataclass(frozen=True)
class Library:
    """One attention library: how its stand-in is made and how it is named.

    ``make(module)`` returns the stand-in's modules, ``{name: module}``, each made by
    ``module(name, is_package=False)`` (registry's factory marks them as stand-ins). ``specs``: its
    public functions as attention calls (function name -> SinkSpec, with the library's rules as
    ``judge``). ``real_modules``: where the real library's functions are wrapped, when it imports;
    ``runners()``: function name -> the stand-in's implementation that runs in place of the real
    one off CUDA tensors (None: the real one runs everywhere, as flash-attn 2's does on CPU to raise
    its own error). ``import_tested``: an installed copy is imported to see that it works (one that
    is built for CUDA only may not import at all); where False an installed copy is always wrapped,
    never replaced. ``distribution``: the distribution registered with importlib.metadata beside
    the stand-in, so that libraries checking availability by distribution (transformers,
    diffusers) see a consistent install; None registers none.
    """

    top: str  # the module the model imports: "sageattention"
    family: str  # its calls' family in the trace's records: "sage"
    release: str  # how a route names the library: "sageattention"
    version: str  # the release whose signatures, checks and messages the stand-in has
    label: str  # how a note names the stand-in: "sageattention 2.2.0"
    kernel: str  # how the kernel line names the kernel: "SageAttention"
    make: Callable[[Callable], dict]
    specs: Mapping = field(default_factory=dict)
    real_modules: Tuple[str, ...] = ()
    runners: Optional[Callable[[], dict]] = None
    import_tested: bool = True
    distribution: Optional[str] = None
