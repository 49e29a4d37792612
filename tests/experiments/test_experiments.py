"""Sweep specs, seeds, validation before any run, the result store and the report (in-process)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from stepsim import stats
from stepsim.cli import main
from stepsim.experiments import (
    Table,
    compare,
    executors,
    load_table,
    parse_spec,
    plan_sweep,
    plot_vs_sparsity,
    run_sweep,
    summarize,
    sweep_dir,
)
from stepsim.experiments import sweep_spec as spec_mod
from tests.tables import stable_rows

TINY = {"steps": 30, "seeds": 2, "nm": ["2:4", "1:8"], "criterion": "autoswitch",
        "problem": {"name": "regression", "options": {"d_in": 16, "d_hidden": 8}},
        "recipes": ["dense", "step"]}


def test_grid_expands_in_order_with_grids_criteria_and_seed_lists():
    spec = parse_spec({
        "steps": [10, 20], "seeds": [3, 7], "nm": ["2:4", [1, 4]],
        "problem": {"name": "regression", "grid": {"batch_size": [8, 16]}},
        "recipes": [{"name": "sr-ste", "grid": {"lam": [1e-4, 2e-4]}},
                    {"name": "step", "criteria": ["autoswitch",
                                                  {"name": "fixed-fraction",
                                                   "grid": {"fraction": [0.1, 0.2]}}]}]})
    runs = plan_sweep(spec)
    # 2 problems x (2 sr-ste + 3 step) x 2 nm x 2 steps x 2 seeds
    assert len(runs) == 2 * 5 * 2 * 2 * 2
    assert len({r.digest for r in runs}) == len(runs)
    first = runs[0].to_dict()
    assert first == {"format": "stepsim.RunSpec/1",
                     "problem": {"name": "regression", "options": {"batch_size": 8}},
                     "recipe": {"name": "sr-ste", "optimizer": "adam",
                                "options": {"lam": 1e-4}},
                     "criterion": None, "nm": [2, 4], "steps": 10,
                     "seed": spec_mod.rng_seed(first["problem"], 3), "eval_every": None,
                     "loss_scale": 1.0}
    assert [index for _, index in spec.grid(lambda *a: True)][:2] == [3, 7]
    crits = {json.dumps(r.to_dict()["criterion"], sort_keys=True) for r in runs
             if r.recipe == "step"}
    assert len(crits) == 3


def test_seeds_depend_on_the_problem_and_seed_index_only_never_on_grid_position():
    runs = plan_sweep(TINY)
    shuffled = dict(TINY, recipes=["step", "dense", "asp"], nm=["1:8", "2:4"], seeds=[1, 0])
    again = {r.digest: r for r in plan_sweep(shuffled)}
    for run in runs:  # same parameters -> same digest and seed, wherever they sit in the grid
        assert again[run.digest] == run
    by_seed = {}
    for run, index in parse_spec(TINY).grid(lambda *a: True):  # recipes and N:M share draws
        by_seed.setdefault(index, set()).add(run.seed)  # at one seed index (common random
    assert all(len(s) == 1 for s in by_seed.values())  # numbers)
    assert by_seed[0] != by_seed[1]
    other_problem = plan_sweep(dict(TINY, problem={"name": "regression",
                                                   "options": {"d_in": 16, "d_hidden": 8,
                                                               "batch_size": 8}}))
    assert other_problem[0].seed != runs[0].seed


BAD_SPECS = [
    (dict(TINY, recipes=["dense", "stpe"]), "unknown recipe 'stpe'"),
    (dict(TINY, recipes=["dense", {"name": "asp", "options": {"lamb": 1}}]),
     r"recipes\[1\] \('asp'\): unknown option\(s\) \['lamb'\]"),
    (dict(TINY, recipes=[{"name": "sr-ste", "grid": {"lam": [1e-4], "betaa": [0.9]}}]),
     r"recipes\[0\] \('sr-ste'\): unknown option\(s\) \['betaa'\]"),
    (dict(TINY, problem={"name": "regresion"}), "problems\\[0\\].*unknown problem 'regresion'"),
    (dict(TINY, problem={"name": "regression", "options": {"width": 3}}),
     r"problems\[0\] \('regression'\): unknown option\(s\) \['width'\]"),
    (dict(TINY, criterion="autoswich"), "criterion: unknown criterion 'autoswich'"),
    (dict(TINY, recipes=[{"name": "step", "criteria": ["tang", "agarwall"]}]),
     r"recipes\[0\] \('step'\) criteria\[1\] \('agarwall'\): unknown criterion"),
    (dict(TINY, criterion={"name": "autoswitch", "options": {"windw": "full"}}),
     r"no option\(s\) \['windw'\]"),
    (dict(TINY, nm=["2:4", "1:3"]), "nm=1:3.*'w1'.*not divisible by M = 3"),
    (dict(TINY, nm=["3:2"]), r"nm\[0\]"),
    (dict(TINY, recipes=[]), "'recipes' is an empty list"),
    (dict(TINY, seeds=[]), "'seeds' is an empty list"),
    (dict(TINY, nm=[]), "'nm' is an empty list"),
    (dict(TINY, recipes=[{"name": "sr-ste", "grid": {"lam": []}}]), "grid 'lam' must be"),
    (dict(TINY, recipes=[{"name": "step", "criterion": "none"}]),
     "'step' needs a switch criterion"),
    (dict(TINY, problem={"name": "regression", "options": {"nm": [2, 4]}}),
     "one door for N:M"),
    (dict(TINY, recipes=[{"name": "step", "optimizer": "sgdm"}]),
     r"recipes\[0\] \('step'\): .*needs optimizer='adam'"),
    (dict(TINY, recipes=[{"name": "dense", "optimizer": "sgdm", "criteria": ["autoswitch"]}]),
     "criterion=autoswitch.*momentum SGD"),
    (dict(TINY, seed=3), r"unknown key\(s\) \['seed'\]"),
    (dict(TINY, recipes=["dense", "step", {"name": "dense", "options": {}}]),
     r"4 runs are listed twice \(e.g. regression\(d_hidden=8, d_in=16\), dense"),
]


def test_a_spec_without_a_criterion_gives_step_the_one_default():
    from stepsim.experiments.run import DEFAULT_CRITERION

    runs = plan_sweep({k: v for k, v in TINY.items() if k != "criterion"})
    step = [r for r in runs if r.recipe == "step"]
    assert step and all(r.criterion == DEFAULT_CRITERION[0]
                        and r.criterion_options == DEFAULT_CRITERION[1] for r in step)


@pytest.mark.parametrize("bad, match", BAD_SPECS)
def test_bad_specs_are_rejected_before_any_run(bad, match, tmp_path, monkeypatch):
    def no_runs(*args):
        raise AssertionError("a run started")

    monkeypatch.setattr(executors, "execute", no_runs)
    with pytest.raises((ValueError, TypeError), match=match):
        run_sweep(bad, tmp_path / "out", jobs=1)
    assert not (tmp_path / "out").exists()


def test_cli_rejects_a_bad_toml_spec_naming_the_entry(tmp_path, capsys):
    spec = tmp_path / "bad.toml"
    spec.write_text('steps = 10\nnm = ["2:4"]\n[[recipes]]\nname = "dense"\n'
                    '[[recipes]]\nname = "asp"\noptions = { prune_att = 0.5 }\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "recipes[1] ('asp'): unknown option(s) ['prune_att']" in err
    assert not (tmp_path / "out").exists()


def _arrays(path):
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def same_bits(a: dict, b: dict) -> bool:
    """Two dicts of arrays hold the same keys, dtypes, shapes and bytes (NaNs included)."""
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
        and a[k].tobytes() == b[k].tobytes() for k in a)


def test_a_crash_between_arrays_and_json_is_redone_and_the_table_is_unchanged(tmp_path,
                                                                              monkeypatch):
    straight = run_sweep(TINY, tmp_path / "straight", jobs=1, progress=False)
    assert len(straight) == 8 and not straight.missing
    saves = {"n": 0}
    from stepsim._ground import provenance as _provenance

    original = _provenance.save_json

    def dying_save_json(path, *args, **kwargs):  # the process "dies" after 3 runs' arrays
        if path.parent.name == sweep_dir.RUNS_DIR:
            saves["n"] += 1
            if saves["n"] == 4:
                raise KeyboardInterrupt
        return original(path, *args, **kwargs)

    monkeypatch.setattr(_provenance, "save_json", dying_save_json)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(TINY, tmp_path / "resumed", jobs=1, progress=False)
    partial = load_table(tmp_path / "resumed")
    assert len(partial) == 3 and len(partial.missing) == 5
    # interrupted between its arrays and its JSON, the save withdrew its own .npz: no half
    # pair (a SIGKILL there leaves one: tests/experiments/test_store_faults.py)
    assert len(list((tmp_path / "resumed" / "runs").glob("*.npz"))) == 3
    monkeypatch.setattr(_provenance, "save_json", original)
    resumed = run_sweep(TINY, tmp_path / "resumed", jobs=1, progress=False)
    assert stable_rows(resumed) == stable_rows(straight)
    assert resumed.columns == straight.columns
    for row in straight.rows:  # every run's arrays are the same bits
        name = f"{row['digest']}.npz"
        a = _arrays(tmp_path / "straight" / "runs" / name)
        b = _arrays(tmp_path / "resumed" / "runs" / name)
        assert same_bits(a, b)
    # a third call trains nothing and rebuilds the same table; no run appears twice
    monkeypatch.setattr(executors, "execute", lambda *a: pytest.fail("a finished run re-ran"))
    again = run_sweep(TINY, tmp_path / "resumed", jobs=1, progress=False)
    assert again.rows == resumed.rows
    on_disk = json.loads((tmp_path / "resumed" / "table.json").read_text())["result"]
    assert len(on_disk["rows"]) == 8 and on_disk["rows"] == [dict(r) for r in again.rows]
    assert (tmp_path / "resumed" / "table.csv").read_text() == again.to_csv()


def test_table_rows_carry_parameters_outcomes_and_versions(tmp_path):
    table = run_sweep(dict(TINY, seeds=1), tmp_path, jobs=1, progress=False)
    step = next(r for r in table.rows if r["recipe"] == "step" and r["nm"] == "1:8")
    assert step["problem"] == "regression" and step["problem.d_in"] == 16
    assert step["criterion"] == "autoswitch" and (step["n"], step["m"]) == (1, 8)
    assert step["sparsity"] == 0.875 and step["final_sparsity"] == 0.875
    assert step["seed"] == 0 and step["steps"] == 30 and step["runtime_s"] > 0
    assert step["version.numpy"] == np.__version__
    dense = next(r for r in table.rows if r["recipe"] == "dense")
    assert dense["final_sparsity"] == 0.0 and dense["criterion"] is None
    assert table.where(recipe="step", nm="1:8").rows == (step,)
    assert len(table.where(recipe="dense")) == 2 and len(table.where(recipe="asp")) == 0
    with pytest.raises(ValueError, match=r"unknown column\(s\) \['recipes'\]"):
        table.where(recipes="step")
    doc = json.loads((tmp_path / "runs" / f"{step['digest']}.json").read_text())
    assert doc["provenance"]["seed"] == step["rng_seed"]  # fit got the run's own seed
    assert math.isfinite(step["test_loss"])


def _fake_table():
    """Two recipes x one N:M x 4 seeds, with known metric values."""
    rows = []
    base = [1.0, 2.0, 3.0, 4.0]
    for recipe, shift in (("dense", 0.0), ("step", 0.5)):
        for seed, value in enumerate(base):
            rows.append({"digest": f"{recipe}{seed}", "problem": "regression",
                         "recipe": recipe, "optimizer": "adam", "criterion": None, "nm": "2:4",
                         "n": 2, "m": 4, "sparsity": 0.5, "steps": 10, "seed": seed,
                         "rng_seed": seed, "test_loss": value + shift * (seed + 1)})
    return Table(rows=tuple(rows), columns=tuple(rows[0]))


def test_summarize_and_compare_use_the_stats_functions_on_the_right_groups():
    table = _fake_table()
    summary = summarize(table, "test_loss")
    assert [s["recipe"] for s in summary] == ["dense", "step"]
    ref = stats.mean_ci([1.5, 3.0, 4.5, 6.0])
    assert (summary[1]["n"], summary[1]["mean"], summary[1]["low"]) == (4, ref.mean, ref.low)
    (pair,) = compare(table, "test_loss", baseline="dense")
    ref = stats.paired_difference([1.5, 3.0, 4.5, 6.0], [1.0, 2.0, 3.0, 4.0])
    assert pair["recipe"] == "step" and pair["n"] == 4
    assert (pair["mean_diff"], pair["cohen_dz"], pair["t_pvalue"], pair["wilcoxon_pvalue"]) == (
        ref.mean_diff, ref.cohen_dz, ref.t_pvalue, ref.wilcoxon_pvalue)
    with pytest.raises(ValueError, match="baseline recipe 'asp' has no runs"):
        compare(table, "test_loss", baseline="asp")
    with pytest.raises(ValueError, match="metric 'accuracy' is not a column"):
        summarize(table, "accuracy")
    # two dense conditions differing in an option step does not set: ambiguous pairing
    extra = [dict(r, digest=r["digest"] + "b", **{"recipe.weight_decay": 0.1})
             for r in table.rows if r["recipe"] == "dense"]
    ambiguous = Table(rows=table.rows + tuple(extra), columns=table.columns + (
        "recipe.weight_decay",))
    with pytest.raises(ValueError, match="matches 2 runs of baseline 'dense'"):
        compare(ambiguous, "test_loss", baseline="dense")


def test_figure_is_written_atomically(tmp_path):
    path = plot_vs_sparsity(_fake_table(), "test_loss", tmp_path / "fig.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["fig.png"]


def test_cli_sweep_from_flags_then_report(tmp_path, capsys):
    out = tmp_path / "sw"
    argv = ["sweep", "--recipes", "dense,sr-ste", "--nm", "2:4", "--seeds", "2", "--steps",
            "20", "-p", "d_in=16", "-p", "d_hidden=8", "--grid", "recipe.lr=1e-3,2e-3",
            "--out", str(out), "--jobs", "1"]
    assert main(argv + ["--dry-run"]) == 0
    assert "8 runs; spec OK" in capsys.readouterr().out
    assert not out.exists()
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "paired difference vs dense" in text and "wall time" in text
    table = load_table(out)
    assert len(table) == 8
    # with a grid over lr, each sr-ste condition is paired with dense at its own lr
    pairs = compare(table, "final_loss", baseline="dense")
    assert [(p["recipe"], p["recipe.lr"], p["n"]) for p in pairs] == [
        ("sr-ste", 1e-3, 2), ("sr-ste", 2e-3, 2)]
    for p in pairs:
        def losses(recipe, lr=p["recipe.lr"]):
            return [r["final_loss"] for r in sorted(table.rows, key=lambda r: r["seed"])
                    if r["recipe"] == recipe and r["recipe.lr"] == lr]
        ref = stats.paired_difference(losses("sr-ste"), losses("dense"))
        assert p["mean_diff"] == ref.mean_diff and p["t_pvalue"] == ref.t_pvalue
    assert main(["report", str(out), "--metric", "final_loss", "--ci", "bootstrap"]) == 0
    text = capsys.readouterr().out
    assert "final_loss: mean over seeds, 95% CI (bootstrap)" in text
    assert (out / "final_loss_vs_sparsity.png").is_file()
    assert (out / "report_final_loss.md").read_text() in text
    assert main(["report", str(tmp_path)]) == 2  # not a sweep directory


def test_spec_round_trips_and_reads_toml(tmp_path):
    spec = parse_spec(TINY)
    assert parse_spec(spec.to_dict()) == spec
    path = tmp_path / "s.toml"
    path.write_text('steps = 30\nseeds = 2\nnm = ["2:4", "1:8"]\ncriterion = "autoswitch"\n'
                    'recipes = ["dense", "step"]\n[problem]\nname = "regression"\n'
                    'options = { d_in = 16, d_hidden = 8 }\n')
    assert spec_mod.load_spec(path) == spec
    with pytest.raises(ValueError, match="must end in .toml or .json"):
        spec_mod.load_spec(tmp_path / "s.yaml")


def test_cli_refuses_bad_outputs_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(executors, "execute", lambda *a: pytest.fail("a run started"))
    a_file = tmp_path / "taken"
    a_file.write_text("not a directory")
    argv = ["sweep", "--recipes", "dense", "--steps", "5", "--jobs", "1"]
    assert main(argv + ["--out", str(a_file)]) == 2
    assert "--out" in capsys.readouterr().err and a_file.read_text() == "not a directory"
    assert main(argv + ["--jobs", "0", "--out", str(tmp_path / "o")]) == 2
    assert "--jobs" in capsys.readouterr().err and not (tmp_path / "o").exists()

    monkeypatch.undo()  # a real (one-run) sweep for the report's checks
    run_sweep(dict(TINY, seeds=1, recipes=["dense"], nm=["2:4"]), tmp_path / "sw", jobs=1,
              progress=False)
    before = sorted(p.name for p in (tmp_path / "sw").iterdir())
    for extra, named in ((["--figure", str(tmp_path / "fig.jpeg")], "--figure"),
                         (["--metric", "accuracy"], "--metric 'accuracy'"),
                         (["--confidence", "nan"], "--confidence")):
        assert main(["report", str(tmp_path / "sw"), *extra]) == 2
        err = capsys.readouterr().err
        last = err.strip().splitlines()[-1]  # argparse's usage block may come first
        assert named in last and "Traceback" not in err, err
    assert sorted(p.name for p in (tmp_path / "sw").iterdir()) == before


def test_per_module_switching_and_learning_curves_reach_fit(tmp_path):
    spec = dict(TINY, seeds=1, nm=["2:4"], eval_every=10, recipes=[
        {"name": "step", "criteria": [{"name": "fixed-step", "options": {"k0": 20}},
                                      {"name": "fixed-step",
                                       "options": {"k0": 20, "per_module": True}}]}])
    table = run_sweep(spec, tmp_path, jobs=1, progress=False)
    assert len(table) == 2 and table.column("eval_every") == [10, 10]
    assert table.column("criterion.per_module") == [None, True]
    assert table.column("status") == ["completed", "completed"]
    criteria = []
    for path in sorted((tmp_path / "runs").glob("*.json")):
        result = json.loads(path.read_text())["result"]
        assert result["curves"]["step"] == [0, 10, 20, 30]  # evaluated every 10 steps
        assert set(result["module_switch_steps"].values()) == {20}
        criteria.append(result["criterion"])
    # fit got SwitchWhen(..., per_module=True) for one run and the bare criterion for the other
    assert sum("per_module=True" in c for c in criteria) == 1, criteria
    assert parse_spec(dict(TINY, eval_every=10)).runs(lambda *a: True)[0].eval_every == 10
    assert plan_sweep(TINY)[0].eval_every is None


def test_diverged_runs_are_counted_per_condition_and_marked_not_averaged(tmp_path, capsys):
    """Issue 28: a sweep with diverged runs finishes, its table keeps a status and numeric
    NaN, `stepsim report` counts them per condition (rc 0), and the figure of a one-N:M
    grid shows its CI (error bars) and the diverged runs (x)."""
    from matplotlib.image import imread

    spec = {"steps": 20, "seeds": 3, "nm": ["2:4"], "problem": "regression",
            "recipes": [{"name": "sr-ste", "grid": {"lr": [1e-3, 1e300]}}]}
    out = tmp_path / "sw"
    table = run_sweep(spec, out, jobs=1, progress=False)
    lost = [r for r in table.rows if r["status"] == "non-finite"]
    assert len(lost) == 3 and all(r["recipe.lr"] == 1e300 for r in lost)
    assert all(isinstance(r["test_loss"], float) for r in table.rows)
    assert all(r["diverged_param"] for r in lost)
    on_disk = json.loads((out / "table.json").read_text())["result"]["rows"]
    assert all(isinstance(r["test_loss"], float) for r in on_disk)  # NaN, not "nan"
    cells = {r["recipe.lr"]: r for r in summarize(table, "test_loss")}
    assert (cells[1e300]["n"], cells[1e300]["diverged"]) == (0, 3)
    assert (cells[1e-3]["n"], cells[1e-3]["diverged"]) == (3, 0)
    assert main(["report", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "diverged" in printed and "| 3 |" in printed
    image = imread(out / "test_loss_vs_sparsity.png")[..., :3]
    blue = image[..., 2] - image[..., 0] > 0.25  # the first line's colour, anti-aliased
    assert np.count_nonzero(blue.any(axis=1)) > 100  # the error bar spans the axis height


LEGACY = Path(__file__).parents[1] / "data" / "legacy_sweep"  # written by commit aeb0e34's code
LEGACY_SPEC = {"name": "legacy", "steps": 5, "seeds": 1, "nm": ["2:4"], "criterion": "autoswitch",
               "problem": {"name": "regression", "options": {"d_in": 16, "d_hidden": 8}},
               "recipes": ["dense", "step"]}


def test_a_sweep_folder_from_before_digests_resumes_with_its_runs_kept(tmp_path, monkeypatch,
                                                                      capsys):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(LEGACY, old)
    (old / "runs" / "dense_2-4_s0_5bfb34eb60578f23.json").unlink()  # killed before its JSON
    assert main(["report", str(old)]) == 2  # read-only: says how to convert, in one line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "layout before digests" in err[0] and "--out" in err[0]
    trained = []
    real = executors.execute
    monkeypatch.setattr(executors, "execute", lambda task: trained.append(task) or real(task))
    resumed = run_sweep(LEGACY_SPEC, old, jobs=1, progress=False)
    assert [t.recipe for t in trained] == ["dense"]  # only the unfinished run ran again
    names = sorted(p.name for p in (old / "runs").iterdir() if p.is_file())
    assert names == sorted(f"{r.digest}.{ext}" for r in plan_sweep(LEGACY_SPEC)
                           for ext in ("json", "npz"))  # the orphan .npz is gone
    straight = run_sweep(LEGACY_SPEC, tmp_path / "new", jobs=1, progress=False)
    assert stable_rows(resumed) == stable_rows(straight)
    for name in names:
        if name.endswith(".npz"):
            new = tmp_path / "new" / "runs" / name
            assert same_bits(_arrays(old / "runs" / name), _arrays(new))
    step = next(r for r in plan_sweep(LEGACY_SPEC) if r.recipe == "step")
    doc = json.loads((old / "runs" / f"{step.digest}.json").read_text())
    assert doc["provenance"]["params"]["sweep"]["run_id"] == "c061ce263309527b"  # its record
    assert doc["result"]["arrays"] == f"{step.digest}.npz"
    assert load_table(old).rows == resumed.rows  # report reads it now


def test_one_runner_resumes_from_a_store_and_runs_each_digest_once(tmp_path, monkeypatch):
    from stepsim.experiments.run import RunSpec
    from stepsim.experiments.store import RunStore

    a, b = RunSpec(steps=3, seed=1), RunSpec(steps=3, seed=2)
    trained, done = [], []
    real = executors.execute
    monkeypatch.setattr(executors, "execute", lambda task: trained.append(task) or real(task))
    runs = RunStore(tmp_path)
    executors.run([a, b, a], lambda task, output: done.append(task), jobs=1, store=runs)
    assert trained == [a, b] and done == [a, b] and runs.is_finished(a) and runs.is_finished(b)
    executors.run([b, a], lambda task, output: done.append(task), jobs=1, store=runs)
    assert trained == [a, b] and done == [a, b]  # finished in the store: nothing runs
    assert not list((tmp_path / "claims").iterdir())  # every claim given back


def test_the_old_name_of_jobs_is_refused():
    from stepsim.checks import run_checks

    with pytest.raises(TypeError, match="n_jobs"):
        run_checks(["C12"], n_jobs=1)
    with pytest.raises(TypeError, match="n_jobs"):
        run_sweep(TINY, "unused", n_jobs=1)
