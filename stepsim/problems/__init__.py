"""Problems that :func:`stepsim.training.fit` trains on, and the protocol they follow.

See :class:`stepsim.problems.base.Problem`. Problems know nothing of recipes. Registered
by name (:data:`PROBLEMS`, :func:`make_problem`): ``regression``
(:class:`SyntheticRegression`), ``digits`` (:class:`~stepsim.problems.digits.Digits`),
``teacher`` (:class:`~stepsim.problems.teacher.TeacherStudent`), ``nqm``
(:class:`~stepsim.problems.nqm.NoisyQuadratic`), ``lm``
(:class:`~stepsim.problems.lm.LanguageModel`) and ``mnist1d``
(:class:`~stepsim.problems.mnist1d.MNIST1D`); all but the regression are imported on
first use. Every front end (``fit``, ``stepsim train --problem NAME``, sweeps, checks)
takes them by name:

* ``regression`` — a two-layer linear net on a synthetic teacher; ``evaluate()``: train/test
  loss.
* ``digits`` — scikit-learn's 8x8 digits, a stratified seeded split, a ReLU MLP (default
  64-256-256-10), batch 128; test/train accuracy and loss.
* ``teacher`` — a student MLP learns a random (optionally N:M-sparse) teacher MLP,
  classification or regression, widths to 1024 and more; test loss/accuracy and mask
  recovery (hidden units aligned first).
* ``nqm`` — the noisy quadratic 1/2 sum h_i (w_i - w*_i)^2, h_i ~ i^-alpha, gradient noise
  variance c_i / B; loss, the best N:M loss, mask optimality.
* ``lm`` — a small GPT-style transformer on a seeded order-k Markov language whose best
  loss (``entropy_floor``) is exact; test loss, its ``gap`` to the floor, the Bayes
  predictor's loss, next-token accuracy beside the Bayes predictor's.
* ``mnist1d`` — a 1-D CNN (stride-2 conv + ReLU blocks, a linear head; N:M over input
  channels at each kernel tap) on MNIST-1D, the ``mnist1d`` package's procedural signals
  (its global-RNG side effect undone), the package's 4000/1000 train/test split with a
  seeded validation split carved from train; error (points) and loss of the test,
  validation and training splits, ``item_errors(params, split=...)``.

A problem's options are its constructor's keyword arguments, declared once in the class's
``OPTIONS`` (:mod:`stepsim._ground.options`: name -> (constraint, default, help); ``-p KEY=VALUE``
on the command line; ``stepsim train --problem digits --problem-options`` lists them with
their defaults and help)::

    stepsim train --problem digits --recipe step --nm 1:8 --criterion autoswitch -c clip=true
    stepsim train --problem teacher -p hidden=1024 --teacher-nm 2:4 --recipe sr-ste --json t.json
    stepsim train --problem nqm -p dim=64 -p alpha=1.5 --recipe ste --lr 0.01

``lm`` from Python (about 1500 steps to learn the language; sizes as ``paper_checks/lm.md``)::

    problem = make_problem("lm", vocab=16, order=2, temperature=0.7, context=32, width=32,
                           blocks=2, heads=2)
    run = fit(problem, make_recipe("sr-ste", lr=1e-2), 1500, rng=0, nm=(2, 4))
    run.metrics["gap"], run.metrics["entropy_floor"], run.metrics["accuracy"]

Its linear weights are stored (out, in) and sparsified N:M along the input axis; ``sparse=``
picks which (``wq wk wv wo w1 w2 head``; default every linear module, as the paper for
BERT and GPT-2). ``python paper_checks/lm_closing.py`` runs dense, SR-STE and STEP at 2:4
and 1:8 under Adam and momentum SGD (3 seeds) and writes ``paper_checks/lm_closing.{json,md}``.

With Adam's v frozen (STEP's phase 2) and a fixed mask, the NQM's expected loss at every
step has an exact closed form (:meth:`NoisyQuadratic.expected_loss`, derived in
:mod:`stepsim.problems.nqm`)::

    nqm = NoisyQuadratic(dim=64, alpha=1.0, batch_size=4)
    precond = frozen_adam_precond(nqm.h**2 + nqm.noise_var)      # 1 / sqrt(v* + eps)
    curve = nqm.expected_loss(500, lr=0.01, beta1=0.9, precond=precond, mask=nqm.best_mask())

:class:`~stepsim.problems.scaled.ScaledLoss` multiplies a problem's loss by a constant
(``RunSpec(loss_scale=...)``): does a criterion depend on the loss's units?

A known hazard on digits: STEP freezes v* at its switch. When the dense phase has fit the
training set before the switch (v ~ 1e-7), v* is far too small for the gradients after
pruning to a high sparsity, and STEP can diverge (seen at 1:8 with a 64-256-256-10 MLP and a
switch at 1000 of 2000 steps: |m| / sqrt(v*) reached 1e5).

Your own problem: a class following :class:`~stepsim.problems.base.Problem`, with an
``OPTIONS`` table of its keyword options, added to :data:`PROBLEMS` in
:mod:`stepsim.problems.registry`; ``fit``, ``stepsim train``, sweeps
and the training claims' machinery then take it by name.
"""

from __future__ import annotations

from stepsim.problems.base import Problem
from stepsim.problems.registry import PROBLEMS, make_problem, problem_options
from stepsim.problems.synthetic import SyntheticRegression

__all__ = ["PROBLEMS", "Problem", "SyntheticRegression", "make_problem", "problem_options"]
