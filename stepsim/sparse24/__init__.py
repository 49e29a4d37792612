"""2:4 and general N:M compressed storage, a reference mma.sp matmul, and memory accounting.

Modules: :mod:`.layout` (CUTLASS 2:4 compress/decompress, bit-exact with PyTorch),
:mod:`.spmm` (reference sparse matmul, lane/tile inspection), :mod:`.nm_storage` (any N:M),
:mod:`.memory` (model memory calculator, Table 5 of the STEP paper), :mod:`.io`
(save/load), :mod:`.cast` (dtype conversion that refuses overflow). Submodules are imported
on first use so ``import stepsim.sparse24`` is cheap.
"""

from __future__ import annotations

from stepsim._lazy import lazy_exports

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
    "cast_values": "cast",
}


__getattr__, __dir__ = lazy_exports(
    __name__, {name: f"{__name__}.{module}" for name, module in _EXPORTS.items()}, globals()
)

__all__ = list(_EXPORTS)
