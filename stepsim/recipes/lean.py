"""fit's lean step: a recipe's step in place, on buffers the run owns.

A :class:`~stepsim.recipes.Recipe` is pure: its ``update`` copies w and Adam's m and v
before the in-place kernel runs, and its pieces build masked arrays with ``np.where``
(temporaries the size of the weights), so that no caller ever sees an array change. Inside
:func:`stepsim.training.fit` nobody else holds those arrays, and the copies are most of
what a small model's update costs. :class:`LeanStep` runs the same stages in the same
order — :mod:`stepsim.recipes.sequence` says it, for both — through the :class:`InPlace`
form: each piece's in-place implementation (the table in :mod:`stepsim.recipes.sequence`),
so the same bits (tests/recipes/test_lean_step.py checks every registered recipe against
the pure step). A recipe with a piece that lacks its in-place form makes
:meth:`LeanStep.make` raise TypeError naming the piece — never a silent fall-back to the
pure step.

**Buffers.** ``ws`` is the run's :class:`Workspace`: ``ws.like(key, name, array)`` returns
a buffer shaped and typed like ``array``, made on first request and the same array at
every later step; ``ws.bound(key, sources, make)`` keeps an object (e.g. Adam's validated
:class:`~stepsim.core.optim_many.AdamArrays`) as long as ``sources`` are the same objects.

=====================  ==================================================================
w                      ``params``: the run's own copy of the initial weights, made once;
                       the optimizer and the after pieces update it in place; new weights
                       a switch returns are copied in (:meth:`LeanStep.adopt`)
m, v                   the recipe state's own arrays, updated in place (a frozen v* is
                       only read)
forward weights        ``ws.like("forward", name, w)``: Pi * w of each masked parameter
gradients              ``ws.like("grad", name, w)``: a gradient piece or the masker's
                       penalty writes each changed gradient there (the problem's gradient
                       arrays are read, never written; the buffer may be the piece's input,
                       left by an earlier piece: the kernels are element-wise)
w_k                    ``ws.like("w_k", name, w)``: an after piece that reads w_k
                       (``view.params``) after the optimizer moved w declares ``reads_w_k
                       = True`` and gets copies of the masked parameters' w_k (only those:
                       reading another raises KeyError) — the one copy a step makes
=====================  ==================================================================

Masks are applied by select kernels (:mod:`stepsim.core.select`), not ``np.where``. What
still allocates each step: the N:M masks themselves (one byte per weight; the last step's
mask is kept to count flips), the problem's activations and gradients, and small Python
objects.
"""

from __future__ import annotations

import numpy as np

from stepsim.core import select
from stepsim.recipes import sequence


class Workspace:
    """Arrays and objects one run's lean step owns (module docstring, ``ws``)."""

    def __init__(self):
        self._arrays = {}
        self._bound = {}

    def like(self, key: str, name: str, array: np.ndarray) -> np.ndarray:
        """The buffer (key, name): C-contiguous, ``array``'s shape and dtype; made once."""
        buf = self._arrays.get((key, name))
        if buf is None or buf.shape != array.shape or buf.dtype != array.dtype:
            buf = self._arrays[(key, name)] = np.empty(array.shape, array.dtype)
        return buf

    def bound(self, key: str, sources: tuple, make):
        """``make()``'s object, made again whenever ``sources`` are not the same objects
        (by identity) as when it was made."""
        held = self._bound.get(key)
        if held is None or len(held[0]) != len(sources) or any(
                a is not b for a, b in zip(held[0], sources)):
            held = self._bound[key] = (tuple(sources), make())
        return held[1]


class InPlace:
    """The in-place form of each stage (:mod:`stepsim.recipes.sequence`): every piece's
    in-place method, on the buffers of :class:`Workspace` ``ws``. reads_w_k: an after
    piece reads w_k after the optimizer (the form then keeps copies)."""

    def __init__(self, ws: Workspace, reads_w_k: bool = False):
        self.ws = ws
        self.reads_w_k = reads_w_k

    def count_flips(self, old, new) -> int:
        """:func:`~stepsim.recipes.transforms.count_flips` without its ``!=`` temporary."""
        flips = 0
        for name, mask in new.items():
            if mask is None:
                continue
            prev = None if old is None else old.get(name)
            if prev is None:
                flips += int(mask.size - np.count_nonzero(mask))
            elif prev is not mask:
                flips += select.count_changed(prev, mask)
        return flips

    def forward_weights(self, masker, mstate, params, masks, alpha, specs, nm):
        return masker.forward_into(mstate, params, masks, alpha, specs, nm, self.ws)

    def penalize(self, masker, mstate, grads, params, masks, step):
        return masker.penalize_into(mstate, grads, params, masks, step, self.ws)

    def gradient(self, piece, grads, view):
        return piece.apply_into(grads, view, self.ws)

    def after_view(self, view):
        """The view the after pieces read: copies of the masked parameters' w_k when one
        of them reads w_k (the optimizer is about to write w in place)."""
        if not self.reads_w_k:
            return view
        w_k = {}
        for name, mask in view.masks.items():
            if mask is not None:
                w_k[name] = self.ws.like("w_k", name, view.params[name])
                np.copyto(w_k[name], view.params[name])
        return view._replace(params=w_k)

    def optimizer(self, optimizer, opt_state, params, grads, step, total_steps, kw):
        stats = optimizer.update_into(opt_state, params, grads, step, total_steps, self.ws,
                                      **kw)
        return params, opt_state, stats

    def after(self, piece, params, view):
        piece.apply_into(params, view, self.ws)
        return params


def missing_in_place(recipe) -> list[str]:
    """The pieces of ``recipe`` without an in-place form (:mod:`stepsim.recipes.sequence`),
    described. A :class:`~stepsim.recipes.maskers.Masker` has both forms of each stage."""
    missing = []
    if not callable(getattr(recipe.optimizer, "update_into", None)):
        missing.append(f"optimizer {type(recipe.optimizer).__name__} (update_into)")
    for point, pieces in (("gradient", recipe.gradient), ("after", recipe.after)):
        for piece in pieces:
            if not callable(getattr(piece, "apply_into", None)):
                missing.append(f"{point} piece {type(piece).__name__} (apply_into)")
    if recipe.masker is not None:
        for method in ("forward_into", "penalize_into"):
            if not callable(getattr(recipe.masker, method, None)):
                missing.append(f"masker {type(recipe.masker).__name__} ({method})")
    return missing


class LeanStep:
    """A recipe's ``forward`` and ``update`` in place: the step's sequence in the
    :class:`InPlace` form, on the run's own weights (``params``).

    Made by :meth:`make` after ``recipe.init`` (and any switch before step 1); ``params``
    is then the run's weight dict, which the steps update in place.
    """

    def __init__(self, recipe, params):
        self.recipe = recipe
        self.params = {name: np.array(w, order="C", copy=True) for name, w in params.items()}
        self.form = InPlace(Workspace(),
                            reads_w_k=any(getattr(p, "reads_w_k", False) for p in recipe.after))

    @property
    def ws(self) -> Workspace:
        return self.form.ws

    @classmethod
    def make(cls, recipe, params, state, ctx):
        """The LeanStep of ``recipe``. Raises TypeError when a piece has no in-place form.
        Returns None only for weights the engine cannot own (not all float32/float64
        ndarrays): the pure path then raises the error that names them at step 1."""
        missing = missing_in_place(recipe)
        if missing:
            raise TypeError(f"recipe {recipe.name!r}: no in-place form for "
                            f"{', '.join(missing)}; fit's step needs one for every piece "
                            "(the protocol: stepsim.recipes.sequence)")
        arrays = list(params.values())
        if not arrays or any(type(w) is not np.ndarray or w.dtype not in (np.float32, np.float64)
                             for w in arrays):
            return None
        return cls(recipe, params)

    def adopt(self, params) -> dict:
        """Copy weights a switch returned into the run's own arrays; returns those."""
        for name, w in params.items():
            own = self.params[name]
            if w is not own:
                np.copyto(own, w)
        return self.params

    def forward(self, state, params, step: int, ctx):
        """``recipe.forward`` in place: (forward weights, state); Pi * w goes into the
        workspace (:func:`stepsim.recipes.sequence.forward`)."""
        return sequence.forward(self.recipe, self.form, state, params, step, ctx)

    def update(self, state, params, grads, step: int, ctx, *, lr: float | None = None):
        """``recipe.update`` in place: (params, state, name -> AdamStats or None)
        (:func:`stepsim.recipes.sequence.update`)."""
        return sequence.update(self.recipe, self.form, state, params, grads, step, ctx, lr=lr)
