"""Option parsers shared by the subcommands (standard library only: imported at parse time).

* :func:`nm` — an argparse ``type=`` for "N:M" options;
* :func:`seed`, :func:`positive_int`, :func:`integer`, :func:`number`, :func:`finite_float` —
  argparse ``type=`` for numbers, so a bad value is reported with the option's name;
* :func:`value` — the one grammar of a ``KEY=VALUE`` value (``-p``, ``-o``, ``-c``,
  ``--grid`` in train, sweep and check);
* :func:`key_values` — repeatable ``KEY=VALUE`` options into a dict;
* :func:`output_path`, :func:`output_dir` — check an output file or directory before any
  work starts;
* :func:`add_quiet` — the ``--quiet`` option of the long commands;
* :func:`run_params` — the parsed options as the ``params`` of a result file;
* :func:`registry_names` — the names of a registry (problems, recipes, ...) for help texts.
"""

from __future__ import annotations

import argparse
import ast
import functools
import math
import os
import tempfile
from pathlib import Path


class OptionError(argparse.ArgumentTypeError, ValueError):
    """A bad option value. argparse prints it after the option's name ("argument --nm: ...");
    called outside argparse it is a ValueError like any other bad input."""


def nm(text: str):
    """"N:M" (e.g. "2:4") -> :class:`~stepsim._ground.validate.NMRatio` (n, m), 1 <= n <= m;
    usable as argparse ``type=``.

    Raises :class:`OptionError` (a ValueError); argparse names the option in its message.
    """
    parts = text.split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise OptionError(f"must look like N:M (e.g. 2:4), got {text!r}")
    from stepsim._ground.validate import NMRatio

    try:  # the run's N:M from here to the kernel: one typed value, checked once, here
        return NMRatio(*(int(p) for p in parts))
    except ValueError:
        raise OptionError(f"needs 1 <= N <= M, got {text!r}") from None


def integer(text: str) -> int:
    """An integer (its range is checked by the API, under the option's name)."""
    try:
        return int(text.strip(), 10)
    except (ValueError, AttributeError):
        raise OptionError(f"must be an integer, got {text!r}") from None


def seed(text: str) -> int:
    """A random seed: an integer >= 0 (NumPy's SeedSequence refuses negatives)."""
    value = integer(text)
    if value < 0:
        raise OptionError(f"a seed must be a non-negative integer, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (a count: steps, trials, a dimension)."""
    value = integer(text)
    if value < 1:
        raise OptionError(f"must be a positive integer, got {text!r}")
    return value


def number(text: str) -> float:
    """A real number; "nan" and "inf" pass, for the API's check of the option's range to
    name them ("--lr must be finite, got nan")."""
    try:
        return float(text)
    except ValueError:
        raise OptionError(f"must be a number, got {text!r}") from None


def finite_float(text: str) -> float:
    """A finite real number ("nan", "inf" refused; ranges are checked by the API)."""
    try:
        value = float(text)
    except ValueError:
        raise OptionError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise OptionError(f"must be a finite number, got {text!r}")
    return value


def value(text: str):
    """A KEY=VALUE value, the same in every subcommand: ``true``/``false``; ``none`` (None);
    an integer; a number; ``N:M`` -> (n, m); ``a,b,...`` -> a tuple of such values
    (``hidden=256,256``; one element: ``hidden=64,``), also written in brackets as a
    Python tuple or list (``hidden=(64,)``, ``nm=(1,4)``); anything else is the string."""
    text = text.strip()
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    if len(text) >= 2 and (text[0], text[-1]) in (("(", ")"), ("[", "]")):
        inner = text[1:-1].strip()
        return tuple(value(part) for part in inner.split(",") if part.strip()) if inner else ()
    if "," in text:
        return tuple(value(part) for part in text.split(",") if part.strip())
    if ":" in text:
        return nm(text)
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def key_values(items, option: str, convert=value) -> dict:
    """Repeatable ``KEY=VALUE`` strings -> {key: convert(value)}.

    items: the option's list (None when never given). option: its name for messages,
    e.g. "--param". Keys are stripped and "-" becomes "_" (``-o weight-decay=0.1`` names
    the keyword ``weight_decay``). An empty value (``hidden=``) is refused, never read as
    an empty string or tuple. A ValueError from ``convert`` is re-raised naming the
    option, the key and the value.
    """
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"{option} must look like KEY=VALUE, got {item!r}")
        if not value.strip():
            raise ValueError(f"{option} {key}: empty value in {item!r}; give KEY=VALUE "
                             f"(or leave the option out for its default)")
        try:
            out[key] = convert(value)
        except ValueError as exc:
            raise ValueError(f"{option} {key}: bad value {value!r} ({exc})") from None
    return out


def output_path(text, *, option: str, suffixes: tuple = (), sidecars: tuple = (),
                inputs: tuple = ()) -> Path | None:
    """Check, before any work starts, that the file an option names can be written.

    text: the option's value (None: not given, returns None). option: its name for
    messages ("--json", "-o"). suffixes: accepted extensions, e.g. (".png",) — a writer
    that picks its format by extension would otherwise write elsewhere (matplotlib saves
    ``DIR`` as ``DIR.png``). sidecars: suffixes of files written beside the output
    (``path.with_suffix(s)``, e.g. train's trace ".npz" beside its JSON); each must be a
    different file from the output. inputs: paths the command reads; the output and its
    sidecars must not replace one of them.

    Refuses, with one line naming the option: an empty path, a directory, a wrong
    extension, an output or sidecar equal to an input or to the output, a directory that
    does not exist (it is never created: a typo in it would scatter outputs), and a
    directory where no file can be created (read-only, not a directory, no space left:
    probed by creating and writing a small temporary file there). Returns the path as a
    Path. Raises :class:`OptionError` (a ValueError).
    """
    if text is None:
        return None
    if not str(text).strip():
        raise OptionError(f"{option}: empty path; give a file name")
    path = Path(text)
    if path.is_dir():
        raise OptionError(f"{option} {text} is a directory; give a file name inside it, e.g. "
                          f"{path / ('result' + (suffixes[0] if suffixes else '.json'))}")
    if suffixes and path.suffix.lower() not in suffixes:
        raise OptionError(f"{option} {text} must end in {' or '.join(suffixes)}")
    for suffix in sidecars:
        beside = path.with_suffix(suffix)
        if _same_file(beside, path):
            raise OptionError(
                f"{option} {text} must not end in {suffix}: the {suffix} file written beside "
                f"it would be {beside} itself; use e.g. {path.with_suffix('.json')}")
    written = [(path, "")] + [(path.with_suffix(s), f" (its {s} file {path.with_suffix(s)})")
                              for s in sidecars]
    for out, what in written:
        for source in inputs:
            if source is not None and _same_file(out, Path(source)):
                raise OptionError(f"{option} {text}{what} is the input file {source}; writing "
                                  f"it would replace the input; choose another name")
        if out.is_dir():
            raise OptionError(f"{option} {text}{what} is a directory")
    _probe_directory(path, option)
    return path


def _same_file(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def output_dir(text, *, option: str, default: bool = False) -> Path:
    """Check, before any work starts, a directory an option names for a command's outputs
    (``--out DIR``): the command makes DIR if it is missing, but not its parent, which must
    exist (a typo there would otherwise create a tree of directories). default: the path
    is the command's own default (e.g. ``sweeps/NAME``), whose missing parents are made.

    Refuses, with one line naming the option: an empty path, a file, a missing parent and
    a place where no file can be written (probed as in :func:`output_path`). Returns the
    path as a Path. Raises :class:`OptionError` (a ValueError).
    """
    if not str(text).strip():  # Path("") is "." (the current directory)
        raise OptionError(f"{option}: empty path; give a directory")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise OptionError(f"{option} {text} is a file, not a directory")
    if path.is_dir():
        _probe_directory(path / "probe", option)
    else:
        _probe_directory(path, option, make_parents=default)
    return path


def _probe_directory(path: Path, option: str, *, make_parents: bool = False) -> None:
    """Create and write a small temporary file where ``path`` will go: the only test that
    also holds for root, read-only mounts and full disks. Its directory must exist unless
    ``make_parents`` (then its nearest existing ancestor is probed)."""
    parent = existing = path.absolute().parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise OptionError(f"{option} {path}: {existing} is a file, not a directory")
    if existing != parent and not make_parents:
        raise OptionError(f"{option} {path}: directory {path.parent} does not exist; create "
                          f"it first (stepsim makes no directory for an output)")
    parent = existing
    try:
        with tempfile.TemporaryFile(dir=parent) as f:
            f.write(b"\0" * 4096)
            f.flush()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise OptionError(f"{option} {path}: cannot write in {parent} ({reason})") from None


def check_distinct_outputs(**paths) -> None:
    """Output options (name -> Path or None) must name different files."""
    seen = {}
    for name, path in paths.items():
        if path is None:
            continue
        for other, other_path in seen.items():
            if _same_file(path, other_path):
                raise OptionError(f"{other} and {name} name the same file {path}")
        seen[name] = path


@functools.cache
def registry_names(module: str, name: str) -> tuple[str, ...]:
    """The names registered in ``module``'s ``name`` (a dict literal's keys, or a tuple's
    strings), read from its source: help texts list every choice of the registry itself
    without importing it (``stepsim.problems`` loads NumPy; help must stay instant).

    E.g. ``registry_names("stepsim.problems.registry", "PROBLEMS")``; tests compare each
    against the imported registry."""
    source = Path(__file__).resolve().parents[1].joinpath(*module.split(".")[1:])
    tree = ast.parse(source.with_suffix(".py").read_text())
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target",
                                                                              None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            items = node.value.keys if isinstance(node.value, ast.Dict) else node.value.elts
            return tuple(item.value for item in items)
    raise LookupError(f"no registry {name} in {module}")


def choices_text(module: str, name: str) -> str:
    """``registry_names`` as "a, b, c" for a help text."""
    return ", ".join(registry_names(module, name))


def add_quiet(parser) -> None:
    """``--quiet``: no progress on stderr (:mod:`stepsim._ground.progress`)."""
    from stepsim._ground.progress import DEFAULT_INTERVAL_S, INTERVAL_VARIABLE

    parser.add_argument("--quiet", action="store_true",
                        help="print no progress on stderr (default: a bar on a terminal, "
                             f"else a line every {INTERVAL_VARIABLE} seconds, default "
                             f"{DEFAULT_INTERVAL_S:g}, with the units done, failures, "
                             "elapsed time and ETA)")


def run_params(args: argparse.Namespace) -> dict:
    """The parsed options as a dict, without argparse internals (names starting with "_")."""
    return {k: v for k, v in vars(args).items() if not k.startswith("_")}
