"""stepsim: verify by simulation the theory and claims of STEP and its baselines.

The public API is loaded lazily (PEP 562): ``import stepsim`` is cheap and imports
neither numba nor the kernels; ``stepsim.nm_mask`` imports its module on first use.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    # N:M masks
    "nm_mask": "stepsim.masks",
    "apply_nm": "stepsim.masks",
    "nm_mask_conv": "stepsim.masks",
    "apply_nm_conv": "stepsim.masks",
    # optimizer kernels
    "adam_step": "stepsim.optim",
    "sgdm_step": "stepsim.optim",
    "AdamStats": "stepsim.optim",
}


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'stepsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))


__all__ = list(_EXPORTS)
