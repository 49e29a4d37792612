"""Maskers: the pieces at a recipe's mask point (which Pi_k a step's forward pass uses).

A masker is frozen configuration (a :class:`Masker`); its methods carry their own values
in the recipe state's ``masker_state``. :class:`~stepsim.recipes.recipe.Recipe` and the
step's sequence (:mod:`stepsim.recipes.sequence`) call them: ``init`` (fresh values),
``start`` (modules switch to sparse after step k0), ``masks`` (Pi_k of the sparse
modules, from the masker's values and a :class:`MaskView` of the step),
``forward_weights``/``forward_into`` (the weights the forward pass uses),
``penalize``/``penalize_into`` and ``observe`` (DominoSearch's gradient term and its
bookkeeping), ``final_nm``/``final_masks`` (Pi_T) and ``report``.

* :class:`EveryStepMask` — the STE family: Pi_k from |w_k| at every step.
* :class:`FixedMask` — ASP: one mask, computed and applied when a module switches.
* :class:`DecayingMask` — Kao et al.'s decaying N.
* :class:`DynamicLayerwise` — every-step masks at DominoSearch's per-layer N.
* :class:`SoftThresholdMask` — S-STE (Hu et al., NeurIPS 2024): the forward weight is
  beta * S(w), a continuous soft threshold of w, with beta frozen when the module starts.

Options every masker takes: ``transposable`` (masks whose rows and columns are both N:M,
:mod:`stepsim.core.transposable`). :class:`EveryStepMask` (and S-STE) also take ``every``
(recompute the mask every K steps, Hu et al., ICML 2024) and ``dense_tail`` (the last
fraction of the run is dense, their dense fine-tuning). Each is a separate piece, so their
combinations are recipes (:mod:`stepsim.recipes.registry`), not new code paths.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import NamedTuple

from stepsim._ground.options import Bool, Choice, Fraction, Int, Option, Options, Real
from stepsim.recipes import transforms as T
from stepsim.recipes.domino import DominoSearch

# ------------------------------------------------------------ options, declared once
# a masker's options as a recipe takes them (-o KEY=VALUE): the registry composes its
# recipes' tables from these, and the maskers read their defaults and checks here
TRANSPOSABLE_OPTIONS = Options({
    "transposable": Option(Bool(), False, "rows and columns of each weight's GEMM matrix "
                                          "both N:M, where M tiles them (2:4 exact, other "
                                          "N:M approximate)"),
})
MASKING_OPTIONS = Options({
    "mask_every": Option(Int(minimum=1), 1, "recompute the mask every K steps (reuse between)"),
    "dense_tail": Option(Fraction(), 0.0, "last fraction of the run trained dense (a dense "
                                          "result: dense fine-tuning)"),
})
DECAYING_OPTIONS = Options({
    "decay_rate": Option(Real(minimum=0.0), None,
                         "c of the pruned weights' scale max(0, 1 - c t) (none: 0)"),
    "alpha_clock": Option(Choice(*T.ALPHA_CLOCKS), "phase",
                          "what t counts: steps of the phase or of the frame"),
})
_TRANSPOSABLE = TRANSPOSABLE_OPTIONS["transposable"].default


# --------------------------------------------------------------------------- view
class MaskView(NamedTuple):
    """What a masker reads to make the masks of one step's forward pass (``masks``).

    The masker's own values (``masker_state``) stay a separate argument: they are the
    masker's, the view is the recipe's (read-only, built afresh each step).

    params : dict str -> ndarray
        w_k, every parameter (dense and sparse) by name, as the optimizer left it.
    names : tuple of str
        The sparse modules in their sparse phase now (non-empty, in the specs' order): the
        ones to mask.
    specs : dict str -> ParamSpec
        Every parameter's spec (the run context's, after ``fit``'s ``nm``); validated once
        by ``RunContext.make``.
    nm : dict str -> (int, int)
        The target (n, m) of every sparse parameter (a one-shot layer-wise allocation's
        result once it ran).
    step : int
        k, the 1-based step whose forward pass uses the masks.
    prev : dict str -> bool ndarray or None, or None
        The masks the previous step used (``RecipeState.masks``; None before the first
        sparse step): a masker that refreshes its mask every K steps reuses them.
    """

    params: dict
    names: tuple
    specs: dict
    nm: dict
    step: int
    prev: dict | None = None


# --------------------------------------------------------------------------- maskers
class Masker:
    """The mask point's protocol, with no-op defaults (a masker overrides what it needs).

    A stage that changes arrays has two forms (:mod:`stepsim.recipes.sequence`): the pure
    one (new arrays) and the in-place one (into the run's workspace ``ws``), the same bits.
    A class that overrides one form of a stage overrides the other too (checked when the
    class is made: a missing in-place form would silently run the default's arithmetic).
    """

    transposable = False  # the dataclass maskers declare it as a field

    #: (pure form, in-place form) of the stages that change arrays
    FORMS = (("forward_weights", "forward_into"), ("penalize", "penalize_into"))

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for pure, into in Masker.FORMS:
            if (pure in cls.__dict__) != (into in cls.__dict__):
                has, lacks = (pure, into) if pure in cls.__dict__ else (into, pure)
                raise TypeError(f"masker {cls.__name__} overrides {has} but not {lacks}: a "
                                "stage's pure and in-place forms change together "
                                "(stepsim.recipes.sequence)")

    def init(self, params, specs):
        return None

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        """(mstate, params) once the modules ``names`` switch after step k0."""
        return mstate, params

    def masks(self, mstate, view: MaskView):
        """(masks of ``view.names``, their (n, m) now, alpha) for step ``view.step``.

        ``mstate``: the masker's values (``RecipeState.masker_state``), not changed.
        """
        now = {name: view.nm[name] for name in view.names}
        return _masks_at(view, now, self.transposable), now, 0.0

    def forward_weights(self, mstate, params, masks, alpha, specs, nm):
        """The weights the forward pass uses given the step's ``masks`` (None for a dense
        parameter) and their (n, m) ``nm``: Pi * w, pruned entries scaled by ``alpha``
        (:func:`~stepsim.recipes.transforms.masked_forward`). S-STE overrides it."""
        return T.masked_forward(params, masks, alpha)

    def forward_into(self, mstate, params, masks, alpha, specs, nm, ws):
        """:meth:`forward_weights` in place: Pi * w into the workspace's buffers
        (:func:`~stepsim.recipes.transforms.masked_forward_into`)."""
        return T.masked_forward_into(params, masks, alpha, ws)

    def penalize(self, mstate, grads, params, masks, step):
        """The gradient with the masker's own term (none by default)."""
        return grads

    def penalize_into(self, mstate, grads, params, masks, step, ws):
        """:meth:`penalize` in place: a changed gradient goes into ``ws.like("grad", name,
        w)`` (the problem's gradient arrays are read, never written)."""
        return grads

    def observe(self, mstate, params, specs, step):
        return mstate

    def final_nm(self, mstate, nm):
        return nm

    def final_masks(self, mstate, params, specs, nm):
        return T.nm_masks(params, specs, nm, self.transposable)

    def report(self, mstate) -> str:
        """A note for the run's result ("" when there is nothing to say)."""
        return ""


class EveryStepState(NamedTuple):
    """:class:`EveryStepMask`'s values: dense_from, the first step of the dense tail (None:
    no dense tail); betas, name -> S-STE's frozen scale (:class:`SoftThresholdMask`)."""

    dense_from: int | None = None
    betas: Mapping = {}  # read-only (never mutated): every change makes a new dict


@dataclasses.dataclass(frozen=True)
class EveryStepMask(Masker):
    """STE family: Pi_k is recomputed from |w_k| at every step of the sparse phase.

    every: recompute the mask at steps k with (k - 1) % every == 0 (and at a module's first
    sparse step), reusing the previous mask in between (Hu et al., "Accelerating
    Transformer Pre-training with 2:4 Sparsity", ICML 2024, arXiv 2404.01847:
    K = 40). dense_tail: the last fraction of the run's steps trains dense (their dense
    fine-tuning, the last 1/6): from step T - round(dense_tail T) + 1 the forward pass uses
    w, gradient pieces see no mask, and the result is the dense w_T (their output is a
    dense model: it accelerates pre-training, not inference; the dense tail's steps count
    no mask flips, having no mask). transposable: rows and columns both N:M.
    """

    every: int = MASKING_OPTIONS["mask_every"].default
    dense_tail: float = MASKING_OPTIONS["dense_tail"].default
    transposable: bool = _TRANSPOSABLE
    kind = "every-step"

    def __post_init__(self):  # the declared checks (every is the option mask_every)
        MASKING_OPTIONS.check_values(mask_every=self.every, dense_tail=self.dense_tail)
        if self.dense_tail >= 1.0:
            raise ValueError(f"dense_tail must be below 1 (a sparse recipe needs sparse steps), "
                             f"got {self.dense_tail!r}")
        TRANSPOSABLE_OPTIONS.check_values(transposable=self.transposable)

    def init(self, params, specs):
        return EveryStepState()

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        tail = round(self.dense_tail * total_steps)
        dense_from = total_steps - tail + 1 if tail > 0 else None
        return mstate._replace(dense_from=dense_from), params

    def _dense_now(self, mstate, step) -> bool:
        return mstate.dense_from is not None and step >= mstate.dense_from

    def masks(self, mstate, view: MaskView):
        if self._dense_now(mstate, view.step):
            dense = {name: (view.nm[name][1],) * 2 for name in view.names}
            return dict.fromkeys(view.names), dense, 0.0
        now = {name: view.nm[name] for name in view.names}
        prev = view.prev or {}
        if self.every > 1 and (view.step - 1) % self.every:
            reuse = {k: prev[k] for k in view.names if prev.get(k) is not None}
            fresh = [k for k in view.names if k not in reuse]
            if fresh:
                reuse.update(_masks_at(view._replace(names=tuple(fresh)),
                                       {k: now[k] for k in fresh}, self.transposable))
            return {k: reuse[k] for k in view.names}, now, 0.0
        return _masks_at(view, now, self.transposable), now, 0.0

    def final_nm(self, mstate, nm):
        if mstate.dense_from is not None:
            return {name: (m, m) for name, (n, m) in nm.items()}
        return nm

    def final_masks(self, mstate, params, specs, nm):
        if mstate.dense_from is not None:  # ended dense (dense fine-tuning)
            return dict.fromkeys(params)
        return T.nm_masks(params, specs, nm, self.transposable)


@dataclasses.dataclass(frozen=True)
class FixedMask(Masker):
    """ASP: the mask is computed once from |w| when a module switches, and the pruned
    weights are zeroed then (the prune); afterwards the mask is fixed."""

    transposable: bool = _TRANSPOSABLE
    kind = "fixed"

    def init(self, params, specs):
        return {}

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        fixed = dict(mstate)
        fresh = T.nm_masks({k: params[k] for k in names}, specs, nm, self.transposable)
        fixed.update(fresh)
        return fixed, T.mask_weights(params, fresh)

    def masks(self, mstate, view: MaskView):
        return ({k: mstate[k] for k in view.names}, {k: view.nm[k] for k in view.names},
                0.0)

    def final_masks(self, mstate, params, specs, nm):
        out = T.nm_masks(params, specs, nm, self.transposable)
        out.update(mstate)  # switched modules keep their fixed mask
        return out


@dataclasses.dataclass(frozen=True)
class DecayingMask(Masker):
    """Decaying mask (Kao et al.): N decreases in equal frames over the sparse phase.

    Per sparse layer a :class:`~stepsim.recipes.transforms.DecaySchedule` from its target
    N:M over steps k0+1..T; ``decay_rate`` c (optional) scales pruned weights by
    alpha = max(0, 1 - c t) in the forward pass (plain STE backward), last frame binary;
    ``alpha_clock`` "phase" (default, t from the start of the sparse phase) or "frame".
    """

    decay_rate: float | None = DECAYING_OPTIONS["decay_rate"].default
    alpha_clock: str = DECAYING_OPTIONS["alpha_clock"].default
    transposable: bool = _TRANSPOSABLE
    kind = "decaying"

    def __post_init__(self):  # the declared checks
        DECAYING_OPTIONS.check_values(decay_rate=self.decay_rate, alpha_clock=self.alpha_clock)

    def init(self, params, specs):
        return {}

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        out = dict(mstate)
        for name in names:
            n, m = nm[name]
            out[name] = T.DecaySchedule.make(n, m, k0 + 1, total_steps, self.decay_rate,
                                             self.alpha_clock)
        return out, params

    def masks(self, mstate, view: MaskView):
        step = view.step
        now = {name: (mstate[name].n_at(step), mstate[name].m) for name in view.names}
        alpha = {name: mstate[name].alpha_at(step) for name in view.names}
        return _masks_at(view, now, self.transposable), now, alpha


@dataclasses.dataclass(frozen=True)
class DynamicLayerwise(Masker):
    """Every-step masks at the N that :class:`DominoSearch` assigns and changes per layer."""

    search: DominoSearch = dataclasses.field(default_factory=DominoSearch)
    transposable: bool = _TRANSPOSABLE
    kind = "domino"

    def init(self, params, specs):
        return self.search.init(params, specs)

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        return self.search.start(mstate, params, names, specs, k0, total_steps), params

    def masks(self, mstate, view: MaskView):
        now = {k: v for k, v in self.search.nm_now(mstate).items() if k in view.names}
        return _masks_at(view, now, self.transposable), now, 0.0

    def penalize(self, mstate, grads, params, masks, step):
        return self.search.penalize(mstate, grads, params, masks, step)

    def penalize_into(self, mstate, grads, params, masks, step, ws):
        return self.search.penalize_into(mstate, grads, params, masks, step, ws)

    def observe(self, mstate, params, specs, step):
        return self.search.observe(mstate, params, specs, step)

    def final_nm(self, mstate, nm):
        return {**nm, **self.search.final_nm(mstate)}

    def report(self, mstate) -> str:
        if not mstate.layers or mstate.done:
            return ""
        found = ", ".join(f"{k} {n}:{m}" for k, (n, m) in self.search.final_nm(mstate).items())
        return (f"DominoSearch did not reach its target sparsity {mstate.target:.4g} before "
                f"the run ended; the result keeps the N found so far ({found})")


@dataclasses.dataclass(frozen=True)
class SoftThresholdMask(EveryStepMask):
    """S-STE (Hu, Zhu & Chen, "S-STE: Continuous Pruning Function for Efficient 2:4 Sparse
    Pre-training", NeurIPS 2024, arXiv 2409.09099): the forward weight is beta * S(w)
    (:mod:`stepsim.core.soft`), S the soft threshold at each group's (N+1)-th
    largest |w| over the N:M mask of |w_k| (recomputed as :class:`EveryStepMask` does);
    beta = <w, S(w)> / <S(w), S(w)> per weight tensor, computed once when the module goes
    sparse (at initialisation for S-STE; at the switch k0 after a dense phase) and frozen.
    The backward pass is the plain STE: the gradient at the forward weights updates w
    unchanged (no decay term, no new hyper-parameter).
    """

    kind = "soft-threshold"

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        from stepsim.core.soft import soft_from_mask, sste_beta

        mstate, params = super().start(mstate, params, names, specs, nm, k0, total_steps)
        betas = dict(mstate.betas)
        masks = T.nm_masks({k: params[k] for k in names}, specs, nm, self.transposable)
        for name in names:
            if name in betas:
                continue  # a module's beta is frozen once
            w, spec = params[name], specs[name]
            s = soft_from_mask(w, masks[name], nm[name][1], spec.axis % w.ndim, 1.0)
            betas[name] = sste_beta(w, s)
        return mstate._replace(betas=betas), params

    def forward_weights(self, mstate, params, masks, alpha, specs, nm):
        from stepsim.core.soft import soft_from_mask, sste_beta

        out = {}
        for name, w in params.items():
            mask = masks.get(name)
            if mask is None:
                out[name] = w
                continue
            m, axis = nm[name][1], specs[name].axis % w.ndim
            beta = mstate.betas.get(name)
            if beta is None:  # a module that never went sparse: its one-shot beta at w_T
                beta = sste_beta(w, soft_from_mask(w, mask, m, axis, 1.0))
            out[name] = soft_from_mask(w, mask, m, axis, beta)
        return out

    def forward_into(self, mstate, params, masks, alpha, specs, nm, ws):
        """:meth:`forward_weights` for the lean step: beta * S(w) is a new array each step
        (the soft-threshold kernel writes it; the same bits as the pure forward)."""
        return self.forward_weights(mstate, params, masks, alpha, specs, nm)


def _masks_at(view: MaskView, nm, transposable: bool = False) -> dict:
    """The N:M masks of ``view.names`` from |w| at the (n, m) ``nm`` gives each."""
    return T.nm_masks({k: view.params[k] for k in view.names}, view.specs, nm, transposable)


__all__ = ["DecayingMask", "DynamicLayerwise", "EveryStepMask", "EveryStepState", "FixedMask",
           "MaskView", "Masker", "SoftThresholdMask"]
