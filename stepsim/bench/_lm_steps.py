"""One training step of stepsim's transformer and the same step in PyTorch (torch.nn).

One step is what :func:`stepsim.training.fit` does for the dense recipe -- the problem's
forward and backward on a minibatch plus an Adam update of every parameter -- against
torch.nn on the CPU with the same weights, the same minibatch and ``torch.optim.Adam(...,
fused=True)`` (torch's fastest CPU Adam; attention through
``F.scaled_dot_product_attention(is_causal=True)``). Timed by :mod:`stepsim.bench.lm`; the
torch step runs in the peer process (:mod:`stepsim.bench._torch_peer`), which imports this
module and not the bench's (so the two do not import each other).

:func:`torch_model` is also the peer the tests check gradients against. torch is optional:
it is imported only inside the functions that need it.
"""

from __future__ import annotations

import numpy as np


def torch_model(cfg, params):
    """A torch.nn.Module computing the same logits as :func:`stepsim.nn.transformer.forward`.

    cfg: a :class:`~stepsim.nn.transformer.TransformerConfig`; params: its parameter dict
    (copied into the module, in the params' dtype). Q, K and V share one nn.Linear whose
    weight is [wq; wk; wv] (rows stacked), as stepsim computes them.
    """
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg.width
            self.ln1 = nn.LayerNorm(d, eps=cfg.eps)
            self.qkv = nn.Linear(d, 3 * d, bias=cfg.bias)
            self.proj = nn.Linear(d, d, bias=cfg.bias)
            self.ln2 = nn.LayerNorm(d, eps=cfg.eps)
            self.fc1 = nn.Linear(d, cfg.hidden, bias=cfg.bias)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(cfg.hidden, d, bias=cfg.bias)

        def forward(self, h):
            b, t, d = h.shape
            qkv = self.qkv(self.ln1(h)).view(b, t, 3, cfg.heads, d // cfg.heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + self.proj(o.transpose(1, 2).reshape(b, t, d))
            return h + self.fc2(self.act(self.fc1(self.ln2(h))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(cfg.vocab, cfg.width)
            self.pos = nn.Parameter(torch.zeros(cfg.context, cfg.width))
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.blocks))
            self.lnf = nn.LayerNorm(cfg.width, eps=cfg.eps)
            if not cfg.tied:
                self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)

        def forward(self, ids):
            h = self.tok(ids) + self.pos[:ids.shape[1]]
            for block in self.blocks:
                h = block(h)
            z = self.lnf(h)
            return z @ self.tok.weight.T if cfg.tied else self.head(z)

    dtype = {np.dtype(np.float32): torch.float32,
             np.dtype(np.float64): torch.float64}[next(iter(params.values())).dtype]
    model = GPT().to(dtype)
    values = params_as_torch(params, cfg)
    with torch.no_grad():
        for name, tensor in torch_parameters(model, cfg).items():
            tensor.copy_(torch.from_numpy(np.ascontiguousarray(values[name])))
    return model


def torch_parameters(model, cfg) -> dict:
    """name -> torch parameter tensor, names as :func:`params_as_torch` gives them."""
    out = {"tok": model.tok.weight, "pos": model.pos, "lnf.g": model.lnf.weight,
           "lnf.b": model.lnf.bias}
    if not cfg.tied:
        out["head"] = model.head.weight
    for i, blk in enumerate(model.blocks):
        p = f"{i}."
        out.update({p + "ln1.g": blk.ln1.weight, p + "ln1.b": blk.ln1.bias,
                    p + "qkv.w": blk.qkv.weight, p + "proj.w": blk.proj.weight,
                    p + "ln2.g": blk.ln2.weight, p + "ln2.b": blk.ln2.bias,
                    p + "fc1.w": blk.fc1.weight, p + "fc2.w": blk.fc2.weight})
        if cfg.bias:
            out.update({p + "qkv.b": blk.qkv.bias, p + "proj.b": blk.proj.bias,
                        p + "fc1.b": blk.fc1.bias, p + "fc2.b": blk.fc2.bias})
    return out


def params_as_torch(params, cfg) -> dict:
    """stepsim's parameter (or gradient) dict under :func:`torch_parameters`' names."""
    out = {"tok": params["tok_emb"], "pos": params["pos_emb"], "lnf.g": params["lnf.g"],
           "lnf.b": params["lnf.b"]}
    if not cfg.tied:
        out["head"] = params["head.w"]
    for i in range(cfg.blocks):
        s, p = f"blocks.{i}.", f"{i}."
        a = s + "attn."
        out.update({p + "ln1.g": params[s + "ln1.g"], p + "ln1.b": params[s + "ln1.b"],
                    p + "qkv.w": np.concatenate([params[a + "wq"], params[a + "wk"],
                                                 params[a + "wv"]]),
                    p + "proj.w": params[a + "wo"], p + "ln2.g": params[s + "ln2.g"],
                    p + "ln2.b": params[s + "ln2.b"], p + "fc1.w": params[s + "mlp.w1"],
                    p + "fc2.w": params[s + "mlp.w2"]})
        if cfg.bias:
            out.update({p + "qkv.b": np.concatenate([params[a + "bq"], params[a + "bk"],
                                                     params[a + "bv"]]),
                        p + "proj.b": params[a + "bo"], p + "fc1.b": params[s + "mlp.b1"],
                        p + "fc2.b": params[s + "mlp.b2"]})
    return out


def step_functions(options: dict, *, seed: int = 0, lr: float = 1e-3, torch_peer: bool = True,
                   srste_lam: float | None = None):
    """(stepsim_step, torch_step): callables that each run one training step of the same
    model (``make_problem("lm", **options)``, float32) on the same fixed minibatch.
    torch_step is None when ``torch_peer`` is False. srste_lam: the torch step is SR-STE's
    (every sparse linear weight of the problem masked at its N:M through a straight-through
    function with decay lam, :func:`stepsim.bench._torch_srste.sparse_ste`); None: dense."""
    from stepsim.problems.registry import make_problem
    from stepsim.recipes import RunContext, make_recipe

    problem = make_problem("lm", **options)
    rng = np.random.default_rng(seed)
    params = problem.init_params(rng)
    batch = problem.sample_batch(rng)
    recipe = make_recipe("dense", lr=lr)
    ctx = RunContext.make(params, problem.specs, 10 ** 9)
    from stepsim.recipes.lean import LeanStep

    opt_state = recipe.init(params, ctx)
    lean = LeanStep.make(recipe, params, opt_state, ctx)  # fit's in-place step
    if torch_peer is False:  # stepsim's own process: as fit, keep freed memory
        from stepsim._ground.malloc import keep_freed_memory

        keep_freed_memory()
    stepper = lean or recipe
    state = {"params": lean.params if lean is not None else params, "opt": opt_state}

    def stepsim_step():
        fwd, st = stepper.forward(state["opt"], state["params"], 1, ctx)
        _, grads = problem.loss_and_grad(fwd, batch)
        state["params"], state["opt"], _ = stepper.update(st, state["params"], grads, 1, ctx)

    if not torch_peer:
        return stepsim_step, None
    import torch

    model = torch_model(problem.model, params)
    if srste_lam is not None:
        _sparse_linears(torch, model, problem, srste_lam)
    opt = torch.optim.Adam(model.parameters(), lr=lr, fused=True)
    ids = torch.from_numpy(batch.inputs)
    targets = torch.from_numpy(batch.targets).reshape(-1)

    def torch_step():
        opt.zero_grad(set_to_none=True)
        logits = model(ids)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets)
        loss.backward()
        opt.step()

    return stepsim_step, torch_step


def _sparse_linears(torch, model, problem, lam: float) -> None:
    """Route the torch model's linear modules whose stepsim weights are sparse through
    SR-STE's straight-through mask (the stacked Q/K/V module when wq, wk and wv are all
    sparse: an N:M mask along the inputs of each row is the same on the stack)."""
    from torch.nn import functional as F

    from stepsim.bench._torch_srste import sparse_ste

    specs = problem.specs
    nm = {spec.nm for spec in specs.values() if spec.sparse}
    if len(nm) != 1:
        raise ValueError(f"the torch SR-STE peer needs one N:M for every sparse weight, got {nm}")
    ste = sparse_ste(torch, *nm.pop(), lam)

    def masked(linear):
        def forward(x):
            return F.linear(x, ste.apply(linear.weight), linear.bias)
        linear.forward = forward

    for i, blk in enumerate(model.blocks):
        p = f"blocks.{i}."
        if all(specs[p + f"attn.{w}"].sparse for w in ("wq", "wk", "wv")):
            masked(blk.qkv)
        for module, name in ((blk.proj, "attn.wo"), (blk.fc1, "mlp.w1"), (blk.fc2, "mlp.w2")):
            if specs[p + name].sparse:
                masked(module)
    if not problem.model.tied and specs["head.w"].sparse:
        masked(model.head)
