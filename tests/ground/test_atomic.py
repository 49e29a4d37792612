"""stepsim._ground.atomic: whole files or none, with the permissions a plain write would give."""

import os
import stat

import numpy as np
import pytest

from stepsim._ground import atomic as _atomic


def test_write_replaces_whole_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.json"
    _atomic.write_json(target, {"a": 1})
    _atomic.write_json(target, {"a": 2})
    assert target.read_text().strip().endswith("}")
    assert '"a": 2' in target.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_failed_writer_keeps_the_previous_file(tmp_path):
    target = tmp_path / "keep.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), _atomic.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_new_files_get_umask_mode_and_replaced_files_keep_theirs(tmp_path):
    mask = os.umask(0o022)
    try:
        fresh = _atomic.savez(tmp_path / "a.npz", x=np.arange(3))
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
        kept = tmp_path / "b.txt"
        kept.write_text("x")
        kept.chmod(0o640)
        _atomic.write_text(kept, "y")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    finally:
        os.umask(mask)
    with np.load(fresh) as data:
        assert data["x"].tolist() == [0, 1, 2]
