"""Layer-wise N:M (DominoSearch-style): per-layer N meeting a global target sparsity.

:func:`allocate_layerwise` is a pure function of the weights' magnitudes (SPEC section 3);
the layer-wise recipes call it once, at their first switch.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from stepsim._ground.validate import check_fraction, check_int
from stepsim.core.sparsity import ParamSpec, check_divides


# --------------------------------------------------------------------------- layer-wise N:M
def _candidates(m: int) -> list[int]:
    """N values a layer may take, largest first: M and the powers of two below it."""
    out = [m]
    p = 1 << (m.bit_length() - 1)
    if p == m:
        p >>= 1
    while p >= 1:
        out.append(p)
        p >>= 1
    return out


def allocate_layerwise(params: Mapping, specs: Mapping[str, ParamSpec], target_sparsity: float,
                       m: int | None = None) -> dict[str, tuple[int, int]]:
    """Per-layer N (a power of two, M fixed) meeting a global target sparsity; greedy rule.

    A simpler stand-in for DominoSearch (Sun et al. 2021), documented here: every sparse
    layer starts dense (N = M); while the kept fraction of all sparse entries exceeds
    1 - target_sparsity, the layer whose next halving of N (to the next smaller power of
    two) would prune the smallest *relative* magnitude is halved. The cost of a halving is
    the mean |w| of the entries it would prune (ranked within each group of M) divided by
    the layer's mean |w| — so a layer's overall scale does not matter, only how
    concentrated its magnitude is inside its groups. Ties go to the first layer in the
    dict's order. Dense parameters (biases) are not counted.

    m: the M of every sparse layer (default: each spec's own M). Returns name -> (n, m) for
    the sparse parameters. Raises ValueError if the target is outside [0, 1] or not
    reachable (every N = 1 still keeps too much), or M does not tile a layer.

    Parameters
    ----------
    params : dict name -> ndarray
    specs : dict name -> ParamSpec
    target_sparsity : float in [0, 1]
    m : int, optional

    Returns
    -------
    dict name -> (n, m)
    """
    target = check_fraction("target_sparsity", target_sparsity)
    if m is not None:
        m = check_int("m", m, minimum=1)
    layers = {}
    for name, w in params.items():
        spec = specs[name]
        if not spec.sparse:
            continue
        mm = spec.m if m is None else m
        check_divides(name, w.shape, spec.axis, mm)
        groups = np.abs(np.moveaxis(w, spec.axis, -1).astype(np.float64)).reshape(-1, mm)
        ranked = -np.sort(-groups, axis=1)  # each group's magnitudes, largest first
        mass = ranked.sum(axis=0)  # mass[r]: total magnitude at rank r over all groups
        mean = float(groups.mean()) if groups.size else 0.0
        layers[name] = {"m": mm, "groups": groups.shape[0], "mass": mass,
                        "scale": mean or 1.0, "cands": _candidates(mm), "n": mm}
    total = sum(lay["groups"] * lay["m"] for lay in layers.values())
    kept = total
    budget = (1.0 - target) * total
    floor = sum(lay["groups"] for lay in layers.values())
    if floor > budget * (1 + 1e-12) + 1e-9:
        raise ValueError(
            f"target_sparsity={target} is not reachable: with N = 1 in every layer the sparsity "
            f"is {1 - floor / total:.6g}")
    while kept > budget * (1 + 1e-12) + 1e-9:
        best = None
        for name, lay in layers.items():
            if lay["n"] == 1:
                continue
            nxt = lay["cands"][lay["cands"].index(lay["n"]) + 1]
            removed = lay["groups"] * (lay["n"] - nxt)
            cost = float(lay["mass"][nxt:lay["n"]].sum()) / removed / lay["scale"]
            if best is None or cost < best[0]:
                best = (cost, name, nxt, removed)
        _, name, nxt, removed = best
        layers[name]["n"] = nxt
        kept -= removed
    return {name: (lay["n"], lay["m"]) for name, lay in layers.items()}
