"""stepsim._ground.libm (CPU-independent transcendental functions) and the rule that keeps NumPy's
CPU-dispatched ufuncs off every path that reaches a result."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from stepsim._ground import libm as _libm

PACKAGE = Path(__file__).resolve().parents[2] / "stepsim"
FUNCTIONS = {"exp": math.exp, "expm1": math.expm1, "tanh": math.tanh, "sin": math.sin, "cos": math.cos}


def _finite(dtype, low, high):
    return hnp.arrays(dtype, hnp.array_shapes(max_dims=3, max_side=9),
                      elements=st.floats(low, high, width=np.dtype(dtype).itemsize * 8))


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@given(x=_finite(np.float64, -700, 700))
def test_each_function_is_glibc_scalar_function_bit_for_bit(name, x):
    """The reference is Python's math module: the same glibc function, one call each."""
    got = getattr(_libm, name)(x)
    want = np.array([FUNCTIONS[name](float(v)) for v in x.ravel()]).reshape(x.shape)
    assert got.dtype == np.float64 and got.shape == x.shape
    assert got.tobytes() == want.tobytes()


@given(x=_finite(np.float32, -80, 80))
def test_float32_in_float32_out_rounded_once_from_float64(x):
    got = _libm.exp(x)
    assert got.dtype == np.float32
    want = np.array([math.exp(float(v)) for v in x.ravel()]).astype(np.float32)
    assert got.ravel().tobytes() == want.tobytes()
    # and within float32 rounding of NumPy's own exp (any CPU path)
    np.testing.assert_allclose(got, np.exp(x), rtol=2.5e-7, atol=0)


def test_log_and_power_match_numpy_to_rounding_with_numpys_special_values():
    x = np.array([0.0, -1.0, 1e-300, 0.5, 1.0, 2.0, np.inf, np.nan])
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(np.isnan(_libm.log(x)), np.isnan(np.log(x)))
        finite = np.isfinite(np.log(x))
        np.testing.assert_allclose(_libm.log(x)[finite], np.log(x)[finite], rtol=2e-16)
    assert _libm.log(0.0) == -math.inf and math.isnan(_libm.log(-1.0))
    base = np.linspace(0.1, 10, 50)
    np.testing.assert_allclose(_libm.power(base, -1.3), base ** -1.3, rtol=4e-16)
    assert _libm.power(base, 2.0).tobytes() == np.array([b * b for b in base]).tobytes()


def test_spaced_grids_keep_their_ends_exact():
    g = _libm.geomspace(1, 2000, 200)
    assert g[0] == 1 and g[-1] == 2000
    np.testing.assert_allclose(g, np.geomspace(1, 2000, 200), rtol=1e-13)  # other formula
    np.testing.assert_allclose(_libm.logspace(0, 4, 9), np.logspace(0, 4, 9), rtol=1e-15)


def test_scalars_give_python_floats():
    assert _libm.exp(np.float32(1.0)) == math.exp(1.0)
    assert isinstance(_libm.tanh(0.5), float)


# NumPy ufuncs whose loops dispatch on the CPU (AVX-512 paths round differently).
DISPATCHED = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "power", "float_power",
              "tanh", "sinh", "cosh", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
              "arctan2", "arcsinh", "arccosh", "arctanh", "cbrt", "logaddexp", "logaddexp2",
              "geomspace", "logspace"}
# Outside any result: benchmarks time NumPy itself.
EXEMPT = {"bench"}


def test_no_module_calls_a_cpu_dispatched_numpy_function():
    """Every exp/log/power/... that can reach a result goes through stepsim._ground.libm."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in EXEMPT or (rel.parts[0] == "_ground" and path.name.startswith("libm")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in DISPATCHED
                    and isinstance(node.value, ast.Name) and node.value.id == "np"):
                offenders.append(f"{rel}:{node.lineno} np.{node.attr}")
    assert not offenders, "use stepsim._ground.libm instead: " + ", ".join(offenders)
