"""A run store reads every file verified, and sets damaged ones aside (in-process).

RunStore (stepsim.experiments.store) with store_files: a truncated or changed .npz, a changed
JSON, half a pair and a foreign file are each found on read, moved to ``damaged/`` (never
deleted), and the task runs again; stores written before seals still load; a task another
process is writing is left alone. The same faults through the real CLI are in
test_store_faults.py (sweeps) and tests/checks/test_check_faults.py (checks).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from stepsim._ground import atomic
from stepsim.experiments import executors
from stepsim.experiments.run import RunSpec
from stepsim.experiments.store import RunStore
from stepsim.experiments.store_files import DAMAGED_DIR, DamagedRun, read
from stepsim.experiments.tasks import Task
from tests.faults import flip, inside_an_array

OPTIONS = (("d_in", 16), ("d_hidden", 8))
RUNS = [RunSpec(problem="regression", problem_options=OPTIONS, recipe=recipe, steps=20,
                seed=seed, criterion=None) for recipe in ("dense", "sr-ste") for seed in (0, 1)]
TASK = Task("stepsim.experiments.executors:usable_cores", {})


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A store holding RUNS and TASK, made once: (folder, {digest: (document, arrays)})."""
    root = tmp_path_factory.mktemp("clean") / "runs"
    executors.run([*RUNS, TASK], jobs=1, store=RunStore(root))
    return root, {t.digest: read(root, t.digest) for t in [*RUNS, TASK]}


@pytest.fixture
def store(clean, tmp_path):
    """A fresh copy of the clean store."""
    root = tmp_path / "runs"
    shutil.copytree(clean[0], root)
    return RunStore(root)


def files(store, task):
    return store.root / f"{task.digest}.json", store.root / f"{task.digest}.npz"


def same_arrays(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
        and a[k].tobytes() == b[k].tobytes() for k in a)


def test_saved_files_are_sealed_and_read_back_whole(clean):
    root, stored = clean
    for task in RUNS:
        doc, arrays = stored[task.digest]
        assert atomic.seal_holds(doc) is True  # the JSON's own checksum
        assert doc["result"][atomic.PAIR_KEY] == atomic.arrays_digest(arrays)
    doc, arrays = stored[TASK.digest]
    assert arrays is None and atomic.seal_holds(doc) is True
    assert RunStore(root).verify().ok


FAULTS = {  # what each fault does to a stored run, and the label it is read as
    "truncated .npz": (lambda js, npz: npz.write_bytes(npz.read_bytes()[:100]),
                       "unreadable .npz"),
    "flipped .npz byte": (lambda js, npz: flip(npz, inside_an_array(npz)), "unreadable .npz"),
    "flipped .json byte": (lambda js, npz: js.write_text(
        js.read_text().replace('"final_loss": 0.', '"final_loss": 1.')),
        ".json changed since it was saved"),
    ".npz gone": (lambda js, npz: npz.unlink(), ".json without its .npz"),
    ".json gone": (lambda js, npz: js.unlink(), ".npz without its .json"),
    "another run's .json": (lambda js, npz: js.write_text(
        (js.parent / f"{RUNS[3].digest}.json").read_text()), "misplaced .json"),
    "empty .json": (lambda js, npz: js.write_text(""), "unreadable .json"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_is_read_as_damage_set_aside_and_redone(store, clean, fault):
    damage, label = FAULTS[fault]
    task = RUNS[1]
    json_path, npz_path = files(store, task)
    damage(json_path, npz_path)
    present = sorted(p.name for p in (json_path, npz_path) if p.exists())
    with pytest.raises(DamagedRun) as info:
        store.load(task)
    assert info.value.label == label
    assert str(store.root) in str(info.value) and "the same command" in str(info.value)
    check = store.verify()  # reads, changes nothing
    assert not check.ok and [d.digest for d in check.damaged] == [task.digest]
    assert sorted(p.name for p in (json_path, npz_path) if p.exists()) == present

    healing = store.heal(RUNS)
    assert [d.digest for d in healing.damaged] == [task.digest] and not healing.foreign
    assert healing.line() == (f"1 damaged run set aside in {store.root / DAMAGED_DIR} "
                              f"(1 {label}); redoing it")
    aside = store.root / DAMAGED_DIR
    assert sorted(p.name for p in aside.iterdir()) == sorted(present + [f"{task.digest}.why"])
    assert label in (aside / f"{task.digest}.why").read_text()
    assert not json_path.exists() and not npz_path.exists()

    ran = []
    executors.run(RUNS, lambda t, out: ran.append(t.digest), jobs=1, store=store)
    assert ran == [task.digest]  # only the damaged run, again
    doc, arrays = read(store.root, task.digest)
    want_doc, want_arrays = clean[1][task.digest]
    assert doc["result"] == want_doc["result"] and same_arrays(arrays, want_arrays)
    assert store.verify().ok


def test_a_foreign_file_is_set_aside_and_names_taken_in_damaged_get_a_number(store):
    (store.root / "notes.txt").write_text("mine")
    (store.root / "copy of run.json").write_text("{}")
    (store.root / ".stfolder").mkdir()  # a sync tool's hidden entry: left alone
    check = store.verify()
    assert [p.name for p in check.foreign] == ["copy of run.json", "notes.txt"]
    assert check.whole == len(RUNS) + 1 and not check.damaged and not check.ok
    healing = store.heal(RUNS)
    assert healing.line() == f"2 foreign files set aside in {store.root / DAMAGED_DIR}"
    assert (store.root / ".stfolder").is_dir()
    # the same run damaged twice: its second pair goes beside the first, numbered
    task = RUNS[0]
    for round_ in (1, 2):
        files(store, task)[1].write_bytes(b"")
        assert [d.digest for d in store.heal(RUNS).damaged] == [task.digest]
        executors.run(RUNS, jobs=1, store=store)
    (store.root / "notes.txt").write_text("mine again")
    store.heal(RUNS)
    names = sorted(p.name for p in (store.root / DAMAGED_DIR).iterdir())
    d = task.digest
    assert names == sorted(["copy of run.json", "copy of run.json.why", "notes.txt",
                            "notes.txt.why", "notes.1.txt", "notes.1.txt.why",
                            f"{d}.json", f"{d}.npz", f"{d}.why",
                            f"{d}.1.json", f"{d}.1.npz", f"{d}.1.why"])
    assert (store.root / DAMAGED_DIR / "notes.1.txt").read_text() == "mine again"
    assert store.verify().ok and store.verify().set_aside == 7  # the .why notes aside


def flipped_bytes_read(clean, tmp_path, stride: int) -> dict:
    """Flip the bytes 0, stride, 2 stride ... of a stored run's .npz and JSON, one at a
    time, and read the run each time: either the read refuses it, or it read the very same
    document and arrays (a byte that zip or JSON does not read: a timestamp, padding).
    Returns {suffix: (bytes flipped, caught)}."""
    root = tmp_path / "runs"
    shutil.copytree(clean[0], root)
    task = RUNS[3]
    want_doc, want_arrays = clean[1][task.digest]
    out = {}
    for path in files(RunStore(root), task):
        original, caught = path.read_bytes(), 0
        positions = range(0, len(original), stride)
        for at in positions:
            flip(path, at)
            try:
                doc, arrays = read(root, task.digest)
            except DamagedRun:
                caught += 1
            else:
                assert doc == want_doc and same_arrays(arrays, want_arrays), (path.name, at)
            path.write_bytes(original)
        out[path.suffix] = (len(positions), caught)
    return out


def test_a_flipped_byte_is_caught_or_changes_nothing_read(clean, tmp_path):
    seen = flipped_bytes_read(clean, tmp_path, stride=23)
    assert seen[".json"][1] == seen[".json"][0]  # every byte of a sealed JSON counts
    assert seen[".npz"][1] > seen[".npz"][0] // 2  # the arrays: most of the file


@pytest.mark.slow
def test_every_flipped_byte_is_caught_or_changes_nothing_read(clean, tmp_path):
    seen = flipped_bytes_read(clean, tmp_path, stride=1)
    assert seen[".json"][1] == seen[".json"][0]
    assert seen[".npz"][1] > seen[".npz"][0] // 2


def test_a_store_from_before_seals_still_loads_and_what_it_records_is_checked(store, clean):
    """Files saved before the JSON was sealed (and before the pair was tied) load as they
    are; a truncated or CRC-failing .npz is still caught."""
    task = RUNS[2]
    json_path, npz_path = files(store, task)
    doc = json.loads(json_path.read_text())
    del doc[atomic.SEAL_KEY], doc["result"][atomic.PAIR_KEY]
    json_path.write_text(json.dumps(doc, indent=2))
    assert store.is_finished(task)
    loaded = store.load(task)
    assert same_arrays(loaded.trace.arrays(), store.load(RUNS[2]).trace.arrays())
    assert loaded.metrics == clean[1][task.digest][0]["result"]["metrics"]
    assert store.verify().ok and not store.heal(RUNS)
    flip(npz_path, inside_an_array(npz_path))  # its CRC-32 fails
    with pytest.raises(DamagedRun, match="unreadable .npz"):
        store.load(task)


def test_a_task_another_process_is_writing_is_left_to_it(store):
    """Half a pair whose task another live process holds is in flight, not damage: heal
    leaves it, verify counts it apart, and its writer's temporaries stay."""
    task = RUNS[0]
    files(store, task)[0].unlink()  # as between the writer's two writes
    writer = RunStore(store.root)  # another holder of the claims (its own lock)
    assert writer.claim(task)
    tmp = store.root / f".{task.digest}.json.abc123.json"
    tmp.write_text("{")
    assert not store.heal(RUNS)
    check = store.verify()
    assert check.ok and check.in_flight == 1 and check.whole == len(RUNS)
    assert store.remove_temporaries() == 0 and tmp.exists()
    writer.release(task, finished=False)
    assert store.remove_temporaries() == 1 and not tmp.exists()
    assert [d.digest for d in store.heal(RUNS).damaged] == [task.digest]


def test_a_damaged_task_output_is_set_aside_and_redone(store, clean):
    json_path = store.root / f"{TASK.digest}.json"
    json_path.write_text(json_path.read_text()[:-30])
    healing = store.heal([TASK])
    assert [d.label for d in healing.damaged] == ["unreadable .json"]
    executors.run([TASK], jobs=1, store=store)
    assert store.load(TASK) == clean[1][TASK.digest][0]["result"]["output"]


def test_seal_is_of_the_content_not_the_layout():
    sealed = atomic.seal({"result": {"b": (1.5, float("nan")), "a": {"1": "x"}},
                          "provenance": {}}, indent=1)
    doc = json.loads(sealed)
    assert atomic.seal_holds(doc) is True
    assert atomic.seal_holds(json.loads(json.dumps(doc, indent=4, sort_keys=True))) is True
    doc["result"]["b"][0] = 1.25
    assert atomic.seal_holds(doc) is False
    assert atomic.seal_holds({"result": {}}) is None


def test_read_arrays_reads_what_np_load_reads(tmp_path):
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b/c": np.array(["x", "yz"]),
              "n": np.int64(3)}
    path = atomic.savez(tmp_path / "x.npz", **arrays)
    read_back = atomic.read_arrays(path)
    with np.load(path) as data:
        assert same_arrays(read_back, {k: data[k] for k in data.files})
