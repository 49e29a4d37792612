"""stepsim's 1-D CNN in PyTorch: the test peer of its gradients and the bench's peer step.

:func:`torch_model` computes the logits of :meth:`stepsim.nn.cnn.CNN.forward` with
``nn.Conv1d`` + ReLU blocks and an ``nn.Linear`` head in torch's own layout (channels
first): a conv weight (C_out, K, C_in) of stepsim is ``w.transpose(0, 2, 1)`` in torch,
and the head's input is flattened channels-first there (feature ``c * L + l``), so its
weight's columns are permuted (:func:`params_as_torch`). :func:`peer_model` is that model
on the ``mnist1d`` problem's training split, which the bench's peer process
(:mod:`stepsim.bench._torch_peer`) steps with ``torch.optim.Adam(fused=True)`` and times
against :func:`stepsim.fit`'s step. torch is optional: imported only inside the functions
that need it, in the tests and the bench's peer process.
"""

from __future__ import annotations

import numpy as np


def params_as_torch(params: dict, cnn) -> dict:
    """stepsim's parameters (or gradients) in torch's layout: name -> C-contiguous array."""
    length, channels = cnn.lengths()[-1], cnn.channels[-1]
    out = {}
    for name, a in params.items():
        if name.startswith("conv") and name.endswith(".w"):
            a = a.transpose(0, 2, 1)
        elif name == "head.w":
            a = a.reshape(cnn.classes, length, channels).transpose(0, 2, 1).reshape(
                cnn.classes, -1)
        out[name] = np.ascontiguousarray(a)
    return out


def torch_model(cnn, params: dict | None = None, dtype=None):
    """A torch.nn.Sequential computing the CNN's logits from x (B, C_in, L) (channels first):
    Conv1d(k, stride, padding (k - 1) // 2) + ReLU per conv layer, Flatten, Linear. With
    ``params`` the weights are copied in (their dtype); else torch's own initialisation."""
    import torch
    from torch import nn

    layers = []
    c_in = cnn.in_channels
    for c, k, s, p in zip(cnn.channels, cnn.kernel_sizes, cnn.strides, cnn.paddings()):
        layers += [nn.Conv1d(c_in, c, k, stride=s, padding=p, bias=cnn.bias), nn.ReLU()]
        c_in = c
    layers += [nn.Flatten(), nn.Linear(cnn.lengths()[-1] * c_in, cnn.classes, bias=cnn.bias)]
    model = nn.Sequential(*layers)
    if params is not None:
        ours = params_as_torch(params, cnn)
        with torch.no_grad():
            for name, p in torch_parameters(model, cnn).items():
                p.data = torch.from_numpy(ours[name].copy())
    elif dtype is not None:
        model = model.to(dtype)
    return model


def torch_parameters(model, cnn) -> dict:
    """stepsim's name -> the torch model's parameter holding it."""
    convs = [m for m in model if m.__class__.__name__ == "Conv1d"]
    out = {}
    for l, conv in enumerate(convs, 1):
        out[f"conv{l}.w"] = conv.weight
        if cnn.bias:
            out[f"conv{l}.b"] = conv.bias
    head = model[-1]
    out["head.w"] = head.weight
    if cnn.bias:
        out["head.b"] = head.bias
    return out


def srste_forward(model, cnn, specs, lam: float = 2e-4):
    """SR-STE's forward of the torch model, as the digits peer does it: each call the N:M
    mask of every sparse weight (``specs``: stepsim's names -> ParamSpec) by topk over
    groups of M input channels at a tap (torch's (out, in, k) conv weight viewed (out, k,
    in); the head's channels-first columns viewed channels-last), the masked weight in the
    product, the gradient plus lam (1 - mask) w in the backward. Returns x -> logits."""
    import torch
    from torch.nn import functional as F

    params = torch_parameters(model, cnn)
    n, m = cnn.nm
    # id of a sparse torch weight -> the shape whose axes 1, 2 swapped put its input
    # channels last
    grouped = {}
    for name, spec in specs.items():
        if spec.sparse:
            w = params[name]
            grouped[id(w)] = (tuple(w.shape) if w.ndim == 3 else
                              (w.shape[0], cnn.channels[-1], cnn.lengths()[-1]))

    class SparseSTE(torch.autograd.Function):
        """forward w * mask, backward g + lam (1 - mask) w."""

        @staticmethod
        def forward(ctx, w, shape):
            g = w.detach().reshape(shape).transpose(1, 2)  # input channels last
            groups = g.abs().reshape(-1, m)
            idx = groups.topk(n, dim=1).indices
            mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, idx, True)
            mask = mask.reshape(g.shape).transpose(1, 2).reshape(w.shape)
            ctx.save_for_backward(w, mask)
            return w * mask

        @staticmethod
        def backward(ctx, grad):
            w, mask = ctx.saved_tensors
            return grad + lam * (~mask) * w, None

    def forward(xb):
        h = xb
        for layer in model:
            w = getattr(layer, "weight", None)
            if w is None or id(w) not in grouped:
                h = layer(h)
            elif w.ndim == 3:
                h = F.conv1d(h, SparseSTE.apply(w, grouped[id(w)]), layer.bias,
                             stride=layer.stride, padding=layer.padding)
            else:
                h = F.linear(h, SparseSTE.apply(w, grouped[id(w)]), layer.bias)
        return h

    return forward


def peer_model(problem_options: dict, *, srste: bool = False, lam: float = 2e-4,
               seed: int = 0):
    """The mnist1d problem's CNN in torch for the bench's peer: (model, forward, x (n, 1, 40)
    the training split channels-first, y (n,), batch size); forward is the model, or with
    ``srste`` its SR-STE forward on the problem's sparse weights (:func:`srste_forward`)."""
    import torch

    from stepsim.problems.registry import make_problem

    problem = make_problem("mnist1d", **problem_options)
    cnn = problem.cnn
    model = torch_model(cnn, problem.init_params(np.random.default_rng(seed)))
    forward = srste_forward(model, cnn, problem.specs, lam) if srste else model
    x = torch.from_numpy(np.ascontiguousarray(problem.x.transpose(0, 2, 1)))
    return model, forward, x, torch.from_numpy(problem.y), problem.batch_size
