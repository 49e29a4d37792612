"""Short recorded runs whose bits must not depend on the CPU (``test_cpu_portability.py``).

``python tests/cpu_digests.py`` prints one JSON object: run name -> sha256 of everything
the run produced (weights, trace, switch step, metrics), plus ``_blas_kernel``, the
OpenBLAS kernel family that ran. ``python tests/cpu_digests.py --record`` writes the
digests into ``tests/data/cpu_digests.json``. The runs cover every kind of arithmetic a
result depends on: float64 and float32 matrix products (OpenBLAS), stepsim's numba
kernels (Adam with its statistics, N:M masks, LayerNorm/softmax/GELU, the convolution's
gather and scatter, the products on the kept weights of N:M layers: digits at 1:4, lm at
1:8, the CNN's conv at 1:8 with 32 channels), glibc's libm through stepsim._ground.libm
(softmax cross-entropy, the Markov language, log statistics), the MNIST-1D signals (made
by the mnist1d package with NumPy and SciPy, rounded to float32), and the Theorem 1 engine.
Each takes about a second.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import stepsim  # noqa: F401  (before NumPy, which is imported inside: pins OpenBLAS's kernels)

FIXTURE = Path(__file__).parent / "data" / "cpu_digests.json"


def _hash_result(result) -> str:
    """sha256 over a FitResult's weights, dense weights, trace arrays, switch and metrics."""
    import numpy as np

    h = hashlib.sha256()
    for k in sorted(result.weights):
        h.update(k.encode() + np.ascontiguousarray(result.weights[k]).tobytes())
        h.update(np.ascontiguousarray(result.dense_weights[k]).tobytes())
    for k, v in sorted(result.trace.arrays().items()):
        h.update(k.encode() + np.ascontiguousarray(v).tobytes())
    h.update(repr((result.switch_step, sorted(result.metrics.items()))).encode())
    return h.hexdigest()[:24]


def runs() -> dict:
    """name -> a zero-argument function returning the run's digest."""
    from stepsim.problems import make_problem
    from stepsim.recipes import make_recipe
    from stepsim.recipes.criteria import make_criterion
    from stepsim.training import fit

    def regression(recipe, criterion=None, **options):
        problem = make_problem("regression", d_in=16, d_hidden=8, d_out=4, n_samples=128,
                               n_test=64, batch_size=8, nm=(2, 4), seed=1)
        r = make_recipe(recipe, lr=1e-2, beta2=0.99, eps=1e-6, **options)
        crit = make_criterion(criterion, adam=r.optimizer) if criterion else None
        return _hash_result(fit(problem, r, 240, rng=7, criterion=crit, progress=False,
                                log_stats=True))

    def digits(recipe, **options):
        problem = make_problem("digits", hidden=(64,), nm=(1, 4), batch_size=32)
        r = make_recipe(recipe, lr=1e-3, **options)
        return _hash_result(fit(problem, r, 150, rng=3, progress=False))

    def lm(recipe, nm=(2, 4), **options):
        problem = make_problem("lm", vocab=8, order=2, temperature=1.0, context=16, width=32,
                               blocks=1, heads=2, batch_size=16, n_test=128, nm=nm)
        r = make_recipe(recipe, lr=1e-2, **options)
        return _hash_result(fit(problem, r, 60, rng=5, progress=False))

    def mnist1d(recipe, channels=(8, 8), batch_size=32, nm=(2, 4), **options):
        problem = make_problem("mnist1d", channels=channels, n_train=400, n_validation=100,
                               n_test=100, batch_size=batch_size, nm=nm)
        r = make_recipe(recipe, lr=3e-3, **options)
        return _hash_result(fit(problem, r, 80, rng=9, progress=False))

    def theorem1():
        from stepsim.theorem1.check import check_theorem1

        result = check_theorem1("ar1", trials=64, dim=16, horizon=300, beta2=0.99, seed=2)
        h = hashlib.sha256()
        for row in result.rows:
            h.update(repr(row).encode())
        return h.hexdigest()[:24]

    return {
        "regression/dense": lambda: regression("dense"),
        "regression/sr-ste": lambda: regression("sr-ste"),
        "regression/step+autoswitch": lambda: regression("step", "autoswitch"),
        "digits/dense": lambda: digits("dense"),
        "digits/sr-ste": lambda: digits("sr-ste"),
        "digits/step": lambda: digits("step", switch_at=0.5),
        "lm/sr-ste": lambda: lm("sr-ste"),
        "lm/step": lambda: lm("step", switch_at=0.5),
        "mnist1d/sr-ste": lambda: mnist1d("sr-ste"),
        "mnist1d/step": lambda: mnist1d("step", switch_at=0.5),
        # 1:8: the transformer's products on the kept weights (stepsim.nn.nm_linear)
        "lm/sr-ste 1:8": lambda: lm("sr-ste", nm=(1, 8)),
        # 32 channels, batch 128, 1:8: conv2's products on its kept weights (stepsim.nn.conv)
        "mnist1d/sr-ste 1:8 32ch": lambda: mnist1d("sr-ste", channels=(32, 32),
                                                   batch_size=128, nm=(1, 8)),
        "theorem1/ar1": theorem1,
    }


def digests() -> dict:
    from stepsim._ground import portability as _portability

    out = {name: run() for name, run in runs().items()}
    out["_blas_kernel"] = _portability.blas_kernel()
    return out


if __name__ == "__main__":
    data = digests()
    if "--record" in sys.argv[1:]:
        from stepsim._ground.atomic import write_json

        write_json(FIXTURE, {k: v for k, v in data.items() if not k.startswith("_")})
        print(f"recorded {len(data) - 1} digests into {FIXTURE}", file=sys.stderr)
    print(json.dumps(data, sort_keys=True))
