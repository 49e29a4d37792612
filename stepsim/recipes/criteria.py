"""Switch criteria: when STEP leaves its precondition phase (SPEC section 4).

A criterion watches Adam's second moment step by step, through the
:class:`~stepsim.core.optim.AdamStats` that :func:`~stepsim.adam_step` reduces in its pass
over memory, and answers "switch now?". Every criterion is streaming: its state holds
O(T_w) scalars, never a copy of v.

Interface (every criterion implements it):

* ``stats_on``: ``"v"`` or ``"vhat"`` — which v the caller must ask ``adam_step`` to
  reduce statistics on; ``needs_log``: whether it needs ``log_stats=True``.
* ``init(total_steps) -> state``: a fresh state for a run of ``total_steps`` steps.
* ``update(state, step, stats) -> (state, fired)``: feed step k's statistics (k = 1, 2,
  ...); ``fired`` is True at the step the criterion decides to switch, and stays True
  after (switching is one-way). ``update`` is pure: states are immutable NamedTuples, and
  it returns a new one (the old state stays valid: a caller may keep or replay it). The
  state's ``fired_at`` is that step, or None.
  Once fired, ``update`` returns ``(state, True)`` without reading ``stats`` (which may
  then be None). The statistic-based criteria (autoswitch, agarwal, tang) need every
  step in order, k = 1, 2, 3, ...; a skipped or repeated step is a ValueError.
* ``state.value`` (every state; added compatibly): the quantity the criterion compared
  with its threshold at the last update — AutoSwitch's window mean Z-bar, Agarwal's
  relative norm change, Tang's norm ratio — or nan while it is undefined (for a trace).

Criteria (registered in ``CRITERIA``; build one with :func:`make_criterion`):

* ``"autoswitch"`` — :class:`AutoSwitch`, the paper's Algorithm 2.
* ``"agarwal"`` — :class:`Agarwal`, the paper's Eq. 10.
* ``"tang"`` — :class:`Tang`, the paper's Eq. 11.
* ``"fixed-step"``, ``"fixed-fraction"`` — :class:`FixedStep`, :class:`FixedFraction`.

Also here: :func:`window_length` (T_w from beta2) and :func:`z_sample` (the sample Z_k);
``fraction_to_step`` and the clip bounds (``CLIP_BOUNDS``) are :mod:`stepsim._ground.switch_steps`'s
(imported here too). The paper's Table 1 metric and criteria over a
hand-made v trajectory are analysis: :mod:`stepsim.recipes.analysis`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import NamedTuple

import numpy as np

from stepsim._ground.options import (
    Bool,
    Choice,
    Fraction,
    Int,
    Option,
    Options,
    OrNone,
    Real,
    StepOrFraction,
    declared,
)
from stepsim._ground.switch_steps import CLIP_BOUNDS, clip_steps, fraction_to_step, robust_floor
from stepsim._ground.validate import (
    check_choice,
    check_int,
    check_open_unit,
    check_step_or_fraction,
)


def z_sample(stats) -> float:
    """Z_k = ||v_k - v_{k-1}||_1 / d of one step's AdamStats (AutoSwitch's Option I sample):
    the one definition, shared by AutoSwitch and the trace (``Trace.z``)."""
    return stats.dv_l1 / stats.size


def window_length(beta2: float) -> int:
    """The paper's window T_w = floor(1 / (1 - beta2)), computed robustly.

    beta2 in (0, 1). 1/(1 - beta2) is floored, except that a value within 1e-9 (relative)
    of an integer is that integer: 0.999 -> 1000 and 0.99 -> 100 (the exact reals are
    1000 and 100; naive ``int(1/(1-0.999))`` gives 999, as one public implementation
    does — pass ``window_length=999`` to a criterion to reproduce it). 0.9985 -> 666.

    Parameters
    ----------
    beta2 : float in (0, 1)

    Returns
    -------
    int
        T_w >= 1.
    """
    beta2 = check_open_unit("beta2", beta2)
    return robust_floor(1.0 / (1.0 - beta2))


# ---------------------------------------------------------------------------- states


class FiredState(NamedTuple):
    """The state of the fixed criteria (and the fields every criterion state has).

    fired_at: the step it fired at (None: not yet). value: the quantity last compared
    with the threshold (nan while undefined, and for the fixed criteria). k0: the step a
    fixed criterion fires at (resolved from the run length by ``init``).
    """

    fired_at: int | None = None
    value: float = math.nan
    k0: int = 1


def _check_next_step(state, step: int) -> int:
    """Statistic-based criteria need k = 1, 2, 3, ... with none skipped or repeated."""
    step = check_int("step", step, minimum=1)
    if step != state.step + 1:
        raise ValueError(
            f"step {step} fed after step {state.step}; feed every step's statistics in "
            f"order, k = 1, 2, 3, ..."
        )
    return step


class RingMean(NamedTuple):
    """The mean of the last ``n`` pushed numbers in O(n) memory, as an immutable value.

    A ring buffer of float64 with a running sum; :meth:`push` returns a new ring (the
    buffer is copied: O(n) per push, n = T_w floats). A plain running sum drifts: after a
    large sample leaves the window, the rounding error it left behind can dwarf the small
    samples that remain (1e6 in, 1e6 out leaves ~1e-10 of noise beside samples of 1e-12).
    So the sum is a Neumaier-compensated pair (total, comp), recomputed exactly
    (``math.fsum``, total and its rounding residual) each time the ring wraps around: the
    error never accumulates for longer than one window.
    """

    buf: np.ndarray  # (n,) float64, the samples held (read-only)
    count: int = 0  # samples held, <= n
    pos: int = 0  # slot the next sample goes to
    total: float = 0.0
    comp: float = 0.0  # Neumaier compensation: total + comp is the sum

    @classmethod
    def empty(cls, n: int) -> RingMean:
        buf = np.zeros(n, dtype=np.float64)
        buf.flags.writeable = False
        return cls(buf)

    @staticmethod
    def _add(total: float, comp: float, x: float) -> tuple[float, float]:
        t = total + x
        if abs(total) >= abs(x):
            comp += (total - t) + x
        else:
            comp += (x - t) + total
        return t, comp

    def push(self, x: float) -> RingMean:
        """A new ring with ``x`` pushed (the oldest sample dropped once full)."""
        n = self.buf.size
        total, comp, count = self.total, self.comp, self.count
        if count == n:
            total, comp = self._add(total, comp, -float(self.buf[self.pos]))
        else:
            count += 1
        buf = self.buf.copy()
        buf[self.pos] = x
        total, comp = self._add(total, comp, x)
        pos = (self.pos + 1) % n
        if pos == 0:  # wrapped: the ring is full; restart the sum exactly
            values = buf.tolist()
            total = math.fsum(values)
            # keep what rounding total to one float lost: it can outweigh every small
            # sample once a large one leaves the window
            comp = math.fsum([*values, -total])
        buf.flags.writeable = False
        return RingMean(buf, count, pos, total, comp)

    @property
    def full(self) -> bool:
        return self.count == self.buf.size

    def mean(self) -> float:
        """Mean of the samples held (nan if none)."""
        if self.count == 0:
            return math.nan
        return (self.total + self.comp) / self.count

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"RingMean(n={self.buf.size}, count={self.count}, mean={self.mean():.6g})"


# ---------------------------------------------------------------------- fixed criteria


FIXED_STEP_OPTIONS = Options({
    "k0": Option(Int(minimum=1), None, "the switch step (required)"),
}, none_is_default=False)
FIXED_FRACTION_OPTIONS = Options({
    "fraction": Option(Fraction(), None, "the switch step as a fraction of the run (required)"),
}, none_is_default=False)


@dataclasses.dataclass(frozen=True)
@declared(FIXED_STEP_OPTIONS)
class FixedStep:
    """Switch at a fixed step k0 (fires when ``step == k0``); k0 is required, an int >= 1
    (checked by its declaration, FIXED_STEP_OPTIONS)."""

    k0: int
    stats_on = "v"
    needs_log = False

    def init(self, total_steps: int) -> FiredState:
        return FiredState(k0=self.k0)

    def update(self, state: FiredState, step: int, stats) -> tuple[FiredState, bool]:
        if state.fired_at is None and step >= state.k0:
            state = state._replace(fired_at=step)
        return state, state.fired_at is not None


@dataclasses.dataclass(frozen=True)
@declared(FIXED_FRACTION_OPTIONS)
class FixedFraction:
    """Switch after a fixed fraction of the run: k0 = max(1, ceil(fraction * total_steps)).

    The paper's Figure 7 sweep. A fraction of 1.0 switches at the last step. fraction is
    required, in [0, 1] (checked by its declaration, FIXED_FRACTION_OPTIONS).
    """

    fraction: float
    stats_on = "v"
    needs_log = False

    def step_for(self, total_steps: int) -> int:
        return fraction_to_step(self.fraction, total_steps)

    def init(self, total_steps: int) -> FiredState:
        check_int("total_steps", total_steps, minimum=1)
        return FiredState(k0=self.step_for(total_steps))

    def update(self, state: FiredState, step: int, stats) -> tuple[FiredState, bool]:
        if state.fired_at is None and step >= state.k0:
            state = state._replace(fired_at=step)
        return state, state.fired_at is not None


# ---------------------------------------------------------- options, declared once
# a criterion's options (stepsim._ground.options): each criterion's dataclass reads its
# defaults and checks from its table (declared; the fixed criteria's are above them)
_STATS_ON = Option(Choice("v", "vhat"), "v", "watch raw v (paper) or bias-corrected v-hat")
_WINDOW_LENGTH = Option(OrNone(Int(minimum=1)), None,
                        "the window T_w in steps (none: floor(1 / (1 - beta2)))")
AUTOSWITCH_OPTIONS = Options({
    "variant": Option(Choice("I", "II"), "I", "Z_k: arithmetic (I) or geometric (II) mean"),
    "beta2": Option(Real(0.0, 1.0, min_open=True, max_open=True), 0.999,
                    "Adam's beta2 (sets T_w; default: the watched Adam's)"),
    "eps": Option(Real(minimum=0.0, min_open=True), 1e-8,
                  "threshold on the window mean (default: the watched Adam's eps)"),
    "window": Option(Choice("full", "partial"), "full",
                     "wait for a full window (paper) or use a partial one"),
    "window_length": _WINDOW_LENGTH,
    "stats_on": _STATS_ON,
    "zero_rule": Option(Choice("skip", "zero", "floor"), "skip",
                        "variant II: how exact zero changes of v count"),
    "zero_floor": Option(OrNone(Real(minimum=0.0, min_open=True)), None,
                         "zero_rule=floor: the value a zero counts as (none: eps)"),
    "clip": Option(Bool(), False, "clip the switch to (t_min, t_max] of the run"),
    "t_min": Option(OrNone(StepOrFraction()), None,
                    f"clip: earliest switch (none: {CLIP_BOUNDS[0]})"),
    "t_max": Option(OrNone(StepOrFraction()), None,
                    f"clip: latest switch (none: {CLIP_BOUNDS[1]})"),
}, none_is_default=False)

AGARWAL_OPTIONS = Options({
    "threshold": Option(Real(minimum=0.0, min_open=True), 0.5,
                        "fire when the relative change of ||v|| is below this"),
    "norm": Option(Choice("l1", "l2"), "l2", "the norm of v"),
    "stats_on": _STATS_ON,
}, none_is_default=False)

TANG_OPTIONS = Options({
    "threshold": Option(Real(minimum=0.0, min_open=True), 0.96,
                        "fire when ||v_k||_1 / ||v_(k-T_w)||_1 exceeds this"),
    "beta2": Option(Real(0.0, 1.0, min_open=True, max_open=True), 0.999,
                    "Adam's beta2 (sets T_w; default: the watched Adam's)"),
    "window_length": _WINDOW_LENGTH,
    "stats_on": _STATS_ON,
}, none_is_default=False)


# ------------------------------------------------------------------------- AutoSwitch


class AutoSwitchState(NamedTuple):
    """AutoSwitch's state: O(T_w) floats.

    window: the last T_w samples and their sum (a :class:`RingMean`). fired_at: the step
    it fired at, or None. value: the window mean Z-bar at the last step (nan while the
    "full" window is not full). step: last step fed. z: the last sample Z_k. t_min, t_max:
    clipping bounds in steps (None: clipping off).
    """

    window: RingMean
    fired_at: int | None = None
    value: float = math.nan
    step: int = 0
    z: float = math.nan
    t_min: int | None = None
    t_max: int | None = None


@dataclasses.dataclass(frozen=True)
@declared(AUTOSWITCH_OPTIONS)
class AutoSwitch:
    """The paper's AutoSwitch (Algorithm 2): switch once the variance change is below eps.

    Each step k gives a sample of the per-coordinate change of v (d coordinates):

    * variant "I" (arithmetic, paper default): Z_k = (1/d) * sum_i |v_k,i - v_{k-1},i|
      = ``stats.dv_l1 / stats.size``.
    * variant "II" (geometric): Z_k = exp((1/d) * sum_i log|v_k,i - v_{k-1},i|). The
      paper writes log(v_k - v_{k-1}) without the absolute value; the differences have
      either sign, so |.| is taken. Exact zero differences (log 0 = -inf) follow
      ``zero_rule``:

      - ``"skip"`` (default): the geometric mean over the coordinates that changed,
        exp(dv_log_sum / (d - zeros)); Z = 0 if none changed. Exact zeros come from
        coordinates that never see a gradient (dead units: v stays 0) or from frozen v;
        under "zero" one such coordinate makes every Z_k = 0, so Option II would fire as
        soon as its window fills whatever the rest of the model does. (Every
        coordinate unchanged, e.g. frozen v, gives Z = 0 under "skip" and "zero".)
      - ``"zero"``: any zero difference makes Z_k = 0 (the literal formula, and what a
        public implementation computes: exp(mean(log|dv|)) with log 0 = -inf).
      - ``"floor"``: a zero difference counts as ``zero_floor`` (default: eps). With the
        floor at eps the zeros pull Z_k towards the threshold but never across it;
        all coordinates unchanged gives Z = zero_floor.

    Window: T_w = :func:`window_length` (beta2) (1000 for 0.999), or ``window_length``.
    Z-bar_k is the mean of the last T_w samples; with ``window="full"`` (paper) nothing
    fires before T_w samples exist; with ``window="partial"`` (one public
    implementation) the mean of the k < T_w samples so far is used.

    Test: fire at the first step k with Z-bar_k < eps (Adam's eps, default 1e-8). With
    ``clip=True`` fire at k > T_max, or when the test passes and k > T_min (defaults
    T_min = 0.1 T, T_max = 0.5 T for a run of T = total_steps). ``t_min``/``t_max``: an
    int is a step count, a float in [0, 1] a fraction of T (resolved as
    floor(fraction * T), which gives the same comparisons as the real fraction * T).

    ``stats_on``: "v" (raw v, paper) or "vhat" (bias-corrected).
    """

    # defaults and checks: AUTOSWITCH_OPTIONS (variant I, beta2 0.999, eps 1e-8, ...)
    variant: str
    beta2: float
    eps: float
    window: str
    window_length: int | None
    stats_on: str
    zero_rule: str
    zero_floor: float | None
    clip: bool
    t_min: int | float | None
    t_max: int | float | None

    def __post_init__(self):  # after the declared checks: normalise, check across fields
        for bound in ("t_min", "t_max"):  # normalised: int = a step, float = a fraction
            if getattr(self, bound) is not None:
                object.__setattr__(self, bound, check_step_or_fraction(bound, getattr(self, bound)))
        if not self.clip and (self.t_min is not None or self.t_max is not None):
            raise ValueError(f"t_min={self.t_min!r} / t_max={self.t_max!r} given but "
                             "clip=False; pass clip=True to clip the switch step")
        lo, hi = self.bounds()
        same_kind = isinstance(lo, numbers.Integral) == isinstance(hi, numbers.Integral)
        if self.clip and same_kind and lo > hi:
            raise ValueError(f"t_min ({lo}) must be <= t_max ({hi})")

    @property
    def needs_log(self) -> bool:
        return self.variant == "II"

    @property
    def window_steps(self) -> int:
        """T_w: ``window_length`` if given, else floor(1 / (1 - beta2)) (robust)."""
        return self.window_length if self.window_length is not None else window_length(self.beta2)

    def bounds(self):
        """(t_min, t_max) as given, with the paper's defaults (``CLIP_BOUNDS``) filled in."""
        return (CLIP_BOUNDS[0] if self.t_min is None else self.t_min,
                CLIP_BOUNDS[1] if self.t_max is None else self.t_max)

    def sample(self, stats) -> float:
        """Z_k of one step's statistics (see the class docstring)."""
        size = stats.size
        if self.variant == "I":
            return z_sample(stats)
        if math.isnan(stats.dv_log_sum):
            raise ValueError("AutoSwitch variant 'II' needs sum log|dv|: call adam_step with "
                             "log_stats=True (stats.dv_log_sum is nan)")
        zeros = stats.dv_zeros
        if zeros == 0:
            return math.exp(stats.dv_log_sum / size)
        if self.zero_rule == "zero" or (self.zero_rule == "skip" and zeros == size):
            return 0.0
        if self.zero_rule == "skip":
            return math.exp(stats.dv_log_sum / (size - zeros))
        floor = self.eps if self.zero_floor is None else self.zero_floor
        if zeros == size:
            return floor  # exactly, not exp(log(floor)) rounded
        return math.exp((stats.dv_log_sum + zeros * math.log(floor)) / size)

    def init(self, total_steps: int) -> AutoSwitchState:
        total_steps = check_int("total_steps", total_steps, minimum=1)
        t_min = t_max = None
        if self.clip:
            lo, hi = self.bounds()
            t_min, t_max = clip_steps(total_steps, lo, hi)
            if t_min > t_max:
                raise ValueError(f"t_min ({lo!r} -> step {t_min}) must be <= t_max "
                                 f"({hi!r} -> step {t_max}) for total_steps={total_steps}")
        return AutoSwitchState(window=RingMean.empty(self.window_steps), t_min=t_min,
                               t_max=t_max)

    def update(self, state: AutoSwitchState, step: int, stats) -> tuple[AutoSwitchState, bool]:
        if state.fired_at is not None:
            return state, True
        step = _check_next_step(state, step)
        z = self.sample(stats)
        if not math.isfinite(z):
            raise ValueError(f"AutoSwitch sample Z at step {step} is {z} (non-finite v?)")
        window = state.window.push(z)
        value = state.value
        if window.full or self.window == "partial":
            value = window.mean()
        passed = value < self.eps  # False while value is nan
        forced = state.t_max is not None and step > state.t_max
        allowed = state.t_min is None or step > state.t_min
        fired_at = step if forced or (passed and allowed) else None
        state = state._replace(window=window, value=value, step=step, z=z, fired_at=fired_at)
        return state, fired_at is not None


# --------------------------------------------------------------------------- Agarwal


class AgarwalState(NamedTuple):
    """Agarwal's state: fired_at, value (as every state), the last step fed and
    ||v_{k-1}|| (nan before the first step)."""

    fired_at: int | None = None
    value: float = math.nan
    step: int = 0
    prev_norm: float = math.nan


@dataclasses.dataclass(frozen=True)
@declared(AGARWAL_OPTIONS)
class Agarwal:
    """Agarwal et al. as the paper's Eq. 10: fire when | ||v_k|| - ||v_{k-1}|| | / ||v_{k-1}||
    < threshold (0.5).

    The paper's Eq. 10 writes an unsubscripted norm; its Section 6 profiles ||v_t||_2,
    ||v_t||_1 and ||v_{t+1} - v_t||_1 "since these suffice for running the three
    approaches", and Eq. 11 names the 1-norm explicitly, so Eq. 10's norm is the 2-norm
    (``norm="l2"``, default; ``"l1"`` is an option). A one-step, one-way simplification of
    Agarwal et al.'s real rule, which compares per-layer gradient norms every few epochs.

    Undefined comparisons never fire: step 1 (v_0 = 0 is Adam's start, so ||v_0|| = 0)
    and any step whose ||v_{k-1}|| is 0.
    """

    # defaults and checks: AGARWAL_OPTIONS (threshold 0.5, the 2-norm of raw v)
    threshold: float
    norm: str
    stats_on: str
    needs_log = False

    def init(self, total_steps: int) -> AgarwalState:
        check_int("total_steps", total_steps, minimum=1)
        return AgarwalState()

    def update(self, state: AgarwalState, step: int, stats) -> tuple[AgarwalState, bool]:
        if state.fired_at is not None:
            return state, True
        step = _check_next_step(state, step)
        norm = stats.v_l2 if self.norm == "l2" else stats.v_l1
        prev = state.prev_norm
        value, fired_at = math.nan, None
        if step != 1 and prev > 0.0:
            value = abs(norm - prev) / prev
            if value < self.threshold:
                fired_at = step
        state = AgarwalState(fired_at=fired_at, value=value, step=step, prev_norm=norm)
        return state, fired_at is not None


# ------------------------------------------------------------------------------ Tang


class TangState(NamedTuple):
    """Tang's state: fired_at, value (as every state), the last step fed and a ring of
    the last T_w norms ||v_j||_1 (read-only; each update makes a new one)."""

    norms: np.ndarray  # norms[(j - 1) % T_w] = ||v_j||_1 for the last T_w j
    fired_at: int | None = None
    value: float = math.nan
    step: int = 0


@dataclasses.dataclass(frozen=True)
@declared(TANG_OPTIONS)
class Tang:
    """Tang et al. as the paper's Eq. 11: fire when ||v_k||_1 / ||v_{k-T_w}||_1 > threshold
    (0.96), T_w = floor(1 / (1 - beta2)) (:func:`window_length`, or ``window_length``).

    Undefined comparisons never fire: k <= T_w (no v_{k-T_w} seen; v_0 = 0 would divide
    by zero) and ||v_{k-T_w}||_1 = 0. Note the test is one-sided, as printed: while v
    grows (ratio > 1) it passes, so on a run whose v rises from 0 it fires at k = T_w + 1.
    """

    # defaults and checks: TANG_OPTIONS (threshold 0.96, beta2 0.999, T_w from beta2, raw v)
    threshold: float
    beta2: float
    window_length: int | None
    stats_on: str
    needs_log = False

    @property
    def window_steps(self) -> int:
        return self.window_length if self.window_length is not None else window_length(self.beta2)

    def init(self, total_steps: int) -> TangState:
        check_int("total_steps", total_steps, minimum=1)
        norms = np.zeros(self.window_steps, dtype=np.float64)
        norms.flags.writeable = False
        return TangState(norms=norms)

    def update(self, state: TangState, step: int, stats) -> tuple[TangState, bool]:
        if state.fired_at is not None:
            return state, True
        step = _check_next_step(state, step)
        slot = (step - 1) % state.norms.size
        old = float(state.norms[slot])  # ||v_{k-T_w}||_1 once k > T_w
        norm = stats.v_l1
        norms = state.norms.copy()
        norms[slot] = norm
        norms.flags.writeable = False
        value, fired_at = math.nan, None
        if step > norms.size and old > 0.0:
            value = norm / old
            if value > self.threshold:
                fired_at = step
        state = TangState(norms=norms, fired_at=fired_at, value=value, step=step)
        return state, fired_at is not None


# ------------------------------------------------------------------------- registry

# name -> constructor; make_criterion(name, **options) passes the options through.
CRITERIA = {
    "autoswitch": AutoSwitch,
    "agarwal": Agarwal,
    "tang": Tang,
    "fixed-step": FixedStep,
    "fixed-fraction": FixedFraction,
}

# name -> the criterion's options, declared once (stepsim._ground.options)
CRITERION_OPTIONS = {
    "autoswitch": AUTOSWITCH_OPTIONS,
    "agarwal": AGARWAL_OPTIONS,
    "tang": TANG_OPTIONS,
    "fixed-step": FIXED_STEP_OPTIONS,
    "fixed-fraction": FIXED_FRACTION_OPTIONS,
}


# a criterion's options that must agree with the Adam it watches: T_w is floor(1/(1-beta2))
# of that Adam, and AutoSwitch's threshold is that Adam's eps (Algorithm 2)
ADAM_TIED_OPTIONS = ("beta2", "eps")


def make_criterion(name: str, *, adam=None, **options):
    """A criterion by name (see ``CRITERIA``), with its options as keywords.

    adam: the optimizer the criterion will watch (anything with ``beta2`` and ``eps``);
    its values become the defaults of the criterion's tied options (``ADAM_TIED_OPTIONS``).
    Unknown names raise ValueError listing the choices; unknown options raise
    UnknownOptionError (a TypeError and a ValueError) naming the option; bad option values
    raise ValueError/TypeError naming the value.

    Parameters
    ----------
    name : str
        A key of ``CRITERIA``.
    adam : Adam, optional
        The optimizer watched (supplies beta2 and eps).
    **options
        The criterion's fields.

    Returns
    -------
    AutoSwitch, Agarwal, Tang, FixedStep or FixedFraction
    """
    check_choice("criterion", name, CRITERIA)
    cls = CRITERIA[name]
    known = CRITERION_OPTIONS[name]
    known.check_known(options, lambda unknown, valid: (
        f"criterion {name!r} has no option(s) {unknown}; its options are {valid}"))
    if adam is not None and not all(hasattr(adam, key) for key in ADAM_TIED_OPTIONS):
        raise TypeError(f"adam must be the Adam the criterion watches (recipe.optimizer), "
                        f"with {list(ADAM_TIED_OPTIONS)}; got {adam!r:.80} ({type(adam).__name__})")
    if adam is not None:
        for key in ADAM_TIED_OPTIONS:
            if key in known and key not in options:
                options[key] = getattr(adam, key)
    return cls(**options)


def check_matches_adam(criterion, adam) -> None:
    """Raise ValueError if ``criterion``'s beta2 or eps differs from the Adam it watches.

    Parameters
    ----------
    criterion : criterion object
    adam : Adam

    Raises
    ------
    ValueError
        Naming the option that differs.
    """
    for key in ADAM_TIED_OPTIONS:
        if hasattr(criterion, key) and getattr(criterion, key) != getattr(adam, key):
            raise ValueError(
                f"the criterion's {key}={getattr(criterion, key)!r} differs from the optimizer's "
                f"{key}={getattr(adam, key)!r}; a criterion reads the Adam it watches (build it "
                f"with make_criterion(name, adam=optimizer), or set both to the same value)")
