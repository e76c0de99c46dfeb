"""`attn_doctor.trace` and `attn_doctor.explain` name two things: subpackages (the tracer, the log
explainer) and the Python API's functions (attn_doctor/api.py). Importing a subpackage makes it the
package's attribute of that name, so a plain function there would be replaced by the module on the
first trace. Instead the subpackage itself is made callable: `attn_doctor.trace(model, ...)` runs
api.trace, and `attn_doctor.trace.api` (mock.patch, `import attn_doctor.trace.api as m`) still
reaches the module. Standard library only: the trace child imports the trace package in the target.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class ApiEntry(types.ModuleType):
    """A subpackage that, called, runs the Python API function of its name."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._api_function()(*args, **kwargs)

    def _api_function(self):
        from . import api

        return getattr(api, self.__name__.rpartition(".")[2])

    @property
    def __signature__(self):  # inspect.signature(attn_doctor.trace): the API function's
        import inspect

        return inspect.signature(self._api_function())

    @property
    def __annotations__(self):  # typing.get_type_hints(attn_doctor.trace): the API function's
        # Resolved here, in the API module's namespace: get_type_hints evaluates a module's
        # annotations in the module's own namespace, where the API's names are not defined.
        import typing

        return typing.get_type_hints(self._api_function(), include_extras=True)


def make_callable(module_name: str) -> None:
    sys.modules[module_name].__class__ = ApiEntry
