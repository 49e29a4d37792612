"""stepsim.nn.MLP: gradients against finite differences and torch, specs, validation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepsim.nn import layers as L
from stepsim.nn.mlp import MLP
from tests.gradcheck import numeric_grad


@settings(max_examples=12)
@given(seed=st.integers(0, 2**32 - 1), activation=st.sampled_from(["relu", "gelu", "tanh"]),
       hidden=st.lists(st.integers(1, 5), min_size=0, max_size=2), bias=st.booleans())
def test_mlp_gradients_match_finite_differences(seed, activation, hidden, bias):
    mlp = MLP((3, *hidden, 2), activation=activation, sparsify="none", bias=bias)
    rng = np.random.default_rng(seed)
    params = mlp.init_params(rng, np.float64)
    for name in params:  # non-zero biases, and pre-activations away from ReLU's kink
        params[name] += 0.1 * rng.standard_normal(params[name].shape)
    x = rng.standard_normal((4, 3))
    labels = rng.integers(0, 2, size=4)

    def loss():
        return L.softmax_cross_entropy(mlp.forward(params, x)[0], labels)[0]

    out, cache = mlp.forward(params, x)
    _, dout = L.softmax_cross_entropy(out, labels)
    grads = mlp.backward(dout, cache)
    assert list(grads) == list(mlp.shapes())
    for name, g in grads.items():
        assert g.shape == params[name].shape and g.dtype == np.float64
        np.testing.assert_allclose(g, numeric_grad(loss, params[name]), rtol=1e-5, atol=1e-7)


def test_specs_follow_sparsify():
    sizes = (64, 32, 16, 8)
    all_ = MLP(sizes, sparsify="all", nm=(1, 8)).specs()
    assert [n for n, s in all_.items() if s.sparse] == ["w1", "w2", "w3"]
    assert all_["w1"].nm == (1, 8) and all_["w1"].axis == -1
    but_last = MLP(sizes, sparsify="all-but-last").specs()
    assert [n for n, s in but_last.items() if s.sparse] == ["w1", "w2"]
    assert not any(s.sparse for s in MLP(sizes, sparsify="none").specs().values())
    assert set(MLP(sizes, bias=False).specs()) == {"w1", "w2", "w3"}


def test_init_is_seeded_float32_and_he_scaled():
    mlp = MLP((256, 512, 10))
    a = mlp.init_params(np.random.default_rng(4))
    b = mlp.init_params(np.random.default_rng(4))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert a["w1"].dtype == np.float32 and a["w1"].shape == (512, 256)
    assert a["w1"].std() == pytest.approx(np.sqrt(2 / 256), rel=0.02)
    assert not a["b1"].any()


def test_bad_mlp_options_are_clear_errors():
    with pytest.raises(ValueError, match="not divisible by M = 4"):
        MLP((6, 8, 2))
    MLP((6, 8, 2), sparsify="all-but-last", nm=(2, 2))  # fine: 6 and ... only w1 sparse
    with pytest.raises(ValueError, match="activation"):
        MLP((4, 4), activation="swish")
    with pytest.raises(ValueError, match="sparsify"):
        MLP((4, 4), sparsify="some")
    with pytest.raises(ValueError, match="at least an input and an output"):
        MLP((4,))
    with pytest.raises(ValueError, match="sizes"):
        MLP((4, 0, 4))
    with pytest.raises(TypeError, match="float32 or float64"):
        MLP((4, 4)).init_params(0, np.float16)


@pytest.mark.torch
@pytest.mark.parametrize("activation", ["relu", "gelu", "tanh"])
def test_mlp_matches_torch(activation):
    """The digits architecture, same weights and batch: same loss and gradients as torch."""
    torch = pytest.importorskip("torch")
    mlp = MLP((64, 256, 256, 10), activation=activation)
    rng = np.random.default_rng(0)
    params = mlp.init_params(rng, np.float64)
    params = {k: v + 0.05 * rng.standard_normal(v.shape) for k, v in params.items()}
    x = rng.standard_normal((128, 64))
    y = rng.integers(0, 10, size=128)
    out, cache = mlp.forward(params, x)
    loss, dout = L.softmax_cross_entropy(out, y)
    grads = mlp.backward(dout, cache)

    act = {"relu": torch.nn.ReLU(), "gelu": torch.nn.GELU(), "tanh": torch.nn.Tanh()}
    layers = [torch.nn.Linear(64, 256), act[activation], torch.nn.Linear(256, 256),
              act[activation], torch.nn.Linear(256, 10)]
    net = torch.nn.Sequential(*layers).double()
    with torch.no_grad():
        for i, lin in enumerate(net[::2], start=1):
            lin.weight.copy_(torch.tensor(params[f"w{i}"]))
            lin.bias.copy_(torch.tensor(params[f"b{i}"]))
    tloss = torch.nn.functional.cross_entropy(net(torch.tensor(x)), torch.tensor(y))
    tloss.backward()
    assert loss == pytest.approx(tloss.item(), rel=1e-12)
    for i, lin in enumerate(net[::2], start=1):
        np.testing.assert_allclose(grads[f"w{i}"], lin.weight.grad.numpy(), rtol=1e-9,
                                   atol=1e-13)
        np.testing.assert_allclose(grads[f"b{i}"], lin.bias.grad.numpy(), rtol=1e-9,
                                   atol=1e-13)
