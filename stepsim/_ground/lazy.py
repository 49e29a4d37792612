"""Lazy public names (PEP 562), shared by every package that exports them.

A package lists ``name -> module`` and gets module-level ``__getattr__`` and ``__dir__``:
the module defining a name is imported on first access only, so importing the package
stays cheap (no numba, no kernels) and ``stepsim --help`` stays instant.
"""

from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict, namespace: dict):
    """``(__getattr__, __dir__)`` for ``package`` whose ``exports`` maps name -> module path."""

    def __getattr__(name):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later accesses skip __getattr__
        return value

    def __dir__():
        return sorted(list(namespace) + list(exports))

    return __getattr__, __dir__
