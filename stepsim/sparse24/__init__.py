"""2:4 and general N:M compressed storage, a reference mma.sp matmul, and memory accounting.

Modules: :mod:`.layout` (CUTLASS 2:4 compress/decompress, bit-exact with PyTorch),
:mod:`.spmm` (reference sparse matmul, lane/tile inspection), :mod:`.nm_storage` (any N:M),
:mod:`.memory` (model memory calculator, Table 5 of the STEP paper), :mod:`.io`
(save/load), :mod:`.cast` (dtype conversion that refuses overflow). Submodules are imported
on first use so ``import stepsim.sparse24`` is cheap.

What is supported: float16, bfloat16 (``ml_dtypes``), int8 (int32 metadata, m16n8k64, an
exact integer matmul) and float32/tf32 (1:2 pairs) in CUTLASS's 2:4 layout;
``meta.view(np.int16)`` equals PyTorch's ``sparse_semi_structured_from_dense_cutlass``
bit for bit. Any other N:M goes to the general storage: ``compress_nm(x, 1, 16)``.
``explain_tile(values, meta, 0, 0)`` prints one tile's per-lane metadata registers (hex) and
values.

Bad input is refused in one line: ``stepsim compress`` refuses NaN/inf weights (also inside
a ``stepsim train`` result); a ``--dtype`` conversion that would overflow names the largest
|value| and the dtype's range (``--saturate``, i.e. ``cast_values(..., saturate=True)``,
clips to the largest finite value instead); ``spmm_2to4`` refuses metadata nibbles PTX does
not define, as ``decompress_2to4`` does; a missing, truncated or foreign ``.npz``, or one
missing an array, names the file.

From a trained run to the hardware layout, and the paper's Table 5::

    stepsim train --recipe step --steps 500 --d-in 64 --d-hidden 32 --dtype float32 --json run.json
    stepsim compress run.npz --nm 2:4 --dtype fp16 --verify -o run_24.npz   # the learned weights
    stepsim memory --model bert-base            # every tensor + metadata, and Table 5's verdicts
    stepsim memory --model gpt2 --counted paper --metadata none

``--verify`` multiplies every stored array by a random B: 2:4 arrays through
:func:`spmm_2to4` straight from the compressed operands. The write-up of Table 5 is
``paper_checks/table5_memory.md``.
"""

from __future__ import annotations

from stepsim._ground.lazy import lazy_exports

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
