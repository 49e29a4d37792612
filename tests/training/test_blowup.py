"""The blow-up stop: a run whose batch loss blows up without going non-finite is stopped and
counted as diverged (``fit(blowup=(window, multiple))``, ``RunSpec(blowup=...)``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stepsim import fit, make_recipe
from stepsim.experiments import RunSpec
from stepsim.fit_result import STATUS_BLOWUP, STATUS_COMPLETED
from stepsim.problems import make_problem


def _digits():
    return make_problem("digits", hidden=(16,), batch_size=32)


def test_a_loss_that_blows_up_stops_the_run_at_the_first_window_above_the_multiple():
    # Adam at lr 3: the loss jumps to hundreds of nats at once and stays finite
    recipe = make_recipe("dense", lr=3.0)
    watched = fit(_digits(), recipe, 400, rng=1, progress=False, blowup=(10, 10.0))
    assert watched.status == STATUS_BLOWUP and not watched.success
    k = watched.stopped_at
    loss = watched.trace.loss
    assert len(loss) == k and k >= 10
    means = [math.fsum(loss[j - 10:j]) / 10 for j in range(10, k + 1)]
    assert means[-1] > 10 * loss[0] and all(m <= 10 * loss[0] for m in means[:-1])
    assert "above 10 x the initial" in watched.message
    # the same run unwatched goes on, finite: the stop changes nothing before it
    plain = fit(_digits(), recipe, k, rng=1, progress=False)
    assert plain.success
    assert np.array_equal(plain.trace.loss[:k], loss)


def test_a_healthy_run_is_not_stopped_and_keeps_its_bits():
    kw = dict(rng=2, progress=False)
    watched = fit(_digits(), make_recipe("sr-ste", lr=1e-3), 120, blowup=(20, 10.0), **kw)
    plain = fit(_digits(), make_recipe("sr-ste", lr=1e-3), 120, **kw)
    assert watched.status == STATUS_COMPLETED and watched.stopped_at is None
    for name, w in plain.weights.items():
        assert np.array_equal(w, watched.weights[name])


def test_runspec_carries_the_stop_and_keeps_old_digests_without_it():
    old = RunSpec(problem="digits", recipe="dense", steps=50, seed=0)
    assert "blowup" not in old.to_dict()
    spec = old.replace(blowup=(20, 10))
    assert spec.blowup == (20, 10.0) and spec.digest != old.digest
    assert RunSpec.from_json(spec.to_json()) == spec
    assert "blows up" in spec.describe()
    for bad, err in [((0, 10.0), ValueError), ((20, 1.0), ValueError), ((20, math.inf),
                     ValueError), ((20,), TypeError), ("20x", TypeError)]:
        with pytest.raises(err, match="blowup"):
            old.replace(blowup=bad)
