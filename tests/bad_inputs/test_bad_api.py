"""Bad inputs to the public API, table-driven (issue 10, item 7).

Every row is one bad input: it must raise the right exception type with a one-line message
naming the argument. Never a traceback, a segfault or a silently wrong number. The input
files are conftest.py's ``files``; the command line's rows are in test_bad_cli.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tests.bad_inputs.limits import _address_space_limit, _limit_if_huge


# --------------------------------------------------------------------------- public API
def _adam_arrays(n=8, v_value=1.0):
    w, g, m = (np.ones(n, np.float32) for _ in range(3))
    return w, g, m, np.full(n, v_value, np.float32)


def _adam(**kw):
    from stepsim import adam_step

    w, g, m, v = kw.pop("arrays", None) or _adam_arrays()
    return adam_step(w, kw.pop("g", g), m, kw.pop("v", v), **dict({"step": 1, "lr": 0.1}, **kw))


def _read_only_g_is_accepted_or_refused_for_its_real_reason():
    from stepsim import adam_step

    w, g, m, v = _adam_arrays()
    g.setflags(write=False)
    try:
        adam_step(w, g, m, v, step=1, lr=0.1)
    except ValueError as exc:
        if "updated in place" in str(exc):  # g is never written: that is not the reason
            raise AssertionError(f"read-only g refused for a wrong reason: {exc}") from None
        raise ValueError(f"g: {exc}") from None  # an honest refusal is acceptable
    w2, g2, m2, v2 = _adam_arrays()
    adam_step(w2, g2, m2, v2, step=1, lr=0.1)
    assert np.array_equal(w, w2)
    raise ValueError("g read-only accepted: ok")  # the row expects a ValueError naming g


def _fit(**kw):
    from stepsim.problems import SyntheticRegression
    from stepsim.recipes import make_recipe
    from stepsim.training import fit

    problem = kw.pop("problem", SyntheticRegression())
    return fit(problem, make_recipe("dense"), kw.pop("steps", 3), progress=False, **kw)


def _corrupt_meta():
    from stepsim.sparse24 import compress_2to4, spmm_2to4

    dense = np.zeros((32, 32), np.float16)
    dense[:, ::2] = 1
    values, meta = compress_2to4(dense)
    return spmm_2to4(values, np.zeros_like(meta), np.ones((32, 4), np.float16))


def _truncated_compressed(files):
    from stepsim.sparse24 import load_compressed

    return load_compressed(files["truncated"])


def _missing_array(files, tmp_name="missing_key.npz"):
    import json

    from stepsim.sparse24 import compress_2to4, load_compressed, save_compressed

    dense = np.zeros((32, 32), np.float16)
    dense[:, ::2] = 1
    path = Path(files["d"]) / tmp_name
    save_compressed(path, {"w": compress_2to4(dense)})
    with np.load(path) as z:
        kept = {k: z[k] for k in z.files if k != "w.meta"}
    assert "w" in json.loads(str(kept["__stepsim__"]))["tensors"]
    np.savez(path, **kept)
    return load_compressed(path)


class _BadAnswer:
    """A custom problem (the regression) whose loss_and_grad answer is spoiled by ``spoil``."""

    def __init__(self, spoil, **options):
        from stepsim.problems import SyntheticRegression

        self._inner, self._spoil = SyntheticRegression(**options), spoil

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def loss_and_grad(self, params, batch):
        loss, grads = self._inner.loss_and_grad(params, batch)
        return self._spoil(loss, dict(grads))


def _spoil_first(change):
    """A spoil function changing the first parameter's gradient with ``change``."""
    def spoil(loss, grads):
        first = next(iter(grads))
        return loss, dict(grads, **{first: change(grads[first])})
    return spoil


def _bad_fit(spoil, **options):
    return lambda files: _fit(problem=_BadAnswer(spoil, **options))


def _sweep_table(files):
    from stepsim.experiments import load_table

    return load_table(files["sweep"])


def api(call, exc, pattern, *marks, id):
    return pytest.param(call, exc, pattern, marks=marks, id=id)


def _np(f):
    return lambda files: f()


def _progress_with_interval(text):
    """A Progress made under STEPSIM_PROGRESS_INTERVAL=text, outside a terminal."""
    import io
    import os

    from stepsim._ground.progress import Progress

    saved = {k: os.environ.pop(k, None) for k in ("STEPSIM_PROGRESS",
                                                  "STEPSIM_PROGRESS_INTERVAL")}
    os.environ["STEPSIM_PROGRESS_INTERVAL"] = text
    try:
        return Progress(3, "x", stream=io.StringIO())
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None)
            if value is not None:
                os.environ[key] = value


def _bound(kind, *, process="ar1", delta=0.05, dim=1):
    from stepsim.theorem1 import make_process
    from stepsim.theorem1.bounds import bound

    return bound(kind, make_process(process), beta2=0.9, k0=20, lags=[1, 5], delta=delta,
                 dim=dim)


API_CASES = [
    # ---- optimizer steps
    api(_np(lambda: _adam(lr=-1.0)), ValueError, r"lr must be in \[0\.0, inf\)", id="adam-lr"),
    api(_np(lambda: _adam(lr=float("nan"))), ValueError, r"lr must be finite", id="adam-lr-nan"),
    api(_np(lambda: _adam(beta1=1.0)), ValueError, r"beta1 must be in \[0\.0, 1\.0\)",
        id="adam-beta1"),
    api(_np(lambda: _adam(beta2=-0.1)), ValueError, r"beta2", id="adam-beta2"),
    api(_np(lambda: _adam(step=0)), ValueError, r"step must be >= 1", id="adam-step"),
    api(_np(lambda: _adam(g=np.ones(4, np.float32))), ValueError, r"g has shape \(4,\)",
        id="adam-shape"),
    api(_np(lambda: _adam(g=np.ones(8))), TypeError, r"g has dtype float64", id="adam-dtype"),
    api(_np(lambda: _adam(g=[1.0] * 8)), TypeError, r"g must be a numpy\.ndarray",
        id="adam-list"),
    api(_np(lambda: _adam(g=np.full(8, np.nan, np.float32))), ValueError,
        r"g contains 8 non-finite", id="adam-nan-gradient"),
    api(_np(lambda: _adam(arrays=_adam_arrays(), eps=0.0)), ValueError, r"eps",
        id="adam-eps-zero"),
    api(_np(lambda: _adam(arrays=_adam_arrays(v_value=-1.0), freeze_v=True)), ValueError,
        r"\bv\b.*(negative|>= 0)", id="adam-frozen-negative-v"),
    api(_np(_read_only_g_is_accepted_or_refused_for_its_real_reason), ValueError, r"\bg\b",
        id="adam-read-only-g"),
    api(_np(lambda: __import__("stepsim").sgdm_step(*_adam_arrays()[:3], lr=0.1,
                                                      momentum=1.0)),
        ValueError, r"momentum must be in \[0\.0, 1\.0\)", id="sgdm-momentum"),
    # ---- masks
    api(_np(lambda: __import__("stepsim").nm_mask(np.ones((2, 8)), 5, 4)), ValueError,
        r"n must be <= m", id="nm_mask-n-above-m"),
    api(_np(lambda: __import__("stepsim").nm_mask(np.ones((2, 6)), 2, 4)), ValueError,
        r"not divisible by m = 4", id="nm_mask-not-divisible"),
    api(_np(lambda: __import__("stepsim").nm_mask(np.full((2, 8), np.nan), 2, 4)), ValueError,
        r"w contains 16 NaN", id="nm_mask-nan"),
    api(_np(lambda: __import__("stepsim").nm_mask(np.ones((2, 8), int), 2, 4)), TypeError,
        r"w must have dtype", id="nm_mask-int"),
    api(_np(lambda: __import__("stepsim").nm_mask(np.ones((2, 8)), 2.0, 4)), TypeError,
        r"n must be an integer", id="nm_mask-n-float"),
    api(_np(lambda: __import__("stepsim").nm_mask(np.ones((2, 8)), 2, 4, axis=5)), ValueError,
        r"axis=5 is out of range", id="nm_mask-axis"),
    # ---- 2:4 layout, spmm, casts, files
    api(_np(_corrupt_meta), ValueError, r"meta holds nibble 0x0 for row 0, group 0",
        id="spmm-corrupt-meta"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.compress_2to4(
        np.zeros((32, 32)))), TypeError, r"the 2:4 layout supports dense dtypes",
        id="compress_2to4-float64"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.compress_2to4(
        np.zeros((30, 32), np.float16))), ValueError, r"dense has shape \(m, k\) = \(30, 32\)",
        id="compress_2to4-shape"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.compress_2to4(
        np.ones((32, 32), np.float16))), ValueError, r"dense is not 2:4 sparse: row 0",
        id="compress_2to4-dense"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.round_tf32(np.array(["a"]))),
        TypeError, r"x must be a real numeric array", id="round_tf32-strings"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.cast_values(
        np.full(4, 1e6), np.float16)), ValueError, r"largest \|value\| 1e\+06 does not fit",
        id="cast_values-overflow"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.cast_values(
        np.full(4, np.nan), np.float16, name="w")), ValueError, r"w contains 4 NaN",
        id="cast_values-nan"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.cast_values(
        np.ones(4), np.int8)), TypeError, r"converts to float dtypes", id="cast_values-int8"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.compress_nm(
        [[1.0] * 8], 2, 4)), TypeError, r"dense must be a numpy\.ndarray", id="compress_nm-list"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.save_compressed(
        "unused.npz", {})), TypeError, r"tensors must be a non-empty dict",
        id="save_compressed-empty"),
    api(_truncated_compressed, ValueError, r"compressed file .*truncated\.npz is truncated",
        id="load_compressed-truncated"),
    api(lambda files: __import__("stepsim.sparse24").sparse24.load_compressed(
        files["text_npz"]), ValueError, r"compressed file .*text\.npz is not a \.npz file",
        id="load_compressed-text"),
    api(lambda files: __import__("stepsim.sparse24").sparse24.load_compressed(
        files["good_npz"]), ValueError, r"good\.npz is not a stepsim compressed file",
        id="load_compressed-foreign"),
    api(_missing_array, ValueError, r"missing_key\.npz: the header lists 'w' but the file has "
        r"no w\.meta", id="load_compressed-missing-array"),
    # ---- theorem1
    api(_np(lambda: __import__("stepsim.theorem1").theorem1.check_theorem1(
        trials=0, dim=2, horizon=10)), ValueError, r"trials must be >= 1",
        id="check_theorem1-trials"),
    api(_np(lambda: __import__("stepsim.theorem1").theorem1.check_theorem1(
        trials=2, dim=2, horizon=10, bound="nope")), ValueError,
        r"bound must be one of .*'nope'|unknown bound 'nope'", id="check_theorem1-bound"),
    api(_np(lambda: _bound("chebyshev", delta=0.0)), ValueError, r"delta must be in",
        id="bound-delta-zero"),
    api(_np(lambda: _bound("chebyshev", delta=1.0)), ValueError, r"delta must be in",
        id="bound-delta-one"),
    api(_np(lambda: _bound("chebyshev", dim=0)), ValueError, r"dim must be >= 1",
        id="bound-dim-zero"),
    api(_np(lambda: _bound("nope")), ValueError, r"bound must be one of .*'nope'|unknown "
        r"bound 'nope'", id="bound-kind"),
    api(_np(lambda: _bound("plugin")), ValueError, r"the plug-in bound needs y_pre",
        id="bound-plugin-no-data"),
    api(_np(lambda: _bound("markov-chernoff", delta=1.5, process="regime")), ValueError,
        r"delta must be in", id="bound-chernoff-delta"),
    api(_np(lambda: _bound("markov-chernoff", dim=0, process="regime")), ValueError,
        r"dim must be >= 1", id="bound-chernoff-dim"),
    api(_np(lambda: _bound("copula-chernoff", process="uniform")), ValueError,
        r"Statement A'\+ does not apply", id="bound-copula-chernoff-uniform"),
    api(_np(lambda: __import__("stepsim.theorem1.copula").theorem1.copula.majorant(0.0)),
        ValueError, r"tangent point t must be a finite number > 0", id="copula-tangent-zero"),
    api(_np(lambda: __import__("stepsim.theorem1.copula").theorem1.copula.log_mgf(
        np.ones(3), np.ones(1), rho=1.0)), ValueError, r"rho must be in \(-1, 1\)",
        id="copula-rho-one"),
    api(_np(lambda: _bound("sticky-chernoff", process="regime")), ValueError,
        r"Statement B'\+ does not apply", id="bound-sticky-chernoff-regime"),
    api(_np(lambda: __import__("stepsim.theorem1.sticky").theorem1.sticky.log_mgf(
        np.ones(3), np.ones(1), q=0.0)), ValueError, r"q must be in \(0, 1\], got 0\.0",
        id="sticky-q-zero"),
    api(_np(lambda: __import__("stepsim.theorem1.sticky").theorem1.sticky.log_mgf(
        np.ones(3), np.ones(1), q=1.5)), ValueError, r"q must be in \(0, 1\], got 1\.5",
        id="sticky-q-above-one"),
    api(_np(lambda: __import__("stepsim.theorem1.sticky").theorem1.sticky.log_mgf(
        np.ones(0), np.ones(1), q=0.1)), ValueError, r"w must be a non-empty array",
        id="sticky-w-empty"),
    api(_np(lambda: __import__("stepsim.theorem1.sticky").theorem1.sticky.log_mgf_bracket(
        np.ones(3), np.ones(1), q=0.1, nodes=0)), ValueError,
        r"nodes must be an integer >= 1, got 0", id="sticky-nodes-zero"),
    api(_np(lambda: __import__("stepsim.theorem1.chernoff").theorem1.chernoff.gaussian_log_mgf(
        np.ones(3), np.ones(1), gamma_g=np.array([1.0, 2.0, 0.0]))), ValueError,
        r"gamma_g is not positive semi-definite", id="chernoff-gaussian-not-psd"),
    api(_np(lambda: _bound("markov", process="sine")), ValueError,
        r"process 'sine' is not a function of a chain", id="bound-markov-sine"),
    api(_np(lambda: __import__("stepsim.theorem1").theorem1.check_theorem1(
        trials=2, dim=2, horizon=10, seed=-1)), ValueError, r"seed must be >= 0",
        id="check_theorem1-seed"),
    api(_np(lambda: __import__("stepsim.theorem1").theorem1.check_theorem1(
        trials=2, dim=2, horizon=10, engine="gpu")), ValueError, r"unknown engine 'gpu'",
        id="check_theorem1-engine"),
    api(_np(lambda: __import__("stepsim.theorem1").theorem1.check_theorem1(
        trials=10**8, dim=10**8, horizon=10)), ValueError, r"would need .* available",
        id="check_theorem1-memory"),
    # ---- recipes, criteria, problems, fit
    api(_np(lambda: __import__("stepsim.recipes").recipes.make_recipe("nope")), ValueError,
        r"unknown recipe 'nope'", id="make_recipe-name"),
    api(_np(lambda: __import__("stepsim.recipes.criteria").recipes.criteria.make_criterion(
        "fixed-fraction", fraction=2.0)), ValueError, r"fraction must be in \[0\.0, 1\.0\]",
        id="make_criterion-fraction"),
    api(_np(lambda: __import__("stepsim.problems.registry").problems.registry.make_problem(
        "nope")), ValueError, r"unknown problem 'nope'", id="make_problem-name"),
    api(_np(lambda: __import__("stepsim.problems").problems.SyntheticRegression(d_in=0)),
        ValueError, r"d_in must be >= 1", id="SyntheticRegression-d_in"),
    api(_np(lambda: __import__("stepsim.problems").problems.SyntheticRegression(nm="2:4")),
        TypeError, r"\bnm\b", id="SyntheticRegression-nm-string"),
    api(_np(lambda: __import__("stepsim.problems").problems.SyntheticRegression(
        d_in=10**9, d_hidden=10**9)), ValueError, r"would need .* available",
        id="SyntheticRegression-memory"),
    api(_np(lambda: __import__("stepsim.problems.registry").problems.registry.make_problem(
        "lm", width=100000)), ValueError, r"^problem lm with .*width=100000.* would need .* "
        r"of memory; .* available$", id="make_problem-lm-memory"),
    api(_np(lambda: __import__("stepsim.problems.registry").problems.registry.make_problem(
        "digits", hidden=(10**7,))), ValueError, r"^problem digits with hidden=\(10000000,\)",
        id="make_problem-digits-memory"),
    api(_np(lambda: __import__("stepsim.problems.registry").problems.registry.make_problem(
        "teacher", n_train=10**10)), ValueError, r"^problem teacher with .*n_train=10000000000",
        id="make_problem-teacher-memory"),
    api(_np(lambda: __import__("stepsim.problems.registry").problems.registry.make_problem(
        "nqm", dim=10**11)), ValueError, r"^problem nqm with dim=100000000000.* would need",
        id="make_problem-nqm-memory"),
    api(_np(lambda: __import__("stepsim.problems.registry").problems.registry.make_problem(
        "regression", n_samples=10**10)), ValueError,
        r"^problem regression with .*n_samples=10000000000", id="make_problem-regression-memory"),
    api(_np(lambda: _progress_with_interval("soon")), ValueError,
        r"^STEPSIM_PROGRESS_INTERVAL must be a positive number of seconds, got 'soon'$",
        id="progress-interval-text"),
    api(_np(lambda: _progress_with_interval("-1")), ValueError,
        r"^STEPSIM_PROGRESS_INTERVAL must be a positive number of seconds, got '-1'$",
        id="progress-interval-negative"),
    api(lambda files: __import__("stepsim.cli.args").cli.args.output_path(
        files["d"] + "/no/such/x.json", option="--json"), ValueError,
        r"^--json .*no/such/x\.json: directory .*no/such does not exist; create it first",
        id="output_path-missing-dir"),
    api(lambda files: __import__("stepsim.cli.args").cli.args.output_dir(
        files["d"] + "/no/such/out", option="--out"), ValueError,
        r"^--out .*no/such/out: directory .*no/such does not exist", id="output_dir-missing-parent"),
    api(lambda files: __import__("stepsim.cli.args").cli.args.output_dir(
        files["good"], option="--out"), ValueError, r"^--out .*good\.npy is a file, not a dir",
        id="output_dir-a-file"),
    api(_np(lambda: _fit(steps=0)), ValueError, r"steps must be >= 1", id="fit-steps"),
    api(_np(lambda: _fit(threads=0)), ValueError, r"threads must be >= 1", id="fit-threads"),
    api(_np(lambda: _fit(rng="abc")), TypeError, r"\brng\b", id="fit-rng-text"),
    api(_np(lambda: _fit(rng=-1)), ValueError, r"\brng\b", id="fit-rng-negative"),
    api(_np(lambda: _fit(nm="2:4")), TypeError, r"\bnm\b", id="fit-nm-string"),
    api(_np(lambda: _fit(criterion=42)), TypeError, r"\bcriterion\b",
        id="fit-criterion-int"),
    api(_np(lambda: _fit(problem=None)), TypeError, r"\bproblem\b", id="fit-problem-none"),
    # ---- issue 16: overflow and underflow in the parameters' dtype
    api(_np(lambda: _adam(lr=1e39)), ValueError, r"lr=1e\+39 is too large for float32",
        id="adam-lr-overflows-float32"),
    api(_np(lambda: _adam(lr=1e38)), ValueError, r"lr=1e\+38 is too large for float32",
        id="adam-lr-step-overflows-float32"),
    api(_np(lambda: _adam(eps=1e-50)), ValueError, r"eps=1e-50 is 0 in float32",
        id="adam-eps-underflows-float32"),
    api(_np(lambda: _adam(eps=1e-50, eps_mode="outside")), ValueError, r"eps=1e-50 is 0",
        id="adam-eps-outside-underflows"),
    api(_np(lambda: _adam(lr=1e20, weight_decay=1e30)), ValueError,
        r"1 - lr \* weight_decay = -1e\+50 overflows float32", id="adam-decay-overflows"),
    api(_np(lambda: __import__("stepsim").sgdm_step(*_adam_arrays()[:3], lr=1e38)),
        ValueError, r"lr=1e\+38 is too large for float32", id="sgdm-lr-overflows-float32"),
    api(_np(lambda: __import__("stepsim").sgdm_step(*_adam_arrays()[:3], lr=0.1,
                                                      weight_decay=1e39)),
        ValueError, r"weight_decay = 1e\+39 overflows float32", id="sgdm-decay-overflows"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.cast_values(
        np.full(4, 1e-9), np.float16, name="w")), ValueError,
        r"w: smallest nonzero \|value\| 1e-09 underflows to 0 in float16",
        id="cast_values-underflow"),
    # ---- lists where arrays or objects are expected
    api(_np(lambda: __import__("stepsim.core.optim_many").core.optim_many.adam_apply_many(
        [[1.0] * 4, [1.0] * 4], *([np.ones(4, np.float32)] * 2 for _ in range(3)),
        __import__("stepsim.core.optim").core.optim.adam_hyper(step=1, lr=0.1))),
        TypeError, r"ws\[0\] must be a numpy\.ndarray, got list", id="adam_apply_many-lists"),
    api(_np(lambda: __import__("stepsim.core.optim_many").core.optim_many.adam_apply_many(
        (w for w in [np.ones(4, np.float32)]), [np.ones(4, np.float32)], [np.ones(4, np.float32)],
        [np.ones(4, np.float32)],
        __import__("stepsim.core.optim").core.optim.adam_hyper(step=1, lr=0.1))),
        TypeError, r"ws must be a list or tuple of arrays", id="adam_apply_many-generator"),
    api(_np(lambda: __import__("stepsim.core.optim_many").core.optim_many.sgdm_apply_many(
        [[1.0] * 4, [1.0] * 4], *([np.ones(4, np.float32)] * 2 for _ in range(2)), lr=0.1)),
        TypeError, r"ws\[0\] must be a numpy\.ndarray, got list", id="sgdm_apply_many-lists"),
    api(_np(lambda: __import__("stepsim.stats").stats.mean_ci(["1.5", "2"])), TypeError,
        r"values must be a sequence or array of real numbers .*got <U3 values",
        id="mean_ci-strings"),
    api(lambda files: __import__("stepsim.experiments").experiments.summarize(
        list(_sweep_table(files).rows), "final_loss"), TypeError,
        r"table must be a stepsim\.experiments\.Table .*got list", id="summarize-rows-list"),
    api(lambda files: __import__("stepsim.experiments").experiments.compare(
        _sweep_table(files), "nope"), ValueError, r"metric 'nope' is not a column of the table",
        id="compare-missing-metric"),
    api(lambda files: __import__("stepsim.experiments").experiments.summarize(
        _sweep_table(files), "recipe"), TypeError, r"metric 'recipe' is not numeric: run .* "
        r"has 'dense'", id="summarize-text-metric"),
    api(_np(lambda: __import__("stepsim.recipes.criteria").recipes.criteria.make_criterion(
        "autoswitch", adam="adam")), TypeError, r"adam must be the Adam the criterion watches",
        id="make_criterion-adam-string"),
    # ---- a custom problem answering loss_and_grad wrongly
    api(_bad_fit(lambda loss, grads: (loss, list(grads.values()))), TypeError,
        r"_BadAnswer\.loss_and_grad must return its gradients as a dict .*got list",
        id="fit-grads-list"),
    api(_bad_fit(lambda loss, grads: (loss, {k: g for k, g in list(grads.items())[1:]})),
        ValueError, r"returned no gradient for \['w2'\]", id="fit-grads-missing"),
    api(_bad_fit(lambda loss, grads: (loss, dict(grads, typo=grads["w1"]))), ValueError,
        r"returned gradients for \['typo'\], which are not parameters", id="fit-grads-extra"),
    api(_bad_fit(_spoil_first(lambda g: g[:1])), ValueError,
        r"the gradient of 'w2' has shape \(1, 16\), but the parameter has shape \(4, 16\)",
        id="fit-grads-broadcastable-shape"),
    api(_bad_fit(_spoil_first(lambda g: g.astype(np.float64)), dtype=np.float32), TypeError,
        r"the gradient of 'w2' has dtype float64, but the parameter has dtype float32",
        id="fit-grads-dtype"),
    api(_bad_fit(_spoil_first(lambda g: g.tolist())), TypeError,
        r"the gradient of 'w2' must be a numpy\.ndarray, got list", id="fit-grads-nested-list"),
    api(_bad_fit(lambda loss, grads: (None, grads)), TypeError,
        r"loss_and_grad must return a real number as its loss, got None", id="fit-loss-none"),
    api(_bad_fit(lambda loss, grads: (np.array([loss, loss]), grads)), TypeError,
        r"must return a real number as its loss, got array", id="fit-loss-array"),
    api(_bad_fit(lambda loss, grads: (loss, grads, {})), TypeError,
        r"must return \(loss, grads\), got a tuple of 3 items", id="fit-answer-triple"),
    # ---- problems: options read the wrong way; a chain too cold to solve
    api(_np(lambda: __import__("stepsim.problems.nqm").problems.nqm.NoisyQuadratic(
        sparse="off")), TypeError, r"sparse must be True or False, got 'off'", id="nqm-sparse-off"),
    api(_np(lambda: __import__("stepsim.problems").problems.SyntheticRegression(bias="no")),
        TypeError, r"bias must be True or False", id="SyntheticRegression-bias-text"),
    api(_np(lambda: __import__("stepsim.problems.digits").problems.digits.Digits(hidden="")),
        TypeError, r"hidden must be an int or a tuple of ints, got ''", id="Digits-hidden-empty"),
    api(_np(lambda: __import__("stepsim.problems.lm").problems.lm.LanguageModel(sparse=" , ")),
        ValueError, r"sparse: no kind in ' , '", id="LanguageModel-sparse-empty"),
    api(_np(lambda: __import__("stepsim.problems.markov").problems.markov.MarkovLanguage(
        temperature=0.05)), ValueError, r"condition number .* raise the temperature",
        id="MarkovLanguage-too-cold"),
    # ---- files and specs of the wrong kind or shape
    api(lambda files: __import__("stepsim._ground.validate")
        ._ground.validate.load_arrays(files["fifo_npy"]),
        ValueError, r"input file .*fifo\.npy is a FIFO", id="load_arrays-fifo"),
    api(lambda files: __import__("stepsim.experiments.sweep_spec").experiments.sweep_spec
        .read_spec_file(files["spec_list"]), TypeError, r"must hold a JSON object", id="read_spec_file-list"),
    api(lambda files: __import__("stepsim.experiments").experiments.load_table(
        files["plan_no_result"]), ValueError, r"is not a sweep's plan .*no 'result'",
        id="load_table-no-result"),
    api(_np(lambda: __import__("stepsim.checks").checks.parse_claims(["all", "C99"])),
        ValueError, r"unknown claim 'C99'", id="parse_claims-all-and-unknown"),
    api(_np(lambda: __import__("stepsim.checks.pipeline").checks.pipeline.run_checks(
        ["C3"], mode="slow")), ValueError, r"mode must be 'quick' or 'full', got 'slow'",
        id="run_checks-mode"),
    api(_np(lambda: __import__("stepsim.checks.pipeline").checks.pipeline.run_checks(
        ["C3"], mode="full", problems=["regression"])), ValueError,
        r"problem must be one of \['digits', 'lm', 'mnist1d'\], got 'regression'",
        id="run_checks-problem"),
    api(_np(lambda: __import__("stepsim.checks.pipeline").checks.pipeline.run_checks(
        ["C3"], mode="full", steps=50)), ValueError, r"steps must be an integer >= 200, got 50",
        id="run_checks-steps"),
    api(_np(lambda: __import__("stepsim.checks.protocol").checks.protocol.parse_key(
        "adam|sr-ste")), ValueError, r"config key must be", id="parse_key-short"),
    api(_np(lambda: __import__("stepsim.checks.pipeline").checks.pipeline.run_checks(
        ["C5"], mode="quick", extended=True)), ValueError,
        r"extended must be True or False and needs mode 'full'", id="run_checks-extended"),
    api(_np(lambda: __import__("stepsim.checks.protocol").checks.protocol.document_rules(
        draft=2)), ValueError, r"draft must be one of \[3, 4, 5\], got 2",
        id="document_rules-draft"),
    api(_np(lambda: __import__("stepsim.checks.protocol").checks.protocol.document_extra(
        "S9")), ValueError, r"extra must be one of \['S1'\], got 'S9'",
        id="document_extra-unknown"),
    api(_np(lambda: __import__("stepsim.checks").checks.parse_claims(["S9"])),
        ValueError, r"unknown claim 'S9'; choose from \[.*'C12', 'S1'\]",
        id="parse_claims-unknown-extra"),
    api(_np(lambda: __import__("stepsim.checks.protocol").checks.protocol.draft_of(
        {"rules_version": 4, "rules_sha256": "0" * 64})), ValueError,
        r"declares draft 4 but its rules digest", id="draft_of-digest"),
    api(_np(lambda: __import__("stepsim.checks.operating").checks.operating.tie_set(
        [1e-3], [[1.0]], 1e-2)), ValueError, r"choice 0\.01 is not in the grid",
        id="tie_set-choice"),
    api(_np(lambda: __import__("stepsim.checks.operating").checks.operating.clopper_pearson(
        4, 3)), ValueError, r"need integers 0 <= k <= n", id="clopper_pearson-k"),
    api(_np(lambda: __import__("stepsim.checks.budget").checks.budget.Budget(
        "full", "digits", "main", (0,), schedule="linear")), ValueError,
        r"schedule must be 'constant' or one of \['cosine-warmup'\], got 'linear'",
        id="budget-schedule"),
    # ---- issue 27, item 8: sizes that cannot fit, empty paths and lists, arguments the
    # protocol does not use (each refused in one line before anything is allocated or run)
    api(_np(lambda: __import__("stepsim").nm_mask(
        np.broadcast_to(np.float32(1), (10**6, 10**6)), 2, 4)), ValueError,
        r"the N:M mask of w with shape \(1000000, 1000000\) \(float32\) would need "
        r"4\.55 TiB of memory; .* available", id="nm_mask-broadcast-memory"),
    api(_np(lambda: __import__("stepsim").nm_mask_conv(
        np.broadcast_to(np.float64(1), (10**4, 10**4, 10, 10)), 1, 4)), ValueError,
        r"the N:M mask of w with shape \(10000, 10000, 10, 10\) \(float64\) would need "
        r".* of memory", id="nm_mask_conv-broadcast-memory"),
    api(_np(lambda: __import__("stepsim.experiments").experiments.plan_sweep(
        {"recipes": ["dense"], "steps": 1, "seeds": 10**9})), ValueError,
        r"spec: the grid's 1,000,000,000 runs .* would need .* of memory",
        id="plan_sweep-seeds-memory"),
    api(_np(lambda: __import__("stepsim.experiments").experiments.plan_sweep(
        {"recipes": [{"name": "sr-ste", "grid": {"lam": list(range(1, 10**4 + 1))}}],
         "steps": list(range(1, 10**3 + 1)), "seeds": 10**3})), ValueError,
        r"spec: the grid's 10,000,000,000 runs", id="plan_sweep-grid-memory"),
    api(_np(lambda: __import__("stepsim.sparse24.memory").sparse24.memory.memory_table([])),
        ValueError, r"params is empty: give the model's Param s or a model name",
        id="memory_table-empty"),
    api(_np(lambda: __import__("stepsim.sparse24.memory").sparse24.memory.memory_table(
        ["bert-base"])), TypeError, r"params must be Param s \(or a model name\), got "
        r"'bert-base' \(str\)", id="memory_table-names-list"),
    api(lambda files: __import__("stepsim.bench").bench.run_bench(
        quick=True, only=["layout"], json_path=""), ValueError,
        r"json_path: empty path; give a file name \(None: do not save\)",
        id="run_bench-json-empty"),
    api(_np(lambda: __import__("stepsim.checks.pipeline").checks.pipeline.run_checks(
        ["C12"], mode="quick", out="")), ValueError, r"--out: empty path; give a directory",
        id="run_checks-out-empty"),
    api(_np(lambda: __import__("stepsim.checks.pipeline").checks.pipeline.run_checks(
        ["C1"], mode="quick", problems=["lm"])), ValueError,
        r"no verdict to make: claim\(s\) C1 on problem\(s\) lm have no setting in quick mode",
        id="run_checks-quick-claim-not-in-quick-mode"),
    # ---- shared helpers the CLI and problems use
    api(_np(lambda: __import__("stepsim._ground.validate")._ground.validate.check_memory(
        "the activations", 8 * 10**18, available=2**30)), ValueError,
        r"the activations would need 6\.94 EiB|the activations would need .* of memory; 1 GiB",
        id="check_memory"),
    api(_np(lambda: __import__("stepsim._ground.validate")._ground.validate.check_finite_array(
        "x", np.array([1.0, np.inf]))), ValueError, r"x contains 0 NaN and 1 infinite",
        id="check_finite_array"),
    api(_np(lambda: __import__("stepsim.cli.args").cli.args.seed("-1")), ValueError,
        r"non-negative integer, got '-1'", id="args-seed"),
    api(_np(lambda: __import__("stepsim.cli.args").cli.args.positive_int("0")), ValueError,
        r"positive integer, got '0'", id="args-positive-int"),
    api(_np(lambda: __import__("stepsim.cli.args").cli.args.finite_float("nan")), ValueError,
        r"finite number, got 'nan'", id="args-finite-float"),
    api(lambda files: __import__("stepsim.cli.args").cli.args.output_path(
        files["d"] + "/t.npz", option="--json", sidecars=(".npz",)), ValueError,
        r"--json .*t\.npz must not end in \.npz: the \.npz file written beside it would be "
        r".*t\.npz itself",
        id="output_path-sidecar"),
    api(lambda files: __import__("stepsim.cli.args").cli.args.output_path(
        files["d"] + "/good.json", option="--json", sidecars=(".npy",),
        inputs=(files["good"],)), ValueError, r"\(its \.npy file .*good\.npy\) is the input",
        id="output_path-sidecar-is-input"),
    # ---- issue 24: S-STE's soft threshold, transposable masks, the new recipes
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.soft_threshold(
        np.zeros((2, 4), np.float16), 2, 4)), TypeError, r"w must have dtype in \(float32",
        id="soft_threshold-float16"),
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.soft_threshold(
        np.zeros((2, 4)), 2, 4, beta=float("nan"))), ValueError, r"beta must be finite",
        id="soft_threshold-beta-nan"),
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.soft_threshold(
        np.array([[np.nan, 0.0, 0.0, 0.0]]), 2, 4)), ValueError, r"w contains 1 NaN",
        id="soft_threshold-nan"),
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.soft_threshold(
        np.zeros((2, 4)), 5, 4)), ValueError, r"n must be <= m", id="soft_threshold-n-gt-m"),
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.soft_threshold(
        np.zeros((2, 6)), 2, 4)), ValueError, r"not divisible by m = 4",
        id="soft_threshold-axis"),
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.sste_beta(
        np.zeros((2, 4)), np.zeros((2, 5)))), ValueError, r"s has shape \(2, 5\)",
        id="sste_beta-shape"),
    api(_np(lambda: __import__("stepsim.core.transposable").core.transposable
            .transposable_mask(np.zeros((4, 6)), 2, 4)), ValueError,
        r"both dimensions of shape \(4, 6\) divisible by m = 4", id="transposable-shape"),
    api(_np(lambda: __import__("stepsim.core.transposable").core.transposable
            .transposable_mask(np.zeros(8), 2, 4)), ValueError,
        r"needs a weight of 2 or more dimensions",
        id="transposable-ndim"),
    api(_np(lambda: __import__("stepsim.recipes").recipes.make_recipe(
        "ste", layerwise=True, mask_every=3)), ValueError,
        r"recipe 'ste' does not use option\(s\) \['mask_every'\]", id="make_recipe-every-lw"),
    api(_np(lambda: __import__("stepsim.recipes").recipes.make_recipe(
        "s-ste-step", layerwise=True)), ValueError,
        r"unknown option\(s\) \['layerwise'\] for recipe 's-ste-step'",
        id="make_recipe-sste-step-layerwise"),
    # ---- issue 27, item 4: every option through its declaration (constructor and registry)
    api(_np(lambda: __import__("stepsim.problems").problems.SyntheticRegression(seed=-1)),
        ValueError, r"^seed must be >= 0, got -1$", id="SyntheticRegression-seed-negative"),
    api(_np(lambda: __import__("stepsim.problems.nqm").problems.nqm.NoisyQuadratic(
        h_max=float("inf"))),
        ValueError, r"^h_max must be finite, got inf$", id="NoisyQuadratic-h_max-inf"),
    api(_np(lambda: __import__("stepsim.problems.lm").problems.lm.LanguageModel(
        kernels="yes")),
        TypeError, r"^kernels must be True or False, got 'yes'", id="LanguageModel-kernels"),
    api(_np(lambda: __import__("stepsim.problems.registry").problems.registry.make_problem(
        "teacher", noise=float("nan"))), ValueError, r"^noise must be finite, got nan$",
        id="make_problem-teacher-noise-nan"),
    api(_np(lambda: __import__("stepsim.recipes.criteria").recipes.criteria.FixedStep(0)),
        ValueError, r"^k0 must be >= 1, got 0$", id="FixedStep-k0-zero"),
    api(_np(lambda: __import__("stepsim.recipes.criteria").recipes.criteria.FixedFraction(
        float("nan"))), ValueError, r"^fraction must be finite, got nan$",
        id="FixedFraction-nan"),
    api(_np(lambda: __import__("stepsim.recipes").recipes.make_recipe(
        "masked-decay", decay=float("inf"))), ValueError, r"^decay must be finite, got inf$",
        id="make_recipe-masked-decay-inf"),
    api(_np(lambda: __import__("stepsim.recipes").recipes.make_recipe(
        "asp", prune_at=float("nan"))), ValueError, r"^prune_at as a float is a fraction",
        id="make_recipe-prune-at-nan"),
    # ---- the 1-D convolution and the mnist1d problem
    api(_np(lambda: __import__("stepsim.nn.conv").nn.conv.conv1d_forward(
        np.zeros((2, 8, 3)), np.zeros((4, 3, 2)), None)), ValueError,
        r"^x must be \(B, L, C_in\) with C_in = w\.shape\[2\] = 2", id="conv1d-channels"),
    api(_np(lambda: __import__("stepsim.nn.conv").nn.conv.conv1d_forward(
        np.zeros((2, 8, 3)), np.zeros((4, 3, 3)), None, stride=0)), ValueError,
        r"^stride must be >= 1, got 0$", id="conv1d-stride-zero"),
    api(_np(lambda: __import__("stepsim.nn.conv").nn.conv.conv1d_forward(
        np.zeros((2, 2, 3)), np.zeros((4, 5, 3)), None, padding=1)), ValueError,
        r"^kernel size 5 exceeds the padded input length 2", id="conv1d-kernel-too-long"),
    api(_np(lambda: __import__("stepsim.nn.cnn").nn.cnn.CNN(40, kernel_sizes=(3, 3))),
        ValueError, r"^kernel_sizes must give one value per conv layer \(3", id="CNN-kernels"),
    api(_np(lambda: __import__("stepsim.problems.registry").problems.registry.make_problem(
        "mnist1d", n_validation=4000)), ValueError,
        r"^n_validation = 4000 must be < n_train = 4000", id="mnist1d-validation-too-big"),
    api(_np(lambda: __import__("stepsim.problems.registry").problems.registry.make_problem(
        "mnist1d", n_test=999)), ValueError, r"^n_train \+ n_test = 4999 must be a multiple "
        r"of 10", id="mnist1d-sizes-not-tens"),
    api(_np(lambda: __import__("stepsim.problems.registry").problems.registry.make_problem(
        "mnist1d", strides="2")), TypeError, r"^strides must be an int or a tuple of ints",
        id="mnist1d-strides-text"),
]


@pytest.mark.parametrize("call, exc, pattern", API_CASES)
def test_api_bad_input_raises_a_one_line_error_naming_the_argument(call, exc, pattern, files,
                                                                  request):
    with pytest.raises(exc) as raised, _limit_if_huge(request.node.callspec.id):
        call(files)
    message = str(raised.value)
    assert "\n" not in message, message
    assert re.search(pattern, message), message


def test_available_memory_sees_an_address_space_limit():
    """check_memory's default budget includes RLIMIT_AS (ulimit -v), not only free RAM."""
    from stepsim._ground.validate import available_memory, check_memory

    before = available_memory()
    assert before is not None and before > 0
    with _address_space_limit(extra=256 << 20):
        capped = available_memory()
        assert capped <= 256 << 20
        with pytest.raises(ValueError, match=r"the test arrays would need 1 GiB of memory"):
            check_memory("the test arrays", 1 << 30)
    assert check_memory("small", 1024) == 1024
