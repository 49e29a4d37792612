"""Atomic output: every file stepsim writes appears whole or not at all.

A writer fills a temporary file in the destination's directory (same filesystem), flushes
and fsyncs it, then ``os.replace``s it over the destination — so a kill at any moment,
SIGKILL included, leaves either the previous file or the new one, never a truncated one.
When a result is several files (a JSON that points to an .npz), write the arrays first and
the JSON last: a JSON that exists always points to complete arrays.

Such a pair is two writes, and a kill between them (or a copy of one file and not the
other) can leave a JSON of one run beside the .npz of another. So the pair is tied: the
JSON records :func:`arrays_digest` of the arrays it commits (``"arrays_sha256"``, beside
``"arrays"``, the .npz's name); the writer removes the old JSON (:func:`uncommit`), then
writes the .npz, then the JSON (the commit mark); every reader calls :func:`check_pair`, which
refuses a mismatched pair in one line naming both files. The tie is a digest of the arrays'
content rather than a random id, so equal runs still give equal files, bit for bit.

A reader can also tell a whole file from a damaged one (a copy cut short, a flipped byte):
:func:`read_arrays` reads an .npz checking every array's CRC-32 (zip's own checksum), and a
JSON document may carry a seal (:func:`seal`, ``"document_sha256"``: the SHA-256 of its
content) that :func:`seal_holds` checks — a same-size change of any value is caught.
"""

from __future__ import annotations

import contextlib
import hashlib
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
        mode = 0o666 & ~current_umask()
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


def current_umask() -> int:
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
    # a file object: NumPy never appends its own ".npz"
    with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as f:
        save(f, **arrays)
    return Path(path)


# ------------------------------------------------------------------ JSON + .npz pairs
PAIR_KEY = "arrays_sha256"  # the key, in the JSON's "result", of the digest of its .npz


def arrays_digest(arrays: dict) -> str:
    """SHA-256 (hex) of named arrays: every name, dtype, shape and the bytes, in name order.

    Equal arrays give equal digests whatever the file's zip timestamps or compression, so
    the digest ties a JSON to the *content* of its .npz (see the module docstring).
    """
    import numpy as np

    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.asarray(arrays[name])
        header = json.dumps([name, array.dtype.str, list(array.shape)])
        digest.update(header.encode("utf-8") + b"\0")
        digest.update(array.tobytes())  # C order, whatever the array's own layout
    return digest.hexdigest()


def uncommit(json_path) -> None:
    """Remove the JSON of a pair before its .npz is rewritten (a missing file is fine).

    Then a kill between the two writes leaves the new, complete .npz alone (no commit mark)
    instead of beside the previous run's JSON.
    """
    with contextlib.suppress(FileNotFoundError):
        Path(json_path).unlink()


def check_pair(npz_path, arrays: dict | None = None) -> None:
    """Raise ValueError if the JSON beside ``npz_path`` commits other arrays than it holds.

    The JSON is ``npz_path`` with the suffix ``.json``; it is this .npz's partner when its
    ``result.arrays`` names the .npz. Nothing is checked (and nothing raised) when there
    is no such JSON (an .npz alone is complete by itself: it was written atomically), or
    when the JSON predates the tie (no ``result.arrays_sha256``). arrays: the .npz's
    arrays when the caller has read them already (default: read here).
    """
    npz_path = Path(npz_path)
    json_path = npz_path.with_suffix(".json")
    if npz_path.suffix != ".npz" or not json_path.is_file():
        return
    try:
        result = json.loads(json_path.read_text())["result"]
        names_it, recorded = result.get("arrays") == npz_path.name, result.get(PAIR_KEY)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return  # not a stepsim result document: not this .npz's partner
    if not names_it or recorded is None:
        return
    if arrays is None:
        import numpy as np

        with np.load(npz_path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    held = arrays_digest(arrays)
    if held != recorded:
        raise ValueError(f"{json_path} and {npz_path} are not one result: the JSON commits "
                         f"arrays {str(recorded)[:12]}..., the .npz holds {held[:12]}... (a run "
                         "was killed between writing them, or one file was replaced); re-run "
                         "the command that wrote them")


def read_arrays(path) -> dict:
    """Every array of the .npz at ``path`` (name -> array, as ``np.load`` names them), each
    read whole so that zip checks its CRC-32 (``np.load`` may stop reading an array before
    the end of its member, where the check happens). Raises what a damaged file gives
    (``zipfile.BadZipFile``, ``zlib.error``, ``ValueError`` ...); no pickles."""
    import io
    import zipfile

    import numpy as np

    arrays = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                raise ValueError(f"{path}: member {info.filename!r} is not an array")
            raw = archive.read(info)  # the whole member: a CRC-32 mismatch raises here
            arrays[info.filename[:-len(".npy")]] = np.lib.format.read_array(
                io.BytesIO(raw), allow_pickle=False)
    return arrays


# ------------------------------------------------------------------ sealed JSON documents
SEAL_KEY = "document_sha256"  # top-level key of a sealed document: the digest of the rest


def document_digest(document: dict) -> str:
    """SHA-256 (hex) of a JSON document's content without its seal: its canonical JSON
    (sorted keys, no spaces; NaN and Infinity as JSON writes them), so the digest does not
    depend on the file's indentation or key order."""
    body = {k: v for k, v in document.items() if k != SEAL_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seal(document: dict, *, indent: int = 2) -> str:
    """The JSON text of ``document`` (indented), with its seal as the last key.

    document: JSON values as a reader parses them back — string keys, numbers, strings,
    lists (or tuples), None — so that the digest of what is written is the digest of what
    is read (``provenance.to_jsonable`` makes any result so; NumPy scalars are not)."""
    body = {k: v for k, v in document.items() if k != SEAL_KEY}
    return json.dumps({**body, SEAL_KEY: document_digest(body)}, indent=indent) + "\n"


def seal_holds(document: dict) -> bool | None:
    """True when ``document``'s seal matches its content, False when it does not (a value
    changed after it was written), None when it has no seal (written before seals)."""
    recorded = document.get(SEAL_KEY)
    if recorded is None:
        return None
    return recorded == document_digest(document)
