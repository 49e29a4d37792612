"""fit's lean step (stepsim.recipes.lean): the same bits as the recipes' pure step, on a
workspace allocated once per run; its kernels (stepsim.core._step_kernels) against np.where;
stepsim.core.optim_many.AdamArrays against adam_apply_many."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from stepsim.problems import make_problem
from stepsim.recipes import RunContext, make_recipe
from stepsim.recipes import lean as lean_module
from stepsim.recipes.criteria import make_criterion
from stepsim.recipes.registry import RECIPES
from stepsim.training import fit


def _same_run(a, b):
    assert a.status == b.status and a.switch_step == b.switch_step
    assert a.module_switch_steps == b.module_switch_steps
    for k in a.weights:
        assert a.weights[k].tobytes() == b.weights[k].tobytes(), k
        assert a.dense_weights[k].tobytes() == b.dense_weights[k].tobytes(), k
    for k, v in a.trace.arrays().items():
        assert np.array_equal(v, getattr(b.trace, k), equal_nan=True), k
    assert repr(sorted(a.metrics.items())) == repr(sorted(b.metrics.items()))


CASES = [
    ("dense", {}, None),
    ("dense", {"optimizer": "adamw", "schedule": "cosine", "warmup_steps": 5}, None),
    ("dense", {"optimizer": "sgdm", "nesterov": True}, None),
    ("sr-ste", {}, None),
    ("sr-ste", {"placement": "after", "lam": 1e-2}, None),
    ("ste", {"optimizer": "sgdm"}, None),
    ("asp", {"prune_at": 0.3}, None),
    ("step", {"switch_at": 0.5}, None),
    ("step", {"switch_at": 0.4, "v_star": "bias-corrected", "denominator": "public",
              "srste_lam": 1e-3, "srste_placement": "after"}, None),
    ("step", {}, "autoswitch"),
    ("step-v-updated", {"switch_at": 0.3}, None),
    ("decaying-mask", {"decay_rate": 0.05, "srste_lam": 1e-3}, None),
    ("layerwise-step", {"layerwise_rule": "greedy", "switch_at": 0.5, "per_module": False},
     None),
]


@pytest.mark.parametrize("problem_name", ["regression", "digits"])
@pytest.mark.parametrize("recipe_name, options, criterion", CASES)
def test_lean_step_gives_the_bits_of_the_pure_step(monkeypatch, problem_name, recipe_name,
                                                   options, criterion):
    if problem_name == "regression":
        problem = make_problem("regression", d_in=16, d_hidden=8, d_out=4, n_samples=64,
                               n_test=32, batch_size=8, seed=1)
    else:
        problem = make_problem("digits", hidden=(16,), nm=(2, 4), batch_size=16)
    recipe = make_recipe(recipe_name, lr=1e-2, **options)
    crit = make_criterion(criterion, adam=recipe.optimizer) if criterion else None
    _lean_vs_pure(monkeypatch, problem, recipe, crit=crit)


SPARSE_CASES = [
    ("sr-ste", {}),
    ("asp", {"prune_at": 0.3}),
    ("step", {"switch_at": 0.5}),
    ("decaying-mask", {"decay_rate": 0.05}),
]


@pytest.mark.parametrize("problem_name", ["digits", "lm"])
@pytest.mark.parametrize("recipe_name, options", SPARSE_CASES)
def test_lean_step_takes_the_same_sparse_products_as_the_pure_step(monkeypatch, problem_name,
                                                                   recipe_name, options):
    # at 1:8 the models multiply by the kept weights (stepsim.nn.nm_linear); both paths
    # must hand them the same masks, so the runs keep the same bits
    from stepsim.nn import _nm_kernels

    if problem_name == "digits":
        problem = make_problem("digits", hidden=(32,), nm=(1, 8), batch_size=16)
    else:
        problem = make_problem("lm", vocab=8, context=8, width=32, blocks=1, heads=2,
                               batch_size=2, n_test=4, nm=(1, 8))
    calls = []
    real = _nm_kernels.sparse_product

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(_nm_kernels, "sparse_product", counted)
    _lean_vs_pure(monkeypatch, problem, make_recipe(recipe_name, lr=1e-2, **options),
                  steps=20)
    assert calls  # the sparse products ran


def _lean_vs_pure(monkeypatch, problem, recipe, steps=40, crit=None):
    """fit with the lean step (checked to have run) and with the recipe's pure step."""
    def run():
        return fit(problem, recipe, steps, rng=4, criterion=crit, progress=False,
                   log_stats=True)

    made = []
    real_make = lean_module.LeanStep.make

    def spy(*args):
        step = real_make(*args)
        made.append(step)
        return step

    monkeypatch.setattr(lean_module.LeanStep, "make", spy)
    lean = run()
    assert made and made[0] is not None  # the lean path ran
    monkeypatch.setattr(lean_module.LeanStep, "make", staticmethod(lambda *a: None))
    pure = run()
    _same_run(lean, pure)


@pytest.mark.parametrize("recipe_name", sorted(RECIPES))
def test_every_registered_recipe_runs_the_lean_step_with_the_pure_bits(monkeypatch,
                                                                       recipe_name):
    # DominoSearch (layerwise-sr-ste) penalises the gradient and changes N during the run;
    # its search runs fast here so that it lowers N inside 40 steps
    problem = make_problem("digits", hidden=(16,), nm=(2, 4), batch_size=16)
    options = {"switch_at": 0.3} if "step" in recipe_name else {}
    if recipe_name == "layerwise-sr-ste":
        options = {"domino_check_every": 2, "domino_penalty_every": 1}
    assert not lean_module.missing_in_place(make_recipe(recipe_name, **_known(recipe_name,
                                                                             options)))
    _lean_vs_pure(monkeypatch, problem, make_recipe(recipe_name, lr=1e-2,
                                                    **_known(recipe_name, options)))


def _known(recipe_name, options):
    """``options`` less those the recipe does not take."""
    from stepsim.recipes.registry import recipe_options

    own = set(recipe_options(recipe_name))
    return {k: v for k, v in options.items() if k in own}


def test_sgdm_with_mixed_dtypes_runs_in_place_with_the_pure_bits():
    from stepsim.recipes.lean import LeanStep

    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 8)).astype(np.float32),
              "b": rng.standard_normal(4)}  # float64
    from stepsim.core.sparsity import ParamSpec

    specs = {"w": ParamSpec(2, 4, axis=-1), "b": ParamSpec()}
    for name in ("sr-ste", "dense"):
        recipe = make_recipe(name, optimizer="sgdm", lr=1e-2)
        ctx = RunContext.make(params, specs, 10)
        state = recipe.init(params, ctx)
        p_pure, state = recipe.switch(state, params, 0, ctx)
        lean = LeanStep.make(recipe, p_pure, state, ctx)
        s_pure = s_lean = state
        for k in range(1, 4):
            grads = {n: rng.standard_normal(w.shape).astype(w.dtype)
                     for n, w in params.items()}
            fwd_p, s_pure = recipe.forward(s_pure, p_pure, k, ctx)
            fwd_l, s_lean = lean.forward(s_lean, lean.params, k, ctx)
            for n in params:
                assert fwd_p[n].tobytes() == fwd_l[n].tobytes()
            p_pure, s_pure, _ = recipe.update(s_pure, p_pure, grads, k, ctx)
            lean.update(s_lean, lean.params, grads, k, ctx)
            for n in params:
                assert p_pure[n].dtype == lean.params[n].dtype
                assert p_pure[n].tobytes() == lean.params[n].tobytes(), (name, k, n)


def test_both_forms_run_one_sequence_in_its_order():
    """The pure step (Recipe.forward/update) and the lean one (LeanStep) run the stages of
    stepsim.recipes.sequence in one order — masks, forward weights; penalty, the masker's
    bookkeeping, gradient pieces, optimizer, after pieces — each through its own form."""
    import dataclasses

    from stepsim.recipes import Adam, MaskWeights, SrsteTerm
    from stepsim.recipes.maskers import DynamicLayerwise

    log = []

    class Masker(DynamicLayerwise):  # a masker with a penalty: every stage is used
        def masks(self, mstate, view):
            log.append(("masks", "one"))
            return super().masks(mstate, view)

        def forward_weights(self, *args):
            log.append(("forward weights", "pure"))
            return super().forward_weights(*args)

        def forward_into(self, *args):
            log.append(("forward weights", "in place"))
            return super().forward_into(*args)

        def penalize(self, *args):
            log.append(("penalty", "pure"))
            return super().penalize(*args)

        def penalize_into(self, *args):
            log.append(("penalty", "in place"))
            return super().penalize_into(*args)

        def observe(self, *args):
            log.append(("observe", "one"))
            return super().observe(*args)

    class Gradient(SrsteTerm):
        def apply(self, grads, view):
            log.append(("gradient piece", "pure"))
            return super().apply(grads, view)

        def apply_into(self, grads, view, ws):
            log.append(("gradient piece", "in place"))
            return super().apply_into(grads, view, ws)

    class After(MaskWeights):
        def apply(self, params, view):
            log.append(("after piece", "pure"))
            return super().apply(params, view)

        def apply_into(self, params, view, ws):
            log.append(("after piece", "in place"))
            return super().apply_into(params, view, ws)

    class Optimizer(Adam):
        def update(self, *args, **kw):
            log.append(("optimizer", "pure"))
            return super().update(*args, **kw)

        def update_into(self, *args, **kw):
            log.append(("optimizer", "in place"))
            return super().update_into(*args, **kw)

    base = make_recipe("layerwise-sr-ste", domino_penalty_every=1)
    recipe = dataclasses.replace(
        base, masker=Masker(search=base.masker.search), gradient=(Gradient(lam=2e-4),),
        after=(After(),), optimizer=Optimizer(**dataclasses.asdict(base.optimizer)))
    problem = make_problem("digits", hidden=(16,), nm=(2, 4), batch_size=16)
    params = problem.init_params(0)
    ctx = RunContext.make(params, problem.specs, 10)
    state = recipe.init(params, ctx)
    params, state = recipe.switch(state, params, 0, ctx)
    logs = {}
    for form, stepper in (("pure", recipe), ("in place", lean_module.LeanStep.make(
            recipe, params, state, ctx))):
        log.clear()
        p, s, rng = getattr(stepper, "params", params), state, np.random.default_rng(0)
        for k in (1, 2):
            fwd, s = stepper.forward(s, p, k, ctx)
            _, grads = problem.loss_and_grad(fwd, problem.sample_batch(rng))
            p, s, _ = stepper.update(s, p, grads, k, ctx)
        logs[form] = list(log)
    order = ["masks", "forward weights", "penalty", "observe", "gradient piece", "optimizer",
             "after piece"]
    for form, entries in logs.items():
        assert [stage for stage, _ in entries] == order * 2, form
        assert {f for _, f in entries} == {"one", form}, form


def test_a_piece_without_an_in_place_form_is_refused_loudly():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class PureOnly:  # a gradient piece with only the pure form
        def apply(self, grads, view):
            return grads

    recipe = dataclasses.replace(make_recipe("sr-ste"), gradient=(PureOnly(),))
    problem = make_problem("digits", hidden=(16,), nm=(2, 4), batch_size=16)
    params = problem.init_params(0)
    ctx = RunContext.make(params, problem.specs, 10)
    assert lean_module.missing_in_place(recipe) == ["gradient piece PureOnly (apply_into)"]
    with pytest.raises(TypeError, match="PureOnly"):
        lean_module.LeanStep.make(recipe, params, recipe.init(params, ctx), ctx)
    with pytest.raises(TypeError, match="PureOnly"):
        fit(problem, recipe, 3, rng=0, progress=False)


def test_lean_step_leaves_the_problems_arrays_alone():
    problem = make_problem("digits", hidden=(16,), nm=(2, 4), batch_size=16)
    recipe = make_recipe("sr-ste")
    params = problem.init_params(0)
    before = {k: w.copy() for k, w in params.items()}
    ctx = RunContext.make(params, problem.specs, 10)
    state = recipe.init(params, ctx)
    params, state = recipe.switch(state, params, 0, ctx)
    step = lean_module.LeanStep.make(recipe, params, state, ctx)
    rng = np.random.default_rng(0)
    for k in range(1, 4):
        fwd, state = step.forward(state, step.params, k, ctx)
        _, grads = problem.loss_and_grad(fwd, problem.sample_batch(rng))
        kept = {n: g.copy() for n, g in grads.items()}
        step.update(state, step.params, grads, k, ctx)
        for n, g in grads.items():  # the gradient is read, never written
            assert g.tobytes() == kept[n].tobytes()
    for k, w in before.items():
        assert params[k].tobytes() == w.tobytes()
        assert not np.shares_memory(step.params[k], params[k])


def _largest_transient(fn) -> int:
    """Bytes a call allocates beyond what it started with, at its peak (tracemalloc sees
    NumPy's array buffers)."""
    tracemalloc.reset_peak()
    start = tracemalloc.get_traced_memory()[0]
    fn()
    return tracemalloc.get_traced_memory()[1] - start


@pytest.mark.parametrize("recipe_name", ["dense", "sr-ste", "step"])
def test_steady_state_lean_steps_allocate_nothing_big(recipe_name):
    # the recipe's part of a step (forward weights, gradient pieces, optimizer, after-update
    # pieces): only the N:M masks (1 byte per weight) may be new each step; the pure step
    # copies w, m and v (and np.where makes weight-sized temporaries)
    problem = make_problem("digits", hidden=(256,), nm=(2, 4), batch_size=16)
    options = {"switch_at": 2} if recipe_name == "step" else {}
    recipe = make_recipe(recipe_name, **options)
    params = problem.init_params(0)
    ctx = RunContext.make(params, problem.specs, 100)
    state = recipe.init(params, ctx)
    if recipe_name == "sr-ste":
        params, state = recipe.switch(state, params, 0, ctx)
    step = lean_module.LeanStep.make(recipe, params, state, ctx)
    rng = np.random.default_rng(0)
    batch = problem.sample_batch(rng)
    box = {"state": state}

    def recipe_part(k, stepper, params):
        fwd, st = stepper.forward(box["state"], params, k, ctx)
        _, grads = problem.loss_and_grad(fwd, batch)
        box["grads"] = grads
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        fwd, st = stepper.forward(st, params, k, ctx)
        new, st, _ = stepper.update(st, params, grads, k, ctx)
        box["state"] = st
        return tracemalloc.get_traced_memory()[1] - start, new

    weight_bytes = sum(w.nbytes for w in params.values())
    mask_bytes = sum(w.size for k, w in params.items() if problem.specs[k].sparse)
    tracemalloc.start()
    try:
        for k in range(1, 4):  # warm: kernels loaded, buffers made
            recipe_part(k, step, step.params)
            if recipe_name == "step" and k == 2:
                switched, box["state"] = recipe.switch(box["state"], step.params, 2, ctx)
                step.adopt(switched)
        lean_peak = max(recipe_part(k, step, step.params)[0] for k in range(4, 8))
        pure_params = {k: w.copy() for k, w in step.params.items()}
        pure_peak, _ = recipe_part(8, recipe, pure_params)
    finally:
        tracemalloc.stop()
    masks = mask_bytes if recipe_name != "dense" else 0
    assert lean_peak <= masks + 64 * 1024, (lean_peak, masks)
    assert pure_peak >= 2 * weight_bytes  # the check can see the copies of w and m


# --- the kernels ---------------------------------------------------------------------------

@st.composite
def masked_case(draw):
    dtype = draw(st.sampled_from((np.float32, np.float64)))
    n = draw(st.integers(0, 200))
    width = np.dtype(dtype).itemsize * 8
    floats = st.floats(-1e6, 1e6, width=width) | st.sampled_from([0.0, -0.0, np.inf, np.nan])
    x = draw(hnp.arrays(dtype, n, elements=floats))
    y = draw(hnp.arrays(dtype, n, elements=floats))
    keep = draw(hnp.arrays(np.bool_, n))
    c = dtype(draw(st.floats(-10, 10, width=width)))
    return x, y, keep, c


def _bits(a: np.ndarray) -> bytes:
    """The bytes of ``a`` with every NaN made the same NaN. IEEE 754 leaves the sign and
    payload of a NaN made by 0 * inf unspecified, and x86 sets the sign depending on the
    order of the operands (hypothesis found 0x7fc00000 beside 0xffc00000); a NaN weight
    stops a run as non-finite whatever its bits, so only "NaN here" is part of the promise.
    Every other value is compared bit for bit."""
    out = a.copy()
    out[np.isnan(out)] = np.nan
    return out.tobytes()


@given(masked_case())
@example((np.array([np.nan, 1.0], np.float32), np.array([np.inf, np.inf], np.float32),
          np.array([False, False]), np.float32(0.0)))  # 0 * inf and NaN + x: NaNs
def test_select_kernels_give_the_bits_of_np_where(case):
    from stepsim.core import _step_kernels as K

    x, y, keep, c = case
    dt = x.dtype.type
    with np.errstate(all="ignore"):  # inf * 0 and the like: NaN, as the kernels give
        expected = {
            "zero": np.where(keep, x, dt(0)),
            "scaled": np.where(keep, x, x * c),
            "add": np.where(keep, x, x + c * y),
            "sub": np.where(keep, x, x - c * y),
            "penalty": x + np.where(keep, c * y, dt(0)),
        }
    got = {name: np.empty_like(x) for name in expected}
    K.where_zero(x, keep, got["zero"])
    K.where_scaled(x, keep, c, got["scaled"])
    K.where_add_scaled(x, y, keep, c, got["add"])
    K.where_sub_scaled(x, y, keep, c, got["sub"])
    K.add_where_scaled(x, y, keep, c, got["penalty"])
    for name, want in expected.items():
        assert _bits(got[name]) == _bits(want), name
    inplace = x.copy()
    K.where_sub_scaled(inplace, y, keep, c, inplace)  # out may be x itself
    assert _bits(inplace) == _bits(expected["sub"])
    other = np.roll(keep, 1)
    assert K.count_changed(keep, other) == np.count_nonzero(keep != other)


# --- AdamArrays ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("log_stats, stats_on", [(False, "v"), (True, "vhat")])
def test_adam_arrays_gives_the_bits_of_adam_apply_many(dtype, log_stats, stats_on):
    from stepsim.core.optim import adam_hyper
    from stepsim.core.optim_many import AdamArrays, adam_apply_many

    rng = np.random.default_rng(1)
    shapes = [(7, 5), (4100,), (3,), (2, 3, 4)]
    ws = [rng.standard_normal(s).astype(dtype) for s in shapes]
    ms = [rng.standard_normal(s).astype(dtype) for s in shapes]
    vs = [rng.random(s).astype(dtype) for s in shapes]
    copies = [[a.copy() for a in arrays] for arrays in (ws, ms, vs)]
    arrays = AdamArrays(ws, ms, vs)
    for step in (1, 2, 3):
        gs = [rng.standard_normal(s).astype(dtype) for s in shapes]
        gs[0] = np.asfortranarray(gs[0])  # a non-contiguous gradient is copied
        hyper = adam_hyper(step=step, lr=1e-2, log_stats=log_stats, stats_on=stats_on,
                           freeze_v=step == 3)
        got = arrays.step(gs, hyper)
        want = adam_apply_many(*copies[0:1], gs, *copies[1:], hyper, per_param=True)
        assert repr(got) == repr(want)
        for a, b in zip(ws + ms + vs, [x for arrays in copies for x in arrays]):
            assert a.tobytes() == b.tobytes()
        sub = arrays.step([gs[1], gs[3]], hyper, [1, 3])
        ref = adam_apply_many([copies[0][1], copies[0][3]], [gs[1], gs[3]],
                              [copies[1][1], copies[1][3]], [copies[2][1], copies[2][3]],
                              hyper, per_param=True)
        assert repr(sub) == repr(ref)


def test_adam_arrays_refuses_what_adam_apply_many_refuses():
    from stepsim.core.optim import adam_hyper
    from stepsim.core.optim_many import AdamArrays

    w = np.zeros(8, np.float32)
    big = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="shares memory"):
        AdamArrays([w], [big[:8]], [big[4:12]])
    with pytest.raises(ValueError, match="C-contiguous"):
        AdamArrays([w], [big[::2]], [np.zeros(8, np.float32)])
    arrays = AdamArrays([w], [np.zeros(8, np.float32)], [np.zeros(8, np.float32)])
    hyper = adam_hyper(step=1, lr=1e-3)
    with pytest.raises(ValueError, match="shape"):
        arrays.step([np.zeros(4, np.float32)], hyper)
    with pytest.raises(TypeError, match="dtype"):
        arrays.step([np.zeros(8, np.float64)], hyper)
    with pytest.raises(ValueError, match="non-finite"):
        arrays.step([np.full(8, np.nan, np.float32)], hyper)


# --- the Adam statistics' lanes (stepsim.core._optim_kernels._block_stats) ---------------------

def _lane_stats_reference(v, v_old, scale_prev, scale_new):
    """NumPy, in the kernel's order: entry i to lane i % 8, each lane summed in index order
    (one row of 8 at a time), then the lanes pairwise ((0+1)+(2+3))+((4+5)+(6+7))."""
    vn = v.astype(np.float64)
    vo = v_old.astype(np.float64)
    if not (scale_prev == 1.0 and scale_new == 1.0):
        vn, vo = vn * scale_new, vo * scale_prev
    d = np.abs(vn - vo)
    rows = {"d": d, "vn": vn, "sq": vn * vn, "zeros": (d == 0.0).astype(np.float64)}
    out = {}
    for name, x in rows.items():
        acc = np.zeros(8)
        for start in range(0, len(x), 8):
            chunk = x[start:start + 8]
            acc[:len(chunk)] += chunk
        out[name] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) +
                                                             (acc[6] + acc[7]))
    return np.array([out["d"], 0.0, out["zeros"], out["vn"], out["sq"]])


@given(st.sampled_from([np.float32, np.float64]), st.integers(0, 100), st.booleans(),
       st.integers(0, 2**32 - 1))
def test_block_stats_lanes_give_the_bits_of_their_reference(dtype, n, raw, seed):
    from stepsim.core import _optim_kernels as K

    rng = np.random.default_rng(seed)
    v = rng.random(n).astype(dtype)
    v_old = v.copy()
    v_old[::3] = rng.random(len(v_old[::3])).astype(dtype)
    v[::5] = 0
    scale_prev, scale_new = (1.0, 1.0) if raw else (1.25, 1.7)
    out = np.empty(5)
    K._block_stats(v, v_old, scale_prev, scale_new, False, out)
    assert out.tobytes() == _lane_stats_reference(v, v_old, scale_prev, scale_new).tobytes()


def test_fit_steps_take_no_page_faults_in_steady_state():
    # a step's large temporaries (attention scores, activations: above glibc's 128 KiB
    # mmap threshold here) are freed and allocated again every step; fit keeps freed
    # memory in the process (stepsim._ground.malloc), so steady-state steps touch no fresh pages
    import resource

    from stepsim._ground.malloc import keep_freed_memory

    if not keep_freed_memory():
        pytest.skip("not glibc: the thresholds cannot be set")
    problem = make_problem("lm", vocab=16, order=2, context=32, width=32, blocks=1, heads=2,
                           batch_size=32, n_test=32)
    recipe = make_recipe("sr-ste", lr=1e-3)

    def faults(steps):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        fit(problem, recipe, steps, rng=0, progress=False)
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    faults(5)  # warm: kernels, the heap's high-water mark
    per_step = (faults(45) - faults(5)) / 40
    assert per_step < 5, per_step  # ~540 a step measured when glibc unmaps freed blocks


def test_modules_switching_at_their_own_steps_keep_the_pure_bits(monkeypatch):
    """Per-module switches (STEP with a criterion per module): Adam's arrays are then
    stepped in several kernel calls, one per distinct freezing, in the lean step as in
    the pure one; the modules must really switch at different steps here."""
    from stepsim.recipes import SwitchWhen

    problem = make_problem("digits", hidden=(16,), nm=(2, 4), batch_size=16)
    recipe = make_recipe("step", lr=1e-2)
    crit = SwitchWhen(make_criterion("agarwal", threshold=0.05), per_module=True)
    made = []
    real_make = lean_module.LeanStep.make

    def spy(*args):
        made.append(real_make(*args))
        return made[-1]

    monkeypatch.setattr(lean_module.LeanStep, "make", spy)
    lean = fit(problem, recipe, 40, rng=4, criterion=crit, progress=False)
    assert made and made[0] is not None
    switched = [k for k in lean.module_switch_steps.values() if k is not None]
    assert len(set(switched)) > 1, lean.module_switch_steps
    monkeypatch.setattr(lean_module.LeanStep, "make", staticmethod(lambda *a: None))
    _same_run(lean, fit(problem, recipe, 40, rng=4, criterion=crit, progress=False))
