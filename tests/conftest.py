"""Test configuration: hypothesis profiles (``dev`` default, ``ci`` when CI=true)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=60, deadline=None)
# CI: more examples, still bounded; numba compiles on first call, so no per-example deadline.
settings.register_profile(
    "ci", max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
