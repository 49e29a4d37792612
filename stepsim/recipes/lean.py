"""fit's lean step: a recipe's forward and update, in place on buffers the step owns.

A :class:`~stepsim.recipes.Recipe` is pure: its ``update`` copies w and Adam's m and v
before the in-place kernel runs, and its pieces build masked arrays with ``np.where``
(temporaries the size of the weights), so that no caller ever sees an array change. Inside
:func:`stepsim.training.fit` nobody else holds those arrays, and the copies are most of
what a small model's update costs. :class:`LeanStep` runs the same step — the same
pieces, in the same order, through each piece's own in-place form (below), so the same
bits (tests/recipes/test_lean_step.py checks every registered recipe against the pure step) — on
buffers allocated once per run. LeanStep knows no piece type: it calls the protocol.

**The in-place protocol** (what a piece must have beside its pure form; a recipe with a
piece that lacks it makes :meth:`LeanStep.make` raise TypeError naming the piece — never a
silent fall-back to the pure step):

=====================  ==================================================================
optimizer              ``update_into(opt_state, params, grads, step, total_steps, ws, *,
                       stats_on, log_stats) -> name -> stats`` — :meth:`update` with w and
                       the moments of ``opt_state`` updated in place (``params`` are the
                       step's own arrays). ``optimizers.Adam`` (frozen v and decoupled
                       decay included), ``optimizers.SGDM``.
gradient piece         ``apply_into(grads, view, ws) -> grads`` — :meth:`apply`, writing
                       each changed gradient into ``ws.like("grad", name, w)`` (the
                       problem's gradient arrays are read, never written; the buffer may
                       be the piece's input, left by an earlier piece: the kernels are
                       element-wise). ``view`` is the pure path's StepView (w_k, Pi_k).
after-update piece     ``apply_into(params, view, ws) -> None`` — :meth:`apply` in place on
                       ``params``. A piece that reads w_k (``view.params``) after the
                       optimizer moved w declares ``reads_w_k = True``: it then gets
                       copies of the masked parameters' w_k (only those: reading another
                       raises KeyError). ``SrsteDecoupled``, ``MaskWeights``.
masker                 a masker that overrides ``penalize`` (changes the gradient) also
                       overrides ``penalize_into(mstate, grads, params, masks, step, ws)``
                       with the same buffer rule as a gradient piece (DominoSearch).
                       ``observe`` is pure and only reads: both paths call it as is.
                       A masker whose forward weights are not Pi * w (it overrides
                       ``forward_weights``: S-STE's beta * S(w)) overrides
                       ``forward_into(mstate, params, masks, alpha, specs, nm, ws) -> fwd``.
switch pieces          run on the pure path (``recipe.switch``) between steps; new weights
                       a switch returns are copied in by :meth:`LeanStep.adopt`.
=====================  ==================================================================

``ws`` is the step's :class:`Workspace`: ``ws.like(key, name, array)`` returns a buffer
shaped and typed like ``array``, made on first request and the same array at every later
step; ``ws.bound(key, sources, make)`` keeps an object (e.g. Adam's validated
:class:`~stepsim.core.optim_many.AdamArrays`) as long as ``sources`` are the same objects.
Masks are applied by select kernels (:mod:`stepsim.core._step_kernels`), not ``np.where``;
each has the NumPy expression of the pure piece as its reference.

Buffers: w (``params``: fit's own copy of the initial weights, made once; a switch's new
weights are copied in), m/v (the recipe state's own arrays, updated in place; a frozen v*
is only read), Pi * w (one buffer per sparse parameter, the forward weights), gradient
buffers (``"grad"``), w_k copies (``"w_k"``, for ``reads_w_k`` pieces only: the one copy
a step makes). What still allocates each step: the N:M masks themselves (one byte per
weight; the last step's mask is kept to count flips), the problem's activations and
gradients, and small Python objects.
"""

from __future__ import annotations

import numpy as np

from stepsim.recipes import transforms as T


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1)


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


def missing_in_place(recipe) -> list[str]:
    """The pieces of ``recipe`` without an in-place form (module docstring), described."""
    from stepsim.recipes.maskers import _Masker

    missing = []
    if not callable(getattr(recipe.optimizer, "update_into", None)):
        missing.append(f"optimizer {type(recipe.optimizer).__name__} (update_into)")
    for point, pieces in (("gradient", recipe.gradient), ("after", recipe.after)):
        for piece in pieces:
            if not callable(getattr(piece, "apply_into", None)):
                missing.append(f"{point} piece {type(piece).__name__} (apply_into)")
    masker = recipe.masker
    if masker is not None and isinstance(masker, _Masker):
        kind = type(masker)
        if kind.penalize is not _Masker.penalize and \
                kind.penalize_into is _Masker.penalize_into:
            missing.append(f"masker {kind.__name__} (penalize_into)")
        if kind.forward_weights is not _Masker.forward_weights and \
                kind.forward_into is _Masker.forward_into:
            missing.append(f"masker {kind.__name__} (forward_into)")
    elif masker is not None and not callable(getattr(masker, "penalize_into", None)):
        missing.append(f"masker {type(masker).__name__} (penalize_into)")
    return missing


class LeanStep:
    """A recipe's ``forward`` and ``update`` in place, through its pieces' in-place forms.

    Made by :meth:`make` after ``recipe.init`` (and any switch before step 1); ``params``
    is then the run's weight dict, which the steps update in place.
    """

    def __init__(self, recipe, params, state, ctx):
        from stepsim.core import _step_kernels
        from stepsim.recipes.maskers import _Masker

        self.recipe = recipe
        self._k = _step_kernels
        self.ws = Workspace()
        self.params = {name: np.array(w, order="C", copy=True) for name, w in params.items()}
        self._reads_w_k = any(getattr(p, "reads_w_k", False) for p in recipe.after)
        # a masker whose forward weights are not Pi * w writes them itself (S-STE)
        self._custom_forward = recipe.masker is not None and \
            type(recipe.masker).forward_weights is not _Masker.forward_weights
        self._fwd = {name: np.empty_like(self.params[name]) for name in ctx.sparse_names} \
            if recipe.sparse else {}

    @classmethod
    def make(cls, recipe, params, state, ctx):
        """The LeanStep of ``recipe``. Raises TypeError when a piece has no in-place form
        (module docstring). Returns None only for weights the engine cannot own (not all
        float32/float64 ndarrays): the pure path then raises the error that names them at
        step 1."""
        missing = missing_in_place(recipe)
        if missing:
            raise TypeError(f"recipe {recipe.name!r}: no in-place form for "
                            f"{', '.join(missing)}; fit's step needs one for every piece "
                            "(the protocol: stepsim.recipes.lean)")
        arrays = list(params.values())
        if not arrays or any(type(w) is not np.ndarray or w.dtype not in (np.float32, np.float64)
                             for w in arrays):
            return None
        return cls(recipe, params, state, ctx)

    # ------------------------------------------------------------------ workspace
    def adopt(self, params) -> dict:
        """Copy weights a switch returned into the run's own arrays; returns those."""
        for name, w in params.items():
            own = self.params[name]
            if w is not own:
                np.copyto(own, w)
        return self.params

    # ------------------------------------------------------------------ the step
    def forward(self, state, params, step: int, ctx):
        """``recipe.forward``: (forward weights, state); Pi * w goes into the workspace, and
        the masks go with it to the model (:func:`~stepsim.recipes.transforms.with_masks`,
        as in the pure forward)."""
        now = self.recipe.masks_now(state, params, step, ctx)
        if now is None:  # (a state that already says 0 flips is kept: _replace costs ~2 us)
            return dict(params), state if state.flips == 0 else state._replace(flips=0)
        masks, nm_now, alpha = now
        flips = self._count_flips(state.masks, masks)
        if self._custom_forward:
            fwd = self.recipe.masker.forward_into(state.masker_state, params, masks, alpha,
                                                  ctx.specs, nm_now, self.ws)
            return fwd, state._replace(masks=masks, nm_now=nm_now, alpha=alpha, flips=flips)
        k = self._k
        fwd = {}
        for name, w in params.items():
            mask = masks[name]
            if mask is None:
                fwd[name] = w
                continue
            a = alpha.get(name, 0.0) if isinstance(alpha, dict) else alpha
            out = self._fwd[name]
            if a == 0.0:
                k.where_zero(_flat(w), _flat(mask), _flat(out))
            else:
                k.where_scaled(_flat(w), _flat(mask), w.dtype.type(a), _flat(out))
            fwd[name] = out
        fwd = T.with_masks(fwd, masks, nm_now, alpha, ctx.specs)  # the models' sparse hook
        return fwd, state._replace(masks=masks, nm_now=nm_now, alpha=alpha, flips=flips)

    def _count_flips(self, old, new) -> int:
        """:func:`~stepsim.recipes.transforms.count_flips` without its ``!=`` temporary."""
        flips = 0
        for name, mask in new.items():
            if mask is None:
                continue
            prev = None if old is None else old.get(name)
            if prev is None:
                flips += int(mask.size - np.count_nonzero(mask))
            elif prev is not mask:
                flips += int(self._k.count_changed(_flat(prev), _flat(mask)))
        return flips

    def update(self, state, params, grads, step: int, ctx, *, lr: float | None = None):
        """``recipe.update`` in place: returns (params, state, name -> AdamStats or None);
        the order of :meth:`stepsim.recipes.Recipe.update`. lr: the step's
        ``optimizer.lr_at(step, T)`` if the caller has it (None: computed here, once for the
        optimizer and the pieces)."""
        recipe, ws = self.recipe, self.ws
        opt = recipe.optimizer
        total = ctx.total_steps
        if lr is None:
            lr = opt.lr_at(step, total)
        kw = {"stats_on": ctx.stats_on, "log_stats": ctx.log_stats, "lr": lr}
        masks = state.masks
        if masks is None:  # every module dense: the plain optimizer
            stats = opt.update_into(state.opt, params, grads, step, total, ws, **kw)
            return params, state, stats
        view = T.StepView(params, masks, step, lr)
        mstate = state.masker_state
        grads = recipe.masker.penalize_into(mstate, grads, params, masks, step, ws)
        mstate = recipe.masker.observe(mstate, params, ctx.specs, step)
        for piece in recipe.gradient:
            grads = piece.apply_into(grads, view, ws)
        after_view = view._replace(params=self._w_k(params, masks)) if self._reads_w_k \
            else view
        stats = opt.update_into(state.opt, params, grads, step, total, ws, **kw)
        for piece in recipe.after:
            piece.apply_into(params, after_view, ws)
        if mstate is not state.masker_state:
            state = state._replace(masker_state=mstate)
        return params, state, stats

    def _w_k(self, params, masks) -> dict:
        """Copies of the masked parameters' w_k, for after-update pieces that read it."""
        out = {}
        for name, mask in masks.items():
            if mask is not None:
                out[name] = self.ws.like("w_k", name, params[name])
                np.copyto(out[name], params[name])
        return out
