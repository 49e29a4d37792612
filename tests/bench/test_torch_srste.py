"""The torch peers' SR-STE (stepsim.bench._torch_srste): forward keeps the n largest |w| of
every m along the inputs, backward is g + lam (1 - mask) w — what stepsim's SR-STE does."""

from __future__ import annotations

import numpy as np
import pytest

from stepsim.bench import _torch_srste


def test_sparse_ste_masks_forward_and_decays_the_pruned_in_backward():
    torch = pytest.importorskip("torch")
    from stepsim import nm_mask

    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 16))
    mask = nm_mask(w, 1, 4, axis=-1)
    ste = _torch_srste.sparse_ste(torch, 1, 4, 0.5)
    wt = torch.tensor(w, requires_grad=True)
    out = ste.apply(wt)
    np.testing.assert_array_equal(out.detach().numpy(), w * mask)
    g = rng.standard_normal(w.shape)
    out.backward(torch.tensor(g))
    np.testing.assert_allclose(wt.grad.numpy(), g + 0.5 * (~mask) * w, rtol=0, atol=0)
