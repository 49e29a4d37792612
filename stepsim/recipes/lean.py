"""fit's lean step: a recipe's forward and update, in place on a workspace fit owns.

A :class:`~stepsim.recipes.Recipe` is pure: its ``update`` copies w and Adam's m and v
before the in-place kernel runs, and its pieces build masked arrays with ``np.where``
(temporaries the size of the weights), so that no caller ever sees an array change. Inside
:func:`stepsim.training.fit` nobody else holds those arrays, and the copies are most of
what a small model's update costs. :class:`LeanStep` runs the same step — the same
pieces, in the same order, with the same arithmetic, so the same bits (tests/cpu_digests.py
and tests/test_training.py check it) — on buffers allocated once per run:

=================  ====================================================================
w (params)         fit's own copy of the initial weights, made once (the problem may keep
                   what ``init_params`` returned). The optimizer and the after-update
                   pieces write it in place; a switch that returns new weights (ASP's
                   prune) is copied into it (:meth:`LeanStep.adopt`).
m, v / buf         the recipe state's own moment arrays (``recipe.init`` made them for this
                   run), updated in place; a frozen v* is only read. Adam's arrays are
                   checked once per run (:class:`stepsim.core.optim.AdamArrays`), a step only
                   hands over the gradients.
Pi * w             one buffer per sparse parameter, rewritten every step (the forward
                   weights; the problem only reads them).
gradient pieces    one buffer per sparse parameter (SR-STE's term, ASP's masked gradient):
                   the problem's gradient is read, never written (it may be its own array).
w_k                one buffer per sparse parameter, only for SR-STE after the optimizer
                   (``srste_placement="after"``): that piece needs w_k after the optimizer
                   has moved w, so it is the one copy a step makes.
=================  ====================================================================

Masks are applied by select kernels (:mod:`stepsim.core._step_kernels`), not ``np.where``.
What still allocates each step: the N:M masks themselves (one byte per weight; the last
step's mask is kept to count flips), the problem's activations and gradients, and small
Python objects.

Recipes with a piece that has no in-place form here (DominoSearch's penalty and
observation, SGD-M with mixed dtypes, ...) get ``None`` from :meth:`LeanStep.make`, and
fit runs the recipe's own pure methods.
"""

from __future__ import annotations

import numpy as np

from stepsim.recipes import transforms as T

_SUPPORTED_GRADIENT = (T.SrsteTerm, T.MaskGradients)
_SUPPORTED_AFTER = (T.SrsteDecoupled, T.MaskWeights)


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1)


class LeanStep:
    """The in-place twin of a recipe's ``forward`` and ``update`` (module docstring).

    Made by :meth:`make` after ``recipe.init`` (and any switch before step 1); ``params``
    is then the run's weight dict, which the steps update in place.
    """

    def __init__(self, recipe, params, state, ctx):
        from stepsim.core import _step_kernels

        self.recipe = recipe
        self._k = _step_kernels
        self.params = {name: np.array(w, order="C", copy=True) for name, w in params.items()}
        sparse = [name for name in ctx.sparse_names] if recipe.sparse else []
        self._fwd = {name: np.empty_like(self.params[name]) for name in sparse}
        self._grad = ({name: np.empty_like(self.params[name]) for name in sparse}
                      if recipe.gradient else {})
        decoupled = any(isinstance(p, T.SrsteDecoupled) for p in recipe.after)
        self._old = {name: np.empty_like(self.params[name]) for name in sparse} if decoupled \
            else {}
        self._adam = None  # (m dict, v dict, AdamArrays) once built
        self._bind_optimizer(state)

    @classmethod
    def make(cls, recipe, params, state, ctx):
        """A LeanStep for ``recipe``, or None when one of its pieces has no in-place form."""
        from stepsim.recipes.maskers import _Masker

        opt = recipe.optimizer
        if not isinstance(opt, (T.Adam, T.SGDM)):
            return None
        if not all(type(p) in _SUPPORTED_GRADIENT for p in recipe.gradient):
            return None
        if not all(type(p) in _SUPPORTED_AFTER for p in recipe.after):
            return None
        masker = recipe.masker
        if masker is not None and (type(masker).penalize is not _Masker.penalize
                                   or type(masker).observe is not _Masker.observe):
            return None  # a masker that reads or changes the gradient (DominoSearch)
        arrays = list(params.values())
        if not arrays or any(type(w) is not np.ndarray or w.dtype not in (np.float32, np.float64)
                             for w in arrays):
            return None
        if len({w.dtype for w in arrays}) != 1:
            return None
        try:
            return cls(recipe, params, state, ctx)
        except (TypeError, ValueError):
            return None  # the pure path raises the same problem, naming it, at step 1

    # ------------------------------------------------------------------ workspace
    def adopt(self, params) -> dict:
        """Copy weights a switch returned into the run's own arrays; returns those."""
        for name, w in params.items():
            own = self.params[name]
            if w is not own:
                np.copyto(own, w)
        return self.params

    def _bind_optimizer(self, state):
        """(Re)build Adam's validated table when the state's m/v dicts are new objects."""
        opt_state = state.opt
        if not isinstance(self.recipe.optimizer, T.Adam):
            return
        if self._adam is not None and self._adam[0] is opt_state.m and \
                self._adam[1] is opt_state.v:
            return
        from stepsim.core.optim import AdamArrays

        names = list(self.params)
        arrays = AdamArrays([self.params[k] for k in names], [opt_state.m[k] for k in names],
                            [opt_state.v[k] for k in names])
        self._adam = (opt_state.m, opt_state.v, arrays)

    # ------------------------------------------------------------------ the step
    def forward(self, state, params, step: int, ctx):
        """``recipe.forward``: (forward weights, state); Pi * w goes into the workspace."""
        now = self.recipe.masks_now(state, params, step, ctx)
        if now is None:
            return dict(params), state._replace(flips=0)
        masks, nm_now, alpha = now
        flips = self._count_flips(state.masks, masks)
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
        """``recipe.update`` in place: returns (params, state, name -> AdamStats or None).
        lr: the step's ``optimizer.lr_at(step, T)`` if the caller has it (None: computed
        here, once for the optimizer and the pieces after it)."""
        recipe = self.recipe
        if lr is None:
            lr = recipe.optimizer.lr_at(step, ctx.total_steps)
        masks = state.masks
        if masks is not None:
            grads = self._gradient_pieces(grads, params, masks)
            for name in self._old:
                if masks.get(name) is not None:
                    np.copyto(self._old[name], params[name])
        stats = self._optimize(state, params, grads, step, ctx, lr)
        if masks is not None and recipe.after:
            self._after_pieces(params, masks, lr)
        return params, state, stats

    def _gradient_pieces(self, grads, params, masks):
        k = self._k
        out = dict(grads)
        for piece in self.recipe.gradient:
            for name, mask in masks.items():
                if mask is None:
                    continue
                buf = self._grad[name]
                g = out[name]
                if isinstance(piece, T.SrsteTerm):
                    w = params[name]
                    k.where_add_scaled(_flat(g), _flat(w), _flat(mask), w.dtype.type(piece.lam),
                                       _flat(buf))
                else:  # MaskGradients
                    k.where_zero(_flat(g), _flat(mask), _flat(buf))
                out[name] = buf
        return out

    def _after_pieces(self, params, masks, lr):
        k = self._k
        for piece in self.recipe.after:
            for name, mask in masks.items():
                if mask is None:
                    continue
                w = _flat(params[name])
                if isinstance(piece, T.SrsteDecoupled):
                    k.where_sub_scaled(w, _flat(self._old[name]), _flat(mask),
                                       params[name].dtype.type(lr * piece.lam), w)
                else:  # MaskWeights
                    k.where_zero(w, _flat(mask), w)

    def _optimize(self, state, params, grads, step, ctx, lr) -> dict:
        opt = self.recipe.optimizer
        if isinstance(opt, T.Adam):
            self._bind_optimizer(state)
            return opt.update_in_place(state.opt, params, grads, step, ctx.total_steps,
                                       self._adam[2], stats_on=ctx.stats_on,
                                       log_stats=ctx.log_stats, lr=lr)
        from stepsim.core.optim import sgdm_apply_many

        sgdm_apply_many(list(params.values()), [grads[k] for k in params],
                        [state.opt.buf[k] for k in params], lr=lr,
                        momentum=opt.momentum, weight_decay=opt.weight_decay,
                        nesterov=opt.nesterov)
        return dict.fromkeys(params)
