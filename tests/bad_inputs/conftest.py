"""The bad-input suite's input files (test_bad_cli.py, test_bad_api.py): good and bad
arrays, archives, specs, FIFOs and sweep directories, made once for the folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest


# --------------------------------------------------------------------------- input files
@pytest.fixture(scope="package")
def files(tmp_path_factory) -> dict:
    """Named paths (str) of good and bad input files, and places for outputs."""
    d = tmp_path_factory.mktemp("bad_inputs")
    sparse = np.zeros((32, 64))
    sparse[:, ::2] = 1.5  # 2:4 already: compress needs no mask
    paths = {}

    def save(name, array):
        paths[name] = str(d / f"{name}.npy")
        np.save(paths[name], array)

    save("good", sparse.astype(np.float32))
    nan = sparse.copy()
    nan[3, 4] = np.nan
    save("nan", nan)
    inf = sparse.copy()
    inf[0, 2] = -np.inf
    save("inf", inf)
    save("big", sparse * 1e6 / 1.5)
    save("huge", sparse * 1e39)
    save("i32", (sparse / 1.5 * 70000).astype(np.int32))
    save("bool", sparse.astype(bool))
    save("complex", sparse.astype(complex))
    save("strings", np.array(["abc", "def", "ghi", "jkl"]))
    save("scalar", np.float32(1.0))
    save("odd", np.ones((4, 6), np.float32))
    paths["train"] = str(d / "train.npz")  # a `stepsim train` result with a NaN weight
    np.savez(paths["train"], **{"weights/W1": nan, "weights/b1": np.ones(4), "loss": np.ones(3)})
    paths["compressed"] = str(d / "compressed.npz")
    from stepsim.sparse24 import compress_nm, save_compressed

    save_compressed(paths["compressed"], {"w": compress_nm(sparse, 2, 4)})
    paths["good_npz"] = str(d / "good.npz")
    np.savez(paths["good_npz"], w=sparse)
    whole = Path(paths["good_npz"]).read_bytes()
    paths["truncated"] = str(d / "truncated.npz")
    Path(paths["truncated"]).write_bytes(whole[: len(whole) // 2])
    paths["text_npz"] = str(d / "text.npz")
    Path(paths["text_npz"]).write_text("this is a text file\n")
    paths["text_npy"] = str(d / "text.npy")
    Path(paths["text_npy"]).write_text("1 2 3\n")
    paths["empty_npz"] = str(d / "empty.npz")
    Path(paths["empty_npz"]).write_bytes(b"")
    paths["objects"] = str(d / "objects.npz")
    np.savez(paths["objects"], o=np.array([{"a": 1}], dtype=object))
    paths["csv"] = str(d / "w.csv")
    Path(paths["csv"]).write_text("1,2\n")
    paths["dir"] = str(d / "a_dir")
    os.mkdir(paths["dir"])
    tiny = sparse * 1e-9 / 1.5  # every kept weight underflows to 0 in float16
    save("tiny", tiny.astype(np.float32))
    save("tiny64", sparse * 1e-50)  # ... and in float32
    for name, text in (("spec_list", "[1, 2]"), ("spec_string", '"dense"'),
                       ("spec_options_list", '{"recipes": [{"name": "dense", "options": [1]}]}')):
        paths[name] = str(d / f"{name}.json")
        Path(paths[name]).write_text(text)
    for name in ("fifo.npy", "fifo.json"):  # a named pipe: reading it would block forever
        paths[name.replace(".", "_")] = str(d / name)
        os.mkfifo(paths[name.replace(".", "_")])
    paths.update(_sweep_dirs(d))
    paths["missing"] = str(d / "missing.npz")
    paths["out"] = str(d / "out.npz")  # must never be written by a failing command
    paths["out_json"] = str(d / "out.json")
    paths["out_png"] = str(d / "out.png")
    paths["d"] = str(d)
    return paths


def _sweep_dirs(d: Path) -> dict:
    """A finished one-run sweep ("sweep") and copies of it spoiled one file at a time."""
    import json
    import shutil

    from stepsim.experiments import run_sweep

    good = d / "sweep"
    run_sweep({"recipes": ["dense"], "steps": 2, "seeds": 1}, good, jobs=1, progress=False)
    out = {"sweep": str(good)}
    plans = {"plan_list": "[1]", "plan_no_result": '{"provenance": {}}',
             "plan_run_no_params": '{"result": {"runs": [{"name": "a", "run_id": "b", '
                                   '"rng_seed": 1}]}}', "plan_not_json": "{oops"}
    def unsealed(doc):  # a result of a store from before seals: its shape is what is judged
        return {k: v for k, v in doc.items() if k != "document_sha256"}

    results = {"result_string": lambda doc: unsealed(dict(doc, result="none")),
               "result_no_metrics": lambda doc: unsealed(dict(doc, result={
                   k: v for k, v in doc["result"].items() if k != "metrics"})),
               # a sealed result edited: damaged (a value changed since it was saved)
               "result_edited": lambda doc: dict(doc, result=dict(doc["result"],
                                                                  final_loss=0.5))}
    for name in (*plans, *results, "plan_fifo"):
        shutil.copytree(good, d / name)
        out[name] = str(d / name)
    for name, text in plans.items():
        (d / name / "sweep.json").write_text(text)
    (d / "plan_fifo" / "sweep.json").unlink()
    os.mkfifo(d / "plan_fifo" / "sweep.json")
    for name, spoil in results.items():
        (result,) = (d / name / "runs").glob("*.json")
        result.write_text(json.dumps(spoil(json.loads(result.read_text()))))
    return out
