"""Test configuration: stepsim's BLAS pin first, then hypothesis profiles (``dev``
default, ``ci`` when CI=true)."""

import os
import sys

# Before any test module imports NumPy: importing stepsim pins OpenBLAS's kernel family
# (stepsim._portability), which only works if OpenBLAS has not been loaded yet. If a
# plugin loaded NumPy first, the replay fixtures would be compared against CPU-specific
# matmul bits: say so loudly instead of failing obscurely.
_numpy_first = "numpy" in sys.modules
import stepsim  # noqa: F401

if _numpy_first:
    from stepsim import _portability

    if not _portability.portable():
        sys.stderr.write("conftest: NumPy was loaded before stepsim (by a pytest plugin?): "
                         "OpenBLAS is not pinned, and bit-for-bit replays may fail\n")

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=60, deadline=None)
# CI: more examples, still bounded; numba compiles on first call, so no per-example deadline.
settings.register_profile(
    "ci", max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
