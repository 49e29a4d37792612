"""2:4 and general N:M compressed storage, a reference mma.sp matmul, and memory accounting.

Modules: :mod:`.layout` (CUTLASS 2:4 compress/decompress, bit-exact with PyTorch),
:mod:`.spmm` (reference sparse matmul, lane/tile inspection), :mod:`.nm_storage` (any N:M),
:mod:`.memory` (model memory calculator, Table 5 of the STEP paper), :mod:`.io`
(save/load). Submodules are imported on first use so ``import stepsim.sparse24`` is cheap.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "compress_2to4": "layout",
    "Compressed24": "layout",
    "decompress_2to4": "layout",
    "layout_spec": "layout",
    "meta_offsets": "layout",
    "spmm_2to4": "spmm",
    "explain_tile": "spmm",
    "locate_element": "spmm",
    "round_tf32": "spmm",
    "compress_nm": "nm_storage",
    "decompress_nm": "nm_storage",
    "NMCompressed": "nm_storage",
    "memory_table": "memory",
    "Param": "memory",
    "model_layers": "memory",
    "save_compressed": "io",
    "load_compressed": "io",
}


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'stepsim.sparse24' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"stepsim.sparse24.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))


__all__ = list(_EXPORTS)
