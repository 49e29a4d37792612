"""Every name ``stepsim`` exports resolves, and ``import stepsim`` stays light."""

import subprocess
import sys

import stepsim


def test_every_export_resolves():
    for name in stepsim.__all__:
        assert getattr(stepsim, name) is not None, name


def test_import_stepsim_loads_no_kernels_or_numba():
    code = ("import sys, stepsim; "
            "print(sorted(m for m in ('numba', 'scipy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_attribute_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        stepsim.nope
