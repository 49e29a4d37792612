"""The training loop (stepsim.training.fit), the synthetic problem and `stepsim train`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stepsim.problems import Problem, SyntheticRegression
from stepsim.recipes import RECIPES, make_recipe
from stepsim.recipes.criteria import make_criterion
from stepsim.training import Trace, fit


def small(**kw):
    opts = {"d_in": 16, "d_hidden": 8, "d_out": 4, "n_samples": 128, "n_test": 64,
            "batch_size": 8, "seed": 3}
    opts.update(kw)
    return SyntheticRegression(**opts)


# ----------------------------------------------------------------------------- problem
@pytest.mark.parametrize("bias", [True, False])
def test_synthetic_gradients_match_central_differences(bias):
    p = small(bias=bias, d_in=8, d_hidden=4, d_out=3, condition=5.0)
    assert isinstance(p, Problem)
    rng = np.random.default_rng(0)
    params = p.init_params(rng)
    params = {k: v + 0.3 * rng.standard_normal(v.shape) for k, v in params.items()}
    batch = p.sample_batch(rng)
    _, grads = p.loss_and_grad(params, batch)
    h = 1e-6
    for name, w in params.items():
        assert grads[name].shape == w.shape and grads[name].dtype == np.float64
        numeric = np.empty_like(w)
        for idx in np.ndindex(w.shape):
            plus = {k: v.copy() for k, v in params.items()}
            minus = {k: v.copy() for k, v in params.items()}
            plus[name][idx] += h
            minus[name][idx] -= h
            numeric[idx] = (p.loss_and_grad(plus, batch)[0]
                            - p.loss_and_grad(minus, batch)[0]) / (2 * h)
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-6, atol=1e-9)


def test_synthetic_problem_controls_noise_and_sparsity():
    p = small(teacher_nm=(1, 4), grad_noise=0.5)
    assert np.all((p.teacher["w1"] != 0).reshape(-1, 4).sum(axis=1) <= 1)
    rng = np.random.default_rng(0)
    params = p.init_params(rng)
    batch = p.sample_batch(rng)
    _, noisy = p.loss_and_grad(params, batch)
    _, clean = p.loss_and_grad(params, batch._replace(grad_noise=None))
    assert 0.2 < np.std(noisy["w1"] - clean["w1"]) < 1.0
    with pytest.raises(ValueError, match="not divisible by M = 3"):
        small(nm=(1, 3))
    f32 = small(dtype=np.float32)
    assert f32.init_params(rng)["w1"].dtype == np.float32


# ----------------------------------------------------------------------------- fit
CASES = [(name, {}) for name in RECIPES] + [
    ("dense", {"optimizer": "adamw"}),
    ("dense", {"optimizer": "sgdm", "lr": 0.05}),
    ("sr-ste", {"optimizer": "sgdm", "lr": 0.05}),
    ("sr-ste", {"placement": "after", "lam": 1e-2}),
    ("step", {"v_star": "bias-corrected", "srste_lam": 2e-4}),
    ("step", {"denominator": "public"}),
    ("decaying-mask", {"dense_fraction": 0.0, "decay_rate": 0.1}),
    ("asp", {"prune_at": 0}),
    ("ste", {"layerwise": True, "schedule": "cosine", "warmup_steps": 10}),
]


@pytest.mark.parametrize(("name", "options"), CASES)
def test_every_recipe_runs_and_reduces_its_loss(name, options):
    p = small()
    options = {"lr": 1e-2, **options}
    recipe = make_recipe(name, **options)
    criterion = make_criterion("fixed-fraction", fraction=0.25) if recipe.needs_criterion else None
    steps = 150
    r = fit(p, recipe, steps, rng=0, criterion=criterion)
    assert r.metrics["loss"] < 0.5 * r.initial_metrics["loss"], r
    assert len(r.trace) == steps and np.all(np.isfinite(r.trace.loss))
    if recipe.sparse:  # inference weights are N:M sparse
        for layer, (n, m) in r.nm.items():
            assert np.all((r.weights[layer] != 0).reshape(-1, m).sum(axis=1) <= n)
        assert np.all(r.trace.phase[-10:] == 1)
    else:
        assert np.all(r.trace.phase == 0)


def test_same_seed_same_bits_and_different_seed_differs():
    p = small()
    recipe = make_recipe("step", lr=1e-2)
    # a fixed switch inside the run, so the sparse phase (masks, flips) is compared too
    runs = [fit(p, recipe, 60, rng=s, criterion=make_criterion("fixed-step", k0=20))
            for s in (11, 11, 12)]
    a, b, c = runs
    assert a.switch_step == 20 and a.trace.phase.max() == 1 and a.trace.flips.sum() > 0
    for name in a.trace.ARRAYS:
        assert getattr(a.trace, name).tobytes() == getattr(b.trace, name).tobytes(), name
    for name in a.weights:
        assert a.weights[name].tobytes() == b.weights[name].tobytes()
    assert a.switch_step == b.switch_step
    assert a.trace.loss.tobytes() != c.trace.loss.tobytes()


def test_trace_records_phases_statistics_and_flips():
    p = small()
    k0, steps = 20, 50
    r = fit(p, make_recipe("step", lr=1e-2), steps, rng=0,
            criterion=make_criterion("fixed-step", k0=k0))
    t = r.trace
    assert r.switch_step == k0
    assert np.all(t.phase[:k0] == 0) and np.all(t.phase[k0:] == 1)
    assert np.all(t.dv_l1[:k0] > 0)
    assert np.all(t.dv_l1[k0:] == 0)  # v frozen
    d = sum(w.size for w in r.dense_weights.values())
    assert np.all(t.dv_zeros[k0:] == d)
    assert np.all(t.v_l1[k0:] == t.v_l1[k0 - 1])
    np.testing.assert_allclose(t.z, t.dv_l1 / d)
    assert np.all(t.n[:k0] == 4) and np.all(t.n[k0:] == 2) and np.all(t.m == 4)
    pruned = (d - 8 - 4) // 2  # half of the two weight matrices (biases are dense)
    assert np.all(t.flips[:k0] == 0) and t.flips[k0] == pruned
    assert np.all(t.flips[k0 + 1:] <= pruned)
    assert np.all(np.isnan(t.z_geo))
    # the first-step statistics match NumPy: v_1 = (1 - b2) g_1^2 (v_0 = 0)
    rng_init, rng_batch = np.random.default_rng(0).spawn(2)
    params = p.init_params(rng_init)
    _, g = p.loss_and_grad(params, p.sample_batch(rng_batch))
    v1 = {k: 0.001 * x * x for k, x in g.items()}
    np.testing.assert_allclose(t.v_l1[0], sum(v.sum() for v in v1.values()), rtol=1e-12)
    np.testing.assert_allclose(t.dv_l1[0], t.v_l1[0], rtol=1e-12)
    np.testing.assert_allclose(t.v_l2[0], np.sqrt(sum((v**2).sum() for v in v1.values())),
                               rtol=1e-12)


def test_log_stats_fill_geometric_z():
    r = fit(small(), make_recipe("dense", lr=1e-2), 10, rng=0, log_stats=True)
    assert np.all(np.isfinite(r.trace.z_geo)) and np.all(r.trace.z_geo > 0)
    # geometric mean <= arithmetic mean over the non-zero differences
    nonzero = r.trace.dv_l1 / (sum(w.size for w in r.weights.values()) - r.trace.dv_zeros)
    assert np.all(r.trace.z_geo <= nonzero * (1 + 1e-12))


def test_single_phase_recipe_only_observes_the_criterion():
    p = small()
    plain = fit(p, make_recipe("sr-ste", lr=1e-2), 30, rng=0)
    watched = fit(p, make_recipe("sr-ste", lr=1e-2), 30, rng=0,
                  criterion=make_criterion("fixed-step", k0=10))
    assert watched.switch_step == 10 and plain.switch_step is None
    assert watched.trace.loss.tobytes() == plain.trace.loss.tobytes()


def test_fit_result_saves_json_and_npz(tmp_path):
    r = fit(small(), make_recipe("asp", lr=1e-2, prune_at=0.5), 20, rng=4)
    assert r.switch_step == 10 and "switch_step=10" in repr(r)
    jpath, npz = r.save(tmp_path / "run.json", params={"note": "test"})
    doc = json.loads(jpath.read_text())
    assert doc["result"]["switch_step"] == 10 and doc["provenance"]["seed"] == 4
    assert doc["provenance"]["params"]["note"] == "test"
    assert doc["result"]["recipe_options"]["prune_at"] == 0.5
    back = Trace.load_npz(npz)
    assert back.loss.tobytes() == r.trace.loss.tobytes()
    assert back.layer_names == r.trace.layer_names == ("w1", "w2")
    with np.load(npz) as data:
        assert np.array_equal(data["weights/w1"], r.weights["w1"])


# ----------------------------------------------------------------------------- CLI
def test_cli_train(tmp_path, capsys):
    from stepsim.cli import main

    out = tmp_path / "r.json"
    code = main(["train", "--recipe", "step", "--criterion", "fixed-fraction", "-c",
                 "fraction=0.3", "--nm", "1:4", "--steps", "40", "--lr", "0.01", "--seed", "3",
                 "--d-in", "16", "--d-hidden", "8", "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "switch     12" in text and "w1 1:4" in text
    assert json.loads(out.read_text())["result"]["nm"]["w1"] == [1, 4]
    assert out.with_suffix(".npz").exists()
    code = main(["train", "--recipe", "dense", "--criterion", "fixed-step", "-c", "k0=5",
                 "--steps", "20", "--d-in", "16", "--d-hidden", "8"])
    text = capsys.readouterr().out
    assert code == 0 and "table1" in text and "at k0 = 5" in text
    assert main(["train", "--recipe", "nope", "--steps", "2"]) == 2
    assert "unknown recipe 'nope'" in capsys.readouterr().err
    assert main(["train", "--recipe", "ste", "--nm", "2:3", "--steps", "2"]) == 2
    assert "not divisible by M = 3" in capsys.readouterr().err
    assert main(["train", "--recipe", "asp", "-o", "prune_at=1.5", "--steps", "2"]) == 2
    expected = "prune_at as a float is a fraction of the run and must be in [0, 1], got 1.5"
    assert expected in capsys.readouterr().err


# --- regressions found in review -------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    (np.float32(0.5), 50), (np.float64(0.25), 25), (np.int64(7), 7), (0.55, 55), (1.0, 100),
])
def test_switch_point_accepts_numpy_scalars_and_fractions(value, expected):
    from stepsim.recipes.switch import schedule_for

    for recipe in (make_recipe("asp", prune_at=value), make_recipe("step", switch_at=value)):
        schedule, _ = schedule_for(recipe, None, 100)  # what fit switches on
        assert schedule.init(100, ("w",)).k0 == expected


def test_criterion_by_name_follows_the_optimizers_beta2_and_eps():
    from stepsim.recipes.criteria import make_criterion

    problem = SyntheticRegression(scale=0.1)
    recipe = make_recipe("step", beta2=0.99, eps=1e-6)
    by_name = fit(problem, recipe, 600, rng=0, progress=False,
                  criterion=make_criterion("autoswitch", adam=recipe.optimizer))
    explicit = fit(problem, recipe, 600, rng=0, progress=False,
                   criterion=make_criterion("autoswitch", beta2=0.99, eps=1e-6))
    assert by_name.switch_step is not None
    assert by_name.switch_step == explicit.switch_step
    with pytest.raises(ValueError, match="differs from the optimizer's"):
        fit(problem, recipe, 10, rng=0, progress=False, criterion=make_criterion("autoswitch"))


@pytest.mark.parametrize("recipe, options", [
    ("step", {"switch_at": 20}),
    ("asp", {"prune_at": 1.0}),
    ("decaying-mask", {"dense_fraction": 1.0}),
])
def test_reported_nm_is_the_nm_of_the_inference_weights(recipe, options):
    problem = SyntheticRegression(nm=(2, 4))
    result = fit(problem, make_recipe(recipe, **options), 20, rng=0, progress=False)
    for name, (n, m) in result.nm.items():
        w = result.weights[name]
        assert (n, m) == (2, 4)
        assert ((w.reshape(-1, m) != 0).sum(axis=1) <= n).all()


def test_reported_nm_of_layerwise_that_never_switched_is_its_allocation():
    from stepsim.recipes.criteria import make_criterion

    problem = SyntheticRegression(nm=(2, 8))
    result = fit(problem, make_recipe("layerwise-step"), 20, rng=0, progress=False,
                 criterion=make_criterion("fixed-step", k0=10_000))
    assert result.switch_step is None
    for name, (n, m) in result.nm.items():
        kept = (result.weights[name].reshape(-1, m) != 0).sum(axis=1)
        assert kept.max() <= n, (name, n, kept.max())


# --- issue 8 item 3 and issue 10 item 6: curves, non-finite stop, argument checks ------

class _ExplodingProblem:
    """SyntheticRegression whose gradient of b1 turns NaN from step ``at`` on."""

    def __init__(self, at):
        self.inner, self.at, self.calls = small(), at, 0
        self.specs = self.inner.specs

    def init_params(self, rng):
        return self.inner.init_params(rng)

    def sample_batch(self, rng):
        return self.inner.sample_batch(rng)

    def loss_and_grad(self, params, batch):
        self.calls += 1
        loss, grads = self.inner.loss_and_grad(params, batch)
        if self.calls >= self.at:
            grads["b1"] = grads["b1"] * np.nan
        return loss, grads

    def evaluate(self, params):
        return self.inner.evaluate(params)

    def config(self):
        return {}


def test_a_non_finite_gradient_stops_the_run_with_a_clear_status(tmp_path):
    r = fit(_ExplodingProblem(7), make_recipe("dense", lr=1e-2), 20, rng=0, progress=False)
    assert r.status == "non-finite" and not r.success and r.stopped_at == 7
    assert "'b1'" in r.message and "step 7" in r.message
    assert len(r.trace) == 6 and np.all(np.isfinite(r.trace.loss))
    assert all(np.all(np.isfinite(w)) for w in r.weights.values())
    jpath, _ = r.save(tmp_path / "r.json")
    saved = json.loads(jpath.read_text())["result"]
    assert saved["status"] == "non-finite" and saved["stopped_at"] == 7


def test_eval_every_records_learning_curves(tmp_path):
    p = small()
    r = fit(p, make_recipe("step", lr=1e-2, switch_at=10), 30, rng=0, eval_every=10,
            progress=False)
    assert r.curves["step"].tolist() == [0, 10, 20, 30]
    assert r.curves["loss"][0] == r.initial_metrics["loss"]
    assert r.curves["test_loss"][-1] < r.curves["test_loss"][0]
    jpath, npz = r.save(tmp_path / "c.json")
    assert json.loads(jpath.read_text())["result"]["curves"]["step"] == [0, 10, 20, 30]
    with np.load(npz) as data:
        assert data["curve/loss"].shape == (4,)
    assert fit(p, make_recipe("dense"), 3, rng=0, progress=False).curves == {}


@pytest.mark.parametrize("kwargs, error, pattern", [
    ({"rng": "abc"}, TypeError, "rng must be"),
    ({"rng": -1}, ValueError, "rng"),
    ({"nm": "2:4"}, TypeError, r"nm must be an \(n, m\) tuple"),
    ({"nm": (2.0, 4)}, TypeError, "nm must be"),
    ({"criterion": 42}, TypeError, "criterion must be a criterion object"),
    ({"criterion": "autoswitch"}, TypeError, "make_criterion"),
    ({"eval_every": 0}, ValueError, "eval_every"),
])
def test_fit_rejects_bad_arguments_naming_them(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        fit(small(), make_recipe("dense"), 2, progress=False, **kwargs)


def test_fit_rejects_a_non_problem_and_a_recipe_name():
    with pytest.raises(TypeError, match="Problem protocol.*NoneType"):
        fit(None, make_recipe("dense"), 2)
    with pytest.raises(TypeError, match=r"make_recipe\('step'\)"):
        fit(small(), "step", 2)


def test_an_lr_that_overflows_the_weights_stops_the_run_silently_naming_the_parameter(tmp_path):
    """Issue 28: `train --lr 1e300` diverges; the first non-finite weight stops the run
    (one status: the step, the parameter, the lr) and no NumPy RuntimeWarning is printed."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any RuntimeWarning fails the test
        r = fit(small(), make_recipe("sr-ste", lr=1e300), 50, rng=0, progress=False)
    assert r.status == "non-finite" and r.diverged_at == r.stopped_at is not None
    assert r.diverged_at <= 3 and r.diverged_param in r.weights
    assert f"step {r.diverged_at}" in r.message and "lr 1e+300" in r.message
    assert repr(r.diverged_param) in r.message
    jpath, _ = r.save(tmp_path / "r.json")
    saved = json.loads(jpath.read_text())["result"]
    assert saved["diverged_param"] == r.diverged_param


def test_a_run_that_does_not_diverge_reports_nothing_diverged():
    r = fit(small(), make_recipe("dense", lr=1e-2), 20, rng=0, progress=False)
    assert r.success and r.diverged_at is None and r.diverged_param is None


@pytest.mark.parametrize("recipe, options", [
    ("sr-ste", {"placement": "after"}),  # Adam, then an after-piece that reads the lr
    ("sr-ste", {"optimizer": "sgdm", "placement": "after"}),
    ("step", {"switch_at": 0.5, "schedule": "cosine", "warmup_steps": 3}),
])
def test_the_learning_rate_is_computed_once_a_step(recipe, options, monkeypatch):
    """lr_at runs once per step of fit (the optimizer, the pieces after it and the trace
    share it), and the trace holds the schedule's value."""
    from stepsim.recipes import optimizers

    calls = []
    real = optimizers.learning_rate

    def counting(*args):
        calls.append(args[1])
        return real(*args)

    monkeypatch.setattr(optimizers, "learning_rate", counting)
    result = fit(SyntheticRegression(), make_recipe(recipe, **options), 12, rng=0,
                 criterion=None, progress=False)
    assert calls == list(range(1, 13))
    opt = make_recipe(recipe, **options).optimizer
    assert list(result.trace.lr) == [real(opt.lr, k, 12, opt.schedule, opt.warmup_steps)
                                     for k in range(1, 13)]
