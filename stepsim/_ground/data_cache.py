"""Generated data kept on disk, so that a process reads what another one made instead of
making it again (MNIST-1D's signals: :func:`stepsim.problems.mnist1d.generate`).

Every process that builds such a problem (a check's, each worker of its pool, a dry run's)
would otherwise make the same arrays again. :func:`cached` keeps them in one .npz per
``key`` in :func:`cache_dir`:

* **where**: ``$STEPSIM_DATA_CACHE`` (a directory; ``off`` turns the cache off), else
  ``$XDG_CACHE_HOME/stepsim/data``, else ``~/.cache/stepsim/data``;
* **what**: the arrays, the key (JSON) they were made for and the SHA-256 of their
  content (:func:`stepsim._ground.atomic.arrays_digest`). A file is used only when it
  reads whole (zip's CRC-32 of every array), holds exactly this key and its arrays still
  have the recorded digest; anything else (a damaged file, a hash collision of the name, a
  file of another format) is made again and written over. So a cache can only save time:
  what a reader gets is what ``make()`` returned when the file was written, for the same
  key. The key names everything the arrays depend on (for MNIST-1D: the generator's
  arguments and the versions of the packages that make them); a new version of any of
  them is another key, another file;
* **how**: written atomically (a temporary file renamed), so two processes that make the
  same arrays at once each leave a whole file; a directory that cannot be written (a
  read-only home) leaves the arrays uncached, said once a process on stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

ENV = "STEPSIM_DATA_CACHE"
OFF = "off"
_KEY, _DIGEST = "__key__", "__sha256__"  # the file's own entries beside the arrays


def cache_dir() -> Path | None:
    """The cache's directory (module docstring), or None when ``STEPSIM_DATA_CACHE=off``."""
    chosen = os.environ.get(ENV, "").strip()
    if chosen.lower() == OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join("~", ".cache")
    return Path(base).expanduser() / "stepsim" / "data"


def key_text(key: dict) -> str:
    """The canonical JSON of ``key`` (sorted keys, no spaces): what a file must hold."""
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


def path_for(name: str, key: dict) -> Path | None:
    """The file ``name``'s arrays for ``key`` live in (None: the cache is off)."""
    folder = cache_dir()
    if folder is None:
        return None
    return folder / f"{name}-{hashlib.sha256(key_text(key).encode()).hexdigest()[:20]}.npz"


def _read(path: Path, key: dict) -> dict | None:
    """The arrays of ``path`` if it is whole and holds ``key``'s arrays, else None."""
    from stepsim._ground.atomic import arrays_digest, read_arrays

    try:
        held = read_arrays(path)
    except Exception:  # noqa: BLE001 - missing, damaged or not ours: make the arrays again
        return None
    key_held, digest = held.pop(_KEY, None), held.pop(_DIGEST, None)
    if key_held is None or digest is None or str(key_held) != key_text(key):
        return None
    if str(digest) != arrays_digest(held):
        return None
    return held


def cached(name: str, key: dict, make) -> dict:
    """``make()``'s arrays (a dict name -> ndarray) for ``key``: read from the cache when a
    whole file holds them, else made, written to the cache (when it can be) and returned.
    ``name`` is a readable prefix of the file's name; ``key`` (JSON-ready) must name
    everything the arrays depend on."""
    import numpy as np

    from stepsim._ground.atomic import arrays_digest, savez

    path = path_for(name, key)
    if path is not None:
        held = _read(path, key)
        if held is not None:
            return held
    arrays = make()
    if path is not None:
        entries = {_KEY: np.array(key_text(key)), _DIGEST: np.array(arrays_digest(arrays))}
        try:
            savez(path, compressed=False, **arrays, **entries)
        except OSError as error:  # the arrays are made again by the next process
            from stepsim._ground.jit import say_once

            say_once(f"stepsim: cannot keep generated data in {path.parent} ({error}); each "
                     f"process makes it again (set {ENV} to a writable directory, or to "
                     f"{OFF} to silence this)")
    return arrays
