"""What a run of :func:`stepsim.training.fit` gives back, and how it is saved.

:class:`Trace` is the per-step record (preallocated arrays, one row a step, filled by
:func:`record_step`); :class:`FitResult` the outcome (weights, trace, switch steps, metrics,
status) with its JSON + .npz saving (:meth:`FitResult.save`). Kept apart from the loop so
the loop reads on one screen and readers of stored runs need not import it.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from stepsim.recipes.criteria import z_sample


@dataclasses.dataclass(frozen=True, repr=False)
class Trace:
    """Per-step record of a run, as preallocated NumPy arrays (row k-1 is step k).

    loss: minibatch loss at the forward weights. v_l1, v_l2: ||v_k||_1, ||v_k||_2 (all
    layers; of vhat when the criterion asked for stats_on="vhat"). dv_l1: ||v_k - v_{k-1}||_1.
    z: Z_k = dv_l1 / d (AutoSwitch Option I). z_geo: exp(mean log|dv| over dv != 0) (Option
    II; nan unless log statistics were on). dv_zeros: coordinates with dv exactly 0. v
    fields are nan under momentum SGD. flips: mask entries changed since the previous step
    (the dense phase counts as all kept). n, m: (T, L) N and M of each sparse layer in force
    (N = M in the dense phase), layers in ``layer_names`` order. phase: 0 dense, 1 sparse
    (1 once any module is sparse). layer_phase: (T, L) the phase of each sparse layer (with
    per-module switching, each layer's switch step is where its column turns 1).
    lr: the learning rate used. mask_size: the mask entries of all sparse parameters (0 for
    a run without any); :attr:`flip_rate` = flips / mask_size per step (Hu et al., ICML
    2024: the fraction of mask entries changed since the previous step). flip_rate is
    derived from the recorded ``flips``, so it is not one of ``ARRAYS`` (the arrays a
    run's digest covers are unchanged); :meth:`FitResult.save` writes it beside them.
    """

    loss: np.ndarray
    v_l1: np.ndarray
    v_l2: np.ndarray
    dv_l1: np.ndarray
    z: np.ndarray
    z_geo: np.ndarray
    dv_zeros: np.ndarray
    flips: np.ndarray
    n: np.ndarray
    m: np.ndarray
    phase: np.ndarray
    lr: np.ndarray
    layer_names: tuple[str, ...]
    layer_phase: np.ndarray | None = None
    mask_size: int = 0

    ARRAYS = ("loss", "v_l1", "v_l2", "dv_l1", "z", "z_geo", "dv_zeros", "flips", "n", "m",
              "phase", "lr", "layer_phase")

    @classmethod
    def empty(cls, steps: int, layer_names, mask_size: int = 0) -> Trace:
        f = lambda: np.full(steps, np.nan)
        layers = len(layer_names)
        return cls(loss=f(), v_l1=f(), v_l2=f(), dv_l1=f(), z=f(), z_geo=f(),
                   dv_zeros=np.zeros(steps, np.int64), flips=np.zeros(steps, np.int64),
                   n=np.zeros((steps, layers), np.int32), m=np.zeros((steps, layers), np.int32),
                   phase=np.zeros(steps, np.int8), lr=f(), layer_names=tuple(layer_names),
                   layer_phase=np.zeros((steps, layers), np.int8), mask_size=int(mask_size))

    @property
    def flip_rate(self) -> np.ndarray:
        """Per step, the fraction of mask entries changed since the previous step (float64;
        nan for a run without sparse parameters). The step a module switches counts its
        pruned entries (the dense phase counts as all kept)."""
        if self.mask_size <= 0:
            return np.full(len(self), np.nan)
        return self.flips / float(self.mask_size)

    def __len__(self):
        return len(self.loss)

    def __repr__(self):
        return f"Trace(steps={len(self)}, layers={list(self.layer_names)})"

    def arrays(self) -> dict:
        return {name: getattr(self, name) for name in self.ARRAYS}

    def head(self, steps: int) -> Trace:
        """The first ``steps`` rows (a run that stopped early)."""
        arrays = {name: getattr(self, name)[:steps] for name in self.ARRAYS}
        return Trace(layer_names=self.layer_names, mask_size=self.mask_size, **arrays)

    @classmethod
    def load_npz(cls, path) -> Trace:
        """The trace of an .npz that ``FitResult.save`` wrote (ValueError if the JSON beside
        it commits other arrays: ``stepsim._ground.atomic.check_pair``)."""
        return cls.from_arrays(read_npz(path))

    @classmethod
    def from_arrays(cls, data) -> Trace:
        """The trace in ``data`` (name -> array: an .npz's arrays, :func:`read_npz`)."""
        arrays = {name: data[name] for name in cls.ARRAYS if name in data}
        if "layer_phase" not in arrays:  # saved before per-module phases: one global phase
            arrays["layer_phase"] = np.repeat(arrays["phase"][:, None],
                                              arrays["n"].shape[1], axis=1)
        names = tuple(str(s) for s in data["layer_names"])
        size = int(data["mask_size"]) if "mask_size" in data else 0  # older files: 0
        return cls(layer_names=names, mask_size=size, **arrays)


def read_npz(path) -> dict:
    """Every array of the .npz at ``path`` (name -> array), read once and checked against
    the JSON beside it (``stepsim._ground.atomic.check_pair``: ValueError if that JSON
    commits other arrays). One read serves the check, the trace and the weights (the
    check used to read the whole file again: a run store read each .npz three times)."""
    from stepsim._ground.atomic import check_pair, read_arrays

    arrays = read_arrays(path)  # every array's CRC-32 checked
    check_pair(path, arrays)  # refuses an .npz beside the JSON of another run
    return arrays


STATUS_COMPLETED, STATUS_NON_FINITE = "completed", "non-finite"
#: the run's batch loss blew up (``fit(blowup=(window, multiple))``): finite, but diverged
STATUS_BLOWUP = "blow-up"


@dataclasses.dataclass(frozen=True, repr=False)
class FitResult:
    """The outcome of :func:`fit`.

    weights: inference weights Pi_T * w_T (dense recipes: w_T). dense_weights: w_T.
    trace: the per-step :class:`Trace` (only the completed steps when the run stopped).
    switch_step: the first step after which any module switched (the criterion or the
    recipe's fixed schedule), None if none did (for single-phase recipes: when the
    observing criterion fired). metrics: ``problem.evaluate(weights)``; initial_metrics: at
    the initial weights. nm: name -> final (n, m) of every sparse layer. recipe: the
    :class:`~stepsim.recipes.Recipe`; criterion: the schedule's repr or None; steps (asked
    for), seed (None when a Generator was passed), problem: the problem's repr.
    status: "completed", "non-finite" (the run diverged: it stopped at ``stopped_at``, also
    ``diverged_at``; ``message`` says which quantity of which parameter went non-finite
    first, and the lr; ``diverged_param`` names that parameter, None when only the loss
    was non-finite) or "blow-up" (``fit(blowup=...)``: the mean batch loss over a window
    exceeded the stated multiple of its first window's; stopped there, ``message`` says
    the two means). module_switch_steps: module
    (parameter) -> its switch step or None. curves: with ``eval_every``, "step" (the steps
    evaluated, 0 = initial) and one array per metric of ``problem.evaluate`` at the
    weights the model computes with after that step. diagnostics: for a run that froze v
    (STEP), {"g2_over_vstar": {name: {"+1": [median, p99], "+10": ..., "+100": ...}}}:
    g^2 / v* over the parameter's coordinates that many steps after its switch
    (:meth:`stepsim.recipes.FreezeV.diagnose`; read only, it changes no arithmetic).
    """

    weights: dict
    dense_weights: dict
    trace: Trace
    switch_step: int | None
    metrics: dict
    initial_metrics: dict
    nm: dict
    recipe: object
    criterion: str | None
    steps: int
    seed: int | None
    problem: str
    status: str = STATUS_COMPLETED
    message: str = ""
    stopped_at: int | None = None
    module_switch_steps: dict = dataclasses.field(default_factory=dict)
    curves: dict = dataclasses.field(default_factory=dict)
    diverged_param: str | None = None
    diagnostics: dict = dataclasses.field(default_factory=dict)

    @property
    def success(self) -> bool:
        """scipy-like vocabulary: True when every step ran with finite values."""
        return self.status == STATUS_COMPLETED

    @property
    def diverged_at(self) -> int | None:
        """The step at which the run went non-finite (None: it did not diverge)."""
        return None if self.success else self.stopped_at

    def __repr__(self):
        metrics = ", ".join(f"{k}={v:.4g}" for k, v in self.metrics.items())
        last = self.trace.loss[-1] if len(self.trace) else float("nan")
        note = "" if self.success else f", status={self.status!r}, stopped_at={self.stopped_at}"
        return (f"FitResult(recipe={self.recipe!r}, steps={self.steps}, seed={self.seed}, "
                f"switch_step={self.switch_step}, final_loss={last:.4g}, "
                f"metrics={{{metrics}}}{note})")

    def summary(self) -> dict:
        """Everything but the large arrays, as JSON-ready values (curves included)."""
        return {
            "recipe": self.recipe.name,
            "recipe_options": {k: v for k, v in self.recipe.options},
            "criterion": self.criterion,
            "steps": self.steps,
            "seed": self.seed,
            "problem": self.problem,
            "status": self.status,
            "message": self.message,
            "stopped_at": self.stopped_at,
            "diverged_param": self.diverged_param,
            "switch_step": self.switch_step,
            "module_switch_steps": dict(self.module_switch_steps),
            "metrics": self.metrics,
            "initial_metrics": self.initial_metrics,
            "nm": {k: list(v) for k, v in self.nm.items()},
            "final_loss": float(self.trace.loss[-1]) if len(self.trace) else None,
            "mask_flips_total": int(self.trace.flips.sum()),
            "curves": {k: np.asarray(v).tolist() for k, v in self.curves.items()},
            "diagnostics": self.diagnostics,
        }

    def save(self, path, *, params: dict | None = None, seal: bool = False) -> tuple[Path, Path]:
        """Write the summary as JSON (with provenance) and the trace and weights as .npz beside it.

        Returns (json path, npz path); the npz has the trace arrays, ``weights/NAME`` and
        ``curve/NAME`` (the learning curves, when recorded). seal: the JSON records its own
        content digest too (``stepsim._ground.atomic.seal``; a run store's files are sealed).
        """
        from stepsim._ground.atomic import arrays_digest, savez, uncommit
        from stepsim._ground.provenance import save_json

        path = Path(path)
        npz = path.with_suffix(".npz")
        if npz == path:
            raise ValueError(f"result path {str(path)!r} must not end in .npz: the trace and "
                             "weights go to an .npz beside the JSON")
        run = dict(params or {}, recipe=self.recipe.name, recipe_options=dict(self.recipe.options),
                   criterion=self.criterion, steps=self.steps, problem=self.problem)
        weights = {f"weights/{k}": v for k, v in self.weights.items()}
        curves = {f"curve/{k}": np.asarray(v) for k, v in self.curves.items()}
        arrays = dict(layer_names=np.array(self.trace.layer_names), **self.trace.arrays(),
                      flip_rate=self.trace.flip_rate, mask_size=np.int64(self.trace.mask_size),
                      **weights, **curves)
        # the pair is tied (stepsim._ground.atomic): the JSON records the arrays' digest; old JSON
        # out, arrays next, JSON last, so a JSON that exists commits exactly these arrays
        payload = dict(self.summary(), arrays=npz.name, arrays_sha256=arrays_digest(arrays))
        uncommit(path)
        savez(npz, **arrays)
        save_json(path, payload, params=run, seed=self.seed, seal=seal)
        return path, npz


def record_step(trace: Trace, i: int, loss, stats, state, layer_names, lr) -> None:
    """Fill row i of ``trace`` (step i + 1): the loss, the lr, the phases and N:M in force,
    and, when ``stats`` (the step's AdamStats over all parameters) is not None, the
    statistics of v that the switch criteria read."""
    trace.loss[i] = loss
    trace.lr[i] = lr
    trace.phase[i] = state.phase
    trace.flips[i] = state.flips
    for j, name in enumerate(layer_names):
        trace.n[i, j], trace.m[i, j] = state.nm_now[name]
        trace.layer_phase[i, j] = state.phases[name]
    if stats is not None:
        trace.v_l1[i] = stats.v_l1
        trace.v_l2[i] = stats.v_l2
        trace.dv_l1[i] = stats.dv_l1
        trace.dv_zeros[i] = stats.dv_zeros
        trace.z[i] = z_sample(stats)
        nonzero = stats.size - stats.dv_zeros
        if nonzero > 0 and math.isfinite(stats.dv_log_sum):
            trace.z_geo[i] = math.exp(stats.dv_log_sum / nonzero)
