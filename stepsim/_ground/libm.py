"""exp, expm1, log, tanh, sin, cos and power with the same bits on every CPU.

NumPy's ufuncs for these functions dispatch on the CPU at run time: on an AVX-512
machine ``np.exp``, ``np.log``, ``np.power``, ``np.tanh`` (float32 and float64) take SIMD
paths that round differently, in the last bit, from the AVX2 machine's paths (measured:
six replay digests change when NumPy's AVX-512 dispatch is disabled). stepsim computes
every transcendental function that can reach a result through this module instead: glibc's
scalar functions, in float64, element by element (:mod:`stepsim._ground.libm_kernels`). glibc
picks one variant of each for every CPU with AVX2 and FMA, so the bits are the same on
all of them. The cost is speed (a scalar call per element): hot float32 paths of
the transformer use stepsim's own vectorised exp instead (:mod:`stepsim.nn._kernels`).

Every function takes an array (any shape; float32 results for float32 input, float64
otherwise) or a Python/NumPy scalar (returns a Python float), like the ufunc it replaces.
"""

from __future__ import annotations

import math

import numpy as np


def _apply(name: str, *arrays):
    """Run kernel ``name`` over broadcast float arrays; the result's dtype: float32 when
    every input is float32, else float64."""
    from stepsim._ground import libm_kernels as K

    arrays = [np.asarray(a) for a in arrays]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    dtype = (np.float32 if all(a.dtype == np.float32 for a in arrays) else np.float64)
    flat = [np.ascontiguousarray(np.broadcast_to(a, shape), dtype=np.float64
                                 if a.dtype.kind not in "f" else a.dtype).ravel()
            for a in arrays]
    out = np.empty(shape, dtype=dtype)
    getattr(K, name)(*flat, out.reshape(-1))
    return out


def _is_scalar(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating))


def exp(x):
    """e**x element-wise."""
    return math.exp(x) if _is_scalar(x) else _apply("exp", x)


def expm1(x):
    """e**x - 1 element-wise, accurate near 0."""
    return math.expm1(x) if _is_scalar(x) else _apply("expm1", x)


def log(x):
    """Natural log element-wise (-inf at 0, NaN below, as NumPy)."""
    if _is_scalar(x):
        return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)
    return _apply("log", x)


def tanh(x):
    """tanh element-wise."""
    return math.tanh(x) if _is_scalar(x) else _apply("tanh", x)


def sin(x):
    """sin element-wise (radians)."""
    return math.sin(x) if _is_scalar(x) else _apply("sin", x)


def cos(x):
    """cos element-wise (radians)."""
    return math.cos(x) if _is_scalar(x) else _apply("cos", x)


def power(base, exponent):
    """base ** exponent element-wise (broadcast), like ``np.power`` on floats."""
    if _is_scalar(base) and _is_scalar(exponent):
        return math.pow(base, exponent)
    return _apply("power", base, exponent)


def geomspace(start: float, stop: float, num: int) -> np.ndarray:
    """``np.geomspace(start, stop, num)`` for positive ends (float64), ends exact."""
    out = exp(np.linspace(math.log(start), math.log(stop), num))
    out[0], out[-1] = start, stop
    return out


def logspace(start: float, stop: float, num: int, base: float = 10.0) -> np.ndarray:
    """``np.logspace(start, stop, num, base=base)``: base ** linspace(start, stop, num)."""
    return power(float(base), np.linspace(start, stop, num))
