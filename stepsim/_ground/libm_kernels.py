"""numba loops over glibc's scalar functions. Private: call :mod:`stepsim._ground.libm`.

Each kernel evaluates one function element by element, in float64, over flat arrays and
writes into ``out`` (float32 ``out`` rounds once). The loops call libm (``math.exp`` is a
call to glibc's ``exp``): numba has no vector library here (SVML is disabled by
:mod:`stepsim._ground.portability`), so LLVM cannot swap in a CPU-specific SIMD version.
"""

from __future__ import annotations

import math

import numpy as np

from stepsim._ground.jit import njit


@njit
def exp(x, out):
    for i in range(x.shape[0]):
        out[i] = math.exp(np.float64(x[i]))


@njit
def log(x, out):
    for i in range(x.shape[0]):
        out[i] = math.log(np.float64(x[i])) if x[i] > 0 else (
            -np.inf if x[i] == 0 else np.nan)


@njit
def expm1(x, out):
    for i in range(x.shape[0]):
        out[i] = math.expm1(np.float64(x[i]))


@njit
def tanh(x, out):
    for i in range(x.shape[0]):
        out[i] = math.tanh(np.float64(x[i]))


@njit
def sin(x, out):
    for i in range(x.shape[0]):
        out[i] = math.sin(np.float64(x[i]))


@njit
def cos(x, out):
    for i in range(x.shape[0]):
        out[i] = math.cos(np.float64(x[i]))


@njit
def power(base, exponent, out):
    for i in range(base.shape[0]):
        out[i] = math.pow(np.float64(base[i]), np.float64(exponent[i]))
