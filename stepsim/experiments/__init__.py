"""Seeded experiment grids (sweeps) that survive a kill, on a local pool or a Dask cluster.

```python
from stepsim.experiments import run_sweep, load_table, summarize, compare

spec = {"steps": 2000, "seeds": 5, "nm": ["2:4", "1:8"],
        "problem": {"name": "regression", "options": {"scale": 0.1}},
        "criterion": "autoswitch",                       # for recipes that need one (STEP)
        "recipes": ["dense", "asp", "sr-ste", "step"]}
table = run_sweep(spec, "runs/baseline", jobs=2)         # or scheduler="tcp://host:8786"
summarize(table, "test_loss")                            # mean and 95% t-CI per condition
compare(table, "test_loss", baseline="dense")            # paired t / Wilcoxon, n, Cohen's d_z
```

* :mod:`~stepsim.experiments.run` — :class:`RunSpec`, one run by names: the one place
  that turns names into problems, recipes and criteria and calls ``fit`` (``stepsim
  train``, sweeps and ``stepsim check`` all go through it).
* :mod:`~stepsim.experiments.spec` — the spec (TOML/JSON/dict), its runs and their seeds.
* :mod:`~stepsim.experiments.store` — result files (atomic, JSON last), the tidy table,
  and a store of runs by digest (:class:`RunStore`, what ``stepsim check`` resumes from).
* :mod:`~stepsim.experiments.executors` — in-process, process pool, Dask (RunSpecs and
  :class:`~stepsim.experiments.tasks.Task`).
* :mod:`~stepsim.experiments.traces` — reductions of a run's trace (v curve, windowed Z,
  Table 1 scores).
* :mod:`~stepsim.experiments.runner` — :func:`plan_sweep` (check everything, train
  nothing) and :func:`run_sweep` (resume-safe).
* :mod:`~stepsim.experiments.report` — summaries, paired comparisons, the figure.
"""

from stepsim.experiments.report import (
    compare,
    plot_vs_sparsity,
    report_markdown,
    summarize,
)
from stepsim.experiments.run import RunSpec
from stepsim.experiments.runner import plan_sweep, run_sweep
from stepsim.experiments.spec import Run, SweepSpec, load_spec, parse_spec
from stepsim.experiments.store import Table, load_table

__all__ = ["Run", "RunSpec", "SweepSpec", "Table", "compare", "load_spec", "load_table",
           "parse_spec", "plan_sweep", "plot_vs_sparsity", "report_markdown", "run_sweep",
           "summarize"]
