"""Bench section: 2:4 compression throughput and the reference mma.sp matmul beside NumPy.

Compression rows give GB/s for the bytes the conversion must touch (read the dense matrix,
write values and metadata), for the numba kernels and their NumPy references. Matmul rows
give ns per multiply-accumulate of the sparse product (m * n * k/2 MACs) for the numba
kernel, its NumPy reference, and NumPy's dense matmul of the same (m, k) x (k, n) shape in
float32 (OpenBLAS) or int32 (no BLAS), with the kernel's time as a ratio to the dense
matmul's. On a shared 2-core host, parallel numba and OpenBLAS threads suffer badly from
oversubscription: compare rows taken with
``OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1`` when other jobs run.
"""

from __future__ import annotations

from functools import partial

import numpy as np

TITLE = "layout: 2:4 compress / decompress (CUTLASS layout) and reference mma.sp matmul"


def _sparse(rng, dtype, m, k):
    from stepsim import apply_nm

    if np.dtype(dtype) == np.int8:
        x = rng.integers(-128, 128, size=(m, k)).astype(np.int8)
        keep = apply_nm(rng.standard_normal((m, k)).astype(np.float32), 2, 4) != 0
        return np.where(keep, x, np.int8(0))
    return apply_nm(rng.standard_normal((m, k)).astype(np.float32), 2, 4).astype(dtype)


def run(bench) -> None:
    from stepsim.sparse24.layout import compress_2to4, decompress_2to4
    from stepsim.sparse24.spmm import spmm_2to4

    rng = np.random.default_rng(0)
    reps = 3 if bench.quick else 7
    # ---- compression throughput
    size = (512, 1024) if bench.quick else (4096, 4096)
    for dtype in (np.float16, np.int8):
        dense = _sparse(rng, dtype, *size)
        values, meta = compress_2to4(dense)
        moved = dense.nbytes + values.nbytes + meta.nbytes
        impls = {
            "compress numba": partial(compress_2to4, dense),
            "compress numpy ref": partial(compress_2to4, dense, impl="numpy"),
            "decompress numba": partial(decompress_2to4, values, meta),
            "decompress numpy ref": partial(decompress_2to4, values, meta, impl="numpy"),
        }
        t = bench.compare(impls, repeats=reps)
        case = f"{np.dtype(dtype).name} {size[0]}x{size[1]}"
        for impl, seconds in t.items():
            ref = t[impl.split()[0] + " numpy ref"]
            faster = f"{ref / seconds:.1f}x faster than numpy"
            extra = {} if impl.endswith("ref") else {"ratio": faster}
            bench.emit("layout", case, impl, seconds, units=dense.size, bytes_moved=moved,
                       **extra)
    # ---- matmul
    m, k, n = (128, 256, 64) if bench.quick else (1024, 1024, 256)
    for dtype in (np.float16, np.int8):
        a = _sparse(rng, dtype, m, k)
        values, meta = compress_2to4(a)
        if np.dtype(dtype) == np.int8:
            b = rng.integers(-128, 128, size=(k, n)).astype(np.int8)
            a_acc, b_acc = a.astype(np.int32), b.astype(np.int32)
            dense_name = "numpy dense int32"
        else:
            b = rng.standard_normal((k, n)).astype(dtype)
            a_acc, b_acc = a.astype(np.float32), b.astype(np.float32)
            dense_name = "numpy dense f32 (BLAS)"
        impls = {
            "spmm numba": partial(spmm_2to4, values, meta, b),
            "spmm numpy ref": partial(spmm_2to4, values, meta, b, impl="numpy"),
            dense_name: partial(np.matmul, a_acc, b_acc),
        }
        # the dense BLAS row swings widely between runs on a shared host: repeat until its
        # spread is within the limit, or let its row say it is noise
        t = bench.compare_until_stable(impls, dense_name, repeats=reps)
        macs = m * n * k // 2
        case = f"{np.dtype(dtype).name} {m}x{k}x{n}"
        for name, seconds in t.items():
            r = seconds / t[dense_name]
            text = f"{r:.1f}x dense time" if r >= 1 else f"{1 / r:.1f}x faster than dense"
            extra = {} if name == dense_name else {"ratio": text}
            bench.emit("layout", case, name, seconds, units=macs, unit="MAC", **extra)
