"""stepsim compress: store arrays N:M-compressed (CUTLASS 2:4 layout when it applies)."""

from __future__ import annotations

from stepsim.cli.args import integer, nm, output_path

HELP = "compress .npy/.npz weights to N:M storage (2:4 in CUTLASS's layout) and report bytes saved"

_DTYPES = {"keep": None, "fp16": "float16", "bf16": "bfloat16", "fp32": "float32",
           "tf32": "float32", "int8": "int8"}


def add_arguments(parser) -> None:
    parser.add_argument("input", metavar="IN", help="a .npy array or a .npz of arrays")
    parser.add_argument("--nm", type=nm, default=(2, 4), metavar="N:M",
                        help="keep N of every M consecutive entries along --axis (default 2:4)")
    parser.add_argument("--dtype", default="keep", choices=sorted(_DTYPES),
                        help="store values as this dtype (default: the input's; int8 needs "
                             "int8 input)")
    parser.add_argument("--format", default="auto", choices=("auto", "cutlass", "nm"),
                        help="auto: CUTLASS's 2:4 layout for 2-D fp16/bf16/int8 at 2:4 and fp32 at "
                             "1:2 when the shape fits, else general N:M storage")
    parser.add_argument("--axis", type=integer, default=-1,
                        help="axis the groups run along (default -1; the CUTLASS layout needs "
                             "-1, and takes a weight of 3 or more dimensions, e.g. a conv "
                             "weight (out, k, in), as its GEMM matrix (out, k * in))")
    parser.add_argument("--keys", action="append", metavar="NAME",
                        help="compress only this array of an .npz (repeatable). Default: every "
                             "array, except for a `stepsim train` result (arrays named weights/*), "
                             "where it is the weight matrices (2-D and up) whose --axis M "
                             "divides and nothing else")
    parser.add_argument("--verify", action="store_true",
                        help="multiply every stored array with a random B (seed 0): 2:4 arrays "
                             "through spmm_2to4 straight from the compressed operands, others "
                             "after decompression, and print the error against the dense matmul")
    parser.add_argument("--saturate", action="store_true",
                        help="with --dtype: clip values beyond the dtype's range to its largest "
                             "finite value (default: refuse them, naming the largest |value|)")
    parser.add_argument("--flush-to-zero", action="store_true",
                        help="with --dtype: store nonzero values below the dtype's smallest "
                             "subnormal as 0 (default: refuse them, naming the smallest "
                             "nonzero |value|)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.npz",
                        help="file to write (.npz; not the input)")


def _load_inputs(path):
    from stepsim._ground.atomic import check_pair
    from stepsim._ground.validate import load_arrays

    inputs = load_arrays(path, what="input file")
    check_pair(path, inputs)  # a `stepsim train` .npz must be the one its JSON commits
    return inputs


def _select(inputs: dict, keys, m: int = 1, axis: int = -1) -> dict:
    """The arrays to compress: ``keys`` if given, else see the --keys help (a `stepsim
    train` result's weights along whose ``axis`` groups of ``m`` fit: a CNN's first conv,
    (out, k, 1), was trained dense and no group of M input channels tiles it)."""
    if "__stepsim__" in inputs:
        raise ValueError("the input is already a stepsim compressed file; read it with "
                         "stepsim.sparse24.load_compressed")
    if keys:
        missing = [k for k in keys if k not in inputs]
        if missing:
            raise ValueError(f"--keys {missing} not in the input; it holds {sorted(inputs)}")
        return {k: inputs[k] for k in keys}
    weights = {k: a for k, a in inputs.items() if k.startswith("weights/")}
    if weights:  # a `stepsim train` result: its learned weight matrices, not trace or biases
        return {k: a for k, a in weights.items()
                if a.ndim >= 2 and -a.ndim <= axis < a.ndim and a.shape[axis] % m == 0}
    return inputs


def _verify(name, array, stored, rng) -> str:
    """Multiply the stored operand with a random B; the error against the dense matmul."""
    import numpy as np

    from stepsim.sparse24.layout import Compressed24
    from stepsim.sparse24.nm_storage import decompress_nm
    from stepsim.sparse24.spmm import spmm_2to4

    dense2d = array.reshape(-1, array.shape[-1])
    if isinstance(stored, Compressed24):
        dense2d = array.reshape(stored.shape)  # the operand: a conv weight's GEMM matrix
        if array.dtype == np.int8:
            b = rng.integers(-8, 8, size=(stored.shape[1], 8)).astype(np.int8)
            expected = dense2d.astype(np.int64) @ b.astype(np.int64)
        else:
            b = rng.standard_normal((stored.shape[1], 8)).astype(array.dtype)
            expected = dense2d.astype(np.float64) @ b.astype(np.float64)
        got = spmm_2to4(stored.values, stored.meta, b, tf32="none")
        how = "spmm_2to4 from the compressed operands"
    else:
        restored = decompress_nm(stored)
        if not np.array_equal(restored, array):
            raise ValueError(f"{name}: N:M round trip is not exact")
        b = rng.standard_normal((array.shape[-1], 8))
        expected = dense2d.astype(np.float64) @ b
        got = restored.reshape(-1, array.shape[-1]).astype(np.float64) @ b
        how = "dense matmul after an exact round trip"
    err = float(np.max(np.abs(got - expected))) if expected.size else 0.0
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    return f"  verify {name}: {how}: max |error| {err:.3g} (max |A@B| {scale:.3g})"


def _convert(name, array, dtype_name, saturate, flush_to_zero):
    """``array`` in the --dtype; overflow is an error unless --saturate, underflow to 0 unless
    --flush-to-zero (stepsim.sparse24.cast)."""
    import numpy as np

    from stepsim.sparse24.cast import cast_values
    from stepsim.sparse24.io import dtype_from_name

    if dtype_name is None:
        return array
    target = dtype_from_name(dtype_name)
    if array.dtype == target:
        return array
    if target == np.int8:
        raise ValueError(f"{name}: --dtype int8 needs int8 input (stepsim does not quantize), "
                         f"got {array.dtype}")
    return cast_values(array, target, saturate=saturate, flush_to_zero=flush_to_zero, name=name)


def _masked(name, array, n, m, axis):
    """``array`` with its N:M mask applied if some group holds more than n non-zeros."""
    import numpy as np

    from stepsim import nm_mask

    moved = np.moveaxis(array, axis, -1)
    if moved.shape[-1] % m:
        raise ValueError(f"{name}: shape {array.shape} has length {moved.shape[-1]} along axis "
                         f"{axis}, not divisible by m = {m} (choose another --axis)")
    counts = (moved.reshape(-1, m) != 0).sum(axis=1)
    if counts.size == 0 or counts.max() <= n:
        return array, False
    floats = (np.float16, np.float32, np.float64)
    scores = array if array.dtype in floats else array.astype(np.float64)
    mask = nm_mask(np.ascontiguousarray(scores), n, m, axis=axis)
    return np.where(mask, array, np.zeros((), dtype=array.dtype)), True


def _cutlass_ok(array, n, m, axis):
    """(whether the CUTLASS 2:4 layout takes ``array``, why not): a 2-D array, or a weight
    of more dimensions grouped along its last axis as its GEMM matrix (shape[0],
    prod(shape[1:])) -- a 1-D conv weight (out, k, in), input channels innermost -- at the
    dtype's N:M and shape multiples."""
    from stepsim.core.transposable import gemm_shape
    from stepsim.sparse24.layout import layout_spec

    try:
        spec = layout_spec(array.dtype)
    except TypeError:
        return False, "dtype"
    want = (1, 2) if spec.name == "float32" else (2, 4)
    if (n, m) != want or spec.name == "uint16":
        return False, f"{spec.name} in the CUTLASS layout is {want[0]}:{want[1]}"
    if array.ndim < 2 or axis not in (-1, array.ndim - 1):
        return False, "needs an array of 2 or more dimensions grouped along its last axis"
    rows, cols = gemm_shape(array.shape)  # a conv weight (out, k, in): (out, k * in)
    if rows % spec.m_multiple or cols % spec.k_multiple or rows == 0:
        return False, (f"GEMM shape {(rows, cols)} is not a multiple of ({spec.m_multiple}, "
                       f"{spec.k_multiple})")
    return True, ""


def _transposable_note(array, n, m, axis) -> str:
    """Whether the stored mask (the non-zeros) of an array's GEMM matrix (a 2-D array
    itself, a conv weight (out, k, in) as (out, k * in)) is N:M along its columns too, so
    that W^T is N:M sparse as well (a transposable mask, e.g. from a recipe trained with
    transposable=True); "" for other shapes or groupings."""
    from stepsim.core.transposable import is_transposable

    if array.ndim < 2 or axis not in (-1, array.ndim - 1):
        return ""
    yes = is_transposable(array != 0, n, m)
    return f"; mask transposable ({n}:{m} along both axes)" if yes else \
        "; mask not transposable"


def run(args) -> int:
    import numpy as np

    from stepsim._ground.validate import check_finite_array
    from stepsim.sparse24.io import save_compressed
    from stepsim.sparse24.layout import Compressed24
    from stepsim.sparse24.nm_storage import compress_nm

    n, m = args.nm
    # the output is checked before anything is read or computed; never the input itself
    output = output_path(args.output, option="-o", suffixes=(".npz",), inputs=(args.input,))
    for flag, given in (("--saturate", args.saturate), ("--flush-to-zero", args.flush_to_zero)):
        if given and args.dtype == "keep":
            raise ValueError(f"{flag} applies to a conversion; give --dtype too")
    inputs = _load_inputs(args.input)
    selected = _select(inputs, args.keys, m, args.axis)
    skipped = sorted(set(inputs) - set(selected))
    if skipped:
        print(f"not compressed: {', '.join(skipped)}")
    out, total_dense, total_stored, checks = {}, 0, 0, []
    rng = np.random.default_rng(0)
    for name, array in selected.items():
        if array.dtype.kind not in "fiu" and array.dtype.name != "bfloat16":
            raise ValueError(f"{name} in {args.input} has dtype {array.dtype}; only real "
                             f"numeric arrays (float, bfloat16, int) can be N:M compressed")
        if array.ndim == 0:
            raise ValueError(f"{name}: a 0-d array cannot be N:M compressed")
        if not -array.ndim <= args.axis < array.ndim:
            raise ValueError(f"--axis {args.axis} is out of range for {name}, shape "
                             f"{array.shape}")
        # NaN/inf weights have no N:M mask and multiply to garbage: refuse them whether or
        # not the array needs masking (a train result's weights are already N:M sparse)
        check_finite_array(f"{name} in {args.input}", array)
        array = _convert(name, array, _DTYPES[args.dtype], args.saturate, args.flush_to_zero)
        array, masked = _masked(name, array, n, m, args.axis)
        ok, why = _cutlass_ok(array, n, m, args.axis)
        if args.format == "cutlass" and not ok:
            raise ValueError(f"{name}: the CUTLASS layout does not apply: {why}")
        if ok and args.format != "nm":
            stored = Compressed24.from_dense(array)
            fmt = f"CUTLASS {n}:{m} layout" + (
                "" if array.ndim == 2 else f" of its GEMM matrix {stored.shape}")
        else:
            stored = compress_nm(array, n, m, axis=args.axis)
            fmt = f"nm {n}:{m}"
        out[name] = stored
        if args.verify:
            checks.append(_verify(name, array, stored, rng))
        dense_bytes = array.nbytes
        total_dense += dense_bytes
        total_stored += stored.nbytes
        saved = 100 * (1 - stored.nbytes / max(dense_bytes, 1))
        print(f"{name}: {tuple(array.shape)} {array.dtype} -> {fmt}"
              f"{' (masked)' if masked else ''}: {dense_bytes:,} B dense, {stored.nbytes:,} B "
              f"stored, saved {dense_bytes - stored.nbytes:,} B ({saved:.1f}%)"
              f"{_transposable_note(array, n, m, args.axis)}")
    for line in checks:
        print(line)
    params = {"input": str(args.input), "nm": f"{n}:{m}", "dtype": args.dtype,
              "format": args.format, "axis": args.axis, "keys": sorted(selected),
              "saturate": args.saturate, "flush_to_zero": args.flush_to_zero}
    path = save_compressed(output, out, params=params)
    saved = 100 * (1 - total_stored / max(total_dense, 1))
    print(f"total: {total_dense:,} B dense -> {total_stored:,} B stored, saved "
          f"{total_dense - total_stored:,} B ({saved:.1f}%); wrote {path}")
    return 0
