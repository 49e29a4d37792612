"""Argument checks shared by every public function.

Each check raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind,
wrong value) with a message that names the argument and shows the offending value, so a
user never sees a numba traceback or gets a silently wrong answer. Kernels never
validate; their public wrappers call these first.
"""

from __future__ import annotations

import math
import numbers
import os

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def show(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_int(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as ``int``; it must be an integer (bool is refused) within bounds."""
    # exact int first: the ABC check below is slow, and kernels are called every step
    if type(value) is not int and (
        isinstance(value, bool) or not isinstance(value, numbers.Integral)
    ):
        raise TypeError(f"{name} must be an integer, got {show(value)} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_real(
    name: str,
    value,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    min_open: bool = False,
    max_open: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` within [minimum, maximum] (ends open on request)."""
    if type(value) is not float and (
        isinstance(value, bool) or not isinstance(value, numbers.Real)
    ):
        raise TypeError(
            f"{name} must be a real number, got {show(value)} ({type(value).__name__})"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and (value < minimum or (min_open and value == minimum)):
        bracket = "(" if min_open else "["
        upper = "inf" if maximum is None else maximum
        close = ")" if (max_open or maximum is None) else "]"
        raise ValueError(f"{name} must be in {bracket}{minimum}, {upper}{close}, got {value}")
    if maximum is not None and (value > maximum or (max_open and value == maximum)):
        bracket = "(" if min_open else "["
        lower = "-inf" if minimum is None else minimum
        close = ")" if max_open else "]"
        raise ValueError(f"{name} must be in {bracket}{lower}, {maximum}{close}, got {value}")
    return value


def check_bool(name: str, value) -> bool:
    """``value`` must be True or False (a NumPy bool too); a string such as "off" is refused
    rather than read as ``bool("off") == True``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {show(value)} "
                        f"({type(value).__name__})")
    return bool(value)


def check_widths(name: str, value) -> tuple:
    """Layer widths: an int (one layer) or a sequence of them, as a tuple (sizes are checked
    by the model). A string is refused: ``tuple("64")`` would be ("6", "4") and
    ``tuple("")`` no layer at all."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be an int or a tuple of ints, got {show(value)}")
    if isinstance(value, numbers.Integral):
        return (value,)
    try:
        return tuple(value)
    except TypeError:
        raise TypeError(f"{name} must be an int or a tuple of ints, got {show(value)}") from None


def check_beta(name: str, value) -> float:
    """A decay rate: a real number in [0, 1)."""
    return check_real(name, value, minimum=0.0, maximum=1.0, max_open=True)


def check_fraction(name: str, value) -> float:
    """A fraction of a run: a real number in [0, 1]."""
    return check_real(name, value, minimum=0.0, maximum=1.0)


def check_step_or_fraction(name: str, value) -> int | float:
    """A point in a run: an integer >= 0 is a step, any other real a fraction in [0, 1].

    Returns a Python ``int`` or ``float``, so callers can branch on the type: NumPy
    scalars (np.int64(5), np.float32(0.5)) mean what their Python equivalents mean.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a step (int >= 0) or a fraction of the run (float in "
                        f"[0, 1]), got {show(value)}")
    if isinstance(value, numbers.Integral):
        return check_int(name, value, minimum=0)
    value = float(value)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} as a float is a fraction of the run and must be in [0, 1], "
                         f"got {value} (pass an int for a number of steps)")
    return value


def check_open_unit(name: str, value) -> float:
    """A real number strictly inside (0, 1), e.g. beta2 where 1/(1 - beta2) is used."""
    return check_real(name, value, minimum=0.0, maximum=1.0, min_open=True, max_open=True)


class UnknownOptionError(ValueError, TypeError):
    """An option that a problem, recipe, optimizer or criterion does not take: one type for
    all of them, naming the option and listing the valid ones. It is a ValueError (bad
    input) and, as ``make_criterion`` raised before, a TypeError (an unexpected keyword)."""


def check_choice(name: str, value, choices) -> str:
    """``value`` must be one of the strings in ``choices``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {sorted(choices)}, got {show(value)}")
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {sorted(choices)}")
    return value


def check_nm(n, m, *, n_name: str = "n", m_name: str = "m") -> tuple[int, int]:
    """An N:M ratio: integers with 1 <= n <= m."""
    m = check_int(m_name, m, minimum=1)
    n = check_int(n_name, n, minimum=1)
    if n > m:
        raise ValueError(
            f"{n_name} must be <= {m_name} (an N:M mask keeps N of every M), got {n}:{m}"
        )
    return n, m


class NMRatio(tuple):
    """An N:M ratio as one typed value, checked once when it is made: ``NMRatio(2, 4)`` (1 <= n
    <= m, integers), ``NMRatio.parse("2:4")``; a tuple ``(n, m)`` everywhere a pair is expected
    (equal to ``(2, 4)``, JSON ``[2, 4]``), with ``.n`` and ``.m``. Whatever receives an
    ``NMRatio`` (a RunSpec, a problem, ``fit(nm=)``, :func:`check_nm_pair`) takes it as it is."""

    __slots__ = ()

    def __new__(cls, n, m, *, name: str = "nm"):
        n, m = check_nm(n, m, n_name=f"{name}[0]", m_name=f"{name}[1]")
        return super().__new__(cls, (n, m))

    def __getnewargs__(self):  # pickling (to pool and Dask workers) without a re-check
        return tuple(self)

    @classmethod
    def parse(cls, text: str, *, name: str = "nm") -> NMRatio:
        """"N:M" (e.g. "2:4") -> ``NMRatio``; ValueError naming ``name`` otherwise."""
        parts = text.split(":") if isinstance(text, str) else ()
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"{name} must look like N:M (e.g. 2:4), got {show(text)}")
        return cls(int(parts[0]), int(parts[1]), name=name)

    n = property(lambda self: self[0], doc="N: entries kept in every group")
    m = property(lambda self: self[1], doc="M: the group length")


def check_nm_pair(name: str, value) -> NMRatio:
    """An N:M given as one value: an :class:`NMRatio` (returned as it is: it was checked when
    made), or an (n, m) tuple or list of two ints with 1 <= n <= m.

    A string such as "2:4" is a TypeError naming ``name`` (strings are parsed in the CLI
    and the sweep spec, :meth:`NMRatio.parse`).
    """
    if type(value) is NMRatio:
        return value
    ok = (isinstance(value, (tuple, list)) and len(value) == 2
          and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in value))
    if not ok:
        raise TypeError(f"{name} must be an (n, m) tuple of ints, e.g. (2, 4); got {show(value)}")
    return NMRatio(int(value[0]), int(value[1]), name=name)


def check_float_array(name: str, array, *, dtypes=FLOAT_DTYPES) -> np.ndarray:
    """``array`` must be a NumPy array of one of ``dtypes`` (no silent conversions)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(array).__name__}")
    if array.dtype not in dtypes:
        names = ", ".join(str(d) for d in dtypes)
        raise TypeError(f"{name} must have dtype in ({names}), got {array.dtype}")
    return array


def check_same_layout(reference_name: str, reference: np.ndarray, **others: np.ndarray) -> None:
    """Every array in ``others`` must have the shape and dtype of ``reference``."""
    for name, other in others.items():
        if not isinstance(other, np.ndarray):
            raise TypeError(f"{name} must be a numpy.ndarray, got {type(other).__name__}")
        if other.shape != reference.shape:
            raise ValueError(
                f"{name} has shape {other.shape} but {reference_name} has shape {reference.shape}"
            )
        if other.dtype != reference.dtype:
            raise TypeError(
                f"{name} has dtype {other.dtype} but {reference_name} has dtype {reference.dtype}"
            )


def check_c_contiguous(name: str, array: np.ndarray) -> None:
    """In-place kernels need C-contiguous memory (a copy would silently drop the update)."""
    if not array.flags.c_contiguous:
        raise ValueError(
            f"{name} must be C-contiguous (it is updated in place, so a copy would lose the "
            f"update); pass np.ascontiguousarray({name}) and keep that array"
        )
    if not array.flags.writeable:
        raise ValueError(f"{name} must be writeable (it is updated in place)")


def normalize_axis(axis, ndim: int, name: str = "axis") -> int:
    """Return ``axis`` as a non-negative index into an array of ``ndim`` dimensions."""
    axis = check_int(name, axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}={axis} is out of range for an array with {ndim} dimension(s)")
    return axis % ndim


def check_finite_array(name: str, array: np.ndarray) -> np.ndarray:
    """``array`` must hold no NaN or infinity (integer arrays always pass).

    The message counts each kind and gives the first offending index, e.g.
    "weights/W1 contains 1 NaN and 0 infinite value(s) (first at index (3, 5))".
    """
    if array.dtype.kind not in "fc" and array.dtype.name != "bfloat16":
        return array
    with np.errstate(invalid="ignore"):  # ml_dtypes warns on NaN compares
        finite = np.isfinite(array)
    if not finite.all():
        nans = int(np.count_nonzero(np.isnan(array)))
        infs = int(finite.size - np.count_nonzero(finite)) - nans
        first = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise ValueError(f"{name} contains {nans} NaN and {infs} infinite value(s) (first at "
                         f"index {first}, value {array[first]})")
    return array


def check_input_file(path, what: str = "input file"):
    """``path`` must name an existing regular file; returns it as a ``Path``.

    Refuses, naming ``what`` and the path, before anything opens it: a missing path
    (FileNotFoundError), a directory, and anything else that is not a regular file — a
    FIFO (named pipe) would block the reader forever, a device or socket never ends.
    """
    import stat
    from pathlib import Path

    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise ValueError(f"{what} {path} cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise ValueError(f"{what} {path} is a directory, not a file")
    if not stat.S_ISREG(mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "not a regular file"
        raise ValueError(f"{what} {path} is {kind}; give a regular file (reading it would "
                         f"block or never end)")
    return path


def format_bytes(nbytes: float) -> str:
    """``nbytes`` in binary units, e.g. "1.5 GiB"."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1024
    return f"{value:.3g} PiB"  # pragma: no cover


def _read_int(path: str):
    try:
        with open(path) as f:
            text = f.read().split()[0]
    except (OSError, IndexError):
        return None
    return int(text) if text.isdigit() else None


def available_memory() -> int | None:
    """Bytes this process can still allocate, as far as the system says; None if unknown.

    The smallest of: MemAvailable (/proc/meminfo), the cgroup's limit minus its usage
    (containers), and the address-space rlimit minus the current virtual size.
    """
    limits = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and usage is not None and limit < 1 << 60:
            limits.append(max(0, limit - usage))
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm") as f:
                used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            limits.append(max(0, soft - used))
    except (ImportError, OSError, ValueError, AttributeError):
        pass
    if not limits and hasattr(os, "sysconf"):
        try:
            limits.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError):
            pass
    return min(limits) if limits else None


def check_memory(what: str, nbytes: int, *, available: int | None = None) -> int:
    """Refuse a computation whose arrays would not fit in memory, before allocating them.

    what: the arrays and the sizes that make them, for the message (e.g. "the statistics,
    trials x dim x lags float64 = 1000 x 100 x 33"). nbytes: the estimated peak bytes.
    available: bytes available (default :func:`available_memory`; unknown -> no check).
    Raises ValueError ("... would need 2.3 TiB of memory; 5.1 GiB available").
    Returns ``nbytes``.
    """
    nbytes = int(nbytes)
    if available is None:
        available = available_memory()
    if available is not None and nbytes > available:
        raise ValueError(f"{what} would need {format_bytes(nbytes)} of memory; "
                         f"{format_bytes(available)} available")
    return nbytes


def check_problem_memory(problem: str, options: dict, nbytes: int, what: str) -> int:
    """:func:`check_memory` for a problem's constructor, before it allocates anything, in
    the names a user gave: ``problem``'s registry name and the ``options`` that set its
    sizes (the keywords of ``-p KEY=VALUE``), e.g. "problem lm with width=100000,
    blocks=2 (parameters, Adam's state, activations) would need 894 GiB of memory; ...".
    what: what the estimate counts. Raises ValueError; returns ``nbytes``."""
    sizes = ", ".join(f"{key}={value}" for key, value in options.items())
    return check_memory(f"problem {problem} with {sizes} ({what})", nbytes)


_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first member / an empty zip


def load_arrays(path, *, what: str = "input file") -> dict:
    """Every array of a .npy (-> {stem: array}) or .npz file, with one-line errors.

    Refuses, naming ``what`` and the file: a missing path, a directory or a FIFO
    (FileNotFoundError / ValueError, :func:`check_input_file`), a file that is not what its
    name says (a text file named .npz used to surface as NumPy's misleading "contains
    pickled data... allow_pickle"), a truncated or corrupt archive (zipfile.BadZipFile,
    EOFError, zlib errors deep in NumPy), and object arrays (never unpickled). Arrays are
    read fully, so the file can be replaced afterwards.
    """
    import zipfile
    import zlib
    from pathlib import Path

    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what} {path} is a directory, not a .npy or .npz file")
    check_input_file(path, what)
    if path.suffix not in (".npy", ".npz"):
        raise ValueError(f"{what} must be a .npy or .npz file, got {path.name}")
    with open(path, "rb") as f:
        head = f.read(6)
    if path.suffix == ".npy" and head != _NPY_MAGIC:
        raise ValueError(f"{what} {path} is not a .npy file (no NumPy header; empty, text, or "
                         f"another format?)")
    if path.suffix == ".npz" and head[:4] not in _ZIP_MAGICS:
        raise ValueError(f"{what} {path} is not a .npz file (not a zip archive; empty, text, "
                         f"or another format?)")
    try:
        if path.suffix == ".npy":
            return {path.stem: np.load(path, allow_pickle=False)}
        with np.load(path, allow_pickle=False) as z:
            out = {}
            for name in z.files:
                try:
                    out[name] = z[name]
                except ValueError as exc:
                    if "allow_pickle" in str(exc):
                        raise ValueError(f"{what} {path}: array {name!r} holds Python objects, "
                                         f"which stepsim never unpickles") from None
                    raise
            return out
    except (zipfile.BadZipFile, EOFError, zlib.error, OSError) as exc:
        raise ValueError(f"{what} {path} is truncated or corrupt "
                         f"({type(exc).__name__}: {exc})") from None
    except ValueError as exc:
        if str(path) in str(exc):
            raise
        raise ValueError(f"{what} {path} cannot be read ({exc})") from None
