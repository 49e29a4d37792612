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
* :mod:`~stepsim.experiments.sweep_spec` — the sweep spec (TOML/JSON/dict), its runs
  (RunSpecs) and their seeds.
* :mod:`~stepsim.experiments.store` — the store of finished runs by digest, with its claim
  locks (:class:`RunStore`: what a sweep and ``stepsim check`` resume from).
* :mod:`~stepsim.experiments.store_files` — a stored run's files judged whole or damaged
  (verified on every read), and damaged ones set aside in ``runs/damaged/``.
* :mod:`~stepsim.experiments.sweep_dir` — a sweep directory: its plan (``sweep.json``),
  its RunStore and the tidy table.
* :mod:`~stepsim.experiments.executors` — :func:`~stepsim.experiments.executors.run`, the
  one task runner (resume from a RunStore; in-process, process pool or Dask) for RunSpecs
  and :class:`~stepsim.experiments.tasks.Task`.
* :mod:`~stepsim.experiments.traces` — reductions of a run's trace (v curve, windowed Z,
  Table 1 scores).
* :mod:`~stepsim.experiments.sweep` — :func:`plan_sweep` (check everything, train
  nothing) and :func:`run_sweep` (resume-safe).
* :mod:`~stepsim.experiments.sweep_report` — a sweep table's summaries, paired comparisons,
  the figure.

One run: ``stepsim train`` and :class:`RunSpec`
-----------------------------------------------
A run of ``stepsim train``, a sweep row and a paper check's run are each one
:class:`RunSpec` (problem, recipe, optimizer, criterion and their options, N:M, steps,
seed, ``eval_every``, loss scale): ``spec.check()`` raises what ``fit`` would,
``spec.run()`` trains, ``spec.to_json()`` / ``RunSpec.from_json`` round-trip, and
``spec.digest`` (SHA-256 of the canonical JSON) names the run. Its defaults are stated
once, in :mod:`~stepsim.experiments.run`: a recipe that needs a criterion and names none
gets AutoSwitch clipped to [0.1 T, 0.5 T] (``DEFAULT_CRITERION``; ``--criterion
autoswitch`` is the unclipped Algorithm 2); an optimizer's lr is its own (Adam 1e-3, SGD-M
1e-2; ``--lr`` only when given); N:M enters through ``nm`` alone (``--nm``, ``-p nm=N:M``),
which is the problem's ``nm`` option.

The names a run accepts:

* recipes (:func:`stepsim.make_recipe`): ``dense``, ``ste``, ``sr-ste``, ``asp``, ``step``
  (Algorithm 1), ``step-v-updated``, ``decaying-mask``, ``layerwise-sr-ste``,
  ``layerwise-step``, ``s-ste``, ``masked-decay``, ``s-ste-step`` (the successors; every recipe
  takes ``transposable``); optimizer ``adam`` | ``adamw`` | ``sgdm``. Options a recipe would not
  use are refused. ``layerwise-step`` switches per module with DominoSearch's dynamic N
  (``layerwise_rule="greedy"`` keeps the one-shot rule; ``domino_deadline``, default half of
  the sparse phase, lifts the vote bar so a short run still meets its target:
  :mod:`stepsim.recipes.domino`). The decaying mask's alpha counts t from the start of the
  sparse phase (``alpha_clock="frame"`` restarts it per frame).
* criteria (:func:`stepsim.make_criterion`): ``autoswitch`` (Algorithm 2; ``variant="I"|"II"``,
  ``window="full"|"partial"``, ``stats_on="v"|"vhat"``, ``zero_rule="skip"|"zero"|"floor"``,
  ``clip=True, t_min=0.1, t_max=0.5``), ``agarwal`` (Eq. 10), ``tang`` (Eq. 11),
  ``fixed-step``, ``fixed-fraction``; ``per_module=true`` gives each parameter its own
  criterion state, switch step and frozen v* (``FitResult.module_switch_steps``). The window
  is T_w = floor(1/(1 - beta2)), computed robustly: ``window_length(0.999) == 1000``.
* ``fit(eval_every=K)`` records learning curves (``FitResult.curves``); a non-finite loss or
  gradient stops a run with ``status="non-finite"``, ``stopped_at`` and a message naming
  the parameter. ``fit`` itself takes objects only: a criterion, or a switch schedule
  (``SwitchAt``, ``SwitchWhen``); a recipe built with an explicit ``switch_at`` /
  ``prune_at`` / ``dense_fraction`` plus a criterion is an error.

Examples of ``stepsim train`` (``--json`` writes the summary with provenance and an .npz
with the trace and the weights beside it)::

    stepsim train --recipe step --criterion autoswitch --nm 2:4 --steps 3000 --scale 0.1
    stepsim train --recipe sr-ste --optimizer sgdm --lr 0.05 -o lam=2e-4
    stepsim train --recipe asp -o prune_at=0.5 --json runs/asp.json
    stepsim train --recipe dense --criterion tang --steps 5000      # Table 1 score of its k0
    stepsim train --recipe step --criterion fixed-fraction -c fraction=0.2 -o v_star=bias-corrected

``-p/-o/-c KEY=VALUE`` share one value grammar in train, sweep and check
(:func:`stepsim.cli.args.value`): ``-p hidden=64,`` is a one-element tuple, ``-p nm=1:4``
an N:M.

Sweeps
------
A sweep is a grid of runs — problem options x recipe (+ options) x criterion (+ options) x
N:M x steps x seeds — from a TOML/JSON spec (:mod:`~stepsim.experiments.sweep_spec`) or from
flags. Its runs are RunSpecs too (``SweepSpec.runs()``), named by their digest in one
:class:`~stepsim.experiments.store.RunStore` (``--out DIR/runs/``) and run by
:func:`executors.run <stepsim.experiments.executors.run>`, as a check's are. Each run
writes its trace and weights (.npz) and then its summary JSON with provenance, both
atomically; the tidy table (one row per run: every parameter, final metrics, switch step,
runtime, versions) is rebuilt from those files, so a sweep killed at any moment (``kill
-9`` included) resumes with the same command and never loses or duplicates a row (a
directory from before runs were named by digest is converted in place and resumed). Two
sweeps started on one ``--out`` (or on machines sharing it) split the runs instead of
repeating them: each locks a run's claim file before running it (a killed process's locks
vanish with it). A run's seed is a hash of its problem and seed index,
never its grid position: recipes compared at one seed index share initial weights and
minibatches, and the bits are the same on any executor. Every spec is checked before any
run (unknown recipe/problem/criterion, an option a recipe does not take, an N:M that does
not tile a layer, an empty grid), naming the entry::

    stepsim sweep stepsim/experiments/specs/baseline.toml --out sweeps/baseline --jobs 2
    stepsim sweep stepsim/experiments/specs/digits.toml --out sweeps/digits
    stepsim sweep --recipes dense,asp,sr-ste,step --nm 2:4,1:8 --seeds 5 -p scale=0.1 --out sw
    stepsim sweep --recipes dense,sr-ste --grid recipe.lr=1e-3,3e-3 --seeds 3 --out sw2
    stepsim sweep SPEC --scheduler tcp://10.0.0.5:8786    # workers: dask worker ADDR --nthreads 1
    stepsim report sweeps/baseline --metric test_loss     # table + metric-vs-sparsity figure

Statistics over seeds are :mod:`stepsim.stats` (``mean_ci``, ``paired_difference``, on
scipy.stats). With 5 seeds a two-sided Wilcoxon p-value can never go below 2/2^5 = 0.0625.

``stepsim check`` builds its runs as RunSpecs too and runs them through the same executors
into a :class:`RunStore` under ``--out DIR/runs/`` (by digest: a run two claims ask for
runs once, and a killed check resumes where it stopped); see :mod:`stepsim.checks`.
"""

from stepsim.experiments.run import RunSpec
from stepsim.experiments.sweep import plan_sweep, run_sweep
from stepsim.experiments.sweep_dir import Table, load_table
from stepsim.experiments.sweep_report import (
    compare,
    plot_vs_sparsity,
    report_markdown,
    summarize,
)
from stepsim.experiments.sweep_spec import SweepSpec, load_spec, parse_spec

__all__ = ["RunSpec", "SweepSpec", "Table", "compare", "load_spec", "load_table",
           "parse_spec", "plan_sweep", "plot_vs_sparsity", "report_markdown", "run_sweep",
           "summarize"]
