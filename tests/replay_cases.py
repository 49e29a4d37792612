"""Replay cases: every recipe and criterion as it ran before the recipe-core rebuild (issue 11).

``python tests/replay_cases.py`` (from the repository root) records each case's digest into
``tests/data/replay_recipes.json``; ``tests/package/test_replay.py`` replays the cases and asserts
the same bits. First recorded on the old core; re-recorded (new options included) when
issue 16 made every result CPU-independent, which changed last bits on purpose. A case is
(label, recipe name, make_recipe options, criterion or None, fit options, new_options):
``new_options`` are merged into the recipe options, for the few defaults issue 11 item 4
changed on purpose (the old behaviour stays reachable through them).
The digest is sha256 of the bytes of every final weight, dense weight and trace array, plus
the switch step, the final N:M and the metrics' float reprs.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).parent / "data" / "replay_recipes.json"
STEPS = 240
# beta2 = 0.99 (T_w = 100) and a larger eps so that the statistic-based criteria fire in a
# few hundred steps on this small problem
ADAM = {"lr": 1e-2, "beta2": 0.99, "eps": 1e-6}
SGDM = {"lr": 0.05}


def problem(nm=(2, 4)):
    from stepsim.problems import SyntheticRegression

    return SyntheticRegression(d_in=16, d_hidden=8, d_out=4, n_samples=128, n_test=64,
                               batch_size=8, scale=0.3, nm=nm, dtype=np.float64, seed=1)


def _cases():
    cases = []

    def add(label, recipe, options=None, criterion=None, fit=None, new=None, opt="adam"):
        base = SGDM if opt == "sgdm" else ADAM
        cases.append((label, recipe, {"optimizer": opt, **base, **(options or {})}, criterion,
                      fit or {}, new or {}))

    for opt in ("adam", "adamw", "sgdm"):
        add(f"dense/{opt}", "dense", opt=opt)
        add(f"ste/{opt}", "ste", opt=opt)
        add(f"sr-ste/{opt}", "sr-ste", opt=opt)
        add(f"sr-ste-after/{opt}", "sr-ste", {"placement": "after", "lam": 1e-2}, opt=opt)
        add(f"asp/{opt}", "asp", opt=opt)
        add(f"decaying-mask/{opt}", "decaying-mask", opt=opt)
    add("asp/prune_at=0", "asp", {"prune_at": 0})
    add("asp/prune_at=100", "asp", {"prune_at": 100})
    add("asp/criterion", "asp", criterion=("fixed-step", {"k0": 60}))
    add("ste/schedule", "ste", {"schedule": "cosine", "warmup_steps": 20})
    add("sr-ste/lam", "sr-ste", {"lam": 5e-2})
    add("ste/observe-autoswitch", "ste", criterion=("autoswitch", {"clip": True}))
    for opt in ("adam", "adamw"):
        add(f"step/{opt}", "step", {"switch_at": 0.3}, opt=opt)
        add(f"step/autoswitch/{opt}", "step", criterion=("autoswitch", {}), opt=opt)
    add("step/v_star=bias-corrected", "step", {"switch_at": 0.3, "v_star": "bias-corrected"})
    add("step/denominator=public", "step", {"switch_at": 0.3, "denominator": "public"})
    add("step/srste-before", "step", {"switch_at": 50, "srste_lam": 2e-3})
    add("step/srste-after", "step", {"switch_at": 50, "srste_lam": 2e-3,
                                     "srste_placement": "after"})
    add("step/eps_mode=outside", "step", {"switch_at": 0.3, "eps_mode": "outside"})
    add("step/fixed-fraction", "step", criterion=("fixed-fraction", {"fraction": 0.4}))
    add("step/autoswitch-II-log", "step", criterion=("autoswitch", {"variant": "II"}))
    add("step/tang", "step", criterion=("tang", {}))
    add("step/agarwal", "step", criterion=("agarwal", {}))
    add("step-v-updated", "step-v-updated", {"switch_at": 0.3})
    add("step-v-updated/criterion", "step-v-updated", criterion=("autoswitch", {}))
    add("decaying-mask/decay_rate", "decaying-mask", {"decay_rate": 0.05},
        new={"alpha_clock": "frame"})
    add("decaying-mask/no-dense+decay", "decaying-mask", {"dense_fraction": 0, "decay_rate": 0.02},
        new={"alpha_clock": "frame"})
    add("decaying-mask/srste", "decaying-mask", {"srste_lam": 2e-3})
    add("decaying-mask/criterion", "decaying-mask", criterion=("fixed-step", {"k0": 30}))
    add("decaying-mask/1:8", "decaying-mask", {"dense_fraction": 0.2}, fit={"nm": (1, 8)})
    add("ste/nm=1:8", "ste", fit={"nm": (1, 8)})
    add("dense/log_stats", "dense", fit={"log_stats": True})
    greedy = {"layerwise_rule": "greedy"}
    add("layerwise-sr-ste", "layerwise-sr-ste", new=greedy)
    add("layerwise-sr-ste/target", "layerwise-sr-ste", {"layerwise_target": 0.6}, new=greedy)
    add("layerwise-sr-ste/m=8", "layerwise-sr-ste", {"layerwise_m": 8, "layerwise_target": 0.7},
        new=greedy)
    add("layerwise-sr-ste/allocation", "layerwise-sr-ste",
        {"layerwise_allocation": {"w1": 1, "w2": 2}})
    add("layerwise-step", "layerwise-step", {"switch_at": 0.3}, new=greedy)
    add("layerwise-step/criterion", "layerwise-step", {"layerwise_target": 0.6},
        criterion=("autoswitch", {}), new={**greedy, "per_module": False})
    add("ste/layerwise", "ste", {"layerwise": True, "layerwise_target": 0.6}, new=greedy)
    add("step/layerwise", "step", {"switch_at": 0.3, "layerwise": True}, new=greedy)
    for crit, opts in [("autoswitch", {}), ("autoswitch", {"variant": "II"}),
                       ("autoswitch", {"variant": "II", "zero_rule": "zero"}),
                       ("autoswitch", {"variant": "II", "zero_rule": "floor"}),
                       ("autoswitch", {"window": "partial"}),
                       ("autoswitch", {"stats_on": "vhat"}),
                       ("autoswitch", {"clip": True, "t_min": 0.2, "t_max": 0.6}),
                       ("agarwal", {}), ("agarwal", {"norm": "l1", "threshold": 0.01}),
                       ("tang", {}), ("tang", {"window_length": 50, "threshold": 0.999}),
                       ("fixed-step", {"k0": 77}), ("fixed-fraction", {"fraction": 0.25})]:
        label = crit + "".join(f"/{k}={v}" for k, v in sorted(opts.items()))
        add(f"criterion/{label}", "dense", criterion=(crit, opts))
    return cases


CASES = _cases()


def _sha(array) -> str:
    a = np.ascontiguousarray(array)
    head = str(a.dtype).encode() + str(a.shape).encode()
    return hashlib.sha256(head + a.tobytes()).hexdigest()[:20]


def run_case(case):
    """The FitResult of one case, on the code currently importable as ``stepsim``."""
    from stepsim.recipes import make_recipe
    from stepsim.recipes.criteria import make_criterion
    from stepsim.training import fit

    _label, name, options, criterion, fit_opts, new = case
    recipe = make_recipe(name, **{**options, **new})
    crit = None
    if criterion is not None:
        crit = make_criterion(criterion[0], adam=recipe.optimizer, **criterion[1])
    return fit(problem(), recipe, STEPS, rng=7, criterion=crit, progress=False, **fit_opts)


def digest(result) -> dict:
    """Hashes of everything a run produced that a rebuild must keep bit for bit."""
    out = {"switch_step": result.switch_step,
           "nm": {k: list(v) for k, v in sorted(result.nm.items())},
           "metrics": {k: repr(float(v)) for k, v in sorted(result.metrics.items())}}
    for k in sorted(result.weights):
        out[f"weights/{k}"] = _sha(result.weights[k])
        out[f"dense_weights/{k}"] = _sha(result.dense_weights[k])
    for k, v in result.trace.arrays().items():
        out[f"trace/{k}"] = _sha(v)
    return out


def old_criteria_on_v():
    """Every criterion over a hand-made v trajectory (run_criteria_on_v): fired_at, value."""
    from stepsim.recipes.analysis import run_criteria_on_v
    from stepsim.recipes.criteria import make_criterion

    rng = np.random.default_rng(5)
    steps, d = 400, 12
    decay = np.exp(-np.arange(1, steps + 1) / 60.0)[:, None]
    v = 1e-3 * (decay + 0.05) * (1 + 1e-4 * rng.random((steps, d)))
    v[:, 0] = 0.0  # a dead coordinate: exact zero differences (zero_rule matters)
    table = {}
    for label, (name, opts) in {
            "as": ("autoswitch", {"eps": 1e-7}), "as-II": ("autoswitch", {"eps": 1e-7,
                                                                           "variant": "II"}),
            "as-II-zero": ("autoswitch", {"eps": 1e-7, "variant": "II", "zero_rule": "zero"}),
            "as-II-floor": ("autoswitch", {"eps": 1e-7, "variant": "II", "zero_rule": "floor"}),
            "as-partial": ("autoswitch", {"eps": 1e-7, "window": "partial"}),
            "as-vhat": ("autoswitch", {"eps": 1e-7, "stats_on": "vhat"}),
            "as-clip": ("autoswitch", {"eps": 1e-12, "clip": True}),
            "agarwal": ("agarwal", {"threshold": 0.01}), "agarwal-l1": ("agarwal", {"norm": "l1"}),
            "tang": ("tang", {"threshold": 0.99}), "fixed": ("fixed-step", {"k0": 9}),
            "fraction": ("fixed-fraction", {"fraction": 0.3})}.items():
        crit = make_criterion(name, beta2=0.99, **opts) if name in ("autoswitch", "tang") \
            else make_criterion(name, **opts)
        table[label] = crit
    states = run_criteria_on_v(v, table, beta2=0.99)
    return {label: {"fired_at": s.fired_at, "value": repr(float(s.value))}
            for label, s in states.items()}


def record(path=FIXTURE) -> dict:
    from stepsim._ground.atomic import write_json

    runs = {case[0]: digest(run_case(case)) for case in CASES}  # as the test replays them
    payload = {"steps": STEPS, "runs": runs, "criteria_on_v": old_criteria_on_v()}
    write_json(path, payload)
    return payload


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    data = record()
    print(f"recorded {len(data['runs'])} runs and {len(data['criteria_on_v'])} criteria "
          f"into {FIXTURE}")
