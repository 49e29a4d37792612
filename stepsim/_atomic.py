"""Atomic output: every file stepsim writes appears whole or not at all.

A writer fills a temporary file in the destination's directory (same filesystem), flushes
and fsyncs it, then ``os.replace``s it over the destination — so a kill at any moment,
SIGKILL included, leaves either the previous file or the new one, never a truncated one.
When a result is several files (a JSON that points to an .npz), write the arrays first and
the JSON last: a JSON that exists always points to complete arrays.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path, *, suffix: str | None = None):
    """Yield a temporary path beside ``path``; on success it is renamed over ``path``.

    suffix: the temporary file's suffix (default: ``path``'s own, so writers that pick a
    format by extension, e.g. matplotlib's ``savefig`` or ``np.savez``, still do).
    On an exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix or path.suffix or ".tmp",
                               dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    # mkstemp makes the file 0600; give it the mode a plain open() would (0666 less umask),
    # or the destination's own mode when it is being replaced
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    os.chmod(tmp, mode)
    try:
        yield tmp
        with open(tmp, "rb+") as f:  # the writer closed it; make its bytes durable
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(path, data: bytes) -> Path:
    """Atomically write ``data`` to ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path, text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``path``."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path, document, *, indent: int = 2) -> Path:
    """Atomically write ``document`` as JSON (with a trailing newline)."""
    return write_text(path, json.dumps(document, indent=indent) + "\n")


def savez(path, *, compressed: bool = True, **arrays) -> Path:
    """Atomically write ``arrays`` to the .npz ``path`` (NumPy's format, no pickles)."""
    import numpy as np

    save = np.savez_compressed if compressed else np.savez
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as f:  # a file object: NumPy never appends its own ".npz"
            save(f, **arrays)
    return Path(path)
