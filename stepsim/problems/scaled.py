"""A problem whose training loss, and so every gradient, is multiplied by a constant.

Used to ask whether a switch criterion depends on the units of the loss (Adam's update is
scale-free up to eps; v scales by the factor squared): ``RunSpec(loss_scale=0.01)``.
"""

from __future__ import annotations


class ScaledLoss:
    """``problem`` with its training loss (and gradients) multiplied by ``factor``.

    The held-out metrics (``evaluate``) are the wrapped problem's, unscaled: only the units
    of the loss the optimizer sees change.
    """

    def __init__(self, problem, factor: float):
        self.problem = problem
        self.factor = float(factor)
        self.specs = problem.specs

    def __repr__(self):
        return f"ScaledLoss({self.problem!r}, factor={self.factor:g})"

    def init_params(self, rng):
        return self.problem.init_params(rng)

    def sample_batch(self, rng):
        return self.problem.sample_batch(rng)

    def loss_and_grad(self, params, batch):
        loss, grads = self.problem.loss_and_grad(params, batch)
        return self.factor * loss, {k: g * g.dtype.type(self.factor) for k, g in grads.items()}

    def evaluate(self, params):
        return self.problem.evaluate(params)

    def __getattr__(self, name):  # item_errors and other read-only extras of the problem
        if name == "problem":  # not yet set (during unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.problem, name)

    def config(self):
        return dict(self.problem.config(), loss_factor=self.factor)
