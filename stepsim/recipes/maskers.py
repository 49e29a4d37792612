"""Maskers: the pieces at a recipe's mask point (which Pi_k a step's forward pass uses).

A masker is frozen configuration; its methods are pure and carry their own values in the
recipe state's ``masker_state``. :class:`~stepsim.recipes.recipe.Recipe` calls them:
``init`` (fresh values), ``start`` (modules switch to sparse after step k0), ``masks``
(Pi_k of the sparse modules, from the masker's values and a :class:`MaskView` of the
step), ``penalize``/``observe`` (DominoSearch's gradient term and its bookkeeping),
``final_nm``/``final_masks`` (Pi_T) and ``report``.

* :class:`EveryStepMask` — the STE family: Pi_k from |w_k| at every step.
* :class:`FixedMask` — ASP: one mask, computed and applied when a module switches.
* :class:`DecayingMask` — Kao et al.'s decaying N.
* :class:`DynamicLayerwise` — every-step masks at DominoSearch's per-layer N.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from stepsim._validate import check_choice, check_real
from stepsim.recipes import transforms as T
from stepsim.recipes.domino import DominoSearch


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
    """

    params: dict
    names: tuple
    specs: dict
    nm: dict
    step: int


# --------------------------------------------------------------------------- maskers
class _Masker:
    """No-op defaults of the mask point (a masker overrides what it needs)."""

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
        return _masks_at(view, now), now, 0.0

    def penalize(self, mstate, grads, params, masks, step):
        return grads

    def penalize_into(self, mstate, grads, params, masks, step, ws):
        """:meth:`penalize` in the lean step (:mod:`stepsim.recipes.lean`): a masker that
        overrides ``penalize`` overrides this too, writing into ``ws.like("grad", ...)``."""
        return grads

    def observe(self, mstate, params, specs, step):
        return mstate

    def final_nm(self, mstate, nm):
        return nm

    def final_masks(self, mstate, params, specs, nm):
        return T._nm_masks(params, specs, nm)

    def report(self, mstate) -> str:
        """A note for the run's result ("" when there is nothing to say)."""
        return ""


@dataclasses.dataclass(frozen=True)
class EveryStepMask(_Masker):
    """STE family: Pi_k is recomputed from |w_k| at every step of the sparse phase."""

    kind = "every-step"


@dataclasses.dataclass(frozen=True)
class FixedMask(_Masker):
    """ASP: the mask is computed once from |w| when a module switches, and the pruned
    weights are zeroed then (the prune); afterwards the mask is fixed."""

    kind = "fixed"

    def init(self, params, specs):
        return {}

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        fixed = dict(mstate)
        fresh = T._nm_masks({k: params[k] for k in names}, specs, nm)
        fixed.update(fresh)
        return fixed, T.mask_weights(params, fresh)

    def masks(self, mstate, view: MaskView):
        return ({k: mstate[k] for k in view.names}, {k: view.nm[k] for k in view.names},
                0.0)

    def final_masks(self, mstate, params, specs, nm):
        out = T._nm_masks(params, specs, nm)
        out.update(mstate)  # switched modules keep their fixed mask
        return out


@dataclasses.dataclass(frozen=True)
class DecayingMask(_Masker):
    """Decaying mask (Kao et al.): N decreases in equal frames over the sparse phase.

    Per sparse layer a :class:`~stepsim.recipes.transforms.DecaySchedule` from its target
    N:M over steps k0+1..T; ``decay_rate`` c (optional) scales pruned weights by
    alpha = max(0, 1 - c t) in the forward pass (plain STE backward), last frame binary;
    ``alpha_clock`` "phase" (default, t from the start of the sparse phase) or "frame".
    """

    decay_rate: float | None = None
    alpha_clock: str = "phase"
    kind = "decaying"

    def __post_init__(self):
        if self.decay_rate is not None:
            check_real("decay_rate", self.decay_rate, minimum=0.0)
        check_choice("alpha_clock", self.alpha_clock, T.ALPHA_CLOCKS)

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
        return _masks_at(view, now), now, alpha


@dataclasses.dataclass(frozen=True)
class DynamicLayerwise(_Masker):
    """Every-step masks at the N that :class:`DominoSearch` assigns and changes per layer."""

    search: DominoSearch = DominoSearch()
    kind = "domino"

    def init(self, params, specs):
        return self.search.init(params, specs)

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        return self.search.start(mstate, params, names, specs, k0, total_steps), params

    def masks(self, mstate, view: MaskView):
        now = {k: v for k, v in self.search.nm_now(mstate).items() if k in view.names}
        return _masks_at(view, now), now, 0.0

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


def _masks_at(view: MaskView, nm) -> dict:
    """The N:M masks of ``view.names`` from |w| at the (n, m) ``nm`` gives each."""
    return T._nm_masks({k: view.params[k] for k in view.names}, view.specs, nm)


__all__ = ["DecayingMask", "DynamicLayerwise", "EveryStepMask", "FixedMask", "MaskView"]
