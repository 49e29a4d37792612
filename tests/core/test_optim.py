"""Adam(W) and momentum SGD: numba kernels against the NumPy references (bit for bit),
their in-pass statistics, PyTorch as an optional peer, and argument checks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepsim import AdamStats, adam_step, sgdm_step
from stepsim.core import reference as ref
from tests.strategies import adam_case


def _copies(arrays):
    return [a.copy() for a in arrays]


@given(adam_case())
def test_adam_matches_reference_bit_for_bit(case):
    arrays, hyper = case
    ours, theirs = _copies(arrays), _copies(arrays)
    stats = adam_step(*ours, log_stats=True, **hyper)
    v_prev = ref.adam_step(*theirs, **hyper)
    for name, a, b in zip("wgmv", ours, theirs):
        np.testing.assert_array_equal(a, b, err_msg=f"{name} differs")
    expected = ref.adam_stats(v_prev, theirs[3])
    assert stats.size == arrays[0].size
    assert stats.dv_zeros == expected["dv_zeros"]
    for field in ("dv_l1", "dv_log_sum", "v_l1", "v_l2sq"):
        assert getattr(stats, field) == pytest.approx(expected[field], rel=1e-10, abs=1e-300)


@given(adam_case())
def test_frozen_v_is_never_written(case):
    arrays, hyper = case
    hyper["freeze_v"] = True
    w, g, m, v = _copies(arrays)
    v_before = v.copy()
    stats = adam_step(w, g, m, v, **hyper)
    np.testing.assert_array_equal(v, v_before)
    assert stats.dv_l1 == 0.0 and stats.dv_zeros == v.size


@given(adam_case())
def test_stats_off_gives_the_same_step(case):
    arrays, hyper = case
    with_stats, without = _copies(arrays), _copies(arrays)
    assert adam_step(*with_stats, **hyper) is not None
    assert adam_step(*without, stats=False, **hyper) is None
    for a, b in zip(with_stats, without):
        np.testing.assert_array_equal(a, b)


def test_empty_arrays_are_a_no_op():
    w, g, m, v = (np.empty(0, np.float32) for _ in range(4))
    stats = adam_step(w, g, m, v, step=1, lr=0.1)
    assert (stats.dv_l1, stats.dv_zeros, stats.v_l1, stats.v_l2sq, stats.size) == (0, 0, 0, 0, 0)


def test_statistics_on_bias_corrected_v():
    rng = np.random.default_rng(3)
    w, g, m = (rng.standard_normal(5000) for _ in range(3))
    v = np.abs(rng.standard_normal(5000))
    beta2, step = 0.99, 7
    v_prev = v.copy()
    stats = adam_step(w, g, m, v, step=step, lr=1e-3, beta2=beta2, stats_on="vhat", log_stats=True)
    expected = ref.adam_stats(v_prev, v, scale_prev=1 / (1 - beta2 ** (step - 1)),
                              scale_new=1 / (1 - beta2**step))
    for field in ("dv_l1", "dv_log_sum", "v_l1", "v_l2sq"):
        assert getattr(stats, field) == pytest.approx(expected[field], rel=1e-12)
    # at step 1 the previous vhat is 0 by definition
    w, g, m, v = (np.ones(8) for _ in range(4))
    v[:] = 0.0
    stats = adam_step(w, g, m, v, step=1, lr=1e-3, stats_on="vhat")
    assert stats.dv_l1 == pytest.approx(8 * 1.0)  # vhat_1 = g^2 = 1


def test_statistics_do_not_depend_on_thread_count():
    import numba

    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(50_000).astype(np.float32) for _ in range(3)]
    arrays.append(np.abs(rng.standard_normal(50_000)).astype(np.float32))
    counts = sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)})
    if len(counts) < 2:
        pytest.skip("numba has a single thread here: nothing to compare")
    results = []
    before = numba.get_num_threads()
    try:
        for threads in counts:
            numba.set_num_threads(threads)
            state = _copies(arrays)
            results.append((adam_step(*state, step=3, lr=1e-3, log_stats=True), state))
    finally:
        numba.set_num_threads(before)
    (s0, a0), (s1, a1) = results[0], results[-1]
    assert s0 == s1
    for x, y in zip(a0, a1):
        np.testing.assert_array_equal(x, y)


def test_adam_stats_combine_and_l2():
    a = AdamStats(1.0, -2.0, 3, 4.0, 9.0, 10)
    b = AdamStats(0.5, -1.0, 1, 1.0, 16.0, 5)
    c = AdamStats.combine([a, b])
    assert c == AdamStats(1.5, -3.0, 4, 5.0, 25.0, 15)
    assert c.v_l2 == 5.0


def test_adam_step_is_adam_hyper_then_adam_apply():
    from stepsim.core.optim import adam_apply, adam_hyper

    rng = np.random.default_rng(8)
    arrays = [rng.standard_normal(300) for _ in range(3)] + [np.abs(rng.standard_normal(300))]
    a, b = _copies(arrays), _copies(arrays)
    kwargs = {"step": 4, "lr": 1e-2, "eps_mode": "outside", "weight_decay": 0.1,
              "stats_on": "vhat", "log_stats": True}
    assert adam_step(*a, **kwargs) == adam_apply(*b, adam_hyper(**kwargs))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(TypeError, match="hyper must be an AdamHyper"):
        adam_apply(*b, kwargs)


def test_first_step_from_zero_state_by_hand():
    # k = 1, m = v = 0: mhat = g, vhat = g^2, so w moves by lr * g / sqrt(g^2 + eps)
    w = np.array([1.0, 1.0, 1.0]); g = np.array([2.0, -0.5, 0.0])
    m = np.zeros(3); v = np.zeros(3)
    adam_step(w, g, m, v, step=1, lr=0.1, eps=1e-8)
    np.testing.assert_allclose(w, 1.0 - 0.1 * g / np.sqrt(g * g + 1e-8), rtol=1e-15)
    np.testing.assert_allclose(m, 0.1 * g); np.testing.assert_allclose(v, 0.001 * g * g)


@given(adam_case())
def test_sgdm_matches_reference_bit_for_bit(case):
    (w, g, buf, _), hyper = case
    lr = hyper["lr"]
    for nesterov in (False, True):
        ours, theirs = _copies([w, g, buf]), _copies([w, g, buf])
        wd = hyper["weight_decay"]
        sgdm_step(*ours, lr=lr, momentum=0.9, weight_decay=wd, nesterov=nesterov)
        ref.sgdm_step(*theirs, lr=lr, momentum=0.9, weight_decay=wd, nesterov=nesterov)
        np.testing.assert_array_equal(ours[0], theirs[0])
        np.testing.assert_array_equal(ours[2], theirs[2])


# --- PyTorch as an optional peer ------------------------------------------------------

@pytest.mark.torch
@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
def test_outside_eps_reproduces_torch_adam(weight_decay):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal(257)
    grads = [rng.standard_normal(257) for _ in range(6)]
    p = torch.nn.Parameter(torch.tensor(w0))
    opt_cls = torch.optim.AdamW if weight_decay else torch.optim.Adam
    opt = opt_cls([p], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay)
    w, m, v = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    for k, g in enumerate(grads, start=1):
        p.grad = torch.tensor(g)
        opt.step()
        adam_step(w, g.copy(), m, v, step=k, lr=0.01, eps=1e-8, eps_mode="outside",
                  weight_decay=weight_decay)
        np.testing.assert_allclose(w, p.detach().numpy(), rtol=1e-13, atol=1e-15)
        state = opt.state[p]
        # torch forms m with lerp (m + (1-b1)(g-m)), a different rounding order: where m
        # nearly cancels, its relative error is large but its absolute error is ~1e-17
        np.testing.assert_allclose(m, state["exp_avg"].numpy(), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(v, state["exp_avg_sq"].numpy(), rtol=1e-13)


@pytest.mark.torch
@pytest.mark.parametrize("nesterov", [False, True])
def test_sgdm_reproduces_torch_sgd(nesterov):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    w0 = rng.standard_normal(100)
    p = torch.nn.Parameter(torch.tensor(w0))
    opt = torch.optim.SGD([p], lr=0.05, momentum=0.9, weight_decay=1e-3, nesterov=nesterov)
    w, buf = w0.copy(), np.zeros_like(w0)
    for _ in range(5):
        g = rng.standard_normal(100)
        p.grad = torch.tensor(g)
        opt.step()
        sgdm_step(w, g, buf, lr=0.05, momentum=0.9, weight_decay=1e-3, nesterov=nesterov)
        np.testing.assert_allclose(w, p.detach().numpy(), rtol=1e-14, atol=1e-15)


# --- bad input -----------------------------------------------------------------------

def _state(n=8, dtype=np.float32):
    return [np.ones(n, dtype=dtype) for _ in range(4)]


@pytest.mark.parametrize(
    "override, error, text",
    [
        ({"lr": -0.1}, ValueError, r"lr must be in \[0.0, inf\), got -0.1"),
        ({"beta1": 1.0}, ValueError, r"beta1 must be in \[0.0, 1.0\), got 1.0"),
        ({"beta2": -0.5}, ValueError, "beta2 must be in"),
        ({"step": 0}, ValueError, "step must be >= 1, got 0"),
        ({"step": 1.5}, TypeError, "step must be an integer"),
        ({"eps": -1e-8}, ValueError, "eps must be in"),
        ({"eps_mode": "middle"}, ValueError, "unknown eps_mode 'middle'"),
        ({"weight_decay": -1.0}, ValueError, "weight_decay must be in"),
        ({"bias_correction2": 0.0}, ValueError, "bias_correction2 must be in"),
        ({"stats_on": "w"}, ValueError, "unknown stats_on"),
        ({"lr": float("nan")}, ValueError, "lr must be finite"),
    ],
)
def test_adam_bad_hyperparameters(override, error, text):
    kwargs = {"step": 1, "lr": 1e-3, **override}
    with pytest.raises(error, match=text):
        adam_step(*_state(), **kwargs)


def test_adam_bad_arrays():
    w, g, m, v = _state()
    with pytest.raises(ValueError, match=r"g has shape \(7,\) but w has shape \(8,\)"):
        adam_step(w, g[:7].copy(), m, v, step=1, lr=0.1)
    with pytest.raises(TypeError, match="v has dtype float64 but w has dtype float32"):
        adam_step(w, g, m, v.astype(np.float64), step=1, lr=0.1)
    with pytest.raises(TypeError, match="w must have dtype in"):
        adam_step(*_state(dtype=np.float16), step=1, lr=0.1)
    with pytest.raises(ValueError, match="m must be C-contiguous"):
        big = np.ones(16, np.float32)
        adam_step(w, g, big[::2], v, step=1, lr=0.1)
    with pytest.raises(ValueError, match="shares memory with w"):
        adam_step(w, g, w, v, step=1, lr=0.1)
    with pytest.raises(ValueError, match="v shares memory with m"):
        adam_step(w, g, m, m, step=1, lr=0.1)
    with pytest.raises(ValueError, match="buf shares memory with g"):
        sgdm_step(w, g, g, lr=0.1)
    with pytest.raises(TypeError, match="g must be a numpy.ndarray"):
        adam_step(w, [1.0] * 8, m, v, step=1, lr=0.1)
    g_bad = np.ones(3 * 4096 + 5, np.float32)
    g_bad[[3, 9000]] = [np.inf, np.nan]
    state = [np.ones_like(g_bad) for _ in range(3)]
    for freeze_v in (False, True):
        for stats in (True, False):
            with pytest.raises(ValueError, match="g contains 2 non-finite value"):
                adam_step(state[0], g_bad, state[1], state[2], step=1, lr=0.1,
                          freeze_v=freeze_v, stats=stats)
    g64 = np.ones(8)
    g64[7] = -np.inf
    with pytest.raises(ValueError, match="g contains 1 non-finite value"):
        adam_step(np.ones(8), g64, np.ones(8), np.ones(8), step=1, lr=0.1)


def test_sgdm_bad_input():
    w, g, buf, _ = _state()
    with pytest.raises(ValueError, match="momentum must be in"):
        sgdm_step(w, g, buf, lr=0.1, momentum=1.0)
    with pytest.raises(ValueError, match="lr must be in"):
        sgdm_step(w, g, buf, lr=-1.0)
    with pytest.raises(ValueError, match="nesterov=True needs momentum > 0"):
        sgdm_step(w, g, buf, lr=0.1, momentum=0.0, nesterov=True)
    g[0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        sgdm_step(w, g, buf, lr=0.1)


# --- multi-tensor Adam -----------------------------------------------------------------

@st.composite
def _model_state(draw):
    """A model's Adam state: 1-5 parameters of mixed shapes (some across a block edge, some
    empty), one dtype; plus hyper-parameters as in adam_case."""
    (_, _, _, _), hyper = draw(adam_case())
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shapes = draw(st.lists(st.one_of(st.tuples(st.integers(0, 40)),
                                     st.tuples(st.integers(1, 70), st.integers(60, 130))),
                           min_size=1, max_size=5))
    params = []
    for shape in shapes:
        w, g, m = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
        v = np.abs(rng.standard_normal(shape) * 0.01).astype(dtype)
        v[rng.random(shape) < 0.2] = 0.0
        g[rng.random(shape) < 0.2] = 0.0
        params.append((w, g, m, v))
    hyper["stats_on"] = draw(st.sampled_from(["v", "vhat"]))
    hyper["log_stats"] = draw(st.booleans())
    return params, hyper


def _same_stats(a, b):
    """Equal bit for bit (nan equal to nan)."""
    return all(x == y or (np.isnan(x) and np.isnan(y)) for x, y in zip(a, b))


@settings(max_examples=25)  # each example runs the step twice and switches thread counts
@given(_model_state(), st.sampled_from([1, 2]))
def test_adam_apply_many_is_per_array_then_combine_bit_for_bit(case, threads):
    import numba

    from stepsim.core.optim import adam_apply, adam_hyper
    from stepsim.core.optim_many import adam_apply_many

    params, kwargs = case
    hyper = adam_hyper(**kwargs)
    one_by_one = [_copies(p) for p in params]
    together = [_copies(p) for p in params]
    expected = AdamStats.combine([adam_apply(*p, hyper) for p in one_by_one])
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        stats = adam_apply_many(*zip(*together), hyper)
    finally:
        numba.set_num_threads(before)
    assert _same_stats(stats, expected), (stats, expected)
    for p, q in zip(one_by_one, together):
        for name, a, b in zip("wgmv", p, q):
            np.testing.assert_array_equal(a, b, err_msg=f"{name} differs")
    assert stats.size == sum(p[0].size for p in params)


def test_adam_apply_many_without_stats_and_without_parameters():
    from stepsim.core.optim import adam_hyper
    from stepsim.core.optim_many import adam_apply_many

    assert adam_apply_many([], [], [], [], adam_hyper(step=1, lr=0.1)) == AdamStats.combine([])
    assert adam_apply_many([], [], [], [], adam_hyper(step=1, lr=0.1, stats=False)) is None
    w, g, m, v = _state()
    assert adam_apply_many([w], [g], [m], [v], adam_hyper(step=1, lr=0.1, stats=False)) is None


def test_adam_apply_many_bad_input_names_the_parameter():
    from stepsim.core.optim import adam_hyper
    from stepsim.core.optim_many import adam_apply_many

    hyper = adam_hyper(step=1, lr=0.1)
    a, b = _state(), _state(n=6)
    with pytest.raises(ValueError, match="one array per parameter, got lengths 2, 2, 1, 2"):
        adam_apply_many([a[0], b[0]], [a[1], b[1]], [a[2]], [a[3], b[3]], hyper)
    with pytest.raises(ValueError, match=r"gs\[1\] has shape \(5,\) but ws\[1\] has shape"):
        adam_apply_many([a[0], b[0]], [a[1], b[1][:5]], [a[2], b[2]], [a[3], b[3]], hyper)
    b64 = _state(n=6, dtype=np.float64)
    with pytest.raises(TypeError, match=r"ws\[1\] has dtype float64 but ws\[0\] has dtype float32"):
        adam_apply_many([a[0], b64[0]], [a[1], b64[1]], [a[2], b64[2]], [a[3], b64[3]], hyper)
    # an array shared between two parameters would be updated twice, racing
    with pytest.raises(ValueError, match=r"ms\[1\] shares memory with ws\[0\]"):
        adam_apply_many([a[0], b[0]], [a[1], b[1]], [a[2], a[0][:6]], [a[3], b[3]], hyper)
    # ... but one gradient may serve two parameters: it is only read
    adam_apply_many([a[0], b[0]], [a[1], a[1][:6]], [a[2], b[2]], [a[3], b[3]], hyper)


@pytest.mark.parametrize("freeze_v", [False, True])
def test_negative_or_nan_v_is_an_error(freeze_v):
    w, g, m, v = (np.ones(5000, np.float32) for _ in range(4))
    v[[7, 4500]] = [-1e-3, np.nan]
    v[9] = -0.0  # -0 is >= 0: allowed
    with pytest.raises(ValueError, match=r"v contains 2 negative or NaN value\(s\)"):
        adam_step(w, g, m, v, step=3, lr=0.1, freeze_v=freeze_v, bias_correction2=1.0)


def test_eps_must_be_positive():
    # eps = 0 would give 0/0 = NaN wherever g = v = 0
    with pytest.raises(ValueError, match=r"eps must be in \(0.0, inf\), got 0.0"):
        adam_step(*_state(), step=1, lr=0.1, eps=0.0)


def test_read_only_or_strided_g_is_accepted_and_never_written():
    rng = np.random.default_rng(9)
    w, m = rng.standard_normal(64), rng.standard_normal(64)
    v = np.abs(rng.standard_normal(64))
    g_big = rng.standard_normal(128)
    read_only = g_big[::2].copy()
    read_only.flags.writeable = False
    for g in (read_only, g_big[::2], np.asfortranarray(g_big.reshape(8, 16))[:, :8].T):
        ours = [w.copy(), m.copy(), v.copy()]
        theirs = [w.copy(), m.copy(), v.copy()]
        g_before = g.copy()
        adam_step(ours[0].reshape(g.shape), g, ours[1].reshape(g.shape), ours[2].reshape(g.shape),
                  step=2, lr=0.01)
        ref.adam_step(theirs[0], np.ascontiguousarray(g).reshape(-1), theirs[1], theirs[2],
                      step=2, lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8)
        np.testing.assert_array_equal(g, g_before)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b)


@settings(max_examples=20)
@given(_model_state(), st.booleans())
def test_sgdm_apply_many_is_per_array_bit_for_bit(case, nesterov):
    from stepsim.core.optim_many import sgdm_apply_many

    params, hyper = case
    kwargs = {"lr": hyper["lr"], "momentum": 0.9, "weight_decay": hyper["weight_decay"],
              "nesterov": nesterov}
    one_by_one = [_copies(p[:3]) for p in params]
    together = [_copies(p[:3]) for p in params]
    for w, g, buf in one_by_one:
        sgdm_step(w, g, buf, **kwargs)
    sgdm_apply_many(*zip(*together), **kwargs)
    for p, q in zip(one_by_one, together):
        for a, b in zip(p, q):
            np.testing.assert_array_equal(a, b)


def test_ndarray_subclasses_are_accepted():
    _, g, m, v = _state()
    sub = np.ones(8, np.float32).view(type("Sub", (np.ndarray,), {}))
    assert adam_step(sub, g, m, v, step=1, lr=0.1) is not None
    assert (sub < 1.0).all()


def test_adam_stats_combine_adds_each_field_in_order():
    """combine sums each field over the parts in order (as the switch criteria and the
    trace read it): bit for bit Python's sum of that field; no parts give zeros."""
    rng = np.random.default_rng(3)
    parts = [AdamStats(*(float(x) for x in rng.standard_normal(2)), int(rng.integers(9)),
                       *(float(x) for x in rng.standard_normal(2)), int(rng.integers(1, 9)))
             for _ in range(7)]
    got = AdamStats.combine(iter(parts))
    for field in AdamStats._fields:
        assert getattr(got, field) == sum(getattr(p, field) for p in parts)
    assert AdamStats.combine([]) == AdamStats(0, 0, 0, 0, 0, 0)


def _kernel_scalars_reference(hyper, dtype):
    """The kernel scalars as made before the run-long part was cached: every check and
    conversion at every call."""
    from stepsim.core.optim_hyper import _check_fits

    eps = hyper.eps_inside or hyper.eps_outside
    root = eps ** 0.5 if hyper.eps_inside else eps
    _check_fits(dtype, {"1 - lr * weight_decay": hyper.decay,
                        "1 / (1 - beta1**step)": hyper.inv_bc1,
                        "1 / bias_correction2": hyper.inv_bc2},
                lr=hyper.lr, gain=1.0 / root, eps=eps)
    dt = dtype.type
    return (dt(hyper.beta1), dt(1.0 - hyper.beta1), dt(hyper.beta2), dt(1.0 - hyper.beta2),
            dt(hyper.inv_bc1), dt(hyper.inv_bc2), dt(hyper.eps_inside), dt(hyper.eps_outside),
            dt(hyper.lr), dt(hyper.decay))


@settings(max_examples=300)
@given(dtype=st.sampled_from([np.float32, np.float64]),
       step=st.integers(1, 10**6),
       lr=st.one_of(st.floats(0, 1e3), st.sampled_from([1e30, 1e37, 1e38, 1e39, 1e300])),
       beta1=st.floats(0, 0.9999), beta2=st.floats(0, 0.9999),
       eps=st.one_of(st.floats(1e-12, 1.0), st.sampled_from([1e-40, 1e-45, 1e-50, 1e-320])),
       eps_mode=st.sampled_from(["inside", "outside"]),
       weight_decay=st.one_of(st.floats(0, 10), st.sampled_from([1e30, 1e40, 1e300])),
       frozen=st.booleans())
def test_kernel_scalars_are_the_checked_conversions(dtype, step, lr, beta1, beta2, eps,
                                                    eps_mode, weight_decay, frozen):
    """kernel_scalars (run-long part cached, a step's part checked fast): the same values
    in the same dtype as converting and checking everything at each call, and the same
    error, word for word, when a value overflows or eps rounds to 0."""
    from stepsim.core.optim_hyper import adam_hyper, kernel_scalars

    hyper = adam_hyper(step=step, lr=lr, beta1=beta1, beta2=beta2, eps=eps, eps_mode=eps_mode,
                       weight_decay=weight_decay, freeze_v=frozen,
                       bias_correction2=1.0 if frozen else None)
    dtype = np.dtype(dtype)
    try:
        want = _kernel_scalars_reference(hyper, dtype)
    except ValueError as exc:
        with pytest.raises(ValueError) as got:
            kernel_scalars(hyper, dtype)
        assert str(got.value) == str(exc)
        return
    got = kernel_scalars(hyper, dtype)
    assert [type(x) for x in got] == [type(x) for x in want]
    assert np.array(got).tobytes() == np.array(want).tobytes()


@settings(max_examples=20)
@given(_model_state(), st.booleans())
def test_sgdm_arrays_steps_as_sgdm_apply_many(case, nesterov):
    """SGDMArrays (w and buf checked once, a step writes only the gradients' addresses):
    the bits of sgdm_apply_many over several steps, and its errors."""
    from stepsim.core.optim_many import SGDMArrays, sgdm_apply_many

    params, hyper = case
    kwargs = {"lr": hyper["lr"], "momentum": 0.9, "weight_decay": hyper["weight_decay"],
              "nesterov": nesterov}
    many = [_copies(p[:3]) for p in params]
    held = [_copies(p[:3]) for p in params]
    arrays = SGDMArrays([w for w, _, _ in held], [buf for _, _, buf in held])
    for _ in range(3):
        sgdm_apply_many(*zip(*many), **kwargs)
        arrays.step([g for _, g, _ in held], **kwargs)
    for p, q in zip(many, held):
        for a, b in zip(p, q):
            assert a.tobytes() == b.tobytes()
    with pytest.raises(ValueError, match="lr must be in"):
        arrays.step([g for _, g, _ in held], **dict(kwargs, lr=-1.0))
    with pytest.raises(ValueError, match="got 0 gradients"):
        arrays.step([], **kwargs)
    w = np.ones(4)
    with pytest.raises(ValueError, match="shares memory"):
        SGDMArrays([w], [w])


@given(st.lists(st.integers(-3, 3) | st.integers(-2**62, 2**62), max_size=70))
def test_the_overlap_checks_order_is_numpys_stable_argsort(keys):
    """The kernels' own merge sort (the order the overlap check walks the arrays in, which
    decides which parameter an overlap error names) against NumPy's stable argsort, with
    many ties (the small integers)."""
    from stepsim.core._optim_kernels import stable_order

    keys = np.asarray(keys, dtype=np.int64)
    np.testing.assert_array_equal(stable_order(keys), np.argsort(keys, kind="stable"))
