"""`stepsim train --json`'s JSON + .npz pair is tied: a JSON of one run beside the .npz of
another is refused by every reader, and a kill between the two writes cannot make one."""

import json
import shutil

import numpy as np
import pytest

from stepsim._ground import atomic as _atomic, provenance as _provenance
from stepsim.cli import main
from stepsim.training import Trace

TRAIN = ["train", "--recipe", "sr-ste", "--steps", "20", "--d-in", "16", "--d-hidden", "8"]


def train(path, seed: int) -> None:
    assert main([*TRAIN, "--seed", str(seed), "--json", str(path)]) == 0


def arrays(npz) -> dict:
    with np.load(npz) as data:
        return {k: data[k] for k in data.files}


def test_the_json_commits_the_digest_of_its_npz_and_equal_runs_give_equal_files(tmp_path):
    train(tmp_path / "a.json", seed=0)
    train(tmp_path / "b.json", seed=0)
    doc = json.loads((tmp_path / "a.json").read_text())["result"]
    assert doc["arrays"] == "a.npz"
    assert doc["arrays_sha256"] == _atomic.arrays_digest(arrays(tmp_path / "a.npz"))
    assert "weights/w1" in arrays(tmp_path / "a.npz")  # the digest covers the weights too
    # a digest of the content, not a random id: the same run twice, the same tie and bits
    again = json.loads((tmp_path / "b.json").read_text())["result"]
    assert again["arrays_sha256"] == doc["arrays_sha256"]
    Trace.load_npz(tmp_path / "a.npz")  # a true pair reads


def test_a_json_beside_another_runs_npz_is_refused_naming_both_files(tmp_path, capsys):
    (tmp_path / "one").mkdir()
    train(tmp_path / "one" / "r.json", seed=0)
    train(tmp_path / "r.json", seed=1)
    # the JSON of seed 0 beside the .npz of seed 1, as a two-write writer killed between
    # its writes (or a copy of one file) leaves them
    shutil.copy(tmp_path / "one" / "r.json", tmp_path / "r.json")
    npz, js = tmp_path / "r.npz", tmp_path / "r.json"
    with pytest.raises(ValueError, match=r"r\.json and .*r\.npz are not one result"):
        Trace.load_npz(npz)
    capsys.readouterr()
    assert main(["compress", str(npz), "-o", str(tmp_path / "c.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1  # one line, naming both files
    assert str(js) in err and str(npz) in err and "killed between writing them" in err
    assert not (tmp_path / "c.npz").exists()
    # one changed array is enough
    data = arrays(tmp_path / "one" / "r.npz")
    data["weights/w1"] = data["weights/w1"].copy()
    data["weights/w1"].flat[0] += 1
    np.savez(tmp_path / "one" / "r.npz", **data)
    with pytest.raises(ValueError, match="are not one result"):
        Trace.load_npz(tmp_path / "one" / "r.npz")


def test_a_kill_between_the_two_writes_leaves_the_new_npz_alone(tmp_path, monkeypatch, capsys):
    out = tmp_path / "r.json"
    train(out, seed=0)
    first = json.loads(out.read_text())["result"]["arrays_sha256"]
    real = _provenance.save_json

    def killed(path, *args, **kwargs):  # the process dies after the .npz, before the JSON
        raise KeyboardInterrupt

    monkeypatch.setattr(_provenance, "save_json", killed)
    # Ctrl-C is one line and status 130 (issue 28), not a traceback
    assert main([*TRAIN, "--seed", "1", "--json", str(out)]) == 130
    assert "interrupted; no result was committed" in capsys.readouterr().err
    monkeypatch.setattr(_provenance, "save_json", real)
    # the old JSON was withdrawn before the new arrays were written: no pair of two runs
    assert not out.exists()
    npz = out.with_suffix(".npz")
    assert _atomic.arrays_digest(arrays(npz)) != first  # the new run's complete arrays
    Trace.load_npz(npz)
    capsys.readouterr()
    assert main(["compress", str(npz), "-o", str(tmp_path / "c.npz")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.npz", "r.npz"]  # no temporaries
    train(out, seed=1)  # re-running commits the pair again
    assert json.loads(out.read_text())["result"]["arrays_sha256"] == \
        _atomic.arrays_digest(arrays(npz))


def test_files_without_a_tie_still_read(tmp_path):
    # a JSON written before the tie (no arrays_sha256), or one that is not this .npz's
    # partner, is not a reason to refuse the arrays
    train(tmp_path / "r.json", seed=0)
    npz = tmp_path / "r.npz"
    saved = {k: v for k, v in arrays(npz).items() if k in Trace.ARRAYS}
    assert "loss" in saved and len(saved) >= 5

    def reads_the_saved_trace():
        trace = Trace.load_npz(npz)
        return all(np.array_equal(getattr(trace, k), v, equal_nan=v.dtype.kind == "f")
                   for k, v in saved.items())  # z_geo is NaN without log statistics

    doc = json.loads((tmp_path / "r.json").read_text())
    del doc["result"]["arrays_sha256"]
    (tmp_path / "r.json").write_text(json.dumps(doc))
    assert reads_the_saved_trace()
    (tmp_path / "r.json").write_text(json.dumps({"result": {"arrays": "other.npz",
                                                            "arrays_sha256": "0" * 64}}))
    assert reads_the_saved_trace()
    (tmp_path / "r.json").write_text("[1, 2]")
    assert reads_the_saved_trace()


def test_the_digest_sees_names_dtypes_shapes_and_bytes_not_layout():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    base = _atomic.arrays_digest({"a": a})
    assert _atomic.arrays_digest({"a": np.asfortranarray(a)}) == base
    assert _atomic.arrays_digest({"b": a}) != base
    assert _atomic.arrays_digest({"a": a.astype(np.float64)}) != base
    assert _atomic.arrays_digest({"a": a.reshape(3, 2)}) != base
    assert _atomic.arrays_digest({"a": a + 1}) != base
