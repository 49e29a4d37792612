"""Provenance for every result file: seed, parameters and versions, saved beside results.

``save_json(path, payload, params=..., seed=...)`` writes one JSON document with the
payload under ``"result"`` and a ``"provenance"`` block: the parameters, the seed, the
versions of Python, NumPy, SciPy, numba and stepsim, the machine, numba's thread count,
OpenBLAS's kernel family (and so whether the run is portable: stepsim._ground.portability) and
a UTC timestamp. Every command that writes results uses it, so any number stepsim prints
can be traced back to how it was made.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

from stepsim._ground import portability as _portability


def versions() -> dict:
    """Versions of the interpreter and of every package a result can depend on (a new
    dict each call; looked up once per process)."""
    return dict(_versions())


@functools.lru_cache(maxsize=1)
def _versions() -> dict:
    # importlib.metadata scans every sys.path entry for each package: slow, and paid
    # by every saved run (a quick check saves 306); the versions cannot change while a
    # process runs (an upgraded package is not re-imported), so they are read once
    from importlib import metadata

    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for package in ("stepsim", "numpy", "scipy", "numba", "llvmlite", "matplotlib"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = None
    return out


def provenance(params: dict | None = None, seed=None) -> dict:
    """The provenance block: parameters, seed, versions, threads, CPU count and time."""
    info = {
        "params": to_jsonable(params or {}),
        "seed": to_jsonable(seed),
        "versions": versions(),
        "cpu_count": os.cpu_count(),
        "numba_threads": _numba_threads(),
        "portability": _portability.summary(),
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv,
    }
    return info


def _numba_threads():
    if "numba" not in sys.modules:  # do not import numba just to report on it
        return os.environ.get("NUMBA_NUM_THREADS")
    return sys.modules["numba"].get_num_threads()


def to_jsonable(obj):
    """Convert NumPy scalars/arrays, dataclasses, NamedTuples, paths and tuples to JSON types."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple) and hasattr(obj, "_asdict"):
        return {k: to_jsonable(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float) and not np.isfinite(obj):
        return str(obj)  # JSON has no NaN/inf; keep them readable
    if isinstance(obj, Path):
        return str(obj)
    return obj


def save_json(path, payload, *, params: dict | None = None, seed=None,
              seal: bool = False) -> Path:
    """Atomically write ``{"result": payload, "provenance": ...}`` to ``path`` (parents
    created). seal: add the document's content digest (``stepsim._ground.atomic.seal``), so
    a reader can tell a changed value from the one written."""
    from stepsim._ground import atomic

    document = {"result": to_jsonable(payload), "provenance": provenance(params, seed)}
    if not seal:
        return atomic.write_json(path, document)
    return atomic.write_text(path, atomic.seal(document))  # to_jsonable: plain JSON values


def load_json(path) -> dict:
    """Read a document written by :func:`save_json`."""
    return json.loads(Path(path).read_text())
