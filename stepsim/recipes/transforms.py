"""Small, pure pieces that recipes are composed of (SPEC sections 1 and 3).

Every piece is a function (or a frozen dataclass with ``init``/``update``, as optax's
``GradientTransformation``) of its inputs only: no hidden state, no global RNG, and the
arrays passed in are never modified — a piece returns new dicts of new arrays. Parameters,
gradients and optimizer moments are dicts ``name -> ndarray`` (float32 or float64, one dtype
per parameter); masks are dicts ``name -> bool ndarray`` with ``None`` for a parameter that
is not sparsified.

Pieces, in the order a step uses them:

* masks: :func:`nm_masks` (Pi_k from |w_k|), :func:`count_flips`; :class:`DecaySchedule`
  (decaying mask: which N at which step); layer-wise N:M is
  :func:`stepsim.recipes.allocation.allocate_layerwise`.
* forward: :func:`masked_forward` — Pi * w, or (Pi + alpha (1 - Pi)) * w for a decaying scale;
  :func:`with_masks` — the forward weights with the masks a model's sparse products read.
* gradient: :func:`srste_term` (g + lam (1 - Pi) w), :func:`mask_gradients` (ASP); as
  pieces a recipe attaches on the gradient: :class:`SrsteTerm`, :class:`MaskGradients`.
* optimizer: :mod:`stepsim.recipes.optimizers` (Adam, SGDM, the learning-rate schedule).
* after the step: :func:`srste_decoupled` (SR-STE term applied after Adam normalises),
  :func:`mask_weights` (ASP: pruned weights are zero after every step); as pieces:
  :class:`SrsteDecoupled`, :class:`MaskWeights`. Each piece reads a :class:`StepView`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from stepsim._ground.validate import check_choice, check_int, check_nm, check_real
from stepsim.core import select
from stepsim.core.sparsity import ParamSpec

Params = dict  # name -> ndarray
Masks = dict  # name -> bool ndarray, or None for a dense parameter


# --------------------------------------------------------------------------- masks
def nm_masks(params: Mapping, specs: Mapping[str, ParamSpec],
              nm: Mapping[str, tuple[int, int]], transposable: bool = False) -> Masks:
    """Pi: the N:M magnitude mask of every sparse parameter (``nm[name] = (n, m)``), else
    None: dict name -> bool ndarray (shaped like the parameter) or None. For the training
    loop: the arguments were checked once per run
    (``RunContext.make``: float weights, every N:M tiling its axis; the N:M values from
    validated specs, allocations and schedules), so each step's masks skip the checks.

    transposable: the mask of every sparse parameter whose shape allows it
    (:func:`transposable_ok`) has the rows and columns of its GEMM matrix both N:M
    (:func:`stepsim.core.transposable.transposable_mask`: a Linear weight itself, a 1-D conv
    weight (out, k, in) as (out, k * in)); the others (e.g. a 10-class output layer at
    M = 4) keep the usual N:M mask along their axis, and ``stepsim compress`` says which
    weights' masks are transposable."""
    from stepsim.core.masks import nm_mask_trusted

    out = {}
    for name, w in params.items():
        spec = specs[name]
        if not spec.sparse:
            out[name] = None
        elif transposable and transposable_ok(w.shape, nm[name][1], spec.axis):
            from stepsim.core.transposable import transposable_mask_trusted

            if np.isnan(w).any():
                raise ValueError(f"parameter {name!r} contains NaN; its transposable N:M "
                                 "mask is undefined")
            out[name] = transposable_mask_trusted(w, *nm[name])
        else:
            out[name] = nm_mask_trusted(w, *nm[name], spec.axis)
    return out


def transposable_ok(shape, m: int, axis: int = -1) -> bool:
    """A weight of ``shape`` grouped along ``axis`` can take a transposable N:M mask: a 2-D
    weight with both dimensions divisible by M (M x M blocks), or a weight of more
    dimensions grouped along its last axis (a 1-D conv weight (out, k, in)) whose first and
    last dimensions M divides, masked as its GEMM matrix (out, k * in)."""
    from stepsim.core.transposable import transposable_shape_ok

    if len(shape) > 2 and axis % len(shape) != len(shape) - 1:
        return False
    return transposable_shape_ok(shape, m)


def count_flips(old: Masks | None, new: Masks) -> int:
    """Mask entries that changed from ``old`` to ``new``; ``old=None`` means all kept (dense).

    Parameters
    ----------
    old : dict name -> bool ndarray or None, or None
    new : dict name -> bool ndarray or None

    Returns
    -------
    int
    """
    flips = 0
    for name, mask in new.items():
        if mask is None:
            continue
        prev = None if old is None else old.get(name)
        flips += int(mask.size - np.count_nonzero(mask)) if prev is None else int(
            np.count_nonzero(prev != mask))
    return flips


def _on_pruned(arrays: Mapping, masks: Masks, pruned) -> Params:
    """``arrays`` with each masked entry replaced by ``pruned(name, x)`` where its mask is
    False; kept entries, and arrays without a mask, pass through unchanged."""
    out = {}
    for name, x in arrays.items():
        mask = masks.get(name)
        out[name] = x if mask is None else np.where(mask, x, pruned(name, x))
    return out


def masked_forward(params: Mapping, masks: Masks, alpha: float | Mapping = 0.0) -> Params:
    """The weights the forward pass uses: Pi * w, pruned entries scaled by ``alpha`` (default 0).

    alpha: one scale for every layer, or a dict name -> scale (missing names: 0).

    Parameters
    ----------
    params : dict name -> ndarray
    masks : dict name -> bool ndarray or None
    alpha : float or dict name -> float

    Returns
    -------
    dict name -> ndarray
        New arrays for masked parameters; the others are passed through.
    """
    def pruned(name, w):
        a = alpha.get(name, 0.0) if isinstance(alpha, Mapping) else alpha
        return w.dtype.type(0) if a == 0.0 else w * w.dtype.type(a)

    return _on_pruned(params, masks, pruned)


def masked_forward_into(params: Mapping, masks: Masks, alpha: float | Mapping, ws) -> Params:
    """:func:`masked_forward` in place: each masked parameter's Pi * w (pruned entries
    scaled by ``alpha``) into the workspace buffer ``ws.like("forward", name, w)``, the
    same bits (:mod:`stepsim.core.select`); the others are passed through."""
    per_name = isinstance(alpha, Mapping)
    out = {}
    for name, w in params.items():
        mask = masks.get(name)
        if mask is None:
            out[name] = w
            continue
        a = alpha.get(name, 0.0) if per_name else alpha
        buf = out[name] = ws.like("forward", name, w)
        if a == 0.0:
            select.where_zero(w, mask, buf)
        else:
            select.where_scaled(w, mask, w.dtype.type(a), buf)
    return out
def with_masks(fwd: Mapping, masks: Masks, nm: Mapping, alpha, specs: Mapping):
    """The forward weights ``fwd`` as a :class:`stepsim.nn.nm_linear.ForwardWeights`: the
    same dict, also carrying the mask and (n, m) of every module whose forward weight is
    Pi * w (masked this step, pruned scale alpha 0) and whose N:M groups run along its last
    axis (a Linear's (out, in), a convolution's (C_out, K, C_in)), so that a model can
    multiply by its kept entries only. ``fwd`` unchanged when
    there is none. The one hook between a step's masks and the models (both the pure and
    the lean step call it, so both hand the model the same thing)."""
    from stepsim.nn.nm_linear import ForwardWeights

    kept, ratios = {}, {}
    for name, mask in masks.items():
        if mask is None or mask.ndim < 2 or specs[name].axis % mask.ndim != mask.ndim - 1:
            continue
        a = alpha.get(name, 0.0) if isinstance(alpha, Mapping) else alpha
        if a == 0.0:
            kept[name], ratios[name] = mask, tuple(nm[name])
    return ForwardWeights(fwd, kept, ratios) if kept else fwd


def srste_term(grads: Mapping, params: Mapping, masks: Masks, lam: float) -> Params:
    """SR-STE's gradient (Eq. 9): g + lam * (1 - Pi) * w; kept entries are g unchanged.

    Parameters
    ----------
    grads, params : dict name -> ndarray
    masks : dict name -> bool ndarray or None
    lam : float >= 0

    Returns
    -------
    dict name -> ndarray
    """
    return _on_pruned(grads, masks,
                      lambda name, g: g + params[name].dtype.type(lam) * params[name])


def srste_decoupled(new_params: Mapping, old_params: Mapping, masks: Masks, lam: float,
                    lr: float) -> Params:
    """SR-STE after the optimizer normalised the gradient: w -= lr * lam * (1 - Pi) * w_old.

    Parameters
    ----------
    new_params : dict name -> ndarray
        w after the optimizer step.
    old_params : dict name -> ndarray
        w_k, before it.
    masks : dict name -> bool ndarray or None
    lam, lr : float

    Returns
    -------
    dict name -> ndarray
    """
    return _on_pruned(new_params, masks,
                      lambda name, w: w - w.dtype.type(lr * lam) * old_params[name])


def mask_gradients(grads: Mapping, masks: Masks) -> Params:
    """ASP (apex): gradients of pruned weights are zeroed before the optimizer step.

    Parameters
    ----------
    grads : dict name -> ndarray
    masks : dict name -> bool ndarray or None

    Returns
    -------
    dict name -> ndarray
    """
    return masked_forward(grads, masks)


def mask_weights(params: Mapping, masks: Masks) -> Params:
    """ASP (apex): pruned weights are set to zero after the optimizer step.

    Parameters
    ----------
    params : dict name -> ndarray
    masks : dict name -> bool ndarray or None

    Returns
    -------
    dict name -> ndarray
    """
    return masked_forward(params, masks)


# --------------------------------------------------------------------------- decaying mask
def decay_sequence(n: int, m: int) -> tuple[int, ...]:
    """The N of each frame of the decaying mask, down to the target n (SPEC section 3).

    Frame 0 keeps M-1 of M; frame s >= 1 keeps max(n, M // 2**s) (the paper's N = M/2^s);
    repeated values are dropped and the sequence stops at n. 1:8 -> (7, 4, 2, 1);
    2:4 -> (3, 2); 1:4 -> (3, 2, 1); 3:8 -> (7, 4, 3); N = M -> (M,).

    Parameters
    ----------
    n, m : int
        The target N:M.

    Returns
    -------
    tuple of int
    """
    n, m = check_nm(n, m)
    seq = [max(n, m - 1)]
    s = 1
    while seq[-1] > n:
        nxt = max(n, m >> s)
        if nxt < seq[-1]:
            seq.append(nxt)
        s += 1
    return tuple(seq)


ALPHA_CLOCKS = ("phase", "frame")


@dataclasses.dataclass(frozen=True)
class DecaySchedule:
    """Structure decay over steps ``start..stop`` (inclusive), in equal frames.

    Frame f (0-based, F frames) starts at step ``start + floor(f * L / F)`` with
    L = stop - start + 1 and keeps ``ns[f]`` of every ``m``. The optional decaying scale
    alpha = max(0, 1 - decay_rate * t) multiplies the pruned weights in the forward pass;
    the last frame always uses a binary mask (alpha 0). ``alpha_clock`` says what t counts:
    "phase" (default): steps since the sparse phase began (t = step - start), once, as Kao
    et al.'s group's code does; "frame": steps since the current frame began, restarting
    at every frame (stepsim's earlier default), so that each frame's first step forwards the
    pruned weights at full scale — kept only as an option.
    """

    m: int
    ns: tuple[int, ...]
    start: int
    stop: int
    decay_rate: float | None = None
    alpha_clock: str = "phase"

    @classmethod
    def make(cls, n: int, m: int, start: int, stop: int, decay_rate: float | None = None,
             alpha_clock: str = "phase"):
        """The schedule from N:M ``n``:``m`` over steps start..stop (see the class)."""
        check_int("start", start, minimum=1)
        if decay_rate is not None:
            check_real("decay_rate", decay_rate, minimum=0.0)
        check_choice("alpha_clock", alpha_clock, ALPHA_CLOCKS)
        return cls(m=m, ns=decay_sequence(n, m), start=start, stop=max(stop, start),
                   decay_rate=decay_rate, alpha_clock=alpha_clock)

    @property
    def frame_starts(self) -> tuple[int, ...]:
        length, frames = self.stop - self.start + 1, len(self.ns)
        return tuple(self.start + (f * length) // frames for f in range(frames))

    def frame(self, step: int) -> int:
        """Index of the frame ``step`` is in (0 before ``start``)."""
        starts = self.frame_starts
        return max(0, int(np.searchsorted(starts, step, side="right")) - 1)

    def n_at(self, step: int) -> int:
        """The N in force at ``step``."""
        return self.ns[self.frame(step)]

    def alpha_at(self, step: int) -> float:
        """The scale of the pruned weights at ``step`` (0 without a decay rate)."""
        f = self.frame(step)
        if self.decay_rate is None or f == len(self.ns) - 1:
            return 0.0
        origin = self.start if self.alpha_clock == "phase" else self.frame_starts[f]
        return max(0.0, 1.0 - self.decay_rate * (step - origin))


# --------------------------------------------------------------------------- step pieces
class StepView(NamedTuple):
    """What a gradient or after-update piece may read about step k.

    params: w_k, the weights the masks were made from (before the update). masks: Pi_k
    (None for a parameter that is dense or whose module has not switched yet). step: k.
    lr: the optimizer's learning rate at step k.
    """

    params: dict
    masks: dict
    step: int
    lr: float


@dataclasses.dataclass(frozen=True)
class SrsteTerm:
    """On the gradient, before the optimizer (SR-STE's code): g + lam (1 - Pi) w.

    The same piece is Hu et al.'s masked decay (ICML 2024, arXiv 2404.01847): alpha (1 - Pi)
    w added to the gradient before Adam, so it enters both m and v (recipe masked-decay)."""

    lam: float

    def __post_init__(self):
        check_real("lam", self.lam, minimum=0.0)

    def apply(self, grads: Mapping, view: StepView) -> Params:
        return srste_term(grads, view.params, view.masks, self.lam)

    def apply_into(self, grads: Mapping, view: StepView, ws) -> Params:
        """:meth:`apply` into the step's gradient buffers (:mod:`stepsim.recipes.lean`)."""
        out = dict(grads)
        for name, mask, w in _masked(view):
            buf = ws.like("grad", name, w)
            select.where_add_scaled(grads[name], w, mask, w.dtype.type(self.lam), buf)
            out[name] = buf
        return out


@dataclasses.dataclass(frozen=True)
class SrsteDecoupled:
    """After the optimizer normalised the gradient: w -= lr lam (1 - Pi) w_k."""

    lam: float

    def __post_init__(self):
        check_real("lam", self.lam, minimum=0.0)

    reads_w_k = True  # view.params after the optimizer: the lean step keeps copies

    def apply(self, params: Mapping, view: StepView) -> Params:
        return srste_decoupled(params, view.params, view.masks, self.lam, view.lr)

    def apply_into(self, params: Mapping, view: StepView, ws) -> None:
        """:meth:`apply` in place on ``params`` (:mod:`stepsim.recipes.lean`)."""
        for name, mask, w_k in _masked(view):
            w = params[name]
            select.where_sub_scaled(w, w_k, mask, w.dtype.type(view.lr * self.lam), w)


@dataclasses.dataclass(frozen=True)
class MaskGradients:
    """ASP (apex), on the gradient: pruned entries' gradients are zeroed."""

    def apply(self, grads: Mapping, view: StepView) -> Params:
        return mask_gradients(grads, view.masks)

    def apply_into(self, grads: Mapping, view: StepView, ws) -> Params:
        """:meth:`apply` into the step's gradient buffers (:mod:`stepsim.recipes.lean`)."""
        out = dict(grads)
        for name, mask in view.masks.items():
            if mask is not None:
                buf = ws.like("grad", name, grads[name])
                select.where_zero(grads[name], mask, buf)
                out[name] = buf
        return out


@dataclasses.dataclass(frozen=True)
class MaskWeights:
    """ASP (apex), after the optimizer: pruned weights are set back to zero."""

    def apply(self, params: Mapping, view: StepView) -> Params:
        return mask_weights(params, view.masks)

    def apply_into(self, params: Mapping, view: StepView, ws) -> None:
        """:meth:`apply` in place on ``params`` (:mod:`stepsim.recipes.lean`)."""
        for name, mask in view.masks.items():
            if mask is not None:
                select.where_zero(params[name], mask, params[name])


def _masked(view: StepView):
    """(name, mask, view.params[name]) of every masked parameter of the step."""
    return [(name, mask, view.params[name]) for name, mask in view.masks.items()
            if mask is not None]
