"""Issue 24: S-STE, masked decay with dense fine-tuning, transposable N:M masks, flip rate.

Kernels against their NumPy references (bit for bit) across shapes, dtypes and N:M ratios,
the properties the papers rely on (S(w) is N:M and continuous in w, beta frozen; a
transposable mask's rows and columns N:M and, at 2:4, the exact optimum), and the recipes
through the real training loop.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import OPT_DTYPES, nm_array, nm_ratio

from stepsim.core import reference as R
from stepsim.core.soft import soft_threshold, sste_beta
from stepsim.core.transposable import is_transposable, patterns_24, transposable_mask


@st.composite
def soft_case(draw):
    """(w, n, m, axis): float32/float64 w whose axis length is a multiple of m; half the
    time small integers, so ties (at the threshold too) are frequent."""
    return nm_array(draw, draw(nm_ratio(max_m=16)), OPT_DTYPES, max_side=4, max_groups=5)


def _groups(a, axis, m):
    return np.moveaxis(a, axis, -1).reshape(-1, m)


# --------------------------------------------------------------------------- S-STE
@given(soft_case(), st.sampled_from([1.0, 0.5, 1.7]))
@settings(max_examples=80, deadline=None)
def test_soft_threshold_kernel_matches_reference(case, beta):
    w, n, m, axis = case
    got, mask = soft_threshold(w, n, m, axis, beta=beta)
    assert np.array_equal(mask, R.nm_mask(w, n, m, axis))
    want = R.soft_threshold_groups(_groups(w, axis, m), _groups(mask, axis, m), beta)
    want = np.moveaxis(want.reshape(np.moveaxis(w, axis, -1).shape), -1, axis)
    assert got.dtype == w.dtype and got.shape == w.shape
    assert np.array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))


@given(soft_case())
@settings(max_examples=60, deadline=None)
def test_soft_threshold_is_nm_and_shrinks_towards_zero(case):
    w, n, m, axis = case
    s, mask = soft_threshold(w, n, m, axis)
    groups, keep = _groups(s, axis, m), _groups(mask, axis, m)
    assert ((groups != 0).sum(axis=1) <= n).all()  # N:M
    assert (groups[~keep] == 0).all()
    # kept entries keep their sign and shrink by the group's threshold t = (N+1)-th largest
    a = np.sort(np.abs(_groups(w, axis, m)), axis=1)[:, ::-1]
    t = a[:, n] if n < m else np.zeros(len(a), w.dtype)
    kept_w = _groups(w, axis, m)
    assert np.array_equal(np.abs(groups), np.where(keep, np.abs(kept_w) - t[:, None], 0))
    assert (np.sign(groups)[keep] * np.sign(kept_w)[keep] >= 0).all()


@given(soft_case(), st.integers(0, 2**32 - 1), st.sampled_from([1e-3, 1e-1, 1.0]))
@settings(max_examples=60, deadline=None)
def test_soft_threshold_is_continuous(case, seed, size):
    """|S(w + d) - S(w)|_inf <= 2 |d|_inf: t moves by at most |d|, |w_i| too, and an entry
    that enters or leaves the kept set does so where S is 0 (the discontinuity of hard
    masking is gone). Computed in float64 so that rounding does not blur the bound."""
    w, n, m, axis = case
    w = w.astype(np.float64)
    d = np.random.default_rng(seed).uniform(-size, size, w.shape)
    s0, _ = soft_threshold(w, n, m, axis)
    s1, _ = soft_threshold(w + d, n, m, axis)
    bound = 2 * np.abs(d).max() if d.size else 0.0
    scale = 1e-12 * (1 + np.abs(w).max() if w.size else 1)
    assert np.abs(s1 - s0).max(initial=0) <= bound + scale


@given(soft_case())
@settings(max_examples=80, deadline=None)
def test_beta_sums_match_reference(case):
    w, n, m, axis = case
    s, _ = soft_threshold(w, n, m, axis)
    num, den = R.sste_beta_sums(w, s)
    beta = sste_beta(w, s)
    assert beta == (num / den if den > 0 else 1.0)


def test_beta_scales_s_to_w_in_least_squares():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 32))
    s, _ = soft_threshold(w, 2, 4)
    beta = sste_beta(w, s)
    best = np.vdot(w, s) / np.vdot(s, s)  # argmin_b ||w - b s||
    assert beta == pytest.approx(best, rel=1e-12) and beta > 1.0


# --------------------------------------------------------------------------- transposable
@st.composite
def block_case(draw, max_blocks=2):
    dtype = draw(st.sampled_from(OPT_DTYPES))
    shape = (4 * draw(st.integers(1, max_blocks)), 4 * draw(st.integers(1, max_blocks)))
    if draw(st.booleans()):
        w = hnp.arrays(dtype, shape, elements=st.integers(-2, 2).map(float))
    else:
        width = np.dtype(dtype).itemsize * 8
        w = hnp.arrays(dtype, shape, elements=st.floats(-1e3, 1e3, width=width))
    return draw(w)


def test_there_are_90_transposable_24_patterns():
    p = patterns_24()
    assert p.shape == (90, 8) and len({tuple(r) for r in p}) == 90
    for row in p:
        block = np.zeros(16, bool)
        block[row] = True
        assert is_transposable(block.reshape(4, 4), 2, 4)


@given(block_case())
@settings(max_examples=40, deadline=None)
def test_transposable_24_kernel_matches_brute_force(w):
    got = transposable_mask(w, 2, 4)
    assert np.array_equal(got, R.transposable_24_brute(w))
    assert is_transposable(got, 2, 4) and got.sum() == w.size // 2


@given(st.integers(0, 2**32 - 1), st.sampled_from([(1, 4), (3, 4), (1, 8), (2, 8), (3, 8),
                                                   (4, 8), (2, 2), (5, 5)]),
       st.sampled_from(OPT_DTYPES))
@settings(max_examples=40, deadline=None)
def test_transposable_general_nm_keeps_n_per_row_and_column(seed, nm, dtype):
    n, m = nm
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((m * rng.integers(1, 3), m * rng.integers(1, 3))).astype(dtype)
    mask = transposable_mask(w, n, m)
    blocks = mask.reshape(w.shape[0] // m, m, w.shape[1] // m, m)
    assert (blocks.sum(axis=3) == n).all() and (blocks.sum(axis=1) == n).all()


@given(st.integers(0, 2**32 - 1), st.sampled_from([4, 5, 6]))
@settings(max_examples=30, deadline=None)
def test_transposable_1_of_m_is_the_exact_optimum(seed, m):
    """N = 1: one Hungarian matching is exact; brute force over all m! permutations."""
    w = np.random.default_rng(seed).standard_normal((m, m))
    mask = transposable_mask(w, 1, m)
    best = max(sum(abs(w[i, p[i]]) for i in range(m))
               for p in itertools.permutations(range(m)))
    assert np.abs(w[mask]).sum() == pytest.approx(best, rel=1e-12)


@given(block_case(max_blocks=2))
@settings(max_examples=30, deadline=None)
def test_general_method_never_beats_the_exact_24_optimum(w):
    from stepsim.core.transposable import _matching_rounds

    exact = np.abs(w[transposable_mask(w, 2, 4)].astype(np.float64)).sum()
    approx = np.abs(w[_matching_rounds(w, 2, 4)].astype(np.float64)).sum()
    assert approx <= exact * (1 + 1e-12) + 1e-300


def test_transposable_bad_inputs():
    w = np.zeros((4, 6))
    with pytest.raises(ValueError, match="divisible by m = 4"):
        transposable_mask(w, 2, 4)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        transposable_mask(np.zeros(8), 2, 4)
    with pytest.raises(ValueError, match=r"the first and last dimensions of shape \(4, 3, 6\)"):
        transposable_mask(np.zeros((4, 3, 6)), 2, 4)  # a conv weight's GEMM matrix (4, 18)
    bad = np.zeros((4, 4))
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        transposable_mask(bad, 2, 4)
    with pytest.raises(TypeError, match="dtype"):
        transposable_mask(np.zeros((4, 4), np.int32), 2, 4)


# --------------------------------------------------------------------------- recipes
def _problem():
    from stepsim.problems import SyntheticRegression

    return SyntheticRegression(d_in=16, d_hidden=8, d_out=4, n_samples=128, n_test=64,
                               batch_size=8, scale=0.3, nm=(2, 4), dtype=np.float64, seed=1)


def _steps(recipe, steps, problem=None):
    """Drive the recipe's pure methods as fit does: (params, state, fwd) after each step."""
    from stepsim.recipes import RunContext

    problem = problem or _problem()
    rng = np.random.default_rng(0)
    params = problem.init_params(rng)
    ctx = RunContext.make(params, dict(problem.specs), steps)
    state = recipe.init(params, ctx)
    if not recipe.schedule.dense_phase:
        params, state = recipe.switch(state, params, 0, ctx)
    out = []
    for k in range(1, steps + 1):
        fwd, state = recipe.forward(state, params, k, ctx)
        _, grads = problem.loss_and_grad(fwd, problem.sample_batch(rng))
        params, state, _ = recipe.update(state, params, grads, k, ctx)
        out.append((params, state, fwd))
    return out, ctx


def test_sste_forward_is_beta_times_s_with_beta_frozen():
    from stepsim.recipes import make_recipe

    recipe = make_recipe("s-ste", lr=1e-2)
    hist, ctx = _steps(recipe, 20)
    betas = hist[0][1].masker_state.betas
    assert set(betas) == set(ctx.sparse_names) and all(b > 1.0 for b in betas.values())
    prev = hist[0][0]
    for params, state, fwd in hist[1:]:
        assert state.masker_state.betas == betas  # frozen
        for name in ctx.sparse_names:
            spec = ctx.specs[name]
            s, mask = soft_threshold(prev[name], *spec.nm, spec.axis, beta=betas[name])
            assert np.array_equal(fwd[name], s)
        prev = params


def test_sste_step_freezes_v_and_soft_thresholds_after_the_switch():
    from stepsim.recipes import make_recipe

    recipe = make_recipe("s-ste-step", lr=1e-2, switch_at=5)
    problem = _problem()
    from stepsim.recipes import RunContext

    rng = np.random.default_rng(0)
    params = problem.init_params(rng)
    ctx = RunContext.make(params, dict(problem.specs), 12)
    state = recipe.init(params, ctx)
    for k in range(1, 13):
        fwd, state = recipe.forward(state, params, k, ctx)
        if k <= 5:
            assert all(np.array_equal(fwd[n], params[n]) for n in params)  # dense phase
        else:
            spec = ctx.specs["w1"]
            beta = state.masker_state.betas["w1"]
            want, _ = soft_threshold(params["w1"], *spec.nm, spec.axis, beta=beta)
            assert np.array_equal(fwd["w1"], want)
        _, grads = problem.loss_and_grad(fwd, problem.sample_batch(rng))
        v_before = {n: state.opt.v[n].copy() for n in params}
        params, state, _ = recipe.update(state, params, grads, k, ctx)
        if k > 5:
            assert all(np.array_equal(state.opt.v[n], v_before[n]) for n in params)
        if k == 5:
            params, state = recipe.switch(state, params, 5, ctx)
            assert set(state.opt.frozen) == set(params)


def test_masked_decay_enters_m_and_v_before_adam():
    """The first step: m = (1 - b1) (g + alpha (1 - Pi) w), v = (1 - b2) (that)^2."""
    from stepsim.recipes import RunContext, make_recipe

    alpha = 0.5  # large so the term is visible in v
    recipe = make_recipe("masked-decay", lr=1e-2, decay=alpha)
    problem = _problem()
    rng = np.random.default_rng(0)
    params = problem.init_params(rng)
    ctx = RunContext.make(params, dict(problem.specs), 60)
    state = recipe.init(params, ctx)
    params, state = recipe.switch(state, params, 0, ctx)
    fwd, state = recipe.forward(state, params, 1, ctx)
    _, grads = problem.loss_and_grad(fwd, problem.sample_batch(rng))
    _, new, _ = recipe.update(state, params, grads, 1, ctx)
    opt = recipe.optimizer
    for name in ctx.sparse_names:
        g = np.where(state.masks[name], grads[name], grads[name] + alpha * params[name])
        np.testing.assert_allclose(new.opt.m[name], (1 - opt.beta1) * g, rtol=1e-12)
        np.testing.assert_allclose(new.opt.v[name], (1 - opt.beta2) * g * g, rtol=1e-12)


def test_mask_every_k_steps_and_dense_tail():
    from stepsim.recipes import make_recipe

    recipe = make_recipe("masked-decay", lr=1e-2, mask_every=4, dense_tail=0.25)
    hist, ctx = _steps(recipe, 20)
    for k in range(2, 21):
        state = hist[k - 1][1]
        if k >= 16:  # T - round(T / 4) + 1 = 16: dense
            assert all(state.masks[n] is None for n in ctx.sparse_names)
            assert all(np.array_equal(hist[k - 1][2][n], hist[k - 2][0][n]) for n in hist[0][0])
        elif (k - 1) % 4:
            assert state.flips == 0
            assert all(state.masks[n] is hist[k - 2][1].masks[n] for n in ctx.sparse_names)
    final = recipe.final_nm(hist[-1][1], hist[-1][0], ctx)
    assert all(n == m for n, m in final.values())  # a dense result


@pytest.mark.parametrize("name,options", [
    ("s-ste", {}), ("masked-decay", {"mask_every": 3}), ("s-ste-step", {"switch_at": 0.3}),
    ("sr-ste", {"transposable": True}), ("step", {"switch_at": 0.3}), ("asp", {}),
    ("decaying-mask", {}), ("ste", {"mask_every": 2, "dense_tail": 0.2}),
])
def test_every_sparse_run_records_its_flip_rate(name, options, tmp_path):
    from stepsim.recipes import make_recipe
    from stepsim.training import Trace, fit

    problem = _problem()
    result = fit(problem, make_recipe(name, lr=1e-2, **options), 40, rng=1, progress=False)
    t = result.trace
    size = sum(problem.init_params(np.random.default_rng(0))[k].size for k in t.layer_names)
    assert t.mask_size == size
    assert np.array_equal(t.flip_rate, t.flips / size)
    assert ((t.flip_rate >= 0) & (t.flip_rate <= 1)).all() and t.flip_rate.max() > 0
    json_path, npz = result.save(tmp_path / "run.json")
    loaded = Trace.load_npz(npz)
    assert loaded.mask_size == size and np.array_equal(loaded.flip_rate, t.flip_rate)
    with np.load(npz) as data:
        assert np.array_equal(data["flip_rate"], t.flip_rate)


def test_dense_run_has_no_flip_rate():
    from stepsim.recipes import make_recipe
    from stepsim.training import fit

    t = fit(_problem(), make_recipe("dense", lr=1e-2), 5, rng=1, progress=False).trace
    assert t.mask_size == 0 and np.isnan(t.flip_rate).all()


def test_transposable_recipe_masks_rows_and_columns():
    from stepsim.recipes import make_recipe
    from stepsim.recipes.transforms import transposable_ok
    from stepsim.training import fit

    problem = _problem()
    result = fit(problem, make_recipe("sr-ste", lr=1e-2, transposable=True), 20, rng=1,
                 progress=False)
    checked = 0
    for name in result.trace.layer_names:
        w = result.weights[name]
        n, m = result.nm[name]
        if transposable_ok(w.shape, m):
            assert is_transposable(w != 0, n, m)
            checked += 1
    assert checked >= 1


@pytest.mark.parametrize("name,options", [
    ("masked-decay", {"mask_every": 3, "dense_tail": 0.2}),
    ("sr-ste", {"transposable": True, "mask_every": 2}),
])
def test_lean_step_gives_the_pure_bits_for_the_new_mask_pieces(monkeypatch, name, options):
    """Periodic masks, the dense tail and transposable masks go through ``masks_now``,
    which the lean step shares: the same bits as the recipe's pure step."""
    from stepsim.recipes import lean as lean_module
    from stepsim.recipes import make_recipe
    from stepsim.training import fit

    problem = _problem()
    recipe = make_recipe(name, lr=1e-2, **options)
    made = []
    real_make = lean_module.LeanStep.make

    def spy(*args):
        made.append(real_make(*args))
        return made[-1]

    monkeypatch.setattr(lean_module.LeanStep, "make", spy)
    lean = fit(problem, recipe, 40, rng=2, progress=False)
    assert made and made[0] is not None  # the lean path ran
    monkeypatch.setattr(lean_module.LeanStep, "make", staticmethod(lambda *a: None))
    pure = fit(problem, recipe, 40, rng=2, progress=False)
    for k in lean.weights:
        assert lean.weights[k].tobytes() == pure.weights[k].tobytes()
        assert lean.dense_weights[k].tobytes() == pure.dense_weights[k].tobytes()
    for k, v in lean.trace.arrays().items():
        assert np.array_equal(v, getattr(pure.trace, k), equal_nan=True), k


def test_sste_owns_an_in_place_forward_and_a_piece_without_one_is_refused():
    """S-STE's forward is not Pi * w: the lean step runs it through the masker's
    ``forward_into`` (tests/recipes/test_lean_step.py checks its bits against the pure step); a
    masker class that overrides ``forward_weights`` without ``forward_into`` is refused when
    it is made, and a masker object without the in-place forms by the lean step."""
    import dataclasses

    from stepsim.recipes import RunContext, make_recipe
    from stepsim.recipes.lean import LeanStep
    from stepsim.recipes.maskers import EveryStepMask

    problem = _problem()
    params = problem.init_params(np.random.default_rng(0))
    ctx = RunContext.make(params, dict(problem.specs), 10)
    for name in ("s-ste", "s-ste-step"):
        recipe = make_recipe(name, **({"switch_at": 3} if name == "s-ste-step" else {}))
        assert isinstance(LeanStep.make(recipe, params, recipe.init(params, ctx), ctx),
                          LeanStep)

    with pytest.raises(TypeError, match="overrides forward_weights but not forward_into"):
        @dataclasses.dataclass(frozen=True)
        class Halved(EveryStepMask):
            def forward_weights(self, mstate, params, masks, alpha, specs, nm):
                return {k: w / 2 for k, w in params.items()}

    class PureOnly:  # a duck-typed masker (no Masker base) with the pure forms only
        def __getattr__(self, name):
            if name.endswith("_into"):
                raise AttributeError(name)
            return getattr(EveryStepMask(), name)

    recipe = dataclasses.replace(make_recipe("ste"), masker=PureOnly())
    with pytest.raises(TypeError, match="forward_into"):
        LeanStep.make(recipe, params, recipe.init(params, ctx), ctx)


def test_compress_says_whether_a_mask_is_transposable(tmp_path, capsys):
    from stepsim.cli import main

    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 16)).astype(np.float32)
    trans = np.where(transposable_mask(w, 2, 4), w, 0)
    np.savez(tmp_path / "w.npz", trans=trans, plain=w, bias=np.ones(8, np.float32))
    assert main(["compress", str(tmp_path / "w.npz"), "-o", str(tmp_path / "out.npz")]) == 0
    lines = {line.split(":")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert lines["trans"].endswith("; mask transposable (2:4 along both axes)")
    assert lines["plain"].endswith("; mask not transposable")
    assert "transposable" not in lines["bias"]


def test_successors_script_quick_mode(tmp_path):
    """paper_checks/successors.py --quick: every recipe runs, its flip rate per step and
    error are written (JSON with provenance, Markdown table, the flip-rate figure)."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "paper_checks" / "successors.py"
    spec = importlib.util.spec_from_file_location("successors_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "s.json"
    assert script.main(["--quick", "--jobs", "1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    rows = doc["result"]["rows"]
    assert {r["recipe"] for r in rows} == set(script.RECIPES)
    assert doc["provenance"]["params"]["quick"] is True
    for r in rows:
        assert r["flip_rate_block"] == 1 and len(r["flip_rate_blocks"]) == 60
        assert np.isfinite(r["error"])
        if r["recipe"] != "dense":
            assert max(x for x in r["flip_rate_blocks"] if x is not None) > 0
    assert (tmp_path / "s_flip_rate.png").stat().st_size > 0
    assert "| s-ste |" in (tmp_path / "s.md").read_text()
