"""The NQM's closed-form expected loss against seed-averaged simulations.

Three routes: noise-free (the recursion's mean part must match a simulation to rounding),
``adam_step(freeze_v=True)`` with a fixed mask over many independent replicas, and STEP's
own recipe (dense Adam, then v frozen at the switch) through its init/forward/update/switch
methods, compared with the closed form conditional on each replica's state at the switch.
Simulated means must lie within a Bonferroni-corrected normal interval of the closed form;
a closed form with a wrong momentum must not (the test can fail).
"""

import numpy as np
import pytest
from scipy import stats

from stepsim.core.masks import nm_mask
from stepsim.core.optim import adam_step
from stepsim.problems.nqm import NoisyQuadratic, expected_loss, frozen_adam_precond

CHECKS = 12  # steps compared (evenly spaced); family-wise error 1e-3, two-sided
Z_CRIT = stats.norm.ppf(1 - 1e-3 / (2 * CHECKS))


def simulate(problem, steps, *, lr, beta1, v_star, mask, rng, first_step=1, w0=None,
             weight_decay=0.0):
    """Losses (steps+1, replicas) of Adam with frozen v and a fixed mask, via adam_step."""
    w = problem.init_params(rng)["w"] if w0 is None else w0.copy()
    m = np.zeros_like(w)
    v = np.ascontiguousarray(np.broadcast_to(v_star, w.shape), dtype=w.dtype)
    losses = np.empty((steps + 1, problem.replicas))
    for j in range(steps + 1):
        fwd = w * mask
        diff = fwd - problem.w_star
        losses[j] = 0.5 * np.sum(problem.h * diff * diff, axis=1)
        if j == steps:
            break
        _, grads = problem.loss_and_grad({"w": fwd}, problem.sample_batch(rng))
        adam_step(w, grads["w"], m, v, step=first_step + j, lr=lr, beta1=beta1, eps=1e-8,
                  freeze_v=True, bias_correction2=1.0, weight_decay=weight_decay, stats=False)
    return losses


def max_abs_z(sim_rows, expected_rows):
    """max |z| over CHECKS evenly spaced steps of the replica-mean residual."""
    resid = sim_rows - expected_rows
    idx = np.linspace(1, len(resid) - 1, CHECKS).astype(int)
    mean = resid[idx].mean(axis=1)
    se = resid[idx].std(axis=1, ddof=1) / np.sqrt(resid.shape[1])
    return float(np.max(np.abs(mean / se)))


def test_noise_free_recursion_matches_simulation_exactly():
    problem = NoisyQuadratic(dim=32, c_scale=0.0, replicas=2, seed=3)
    rng = np.random.default_rng(0)
    w0 = problem.init_params(rng)["w"]
    v_star = problem.h**2 * 0.5 + 1e-4
    mask = nm_mask(np.abs(w0), 2, 4).astype(float)
    sim = simulate(problem, 200, lr=0.02, beta1=0.9, v_star=v_star, mask=mask, rng=rng,
                   first_step=7, w0=w0, weight_decay=0.01)
    closed = problem.expected_loss(200, lr=0.02, beta1=0.9, weight_decay=0.01, w0=w0,
                                   precond=frozen_adam_precond(v_star), mask=mask,
                                   first_step=7, keep_rows=True)
    np.testing.assert_allclose(sim, closed, rtol=1e-10)
    assert closed[-1].sum() < 0.5 * closed[0].sum()  # it did optimise


@pytest.mark.parametrize("random_start", [False, True])
def test_seed_average_of_frozen_v_adam_agrees_with_the_closed_form(random_start):
    problem = NoisyQuadratic(dim=32, batch_size=2, replicas=1000, seed=1)
    rng = np.random.default_rng(11)
    v_star = problem.h**2 + problem.noise_var  # a plausible Adam v at the switch
    precond = frozen_adam_precond(v_star)
    mask = problem.best_mask().astype(float)
    w0 = None if random_start else np.broadcast_to(problem.w_star + 0.5, problem.shape).copy()
    steps, lr, beta1, first = 150, 0.01, 0.9, 20
    sim = simulate(problem, steps, lr=lr, beta1=beta1, v_star=v_star, mask=mask, rng=rng,
                   first_step=first, w0=w0)
    closed = problem.expected_loss(steps, lr=lr, beta1=beta1, precond=precond, mask=mask,
                                   first_step=first, w0=w0, keep_rows=True)
    if random_start:  # w0 ~ N(0, 1): the closed form averages over it; compare sums
        closed = np.broadcast_to(
            problem.expected_loss(steps, lr=lr, beta1=beta1, precond=precond, mask=mask,
                                  first_step=first)[:, None] / problem.replicas, sim.shape)
    assert max_abs_z(sim, closed) < Z_CRIT
    wrong = problem.expected_loss(steps, lr=lr, beta1=0.8, precond=precond, mask=mask,
                                  first_step=first, w0=w0, keep_rows=True)
    if not random_start:
        assert max_abs_z(sim, wrong) > 3 * Z_CRIT  # the comparison has power


def test_step_recipe_phase_two_agrees_with_the_conditional_closed_form():
    """STEP through its recipe: dense Adam for k0 steps, then v* frozen and the STE mask.

    w* is itself 2:4-sparse, so pruned coordinates feel pure noise and the mask stays fixed
    after the switch (checked: no flips); given each replica's (w, m, v*) at the switch the
    closed form gives its expected loss, and the residuals average to zero. beta2 = 0.9 so
    that the raw v* (STEP's default) is near its stationary value by k0; with 0.999 the
    raw v* of step 40 is ~4% of it, steps are ~5x larger and masks flip.
    """
    from stepsim.recipes import RunContext, make_recipe

    problem = NoisyQuadratic(dim=16, replicas=500, batch_size=4, alpha=0.5, w_star_nm=(2, 4),
                             w_star_scale=3.0, init_scale=0.0, seed=2)
    lr, k0, steps = 0.01, 40, 160
    recipe = make_recipe("step", switch_at=k0, lr=lr, beta2=0.9)
    rng = np.random.default_rng(5)
    params = problem.init_params(rng)
    ctx = RunContext.make(params, problem.specs, steps)
    state = recipe.init(params, ctx)
    losses = np.empty((steps, problem.replicas))
    flips_after = 0
    for k in range(1, steps + 1):
        batch = problem.sample_batch(rng)
        fwd, state = recipe.forward(state, params, k, ctx)
        diff = fwd["w"] - problem.w_star
        losses[k - 1] = 0.5 * np.sum(problem.h * diff * diff, axis=1)
        _, grads = problem.loss_and_grad(fwd, batch)
        params, state, _ = recipe.update(state, params, grads, k, ctx)
        if k > k0 + 1:
            flips_after += state.flips
        if k == k0:
            params, state = recipe.switch(state, params, k, ctx)
            start_w, start_m = params["w"].copy(), state.opt.m["w"].copy()
            precond = frozen_adam_precond(state.opt.v["w"], eps=recipe.optimizer.eps)
            mask = nm_mask(start_w, 2, 4).astype(float)
    assert state.phases["w"] == 1 and flips_after == 0
    closed = problem.expected_loss(steps - k0 - 1, lr=lr, beta1=0.9, precond=precond,
                                   mask=mask, first_step=k0 + 1, w0=start_w, m0=start_m,
                                   keep_rows=True)
    sim = losses[k0:]  # trace row k-1 = the loss at w_{k-1}: rows k0.. are phase two
    assert max_abs_z(sim, closed) < Z_CRIT
    wrong = problem.expected_loss(steps - k0 - 1, lr=lr, beta1=0.9, mask=mask,
                                  precond=frozen_adam_precond(state.opt.v["w"] / 0.96),
                                  first_step=k0 + 1, w0=start_w, m0=start_m, keep_rows=True)
    assert max_abs_z(sim, wrong) > Z_CRIT  # a 2% error in v* is detected


def test_expected_loss_validates_and_knows_trivial_cases():
    h = np.array([1.0, 0.5])
    w_star = np.array([1.0, -2.0])
    # lr = 0: the loss never moves from its start
    out = expected_loss(h, w_star, 0.1, steps=5, lr=0.0, beta1=0.9, precond=1.0, w0_mean=0.0)
    np.testing.assert_allclose(out, 0.5 * (1.0 + 0.5 * 4.0))
    # mask 0 everywhere: the forward weights are 0 whatever w does
    out = expected_loss(h, w_star, 0.1, steps=5, lr=0.1, beta1=0.9, precond=1.0,
                        mask=[0, 0], w0_var=1.0)
    np.testing.assert_allclose(out, 1.5)
    with pytest.raises(ValueError, match="mask must hold only 0 and 1"):
        expected_loss(h, w_star, 0.1, steps=1, lr=0.1, beta1=0.9, precond=1.0, mask=[0.5, 1])
    with pytest.raises(ValueError, match="beta1"):
        expected_loss(h, w_star, 0.1, steps=1, lr=0.1, beta1=1.0, precond=1.0)
    with pytest.raises(ValueError, match="lr"):
        expected_loss(h, w_star, 0.1, steps=1, lr=-0.1, beta1=0.9, precond=1.0)
    with pytest.raises(ValueError, match="noise_var"):
        expected_loss(h, w_star, -1.0, steps=1, lr=0.1, beta1=0.9, precond=1.0)


def test_nqm_problem_protocol():
    problem = NoisyQuadratic(dim=8, replicas=3, batch_size=4, alpha=0.0, seed=0)
    assert problem.specs["w"].nm == (2, 4)
    params = problem.init_params(np.random.default_rng(0))
    assert params["w"].shape == (3, 8)
    loss, grads = problem.loss_and_grad(params, np.zeros((3, 8)))
    assert loss == pytest.approx(problem.loss(params["w"]))
    np.testing.assert_allclose(grads["w"], problem.h * (params["w"] - problem.w_star))
    noise = np.stack([problem.sample_batch(np.random.default_rng(s)) for s in range(4000)])
    np.testing.assert_allclose(noise.var(axis=(0, 1)), problem.c / 4, rtol=0.1)
    metrics = problem.evaluate({"w": np.broadcast_to(problem.w_star, (3, 8)).copy()})
    assert metrics["loss"] == 0 and metrics["mask_optimality"] == 1.0
    assert metrics["best_nm_loss"] > 0
    with pytest.raises(ValueError, match="divisible by M = 4"):
        NoisyQuadratic(dim=6)
    with pytest.raises(ValueError, match="GiB"):
        NoisyQuadratic(dim=2**40)
