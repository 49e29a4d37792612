"""The data cache (stepsim._ground.data_cache) through MNIST-1D's ``generate``: a second
process's arrays are read, not made, and are the very bits the package makes; a damaged
file, a file of another key or of another format is made again and written over; ``off``
and an unwritable directory leave the arrays uncached, never an error."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from stepsim._ground import data_cache
from stepsim._ground.atomic import read_arrays
from stepsim.problems import mnist1d
from tests.faults import flip, inside_an_array

SAMPLES, SEED = 120, 5


@pytest.fixture
def makes(monkeypatch, tmp_path):
    """A cache in tmp_path, an empty per-process cache, and the calls of the package's
    generator counted (it still runs: the wrapper calls it)."""
    monkeypatch.setenv(data_cache.ENV, str(tmp_path / "cache"))
    made = []
    real = mnist1d._make_dataset_isolated

    def counted(samples, seed):
        made.append((samples, seed))
        return real(samples, seed)

    monkeypatch.setattr(mnist1d, "_make_dataset_isolated", counted)
    mnist1d.generate.cache_clear()
    yield made
    mnist1d.generate.cache_clear()


def fresh(samples=SAMPLES, seed=SEED):
    """``generate`` as a new process calls it (nothing in the per-process cache)."""
    mnist1d.generate.cache_clear()
    x, y = mnist1d.generate(samples, seed)
    return x.copy(), y.copy()


def the_file(samples=SAMPLES, seed=SEED):
    return data_cache.path_for("mnist1d", mnist1d.data_key(samples, seed))


def test_a_second_process_reads_the_arrays_it_did_not_make(makes):
    x, y = fresh()
    assert makes == [(SAMPLES, SEED)] and the_file().is_file()
    again = fresh()
    assert makes == [(SAMPLES, SEED)]  # read, not made
    assert again[0].tobytes() == x.tobytes() and again[1].tobytes() == y.tobytes()
    assert again[0].dtype == np.float32 and again[1].dtype == np.int64
    made = mnist1d._made(SAMPLES, SEED)  # what the package makes, here and now
    assert made["x"].tobytes() == x.tobytes() and made["y"].tobytes() == y.tobytes()
    fresh(SAMPLES, SEED + 1)  # another key: another file, made
    assert makes[-1] == (SAMPLES, SEED + 1) and the_file(SAMPLES, SEED + 1) != the_file()


def test_a_new_process_uses_the_file(makes, tmp_path):
    """The file is what another Python process reads (no state of this one is needed)."""
    x, _ = fresh()
    code = ("import sys; from stepsim.problems import mnist1d as m; "
            "m._make_dataset_isolated = None; "  # a process that cannot make them
            f"sys.stdout.write(m.generate({SAMPLES}, {SEED})[0].tobytes().hex())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert bytes.fromhex(done.stdout) == x.tobytes()


@pytest.mark.parametrize("damage", ["a flipped byte in an array", "cut short",
                                    "another key's file", "no key or digest"])
def test_a_file_that_does_not_hold_the_keys_arrays_is_made_again(makes, damage):
    x, y = fresh()
    path = the_file()
    if damage == "a flipped byte in an array":
        flip(path, inside_an_array(path))
    elif damage == "cut short":
        path.write_bytes(path.read_bytes()[:1000])
    elif damage == "another key's file":
        fresh(SAMPLES, SEED + 1)
        shutil.copyfile(the_file(SAMPLES, SEED + 1), path)
    else:
        np.savez(path, x=x, y=y)  # the arrays themselves, but not a cache file
    again = fresh()
    assert makes[-1] == (SAMPLES, SEED) and makes.count((SAMPLES, SEED)) == 2
    assert again[0].tobytes() == x.tobytes() and again[1].tobytes() == y.tobytes()
    held = read_arrays(path)  # written over, whole: the next process reads it
    assert held["x"].tobytes() == x.tobytes()
    fresh()
    assert makes.count((SAMPLES, SEED)) == 2


def test_off_and_an_unwritable_directory_cache_nothing(makes, monkeypatch, tmp_path,
                                                       capsys):
    monkeypatch.setenv(data_cache.ENV, "off")
    assert data_cache.cache_dir() is None and the_file() is None
    x, _ = fresh()
    fresh()
    assert len(makes) == 2 and capsys.readouterr().err == ""
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(data_cache.ENV, str(blocker / "cache"))
    again = fresh()
    assert len(makes) == 3 and again[0].tobytes() == x.tobytes()
    assert blocker.is_file()
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith(
        f"stepsim: cannot keep generated data in {blocker / 'cache'} (")
    assert said[0].endswith("(set STEPSIM_DATA_CACHE to a writable directory, or to off to "
                            "silence this)")
    fresh()
    assert capsys.readouterr().err == ""  # once a process


def test_where_the_cache_lives(monkeypatch, tmp_path):
    monkeypatch.delenv(data_cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data_cache.cache_dir() == tmp_path / "xdg" / "stepsim" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_cache.cache_dir() == tmp_path / "home" / ".cache" / "stepsim" / "data"
    monkeypatch.setenv(data_cache.ENV, "OFF")
    assert data_cache.cache_dir() is None
    # the key's canonical text names the file: equal keys in any order, one file
    monkeypatch.setenv(data_cache.ENV, str(tmp_path))
    assert data_cache.path_for("d", {"a": 1, "b": 2}) == data_cache.path_for("d", {"b": 2,
                                                                                  "a": 1})
    assert data_cache.path_for("d", {"a": 1}) != data_cache.path_for("d", {"a": 2})


def test_the_key_names_the_packages_versions():
    from importlib.metadata import version

    key = mnist1d.data_key(SAMPLES, SEED)
    assert key["versions"] == {p: version(p) for p in ("mnist1d", "numpy", "scipy")}
    assert (key["samples"], key["seed"]) == (SAMPLES, SEED)
