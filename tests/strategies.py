"""Hypothesis strategies for the kernel tests, valid by construction (no ``assume``)."""

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

FLOAT_DTYPES = (np.float16, np.float32, np.float64)
OPT_DTYPES = (np.float32, np.float64)


@st.composite
def nm_ratio(draw, max_m=32):
    """(n, m) with 1 <= n <= m <= max_m; m = 4 (the 2:4 fast path) often."""
    m = draw(st.one_of(st.just(4), st.integers(1, max_m)))
    n = draw(st.integers(1, m))
    return n, m


def nm_array(draw, ratio, dtypes, *, max_side: int = 5, max_groups: int = 6):
    """(w, n, m, axis) for the N:M ``ratio``: w of one of ``dtypes``, ndim 1-3, sides
    1..max_side, the axis 1..max_groups groups of m long. Values come from a small integer
    grid half the time, so ties are frequent."""
    n, m = ratio
    dtype = draw(st.sampled_from(dtypes))
    ndim = draw(st.integers(1, 3))
    shape = list(draw(st.lists(st.integers(1, max_side), min_size=ndim, max_size=ndim)))
    axis = draw(st.integers(-ndim, ndim - 1))
    shape[axis] = m * draw(st.integers(1, max_groups))
    if draw(st.booleans()):
        w = hnp.arrays(dtype, shape, elements=st.integers(-3, 3).map(float))
    else:
        width = np.dtype(dtype).itemsize * 8
        w = hnp.arrays(dtype, shape, elements=st.floats(-1e4, 1e4, width=width))
    return draw(w), n, m, axis


@st.composite
def nm_case(draw):
    """(w, n, m, axis): w of any float dtype whose axis length is a multiple of m."""
    return nm_array(draw, draw(nm_ratio()), FLOAT_DTYPES)


@st.composite
def adam_case(draw):
    """Flat or shaped float32/float64 state (w, g, m, v) with v >= 0, plus hyper-parameters."""
    dtype = draw(st.sampled_from(OPT_DTYPES))
    size = draw(st.one_of(st.integers(1, 50), st.integers(4000, 9000)))  # crosses a block edge
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(size).astype(dtype)
    g = (rng.standard_normal(size) * draw(st.sampled_from([1e-4, 1.0, 1e3]))).astype(dtype)
    m = (rng.standard_normal(size) * 0.1).astype(dtype)
    v = np.abs(rng.standard_normal(size) * 0.01).astype(dtype)
    if draw(st.booleans()):
        v[rng.random(size) < 0.3] = 0.0
        g[rng.random(size) < 0.3] = 0.0  # exact zero differences for the statistics
    hyper = {
        "step": draw(st.integers(1, 5000)),
        "lr": draw(st.sampled_from([0.0, 1e-4, 1e-2, 0.5])),
        "beta1": draw(st.sampled_from([0.0, 0.5, 0.9])),
        "beta2": draw(st.sampled_from([0.0, 0.9, 0.999, 0.9999])),
        "eps": draw(st.sampled_from([1e-12, 1e-8, 1e-3])),
        "eps_mode": draw(st.sampled_from(["inside", "outside"])),
        "weight_decay": draw(st.sampled_from([0.0, 0.01])),
        "freeze_v": draw(st.booleans()),
    }
    if draw(st.booleans()):
        hyper["bias_correction2"] = draw(st.sampled_from([1.0, 0.5, 0.01]))
    return (w, g, m, v), hyper


@st.composite
def sparse_linear_case(draw):
    """(x, w, mask, n, m, dy): an N:M Linear product's operands. w (out, in) float32 or
    float64 with in a multiple of m, mask its N:M magnitude mask along the inputs (exactly
    n of every m kept, ties by position), x (rows, in) and dy (rows, out). Rows cross a
    tile edge often (32 float32 / 16 float64 rows a tile), out and in cross the 8 x 8
    transpose blocks; values are small integers half the time (exact sums, many ties)."""
    from stepsim.core.masks import nm_mask

    n, m = draw(nm_ratio(max_m=16))
    dtype = draw(st.sampled_from(OPT_DTYPES))
    rows = draw(st.one_of(st.integers(1, 40), st.integers(60, 70)))
    out = draw(st.integers(1, 20))
    n_in = m * draw(st.integers(1, 40 // m + 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        def fill(*shape):
            return rng.integers(-3, 4, size=shape).astype(dtype)
    else:
        def fill(*shape):
            return (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3, size=shape)
                    ).astype(dtype)
    w = fill(out, n_in)
    mask = nm_mask(w, n, m, axis=-1)
    return fill(rows, n_in), w, mask, n, m, fill(rows, out)
