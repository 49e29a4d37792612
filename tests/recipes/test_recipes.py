"""Recipes (stepsim.recipes): the pieces, their compositions and their invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepsim.core.reference import nm_mask as ref_nm_mask
from stepsim.problems import SyntheticRegression
from stepsim.recipes import (
    RECIPES,
    DecaySchedule,
    ParamSpec,
    RunContext,
    allocate_layerwise,
    decay_sequence,
    make_recipe,
    sparsity,
)
from stepsim.recipes import transforms as T
from stepsim.recipes.criteria import make_criterion
from stepsim.recipes.switch import SwitchAt, schedule_for
from stepsim.training import fit


def small(**kw):
    opts = {"d_in": 16, "d_hidden": 8, "d_out": 4, "n_samples": 128, "n_test": 64,
            "batch_size": 8, "seed": 3}
    opts.update(kw)
    return SyntheticRegression(**opts)


def run_manual(problem, recipe, steps, k0=None, seed=0):
    """Drive a recipe by hand; returns [(step, params, state)] after each step (and switch)."""
    rng = np.random.default_rng(seed)
    params = problem.init_params(rng)
    ctx = RunContext.make(params, problem.specs, steps)
    state = recipe.init(params, ctx)
    if k0 == 0:
        params, state = recipe.switch(state, params, 0, ctx)
    out = []
    for k in range(1, steps + 1):
        batch = problem.sample_batch(rng)
        fwd, state = recipe.forward(state, params, k, ctx)
        _, grads = problem.loss_and_grad(fwd, batch)
        params, state, _ = recipe.update(state, params, grads, k, ctx)
        if k == k0:
            params, state = recipe.switch(state, params, k, ctx)
        out.append((k, params, state))
    return out


# ----------------------------------------------------------------------------- pieces
def test_pieces_do_not_modify_their_inputs():
    p = small()
    rng = np.random.default_rng(0)
    params = p.init_params(rng)
    _, grads = p.loss_and_grad(params, p.sample_batch(rng))
    recipe = make_recipe("sr-ste", lr=1e-2)
    ctx = RunContext.make(params, p.specs, 10)
    state = recipe.init(params, ctx)
    params, state = recipe.switch(state, params, 0, ctx)
    _, state = recipe.forward(state, params, 1, ctx)
    before = {k: v.copy() for k, v in params.items()}
    m_before = {k: v.copy() for k, v in state.opt.m.items()}
    new, _, _ = recipe.update(state, params, grads, 1, ctx)
    for k in params:
        assert np.array_equal(params[k], before[k])
        assert np.array_equal(state.opt.m[k], m_before[k])
        assert not np.array_equal(new[k], before[k])  # and it did step


def test_srste_term_matches_equation_9():
    rng = np.random.default_rng(1)
    w = {"a": rng.standard_normal((3, 8)), "b": rng.standard_normal(3)}
    g = {"a": rng.standard_normal((3, 8)), "b": rng.standard_normal(3)}
    masks = {"a": ref_nm_mask(w["a"], 2, 4), "b": None}
    out = T.srste_term(g, w, masks, 0.25)
    expected = g["a"] + 0.25 * (1 - masks["a"]) * w["a"]
    np.testing.assert_allclose(out["a"], expected, rtol=0, atol=1e-15)
    assert out["b"] is g["b"]
    assert np.array_equal(out["a"][masks["a"]], g["a"][masks["a"]])


def test_decay_sequence_follows_spec():
    assert decay_sequence(1, 8) == (7, 4, 2, 1)
    assert decay_sequence(2, 4) == (3, 2)
    assert decay_sequence(1, 4) == (3, 2, 1)
    assert decay_sequence(1, 16) == (15, 8, 4, 2, 1)
    assert decay_sequence(3, 8) == (7, 4, 3)
    assert decay_sequence(4, 4) == (4,)


@given(st.integers(1, 5).map(lambda e: 2**e), st.data(), st.integers(1, 40),
       st.integers(1, 300))
def test_decay_schedule_frames(m, data, start, length):
    n = data.draw(st.integers(1, m))
    sched = DecaySchedule.make(n, m, start, start + length - 1)
    starts = sched.frame_starts
    assert starts[0] == start and list(starts) == sorted(starts)
    for f, s in enumerate(starts):
        if f + 1 < len(starts) and starts[f + 1] == s:
            continue  # an empty frame (run shorter than the number of frames)
        assert sched.n_at(s) == sched.ns[f]
        if f > 0 and starts[f - 1] < s:
            assert sched.n_at(s - 1) == sched.ns[f - 1]
    assert sched.n_at(start + length - 1) == n  # the run ends at the target


@pytest.mark.slow
def test_decaying_mask_is_at_the_scheduled_nm_at_every_frame_boundary():
    p = small(nm=(1, 8))
    steps = 100
    recipe = make_recipe("decaying-mask", lr=1e-2, dense_fraction=0.1)
    hist = run_manual(p, recipe, steps, k0=SwitchAt(recipe.schedule.switch_at).step_for(steps))
    state = hist[-1][2]
    schedules = state.masker_state
    sched = schedules["w1"]
    assert sched.ns == (7, 4, 2, 1) and sched.start == 11
    for f, s in enumerate(sched.frame_starts):
        masks = hist[s - 1][2].masks  # the masks step s used
        for name in ("w1", "w2"):
            per_group = masks[name].reshape(-1, 8).sum(axis=1)
            assert np.all(per_group == sched.ns[f]), (name, s)
    assert hist[9][2].masks is None  # dense phase: steps 1..10


def test_decaying_scale_alpha():
    sched = DecaySchedule.make(1, 8, 1, 40, decay_rate=0.25)
    assert sched.alpha_at(1) == 1.0 and sched.alpha_at(3) == 0.5 and sched.alpha_at(6) == 0.0
    assert sched.alpha_at(sched.frame_starts[-1]) == 0.0  # the last frame is binary
    # t counts from the start of the sparse phase, once (Kao et al.'s code): frame 1
    # does not restart at full scale
    assert sched.alpha_at(sched.frame_starts[1]) == 0.0
    old = DecaySchedule.make(1, 8, 1, 40, decay_rate=0.25, alpha_clock="frame")
    assert old.alpha_at(old.frame_starts[1]) == 1.0  # the option: restarts each frame


# ----------------------------------------------------------------------------- layer-wise
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 4), st.floats(0.1, 10.0)),
                min_size=1, max_size=4),
       st.sampled_from([4, 8, 16]), st.floats(0.0, 0.93), st.integers(0, 2**16))
def test_layerwise_allocation_meets_the_target(layers, m, target, seed):
    rng = np.random.default_rng(seed)
    params, specs = {}, {}
    for i, (rows, groups, scale) in enumerate(layers):
        params[f"l{i}"] = scale * rng.standard_normal((rows, groups * m)) ** 3
        specs[f"l{i}"] = ParamSpec(1, m)
    params["bias"], specs["bias"] = np.ones(3), ParamSpec()
    reachable = 1 - 1 / m
    if target > reachable:
        with pytest.raises(ValueError, match="not reachable"):
            allocate_layerwise(params, specs, target)
        return
    alloc = allocate_layerwise(params, specs, target)
    assert set(alloc) == {f"l{i}" for i in range(len(layers))}
    for n, mm in alloc.values():
        assert mm == m and n in {m, m // 2, m // 4, m // 8, m // 16} and n >= 1
    achieved = sparsity(specs, {k: v.shape for k, v in params.items()}, alloc)
    assert achieved >= target - 1e-12
    # a layer's overall scale does not change its N (costs are relative to its mean |w|)
    scaled = dict(params, l0=params["l0"] * 1000.0)
    assert allocate_layerwise(scaled, specs, target) == alloc


def test_layerwise_prunes_the_concentrated_layer_harder():
    rng = np.random.default_rng(0)
    flat = np.sign(rng.standard_normal((8, 64))) * (1 + 0.01 * rng.random((8, 64)))
    peaked = rng.standard_normal((8, 64)) * 1e-3
    peaked[:, ::8] = 1.0  # one dominant weight per group of 8
    specs = {"flat": ParamSpec(2, 8), "peaked": ParamSpec(2, 8)}
    alloc = allocate_layerwise({"flat": flat, "peaked": peaked}, specs, 0.75)
    assert alloc["peaked"][0] < alloc["flat"][0]


def test_layerwise_recipe_allocates_at_the_switch_and_uses_it():
    p = small(d_in=32, d_hidden=16, nm=(2, 8))
    result = fit(p, make_recipe("layerwise-step", lr=1e-2, switch_at=0.3,
                                layerwise_rule="greedy"), 60, rng=0)
    ns = {k: n for k, (n, m) in result.nm.items()}
    assert all(m == 8 for _, m in result.nm.values())
    shapes = {k: v.shape for k, v in result.weights.items()}
    assert sparsity(p.specs, shapes, result.nm) >= 0.75 - 1e-12
    for name, n in ns.items():
        kept = (result.weights[name] != 0).reshape(-1, 8).sum(axis=1)
        assert np.all(kept <= n)
    assert np.all(result.trace.n[result.trace.phase == 0] == 8)


# ----------------------------------------------------------------------------- STEP
def test_step_phase2_freezes_v_bit_for_bit_while_m_moves():
    p = small()
    k0, steps = 20, 45
    hist = run_manual(p, make_recipe("step", lr=1e-2), steps, k0=k0)
    at_switch = hist[k0 - 1][2].opt
    v_star = {k: a.copy() for k, a in at_switch.v.items()}
    m_star = {k: a.copy() for k, a in at_switch.m.items()}
    assert set(at_switch.frozen) == set(v_star)
    assert all(f.bias_correction2 == 1.0 for f in at_switch.frozen.values())
    assert not hist[k0 - 2][2].opt.frozen
    for k, v in hist[k0 - 2][2].opt.v.items():  # v did change on the step before
        assert not np.array_equal(v, v_star[k]) or not np.any(v)
    for _, _, state in hist[k0:]:
        for name, v in v_star.items():
            assert state.opt.v[name].tobytes() == v.tobytes()
    final = hist[-1][2].opt
    assert any(not np.array_equal(final.m[n], m_star[n]) for n in m_star)


def test_step_v_updated_keeps_updating_v():
    p = small()
    hist = run_manual(p, make_recipe("step-v-updated", lr=1e-2), 30, k0=10)
    v10 = hist[9][2].opt.v["w1"].copy()
    assert not hist[-1][2].opt.frozen
    assert not np.array_equal(hist[-1][2].opt.v["w1"], v10)
    assert hist[-1][2].phase == 1


@pytest.mark.parametrize(("v_star", "denominator"), [("raw", "paper"),
                                                     ("bias-corrected", "paper"),
                                                     ("raw", "public")])
def test_step_phase2_denominator(v_star, denominator):
    p = small()
    k0, lr, b1, b2, eps = 5, 1e-2, 0.9, 0.999, 1e-8
    recipe = make_recipe("step", lr=lr, v_star=v_star, denominator=denominator)
    hist = run_manual(p, recipe, k0 + 1, k0=k0)
    _, w_prev, st_prev = hist[k0 - 1]
    _, w_next, st_next = hist[k0]
    m_new, v_star_arr = st_next.opt.m["w1"], st_prev.opt.v["w1"]
    mhat = m_new / (1 - b1 ** (k0 + 1))
    if denominator == "public":
        denom = np.sqrt(v_star_arr) + eps**0.75
    else:
        c2 = 1.0 if v_star == "raw" else 1 - b2**k0
        denom = np.sqrt(v_star_arr / c2 + eps)
    np.testing.assert_allclose(w_next["w1"], w_prev["w1"] - lr * mhat / denom, rtol=1e-12,
                               atol=1e-15)


def test_step_that_never_switches_is_dense_adam_bit_for_bit():
    p = small()
    steps = 40
    dense = fit(p, make_recipe("dense", lr=1e-2), steps, rng=7)
    never = fit(p, make_recipe("step", lr=1e-2), steps, rng=7,
                criterion=make_criterion("fixed-step", k0=steps + 1))
    assert never.switch_step is None
    for name in dense.dense_weights:
        assert never.dense_weights[name].tobytes() == dense.dense_weights[name].tobytes()
    assert never.trace.loss.tobytes() == dense.trace.loss.tobytes()
    assert never.trace.dv_l1.tobytes() == dense.trace.dv_l1.tobytes()
    # its inference weights are the one-shot N:M prune of w_T (Algorithm 1, line 23)
    w1 = dense.dense_weights["w1"]
    assert np.array_equal(never.weights["w1"], np.where(ref_nm_mask(w1, 2, 4), w1, 0.0))


# ----------------------------------------------------------------------------- SR-STE, ASP
def test_srste_with_lam_zero_is_ste_bit_for_bit():
    p = small()
    ste = fit(p, make_recipe("ste", lr=1e-2), 40, rng=5)
    sr0 = fit(p, make_recipe("sr-ste", lr=1e-2, lam=0.0), 40, rng=5)
    sr = fit(p, make_recipe("sr-ste", lr=1e-2, lam=1e-1), 40, rng=5)
    for name in ste.dense_weights:
        assert sr0.dense_weights[name].tobytes() == ste.dense_weights[name].tobytes()
        assert sr0.weights[name].tobytes() == ste.weights[name].tobytes()
    assert not np.array_equal(sr.dense_weights["w1"], ste.dense_weights["w1"])


def test_srste_after_placement_differs_from_before():
    p = small()
    before = fit(p, make_recipe("sr-ste", lr=1e-2, lam=1.0), 30, rng=1)
    after = fit(p, make_recipe("sr-ste", lr=1e-2, lam=1.0, placement="after"), 30, rng=1)
    assert not np.array_equal(before.dense_weights["w1"], after.dense_weights["w1"])


def test_asp_pruned_weights_are_zero_and_stay_zero():
    p = small()
    k0, steps = 15, 40
    hist = run_manual(p, make_recipe("asp", lr=1e-2, prune_at=k0), steps, k0=k0)
    fixed = hist[k0 - 1][2].masker_state
    assert np.any(hist[k0 - 2][1]["w1"] != 0)
    m_prev = None
    for _, params, state in hist[k0 - 1:]:
        for name in ("w1", "w2"):
            assert np.all(params[name][~fixed[name]] == 0)
            assert np.all(params[name][fixed[name]] != 0)
            assert state.masker_state[name] is fixed[name]
        m_now = state.opt.m["w1"][~fixed["w1"]]
        if m_prev is not None:  # gradients are masked: pruned moments only decay
            assert np.array_equal(m_now, np.float64(0.9) * m_prev)
        m_prev = m_now.copy()


def test_momentum_sgd_runs_under_srste():
    p = small()
    r = fit(p, make_recipe("sr-ste", optimizer="sgdm", lr=0.05), 100, rng=0)
    assert r.metrics["loss"] < 0.5 * r.initial_metrics["loss"]
    assert np.all(np.isnan(r.trace.v_l1))


# ----------------------------------------------------------------------------- errors
def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown recipe 'nope'"):
        make_recipe("nope")
    with pytest.raises(ValueError, match="lamda"):
        make_recipe("sr-ste", lamda=1e-3)
    with pytest.raises(ValueError, match="prune_at"):
        make_recipe("asp", prune_at=1.5)
    with pytest.raises(ValueError, match="dense_fraction"):
        make_recipe("decaying-mask", dense_fraction=-0.1)
    with pytest.raises(TypeError, match="prune_at"):
        make_recipe("asp", prune_at=True)
    with pytest.raises(ValueError, match="optimizer"):
        make_recipe("step", optimizer="sgdm")
    with pytest.raises(ValueError, match="unknown optimizer"):
        make_recipe("dense", optimizer="rmsprop")
    with pytest.raises(ValueError, match="v_star"):
        make_recipe("step", v_star="hat")
    with pytest.raises(ValueError, match="placement"):
        make_recipe("sr-ste", placement="middle")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['layerwise'\]"):
        make_recipe("layerwise-step", layerwise=False)
    with pytest.raises(ValueError, match="fraction"):
        make_criterion("fixed-fraction", fraction=1.5)
    p = small()
    with pytest.raises(ValueError, match=r"'w1'.*not divisible by M = 3"):
        fit(p, make_recipe("ste"), 2, rng=0, nm=(1, 3))
    with pytest.raises(TypeError, match="make_criterion"):
        fit(p, make_recipe("step"), 2, rng=0, criterion="sometimes")
    with pytest.raises(ValueError, match="needs a switch criterion"):
        fit(p, make_recipe("step"), 2, rng=0)
    with pytest.raises(ValueError, match="momentum SGD"):
        fit(p, make_recipe("sr-ste", optimizer="sgdm"), 2, rng=0,
            criterion=make_criterion("fixed-step", k0=1))
    with pytest.raises(ValueError, match=r"'w1'.*not divisible by M = 32"):
        fit(p, make_recipe("layerwise-sr-ste", layerwise_m=32), 2, rng=0)
    with pytest.raises(ValueError, match="not reachable"):
        fit(p, make_recipe("layerwise-sr-ste", layerwise_target=0.9, layerwise_rule="greedy"),
            2, rng=0)
    with pytest.raises(ValueError, match="would freeze"):
        make_recipe("step", switch_at=0)
    with pytest.raises(ValueError, match="n must be <= m"):
        ParamSpec(5, 4)


def test_registry_names():
    assert {"dense", "ste", "sr-ste", "asp", "step", "step-v-updated", "decaying-mask",
            "layerwise-sr-ste", "layerwise-step"} <= set(RECIPES)


def test_conv_weights_group_input_channels():
    from stepsim.core.masks import nm_mask_conv

    w = np.random.default_rng(0).standard_normal((3, 8, 2, 2))
    specs = {"conv": ParamSpec(2, 4, axis=1)}
    masks = T.nm_masks({"conv": w}, specs, {"conv": (2, 4)})  # the maskers' masks
    assert np.array_equal(masks["conv"], nm_mask_conv(w, 2, 4))
    alloc = allocate_layerwise({"conv": w}, {"conv": ParamSpec(2, 8, axis=1)}, 0.5)
    assert alloc == {"conv": (4, 8)}


def test_decaying_scale_multiplies_only_pruned_weights():
    w = {"a": np.arange(1.0, 9.0).reshape(1, 8), "b": np.ones(2)}
    masks = {"a": ref_nm_mask(w["a"], 2, 4), "b": None}
    out = T.masked_forward(w, masks, {"a": 0.5})
    expected = np.where(masks["a"], w["a"], 0.5 * w["a"])
    assert np.array_equal(out["a"], expected) and out["b"] is w["b"]
    assert np.array_equal(T.masked_forward(w, masks)["a"], np.where(masks["a"], w["a"], 0.0))


# ----------------------------------------------------------------------------- issue 11
from stepsim.recipes import DominoSearch, Recipe, Schedule, SwitchAt, SwitchWhen
from stepsim.recipes import domino as D


def test_per_module_switching_at_one_k0_equals_global_switching():
    p = small()
    recipe = make_recipe("step", lr=1e-2)
    crit = make_criterion("fixed-step", k0=12)
    glob = fit(p, recipe, 30, rng=4, criterion=crit, progress=False)
    per = fit(p, recipe, 30, rng=4, criterion=SwitchWhen(crit, per_module=True),
              progress=False)
    at = fit(p, recipe, 30, rng=4, criterion=SwitchAt(12), progress=False)
    assert set(per.module_switch_steps.values()) == {12}
    for r in (per, at):
        for name in glob.weights:
            assert r.weights[name].tobytes() == glob.weights[name].tobytes()
        for name in glob.trace.ARRAYS:
            assert getattr(r.trace, name).tobytes() == getattr(glob.trace, name).tobytes()


def _reference_step_per_module(p, switch, steps, lr, seed, b1=0.9, b2=0.999, eps=1e-8):
    """Independent per-module STEP: NumPy Adam, STE masks (reference nm_mask), raw v*
    frozen at each module's own step ``switch[name]``."""
    init_rng, batch_rng = np.random.default_rng(seed).spawn(2)
    w = p.init_params(init_rng)
    m = {k: np.zeros_like(a) for k, a in w.items()}
    v = {k: np.zeros_like(a) for k, a in w.items()}
    for k in range(1, steps + 1):
        batch = p.sample_batch(batch_rng)
        fwd = {}
        for name, a in w.items():
            sparse = switch[name] is not None and k > switch[name]
            fwd[name] = (np.where(ref_nm_mask(a, 2, 4), a, 0.0)
                         if sparse and p.specs[name].sparse else a)
        _, g = p.loss_and_grad(fwd, batch)
        for name in w:
            frozen = switch[name] is not None and k > switch[name]
            m[name] = b1 * m[name] + (1 - b1) * g[name]
            if not frozen:
                v[name] = b2 * v[name] + (1 - b2) * g[name] ** 2
            c2 = 1.0 if frozen else 1 - b2**k
            w[name] = w[name] - lr * (m[name] / (1 - b1**k)) / np.sqrt(v[name] / c2 + eps)
    return w


def test_per_module_step_freezes_each_modules_v_at_its_own_step():
    p = small()
    crit = make_criterion("agarwal", threshold=0.02)  # fires at different steps per module
    r = fit(p, make_recipe("step", lr=1e-2), 60, rng=2, progress=False,
            criterion=SwitchWhen(crit, per_module=True))
    steps = r.module_switch_steps
    assert len({s for s in steps.values() if s is not None}) >= 2, steps
    ref = _reference_step_per_module(p, steps, 60, 1e-2, 2)
    for name, w in ref.items():
        np.testing.assert_allclose(r.dense_weights[name], w, rtol=1e-9, atol=1e-12)


def test_layerwise_step_defaults_to_per_module_domino():
    recipe = make_recipe("layerwise-step")
    assert recipe.schedule.per_module and recipe.masker.kind == "domino"
    assert not make_recipe("layerwise-step", switch_at=10).schedule.per_module
    with pytest.raises(ValueError, match="per_module=True"):
        make_recipe("layerwise-step", per_module=True, switch_at=10)


@pytest.mark.parametrize(("name", "options", "expected"), [
    ("dense", {}, Schedule()),
    ("ste", {}, Schedule()),
    ("asp", {}, Schedule(dense_phase=True, switch_at=0.5)),
    ("asp", {"prune_at": 7}, Schedule(dense_phase=True, switch_at=7, explicit=True)),
    ("step", {}, Schedule(dense_phase=True)),
    ("step", {"switch_at": 1.0}, Schedule(dense_phase=True, switch_at=1.0, explicit=True)),
    ("layerwise-step", {}, Schedule(dense_phase=True, per_module=True)),
    ("decaying-mask", {"dense_fraction": 0.2},
     Schedule(dense_phase=True, switch_at=0.2, explicit=True)),
])
def test_make_recipe_fills_the_recipes_one_schedule(name, options, expected):
    recipe = make_recipe(name, **options)
    assert recipe.schedule == expected
    assert recipe.needs_criterion == (recipe.sparse and expected.needs_criterion)
    if not recipe.needs_criterion:  # what fit switches on without a criterion
        schedule, _ = schedule_for(recipe, None, 40)
        own = expected.switch_at if expected.dense_phase else 0  # 0: sparse from step 0
        assert schedule == (SwitchAt(own) if recipe.sparse else None)


def test_schedule_normalises_switch_at_and_gives_k0():
    at = Schedule(dense_phase=True, switch_at=np.int64(3)).switch_at
    assert at == 3 and type(at) is int
    assert type(Schedule(switch_at=np.float32(0.5)).switch_at) is float
    assert SwitchAt(Schedule(dense_phase=True, switch_at=0.25).switch_at).step_for(10) == 3
    assert SwitchAt(Schedule(dense_phase=True, switch_at=0.0).switch_at).step_for(10) == 0
    assert Schedule(dense_phase=True).needs_criterion
    assert not Schedule(switch_at=5).needs_criterion  # no dense phase: sparse from step 0
    with pytest.raises(TypeError, match="schedule must be"):
        Recipe("x", make_recipe("dense").optimizer, schedule=None)


def test_domino_threshold_vote_and_erk():
    groups = np.array([[1.0, 2.0, 3.0, 4.0], [4.0, 4.0, 0.0, 0.0]])
    assert D.initial_threshold(groups).ravel().tolist() == [1.5, 0.0]
    # entries above T: 3 and 2; fewer than 4 in both groups, fewer than 3 in half of them
    assert D.vote(groups, D.initial_threshold(groups), 4, 0.75)
    assert not D.vote(groups, D.initial_threshold(groups), 3, 0.75)
    assert D.vote(groups, D.initial_threshold(groups), 3, 0.5)
    erk = D.erk_sparsities({"a": (8, 64), "b": (64, 64)}, 0.5)
    kept = (1 - erk["a"]) * 512 + (1 - erk["b"]) * 4096
    assert kept == pytest.approx(0.5 * (512 + 4096)) and erk["b"] > erk["a"]


def _domino_drive(search, weights_at, specs, steps):
    """Run DominoSearch's rule on a given weight trajectory; returns [(step, state)]."""
    params = weights_at(0)
    state = search.init(params, specs)
    state = search.start(state, params, tuple(specs), specs, 0)
    out = []
    for k in range(1, steps + 1):
        state = search.observe(state, weights_at(k), specs, k)
        out.append((k, state))
    return out


@pytest.mark.parametrize("m, target", [(4, 0.5), (8, 0.75), (16, 0.8)])
def test_domino_meets_its_target_and_changes_n_only_by_its_rule(m, target):
    rng = np.random.default_rng(m)
    base = {"a": rng.standard_normal((16, 4 * m)), "b": rng.standard_normal((8, 2 * m))}
    specs = {"a": ParamSpec(1, m), "b": ParamSpec(1, m)}
    # the penalty's effect, simulated: the smallest entries of each group shrink over time
    ranks = {k: np.argsort(np.argsort(np.abs(v).reshape(-1, m), axis=1), axis=1)
             for k, v in base.items()}

    def weights_at(k):
        return {n: (v.reshape(-1, m) * np.where(ranks[n] < m - 1, np.exp(-k / 150), 1.0)
                    ).reshape(v.shape) for n, v in base.items()}

    search = DominoSearch(target=target, check_every=10)
    hist = _domino_drive(search, weights_at, specs, 3000)
    final = hist[-1][1]
    assert final.done
    shapes = {k: v.shape for k, v in base.items()}
    reached = sparsity(specs, shapes, search.final_nm(final))
    assert reached >= target - search.tolerance
    prev = {k: (m, m) for k in base}
    for k, snap in hist:
        for name, lay in snap.layers.items():
            n_prev, inter_prev = prev[name]
            if snap.done:
                assert lay.n_inter == lay.n
            else:
                if lay.n_inter != inter_prev:  # only at check steps, by one
                    assert (k - lay.start) % 10 == 0 and lay.n_inter == inter_prev - 1
                if lay.n != n_prev:  # only to a power of two that N' just reached
                    assert lay.n == lay.n_inter and lay.n & (lay.n - 1) == 0
            prev[name] = (lay.n, lay.n_inter)


def test_domino_in_a_run_changes_n_only_at_its_check_steps():
    p = small(nm=(2, 8))
    recipe = make_recipe("layerwise-sr-ste", lr=1e-2, domino_check_every=20, domino_decay=0.5,
                         domino_deadline=1.0)  # no deadline: the original's rule only
    r = fit(p, recipe, 200, rng=0, progress=False)
    n = r.trace.n
    changed = np.nonzero(np.any(np.diff(n, axis=0) != 0, axis=1))[0] + 2  # steps of change
    # the rule runs in step k = 1, 21, 41, ... (t = k - 1 = 0 mod 20, on w_k); the forward
    # of step k + 1 is the first to use the new N'
    assert changed.size and np.all((changed - 2) % 20 == 0), changed
    assert np.all(np.diff(n, axis=0) <= 0)
    for name, (nn, mm) in r.nm.items():
        assert ((r.weights[name].reshape(-1, mm) != 0).sum(axis=1) <= nn).all()


def test_options_a_recipe_does_not_use_are_rejected():
    with pytest.raises(ValueError, match="v_star"):
        make_recipe("step-v-updated", v_star="bias-corrected")
    with pytest.raises(ValueError, match="denominator"):
        make_recipe("step", freeze_v=False, denominator="public")
    with pytest.raises(ValueError, match="srste_placement"):
        make_recipe("step", srste_placement="after")
    with pytest.raises(ValueError, match="alpha_clock"):
        make_recipe("decaying-mask", alpha_clock="frame")
    with pytest.raises(ValueError, match="domino_decay"):
        make_recipe("layerwise-sr-ste", layerwise_rule="greedy", domino_decay=1.0)
    with pytest.raises(ValueError, match="layerwise_rule"):
        make_recipe("ste", layerwise_rule="greedy")


def test_step_v_updated_used_to_ignore_v_star_silently():
    # the old behaviour was wrong: with v updating there is no v* to read, so v_star and
    # denominator changed nothing (bit-identical runs) — now they are refused
    p = small()
    crit = make_criterion("fixed-step", k0=10)
    a = fit(p, make_recipe("step", freeze_v=False, lr=1e-2), 30, rng=0, criterion=crit,
            progress=False)
    b = fit(p, make_recipe("step", lr=1e-2, v_star="bias-corrected"), 30, rng=0,
            criterion=crit, progress=False)
    assert a.weights["w1"].tobytes() != b.weights["w1"].tobytes()  # frozen: it matters


@pytest.mark.parametrize("name, options", [("decaying-mask", {"dense_fraction": 0}),
                                           ("asp", {"prune_at": 0}),
                                           ("step", {"switch_at": 5})])
def test_an_explicit_schedule_and_a_criterion_conflict(name, options):
    p = small()
    recipe = make_recipe(name, lr=1e-2, **options)
    with pytest.raises(ValueError, match="explicit switch"):
        fit(p, recipe, 10, rng=0, criterion=make_criterion("fixed-step", k0=5))
    # without the explicit option the criterion decides, as before
    default = make_recipe(name, lr=1e-2)
    r = fit(p, default, 10, rng=0, criterion=make_criterion("fixed-step", k0=5),
            progress=False)
    assert r.switch_step == 5


def test_decaying_alpha_follows_the_original_clock_by_default():
    # the old clock restarted alpha at every frame: the first step of each frame forwarded
    # the fully dense w, contrary to Kao et al.'s code (t counted once from the sparse phase)
    new = DecaySchedule.make(1, 8, 11, 100, decay_rate=0.05)
    old = DecaySchedule.make(1, 8, 11, 100, decay_rate=0.05, alpha_clock="frame")
    starts = new.frame_starts
    assert [old.alpha_at(s) for s in starts[:-1]] == [1.0] * (len(starts) - 1)
    assert [new.alpha_at(s) for s in starts[1:-1]] == [
        max(0.0, 1 - 0.05 * (s - 11)) for s in starts[1:-1]]
    assert new.alpha_at(starts[1]) < 1.0


def test_per_module_criterion_reads_each_modules_own_statistics():
    from stepsim.core.optim import AdamStats

    def st(z):  # AutoSwitch Option I sample Z = dv_l1 / size = z
        return AdamStats(dv_l1=4 * z, dv_log_sum=0.0, dv_zeros=0, v_l1=1.0, v_l2sq=1.0, size=4)

    sched = SwitchWhen(make_criterion("autoswitch", beta2=0.5), per_module=True)  # T_w = 2
    state = sched.init(10, ("a", "b"))
    fired_at = {}
    for k in range(1, 6):
        za, zb = 1e-9, (1e-9 if k >= 3 else 1.0)  # b is quiet only from step 3
        state, fired = sched.update(state, k, {"a": st(za), "b": st(zb)})
        for name in fired:
            fired_at[name] = k
    assert fired_at == {"a": 2, "b": 4}  # each after its own window of 2 quiet samples
    glob = SwitchWhen(make_criterion("autoswitch", beta2=0.5))
    gstate, when = glob.init(10, ("a", "b")), {}
    for k in range(1, 6):
        zb = 1e-9 if k >= 3 else 1.0
        gstate, fired = glob.update(gstate, k, {"a": st(1e-9), "b": st(zb)})
        when.update(dict.fromkeys(fired, k))
    assert when == {"a": 4, "b": 4}  # one criterion on the mean over all of v


def test_layer_phase_and_an_unfinished_search_are_reported():
    p = small(nm=(2, 8))
    r = fit(p, make_recipe("layerwise-step", lr=1e-2, domino_deadline=1.0), 40, rng=1,
            progress=False,
            criterion=SwitchWhen(make_criterion("agarwal", threshold=0.02), per_module=True))
    lp = r.trace.layer_phase
    for j, name in enumerate(r.trace.layer_names):
        k0 = r.module_switch_steps[name]
        assert k0 is not None and np.all(lp[:k0, j] == 0) and np.all(lp[k0:, j] == 1)
    assert "did not reach its target sparsity 0.75" in r.message and r.success


def test_domino_deadline_meets_the_target_in_a_short_run():
    p = small(nm=(2, 8))
    r = fit(p, make_recipe("layerwise-sr-ste", lr=1e-2), 300, rng=0, progress=False)
    shapes = {k: v.shape for k, v in r.weights.items()}
    assert sparsity(p.specs, shapes, r.nm) >= 0.75 - 1e-3 and r.message == ""
    n = r.trace.n
    steps = np.nonzero(np.any(np.diff(n, axis=0) != 0, axis=1))[0] + 2
    before = steps[steps <= 151]  # deadline: step 1 + int(0.5 * 300) = 151 (rule on w_151)
    assert np.all((before - 2) % 100 == 0)  # the original's checks
    late = np.diff(n[150:], axis=0)
    assert np.all(late <= 0) and np.all((late != 0).sum(axis=1) <= 1)  # one layer, by one
    assert np.all(np.abs(late).sum(axis=1) <= 1)
    for name, (nn, mm) in r.nm.items():
        assert ((r.weights[name].reshape(-1, mm) != 0).sum(axis=1) <= nn).all()
