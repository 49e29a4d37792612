"""The protocol every problem follows, so every recipe and criterion runs on it unchanged.

A problem owns its data and its model's forward/backward; recipes and ``fit`` only see
parameter dicts. Implement :class:`Problem` (a ``typing.Protocol``: no base class needed).
This module imports nothing from ``stepsim.recipes``: problems sit below recipes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from stepsim.core.sparsity import ParamSpec

#: the held-out splits a problem's ``item_errors(params, split)`` reads: choices made from
#: data (learning rates, regularisers) read "validation", verdicts read "test"
ITEM_SPLITS = ("test", "validation")


@runtime_checkable
class Problem(Protocol):
    """What ``fit`` needs from a problem.

    specs: name -> :class:`ParamSpec` for every parameter (which are N:M-sparsified, with
        their default N:M and grouping axis).
    init_params(rng): a fresh dict name -> C-contiguous float32/float64 array; all
        randomness from ``rng`` (a ``numpy.random.Generator``).
    sample_batch(rng): one minibatch (any object ``loss_and_grad`` understands), drawn
        with ``rng`` only.
    loss_and_grad(params, batch) -> (loss, grads): the minibatch loss (a float) and its
        gradient, a dict with every parameter's name, each array of its parameter's
        shape and dtype. It must not modify ``params`` (recipes share arrays between
        steps; the forward weights of a dense phase are the parameters themselves).
    evaluate(params) -> dict of floats: held-out metrics (e.g. test loss, accuracy);
        deterministic (no randomness), and it must not modify ``params``.
    config() -> dict of JSON-ready values: the constructor arguments, for provenance.

    Optional, for the paper checks: ``item_errors(params, split="test")`` -> float64 array,
    one error per held-out item of ``split`` (one of :data:`ITEM_SPLITS`; their mean is the
    error the checks compare), and ``diverged_item_errors(split="test")``, the same for a
    run that went non-finite.
    """

    specs: Mapping[str, ParamSpec]

    def init_params(self, rng: np.random.Generator) -> dict: ...

    def sample_batch(self, rng: np.random.Generator) -> Any: ...

    def loss_and_grad(self, params: Mapping, batch: Any) -> tuple[float, dict]: ...

    def evaluate(self, params: Mapping) -> dict: ...

    def config(self) -> dict: ...
