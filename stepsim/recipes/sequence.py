"""One training step of a recipe: its stages in order, said once here, in two forms.

Step k (1-based) as :func:`stepsim.fit` drives it (SPEC section 3):

=========  ===============  =================================================================
forward    masks            the masker's Pi_k of the modules in their sparse phase, their
                            N:M now and the pruned weights' scale alpha
                            (:meth:`~stepsim.recipes.Recipe.masks_now`)
           forward weights  what the model computes with: Pi_k * w_k (S-STE: beta * S(w_k));
                            Pi_k * w_k carries its masks, so the models can multiply by
                            the kept weights only (:func:`~stepsim.recipes.transforms.with_masks`)
(the problem's loss and gradient at the forward weights, between the two)
update     penalty          the masker's gradient term (DominoSearch), then its bookkeeping
                            (``observe``: pure, it only reads)
           gradient pieces  the recipe's ``gradient``, in order (SR-STE's term, ASP's mask)
           optimizer        Adam or SGD-M
           after pieces     the recipe's ``after``, in order (SR-STE after Adam, ASP)
=========  ===============  =================================================================

:func:`forward` and :func:`update` are that order, and nothing else; a *form* runs each
stage, through the piece's own implementation of it:

* :data:`PURE` (:class:`Pure`) — new arrays, the inputs never change: ``Recipe.forward``
  and ``Recipe.update``, for callers that keep old weights;
* :class:`stepsim.recipes.lean.InPlace` — buffers one run owns, no copies: fit's step
  (:class:`~stepsim.recipes.lean.LeanStep`).

Each piece implements both forms (the same bits: tests/recipes/test_lean_step.py runs
every registered recipe both ways); ``ws`` is the run's
:class:`~stepsim.recipes.lean.Workspace`, whose buffer rules are in :mod:`stepsim.recipes.lean`:

===============  ==========================================  ==================================
stage            pure form                                   in-place form
===============  ==========================================  ==================================
forward weights  masker ``forward_weights(mstate, params,    masker ``forward_into(...,  ws)``
                 masks, alpha, specs, nm) -> weights``
penalty          masker ``penalize(mstate, grads, params,    masker ``penalize_into(..., ws)``
                 masks, step) -> grads``
gradient pieces  ``apply(grads, view) -> grads``             ``apply_into(grads, view, ws)``
optimizer        ``update(opt_state, params, grads, step,    ``update_into(opt_state, params,
                 T, *, stats_on, log_stats, lr) ->           grads, step, T, ws, *, ...) ->
                 (params, opt_state, stats)``                stats``
after pieces     ``apply(params, view) -> params``           ``apply_into(params, view, ws)``
===============  ==========================================  ==================================

``view`` is the step's :class:`~stepsim.recipes.transforms.StepView` (w_k, Pi_k, k, lr).
The masker's pairs come with :class:`~stepsim.recipes.maskers.Masker`; the switch pieces
run between steps (``Recipe.switch``), on the pure path only.
"""

from __future__ import annotations

from stepsim.recipes import transforms as T
from stepsim.recipes.maskers import Masker


class Pure:
    """The pure form of each stage: every piece's pure method; new arrays, inputs kept."""

    def count_flips(self, old, new) -> int:
        return T.count_flips(old, new)

    def forward_weights(self, masker, mstate, params, masks, alpha, specs, nm):
        return masker.forward_weights(mstate, params, masks, alpha, specs, nm)

    def penalize(self, masker, mstate, grads, params, masks, step):
        return masker.penalize(mstate, grads, params, masks, step)

    def gradient(self, piece, grads, view):
        return piece.apply(grads, view)

    def after_view(self, view):
        """The view the after pieces read: w_k is still ``view.params`` (never written)."""
        return view

    def optimizer(self, optimizer, opt_state, params, grads, step, total_steps, kw):
        return optimizer.update(opt_state, params, grads, step, total_steps, **kw)

    def after(self, piece, params, view):
        return piece.apply(params, view)


PURE = Pure()


def forward(recipe, form, state, params, step: int, ctx):
    """The forward stages of step ``step``: (the weights the forward pass uses, state).

    masks (None: every module dense now, the weights themselves), then the forward
    weights; the state records the masks, their N:M, alpha and the mask flips."""
    now = recipe.masks_now(state, params, step, ctx)
    if now is None:  # a state that already says 0 flips is kept as it is
        return dict(params), state if state.flips == 0 else state._replace(flips=0)
    masks, nm_now, alpha = now
    flips = form.count_flips(state.masks, masks)
    masker = recipe.masker
    fwd = form.forward_weights(masker, state.masker_state, params, masks, alpha, ctx.specs,
                               nm_now)
    if type(masker).forward_weights is Masker.forward_weights:  # Pi * w: the masks go to
        fwd = T.with_masks(fwd, masks, nm_now, alpha, ctx.specs)  # the models' sparse hook
    return fwd, state._replace(masks=masks, nm_now=nm_now, alpha=alpha, flips=flips)


def update(recipe, form, state, params, grads, step: int, ctx, *, lr: float | None = None):
    """The update stages of step ``step`` from the gradient at the forward weights:
    penalty, gradient pieces, optimizer, after pieces (every module dense: the optimizer
    only). Returns (params, state, stats): stats maps every parameter to its AdamStats
    (None under SGD-M). lr: the step's ``optimizer.lr_at(step, T)`` if the caller has it
    (None: computed here, once for the optimizer and the pieces)."""
    optimizer, total = recipe.optimizer, ctx.total_steps
    if lr is None:
        lr = optimizer.lr_at(step, total)
    kw = {"stats_on": ctx.stats_on, "log_stats": ctx.log_stats, "lr": lr}
    masks, mstate = state.masks, state.masker_state
    if masks is None:  # every module dense: the plain optimizer
        params, opt, stats = form.optimizer(optimizer, state.opt, params, grads, step, total,
                                            kw)
    else:
        view = T.StepView(params, masks, step, lr)
        grads = form.penalize(recipe.masker, mstate, grads, params, masks, step)
        mstate = recipe.masker.observe(mstate, params, ctx.specs, step)
        for piece in recipe.gradient:
            grads = form.gradient(piece, grads, view)
        after_view = form.after_view(view)  # before the optimizer writes w
        params, opt, stats = form.optimizer(optimizer, state.opt, params, grads, step, total,
                                            kw)
        for piece in recipe.after:
            params = form.after(piece, params, after_view)
    if opt is not state.opt or mstate is not state.masker_state:
        state = state._replace(opt=opt, masker_state=mstate)
    return params, state, stats
