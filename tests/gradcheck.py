"""Central finite differences, the reference every hand-written backward is checked against."""

import numpy as np


def numeric_grad(f, x, h=1e-6):
    """d f / d x by central differences: f() a scalar function of the array x, which is
    perturbed in place one entry at a time and restored. Use float64."""
    grad = np.zeros_like(x)
    flat, gflat = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + h
        plus = f()
        flat[i] = old - h
        minus = f()
        flat[i] = old
        gflat[i] = (plus - minus) / (2 * h)
    return grad
