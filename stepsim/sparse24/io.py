"""Save and load compressed tensors (2:4 CUTLASS operands and general N:M) as one .npz file.

File layout (``format: "stepsim.sparse/1"``):

* ``__stepsim__``: a JSON string with, per array name, its storage format
  (``"cutlass-2:4"`` or ``"nm"``), dtype name (``"bfloat16"`` for ml_dtypes' bfloat16),
  dense shape, n, m and axis (for a 2:4 operand that is a conv weight's GEMM matrix, also
  the weight's ``tensor_shape``), plus a ``provenance`` block (params, versions, time) from
  :mod:`stepsim._ground.provenance`.
* ``NAME.values``: the stored values as their raw bits (uint8/16/32/64), because .npy
  cannot describe bfloat16 portably; the recorded dtype restores the view on load.
* ``NAME.meta`` (2:4: CUTLASS's reordered words) or ``NAME.indices`` (N:M: packed bits).

Files are written atomically (:mod:`stepsim._ground.atomic`) and loaded with
``allow_pickle=False``; a truncated, corrupt or foreign file, or one missing an array its
header lists, is a one-line ValueError naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from stepsim._ground.bits import unsigned_view
from stepsim.sparse24.layout import Compressed24, layout_spec
from stepsim.sparse24.nm_storage import NMCompressed

__all__ = ["FORMAT", "load_compressed", "save_compressed"]

FORMAT = "stepsim.sparse/1"


def dtype_from_name(name: str) -> np.dtype:
    """np.dtype for a recorded dtype name; "bfloat16" comes from ml_dtypes."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def save_compressed(path, tensors: dict, *, params: dict | None = None, seed=None) -> Path:
    """Write ``tensors`` (name -> Compressed24 | (values, meta) | NMCompressed) to ``path``.

    params/seed: recorded in the provenance block (e.g. the command line's options).
    Returns the path written (``.npz`` is appended by NumPy when missing).
    """
    from stepsim._ground.provenance import provenance, to_jsonable

    if not isinstance(tensors, dict) or not tensors:
        raise TypeError("tensors must be a non-empty dict of name -> compressed tensor")
    arrays, info = {}, {}
    for name, t in tensors.items():
        if not isinstance(name, str) or not name or name.startswith("__"):
            raise ValueError(f"invalid tensor name {name!r}")
        if isinstance(t, tuple) and len(t) == 2:
            t = Compressed24(*t)
        if isinstance(t, Compressed24):
            layout_spec(t.values.dtype)  # refuses dtypes the layout does not know
            arrays[f"{name}.values"] = unsigned_view(t.values)
            arrays[f"{name}.meta"] = t.meta
            n, m = (1, 2) if t.dtype == np.float32 else (2, 4)  # tf32 is 1:2 in this layout
            info[name] = {"format": "cutlass-2:4", "dtype": t.dtype.name, "shape": list(t.shape),
                          "n": n, "m": m, "axis": 1, "meta_dtype": t.meta.dtype.name}
            if t.tensor_shape is not None:  # the operand is this weight's GEMM matrix
                info[name]["tensor_shape"] = list(t.tensor_shape)
        elif isinstance(t, NMCompressed):
            arrays[f"{name}.values"] = unsigned_view(t.values)
            arrays[f"{name}.indices"] = t.indices
            info[name] = {"format": "nm", "dtype": t.dtype.name, "shape": list(t.shape),
                          "n": t.n, "m": t.m, "axis": t.axis}
        else:
            raise TypeError(f"tensors[{name!r}] must be Compressed24, (values, meta) or "
                            f"NMCompressed, got {type(t).__name__}")
    from stepsim._ground.atomic import savez

    header = {"format": FORMAT, "tensors": info, "provenance": provenance(params, seed)}
    arrays["__stepsim__"] = np.array(json.dumps(to_jsonable(header)))
    path = Path(path)
    if path.suffix != ".npz":  # what np.savez did; kept so existing callers find their file
        path = path.with_name(path.name + ".npz")
    return savez(path, compressed=False, **arrays)


def _read(path) -> tuple[dict, dict]:
    """(header, arrays) of a compressed file, every failure a ValueError naming ``path``."""
    from stepsim._ground.validate import load_arrays

    if Path(path).suffix != ".npz":
        raise ValueError(f"compressed file must be a .npz file, got {Path(path).name}")
    arrays = load_arrays(path, what="compressed file")
    if "__stepsim__" not in arrays:
        raise ValueError(f"{path} is not a stepsim compressed file (no __stepsim__ header)")
    try:
        header = json.loads(str(arrays.pop("__stepsim__")))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: corrupt __stepsim__ header ({exc})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        found = header.get("format") if isinstance(header, dict) else header
        raise ValueError(f"{path}: unknown format {found!r}, expected {FORMAT!r}")
    if not isinstance(header.get("tensors"), dict):
        raise ValueError(f"{path}: the header lists no tensors")  # noqa: TRY004  (a bad file)
    return header, arrays


def load_header(path) -> dict:
    """The JSON header of a file written by :func:`save_compressed`."""
    return _read(path)[0]


def load_compressed(path) -> dict:
    """Read a file written by :func:`save_compressed`: name -> Compressed24 | NMCompressed."""
    header, arrays = _read(path)
    out = {}
    for name, info in header["tensors"].items():
        try:
            kind = info["format"]
            parts = ("values", "meta") if kind == "cutlass-2:4" else ("values", "indices")
            missing = [f"{name}.{p}" for p in parts if f"{name}.{p}" not in arrays]
            if missing:
                raise ValueError(f"{path}: the header lists {name!r} but the file has no "
                                 f"{', '.join(missing)}")
            dtype = dtype_from_name(info["dtype"])
            values = arrays[f"{name}.values"].view(dtype)
            if kind == "cutlass-2:4":
                tensor_shape = info.get("tensor_shape")
                t = Compressed24(values, arrays[f"{name}.meta"],
                                 None if tensor_shape is None else tuple(tensor_shape))
                if list(t.shape) != info["shape"]:
                    raise ValueError(f"{path}: {name} has shape {t.shape}, header says "
                                     f"{info['shape']}")
            elif kind == "nm":
                t = NMCompressed(values, arrays[f"{name}.indices"], tuple(info["shape"]),
                                 int(info["n"]), int(info["m"]), int(info["axis"]))
            else:
                raise ValueError(f"{path}: {name} has unknown storage format {kind!r}")
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: header entry of {name!r} is incomplete or malformed "
                             f"({type(exc).__name__}: {exc})") from None
        out[name] = t
    return out
