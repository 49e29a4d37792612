"""The ``lm`` problem: protocol, specs, evaluation, and training on the synthetic language."""

import json

import numpy as np
import pytest

from stepsim.problems.base import Problem
from stepsim.problems.lm import LanguageModel
from stepsim.problems.registry import make_problem, problem_options
from stepsim.recipes import make_recipe
from stepsim.training import fit

SMALL = {"vocab": 8, "order": 2, "temperature": 1.0, "context": 16, "width": 32, "blocks": 1,
         "heads": 2, "batch_size": 32, "n_test": 256}


def test_registry_builds_the_problem_with_keyword_options():
    problem = make_problem("lm", **SMALL)
    assert isinstance(problem, LanguageModel) and isinstance(problem, Problem)
    assert {"vocab", "order", "temperature", "context", "sparse", "nm", "tied"} <= set(
        problem_options("lm"))
    json.dumps(problem.config())
    with pytest.raises(ValueError, match="widht"):
        make_problem("lm", widht=32)


def test_specs_sparsify_every_linear_weight_along_its_input_axis():
    problem = LanguageModel(**SMALL)
    sparse = sorted(n for n, s in problem.specs.items() if s.sparse)
    assert sparse == sorted(["blocks.0.attn.wq", "blocks.0.attn.wk", "blocks.0.attn.wv",
                             "blocks.0.attn.wo", "blocks.0.mlp.w1", "blocks.0.mlp.w2", "head.w"])
    assert all(problem.specs[n].nm == (2, 4) and problem.specs[n].axis == -1 for n in sparse)
    only_mlp = LanguageModel(**SMALL, sparse=("w1", "w2"), nm=(1, 8))
    assert sorted(n for n, s in only_mlp.specs.items() if s.sparse) == [
        "blocks.0.mlp.w1", "blocks.0.mlp.w2"]
    assert LanguageModel(**SMALL, sparse="w1,w2").specs == only_mlp.specs | {
        n: s.with_nm(2, 4) for n, s in only_mlp.specs.items() if s.sparse}
    assert not any(s.sparse for s in LanguageModel(**SMALL, sparse=()).specs.values())
    tied = LanguageModel(**SMALL, tied=True)
    assert "head.w" not in tied.specs and not tied.specs["tok_emb"].sparse


@pytest.mark.parametrize("kwargs, word", [
    ({"sparse": ("wq", "wz")}, "wz"), ({"tied": True, "sparse": ("head",)}, "head"),
    ({"width": 30, "heads": 2}, "not divisible by M"), ({"context": 1, "order": 2}, "context"),
    ({"dtype": np.int32}, "dtype"), ({"batch_size": 0}, "batch_size"),
    ({"tied": "yes"}, "tied"),
])
def test_bad_options_name_themselves(kwargs, word):
    with pytest.raises((ValueError, TypeError), match=word):
        LanguageModel(**{**SMALL, **kwargs})


def test_evaluate_reports_the_gap_to_the_exact_floor():
    problem = LanguageModel(**SMALL)
    params = problem.init_params(np.random.default_rng(0))
    before = {k: v.copy() for k, v in params.items()}
    metrics = problem.evaluate(params)
    assert all(np.array_equal(before[k], params[k]) for k in params)
    assert metrics == problem.evaluate(params)  # deterministic
    assert metrics["entropy_floor"] == pytest.approx(problem.language.loss_floor(16))
    assert metrics["gap"] == pytest.approx(metrics["test_loss"] - metrics["entropy_floor"])
    # at initialisation the logits are nearly uniform: loss ~ log V, far above the floor
    assert metrics["test_loss"] == pytest.approx(np.log(8), abs=0.05)
    # the Bayes predictor's loss on this finite test set is near the exact floor
    assert abs(metrics["oracle_test_loss"] - metrics["entropy_floor"]) < 0.05
    assert 1 / 8 < metrics["oracle_accuracy"] < 1


def test_batches_come_from_the_generator_only():
    problem = LanguageModel(**SMALL)
    a = problem.sample_batch(np.random.default_rng(3))
    b = problem.sample_batch(np.random.default_rng(3))
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.targets, b.targets)
    assert a.inputs.shape == (32, 16)
    np.testing.assert_array_equal(a.inputs[:, 1:], a.targets[:, :-1])


def test_dense_adam_comes_within_5_percent_of_the_entropy_floor():
    """A 1-block, width-32 model on an order-2 language (V = 8): within 5% of the floor.

    The bar is discriminating: the best predictor that sees only the last token (an order-1
    model) stays 18% above the floor, so passing needs attention to the token before it.
    """
    problem = LanguageModel(**SMALL)
    floor = problem.entropy_floor
    order1 = problem.language.position_floors(1)[0]  # H(X_1 | X_0): best with one token
    assert order1 > 1.15 * floor
    result = fit(problem, make_recipe("dense", lr=1e-2), 500, rng=0, progress=False)
    assert result.metrics["test_loss"] < 1.05 * floor, result.metrics
    assert result.metrics["accuracy"] > result.metrics["oracle_accuracy"] - 0.03


def nm_of_groups(w, m):
    """Nonzeros in every group of m consecutive entries along the last axis."""
    return np.count_nonzero(w.reshape(-1, m), axis=1)


@pytest.mark.parametrize("recipe, options, nm", [
    ("sr-ste", {}, (2, 4)), ("step", {"switch_at": 0.5}, (2, 4)), ("step", {"switch_at": 0.5},
                                                                     (1, 8)),
])
def test_sparse_recipes_end_with_exact_nm_in_every_sparsified_module(recipe, options, nm):
    problem = LanguageModel(**{**SMALL, "batch_size": 8, "n_test": 16})
    result = fit(problem, make_recipe(recipe, lr=1e-2, **options), 20, rng=1, nm=nm,
                 progress=False)
    n, m = nm
    sparse = [name for name, spec in problem.specs.items() if spec.sparse]
    assert len(sparse) == 7
    for name in sparse:
        assert np.all(nm_of_groups(result.weights[name], m) == n), name
        assert result.nm[name] == (n, m)
    for name, spec in problem.specs.items():
        if not spec.sparse:
            assert np.count_nonzero(result.weights[name]) > 0.5 * result.weights[name].size


def test_same_seed_same_bits():
    problem = LanguageModel(**{**SMALL, "batch_size": 4, "n_test": 8})
    runs = [fit(problem, make_recipe("sr-ste", lr=1e-2), 5, rng=7, progress=False)
            for _ in range(2)]
    assert runs[0].metrics == runs[1].metrics
    for name in runs[0].weights:
        assert np.array_equal(runs[0].weights[name], runs[1].weights[name]), name


def test_bench_section_times_a_step(capsys):
    import io

    from stepsim.bench import Bench
    from stepsim.bench import lm as bench_lm

    bench = Bench(quick=True, stream=io.StringIO())
    bench_lm.run(bench)
    assert [row["impl"] for row in bench.rows] == ["stepsim"]
    assert bench.rows[0]["steps_per_s"] > 0 and bench.rows[0]["unit"] == "token"


def test_fit_runs_the_products_on_one_blas_thread_by_default():
    """fit pins BLAS (OpenBLAS's bits can depend on its thread count); blas_threads=2 lifts it."""
    from threadpoolctl import threadpool_info

    from stepsim.recipes import make_recipe
    from stepsim.training import fit

    seen = []

    class Watched(LanguageModel):
        def loss_and_grad(self, params, batch):
            seen.append(max(i["num_threads"] for i in threadpool_info()
                            if i["user_api"] == "blas"))
            return super().loss_and_grad(params, batch)

    problem = Watched(**SMALL)
    fit(problem, make_recipe("dense"), 2, rng=0, progress=False)
    fit(problem, make_recipe("dense"), 2, rng=0, progress=False, blas_threads=2)
    assert seen[:2] == [1, 1] and all(n <= 2 for n in seen[2:])
