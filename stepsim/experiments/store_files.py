"""The files of a run store (:class:`~stepsim.experiments.store.RunStore`), judged whole or
damaged; damaged ones are set aside in ``damaged/`` — moved, never deleted.

A stored task (``DIGEST.json``, and for a RunSpec ``DIGEST.npz`` too) is whole when

* its JSON parses, names its digest (``provenance.params.digest``) and matches its seal
  (``document_sha256``: the SHA-256 of its content, :func:`stepsim._ground.atomic.seal`),
  so a changed value is caught, a flipped byte of the same size included;
* a run's .npz reads whole, every array's CRC-32 checked
  (:func:`stepsim._ground.atomic.read_arrays`), and holds exactly the arrays its JSON
  committed (``result.arrays_sha256``, :func:`stepsim._ground.atomic.arrays_digest`).

Stores written before seals existed (no ``document_sha256``) or before the pair was tied
(no ``arrays_sha256``) still load: what a file does not record cannot be checked, so for
them "whole" is what can be verified — the JSON parses and names its digest, and every
array of the .npz reads with a correct CRC-32.

A task with one file of its pair — a JSON whose .npz is gone, an .npz without its JSON (a
lost JSON, or a process killed between the two writes) — is damaged too. A file of the
store's folder that is none of these, nor a writer's temporary (``.DIGEST.*``), nor
``claims/`` or ``damaged/``, is foreign: it is set aside as well, because readers take
every JSON in the folder for a result (a check counts them). Other hidden files (a sync
tool's) are left alone.

``damaged/`` keeps each set-aside file under its own name (``.1``, ``.2`` ... before the
suffix when the name is taken there, the same number for both files of a task) and a
``NAME.why`` text beside it: what was wrong, when, and which process moved it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import time
from pathlib import Path

DAMAGED_DIR = "damaged"
CLAIMS_DIR = "claims"
_STORED = re.compile(r"^([0-9a-f]{64})\.(json|npz)$")  # a task's file
_TEMPORARY = re.compile(r"^\.([0-9a-f]{64})\.(json|npz)\.")  # a writer's (atomic_path)


class DamagedRun(OSError):
    """A stored task whose files are not whole.

    root: the store's folder; digest; files: the task's files present (what is set aside);
    label: what is wrong, in a few words ("unreadable .npz"); detail: the error read.
    """

    def __init__(self, root, digest: str, files, label: str, detail: str = ""):
        self.root, self.digest, self.files = Path(root), digest, tuple(files)
        self.label, self.detail = label, detail
        super().__init__(f"run {digest[:16]} in {self.root} is damaged ({self.reason}); "
                         f"the same command sets it aside in {self.root / DAMAGED_DIR} "
                         f"and redoes it")

    @property
    def reason(self) -> str:
        """The label with the error read, if any: "unreadable .npz (BadZipFile: ...)"."""
        return f"{self.label} ({self.detail})" if self.detail else self.label

    def __str__(self) -> str:
        return self.args[0]

    def __reduce__(self):  # an exception crossing a process boundary keeps its fields
        return type(self), (self.root, self.digest, self.files, self.label, self.detail)


class DamagedStore(OSError):
    """A store with damaged runs that a reader refuses (``stepsim report``): one line with
    their count and kinds, the folder, and the command that sets them aside and redoes
    them. root; damaged: the :class:`DamagedRun` of each."""

    def __init__(self, root, damaged, command: str):
        self.root, self.damaged, self.command = Path(root), tuple(damaged), command
        super().__init__(f"{_count(len(self.damaged), 'damaged run')} in {self.root} "
                         f"({_kinds(d.label for d in self.damaged)}); {command} sets them "
                         f"aside in {self.root / DAMAGED_DIR} and redoes them")

    def __str__(self) -> str:
        return self.args[0]

    def __reduce__(self):
        return type(self), (self.root, self.damaged, self.command)


def files_of(root, digest: str) -> tuple[Path, Path]:
    """(JSON, .npz) paths of task ``digest`` in store folder ``root``."""
    root = Path(root)
    return root / f"{digest}.json", root / f"{digest}.npz"


def read(root, digest: str):
    """Task ``digest``'s stored document and, for a run, its arrays (None for a Task),
    verified as the module docstring says: (document, arrays), or None when no file of it
    is stored. Raises :class:`DamagedRun` when it is not whole."""
    from stepsim._ground import atomic

    json_path, npz_path = files_of(root, digest)
    present = [p for p in (json_path, npz_path) if os.path.lexists(p)]
    if not present:
        return None

    def damaged(label, detail=""):
        return DamagedRun(root, digest, present, label, detail)

    if json_path not in present:
        raise damaged(".npz without its .json")
    try:
        if not json_path.is_file():  # a FIFO would block the read
            raise OSError("not a regular file")
        document = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise damaged("unreadable .json", _one_line(exc)) from None
    try:
        params, result = document["provenance"]["params"], document["result"]
        named = params["digest"]
    except (KeyError, TypeError, IndexError):
        raise damaged("unreadable .json", "not a stored result") from None
    if named != digest:
        raise damaged("misplaced .json", f"it names run {str(named)[:16]}")
    if atomic.seal_holds(document) is False:
        raise damaged(".json changed since it was saved", "its checksum does not match")
    if "run" not in params:  # a Task: its JSON is all of it
        return document, None
    if npz_path not in present:
        raise damaged(".json without its .npz")
    try:
        if not npz_path.is_file():
            raise OSError("not a regular file")
        arrays = atomic.read_arrays(npz_path)
    except Exception as exc:  # noqa: BLE001 (a damaged zip raises BadZipFile, zlib.error ...)
        raise damaged("unreadable .npz", f"{type(exc).__name__}: {_one_line(exc)}") from None
    recorded = result.get(atomic.PAIR_KEY) if isinstance(result, dict) else None
    if recorded is not None and atomic.arrays_digest(arrays) != recorded:
        raise damaged(".npz changed since it was saved",
                      "its arrays differ from those its .json committed")
    return document, arrays


def is_temporary(name: str) -> bool:
    """Whether file ``name`` is a writer's temporary (``.DIGEST.json.XXXX.json``)."""
    return _TEMPORARY.match(name) is not None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:160] + ("..." if len(text) > 160 else "")


# ------------------------------------------------------------------ what the folder holds
@dataclasses.dataclass(frozen=True)
class Listing:
    """What a store folder holds: digests (of tasks with a file there), foreign (paths:
    see the module docstring), temporaries (writers' ``.DIGEST.*`` files, in flight or
    left by a killed writer) and set_aside (entries in ``damaged/``)."""

    digests: frozenset
    foreign: tuple
    temporaries: tuple
    set_aside: int


def listing(root) -> Listing:
    """The :class:`Listing` of store folder ``root`` (empty when it does not exist)."""
    root = Path(root)
    digests, foreign, temporaries = set(), [], []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return Listing(frozenset(), (), (), 0)
    for entry in entries:
        name = entry.name
        stored = _STORED.match(name)
        if stored:
            digests.add(stored.group(1))
        elif _TEMPORARY.match(name):
            temporaries.append(Path(entry.path))
        elif name.startswith(".") or (name in (CLAIMS_DIR, DAMAGED_DIR) and entry.is_dir()):
            continue
        else:
            foreign.append(Path(entry.path))
    try:
        aside = sum(1 for p in (root / DAMAGED_DIR).iterdir() if p.suffix != ".why")
    except (FileNotFoundError, NotADirectoryError):
        aside = 0
    return Listing(frozenset(digests), tuple(foreign), tuple(temporaries), aside)


# ------------------------------------------------------------------ setting aside
def set_aside(root, files, why: str, *, note: str | None = None) -> list[Path]:
    """Move ``files`` (entries of store folder ``root``) into ``root/damaged/`` and write
    why beside them (``NOTE.why``; note: default the first file's name, a task's digest
    for its pair); return their new paths. The files of one call share one free number
    when a name is taken there; a file gone meanwhile (another process moved it) is
    skipped, and nothing is written when none was moved."""
    from stepsim._ground.atomic import write_text

    root = Path(root)
    aside = root / DAMAGED_DIR
    aside.mkdir(exist_ok=True)
    files = [Path(f) for f in files]
    note = note or files[0].name
    number = 0
    while any(os.path.lexists(aside / _numbered(name, number))
              for name in [f.name for f in files] + [note + ".why"]):
        number += 1
    moved = []
    for f in files:
        try:
            os.rename(f, aside / _numbered(f.name, number))  # one filesystem: never a copy
        except FileNotFoundError:
            continue
        moved.append(aside / _numbered(f.name, number))
    if moved:
        write_text(aside / _numbered(note + ".why", number),
                   f"{', '.join(f.name for f in files)} set aside from {root} at "
                   f"{time.strftime('%Y-%m-%d %H:%M:%S %z')} by pid {os.getpid()} on "
                   f"{socket.gethostname()}: {why}\n")
    return moved


def _numbered(name: str, number: int) -> str:
    """``name`` with ``.number`` before its first suffix ("D.json" -> "D.2.json"); 0: as is."""
    if number == 0:
        return name
    stem, dot, rest = name.partition(".")
    return f"{stem}.{number}{dot}{rest}" if stem else f"{name}.{number}"


# ------------------------------------------------------------------ what was found
@dataclasses.dataclass(frozen=True)
class Healing:
    """What :meth:`RunStore.heal <stepsim.experiments.store.RunStore.heal>` set aside:
    damaged (:class:`DamagedRun` each) and foreign (paths), in ``root/damaged/``."""

    root: Path
    damaged: tuple = ()
    foreign: tuple = ()

    def __bool__(self) -> bool:
        return bool(self.damaged or self.foreign)

    def line(self) -> str:
        """One line: "2 damaged runs set aside in DIR/damaged (1 unreadable .npz, 1 .json
        without its .npz); redoing them"."""
        parts = []
        if self.damaged:
            parts.append(_count(len(self.damaged), "damaged run"))
        if self.foreign:
            parts.append(_count(len(self.foreign), "foreign file"))
        kinds = _kinds([d.label for d in self.damaged])
        text = f"{' and '.join(parts)} set aside in {self.root / DAMAGED_DIR}"
        if kinds:
            text += f" ({kinds})"
        if self.damaged:
            text += "; redoing " + ("the runs" if self.foreign else
                                    "it" if len(self.damaged) == 1 else "them")
        return text


@dataclasses.dataclass(frozen=True)
class StoreCheck:
    """What :meth:`RunStore.verify <stepsim.experiments.store.RunStore.verify>` read:
    whole (count of whole stored tasks), damaged (:class:`DamagedRun` each), foreign
    (paths), in_flight (tasks another live process is writing now), temporaries (writers'
    leftovers: removed by the next run), set_aside (entries already in ``damaged/``)."""

    root: Path
    whole: int
    damaged: tuple
    foreign: tuple
    in_flight: int = 0
    temporaries: int = 0
    set_aside: int = 0

    @property
    def ok(self) -> bool:
        """Whether the store is whole: no damaged run and no foreign file."""
        return not (self.damaged or self.foreign)

    def lines(self, command: str) -> list[str]:
        """What ``--verify`` prints: a line per damaged run and foreign file, then one
        summary line; command: what heals the store ("the same `stepsim check --out DIR`")."""
        out = [f"damaged  {d.digest}  {d.reason}" for d in self.damaged]
        out += [f"foreign  {p.name}  not a file of this store" for p in self.foreign]
        summary = f"{self.root}: {_count(self.whole, 'stored run')} whole"
        if self.damaged:
            summary += f", {len(self.damaged)} damaged ({_kinds([d.label for d in self.damaged])})"
        if self.foreign:
            summary += f", {_count(len(self.foreign), 'foreign file')}"
        if self.in_flight:
            summary += f", {self.in_flight} being written by another process now"
        if self.temporaries:
            summary += (f", {_count(self.temporaries, 'temporary file')} of a stopped "
                        "writer (removed by the next run)")
        if self.set_aside:
            summary += f"; {_count(self.set_aside, 'file')} set aside earlier in {DAMAGED_DIR}/"
        if self.ok:
            out.append(summary + "; the store is whole")
        else:
            out.append(summary + f"; {command} sets them aside in {self.root / DAMAGED_DIR}"
                       + (" and redoes the damaged runs" if self.damaged else ""))
        return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _kinds(labels) -> str:
    """"1 unreadable .npz, 2 .json without its .npz": labels counted, first seen first."""
    counts = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{n} {label}" for label, n in counts.items())
