"""A task that is not a training run: a named function with JSON arguments.

The paper checks' Theorem 1 simulations (C11) and memory counts (C12) run through the same
executors and result store as training runs (:class:`~stepsim.experiments.run.RunSpec`):
a :class:`Task` names its function by ``"module:function"``, its keyword arguments are
JSON values, its ``digest`` identifies it (same function and arguments, same digest), and
calling it returns a JSON-ready dict.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib

from stepsim.experiments.run import canonical_json


@dataclasses.dataclass(frozen=True)
class Task:
    """fn: "module:function"; kwargs: JSON-ready keyword arguments (a dict)."""

    fn: str
    kwargs: dict

    @property
    def digest(self) -> str:
        """SHA-256 (hex) of the canonical JSON of the function and its arguments."""
        text = canonical_json({"task": self.fn, "kwargs": self.kwargs})
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def describe(self) -> str:
        return f"{self.fn}({', '.join(f'{k}={v!r}' for k, v in sorted(self.kwargs.items()))})"

    def __call__(self) -> dict:
        module, name = self.fn.split(":")
        return getattr(importlib.import_module(module), name)(**self.kwargs)


__all__ = ["Task"]
