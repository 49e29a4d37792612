"""The matrix products of a training step, replayed; and where sparse products pay.

:func:`replay` gives two functions for one ``problem.loss_and_grad(fwd, batch)``: one runs
the products the step takes on OpenBLAS (dense), the other those it takes on a masked
layer's kept entries (:mod:`stepsim.nn.nm_linear`: Linear layers and the CNN's
convolutions on their column matrices), each on arrays of the step's shapes, dtypes and
layouts (the operands' transposes decide OpenBLAS's kernels). Which products are sparse is
asked of :func:`stepsim.nn.nm_linear.weights_for` with the step's own forward weights,
exactly as the models ask it. The train section times them to split a step into products
(dense, sparse) and the rest.

:func:`crossover_rows` times the forward product and the input gradient of the Linear
weights of the train section's models (their shapes and batches) and of the MNIST-1D
CNN's convolutions (their column matrices), dense and sparse, at several N:M,
interleaved: the table :func:`stepsim.nn.nm_linear.sparse_pays`'s rule was read from,
with the rule's choice beside each measured ratio.
"""

from __future__ import annotations

import numpy as np

# (model, rows of a batch, [(layer, out, in), ...], rule): the sparse layers of the train
# section's models at their batch (digits: 128 images; lm: 32 sequences of 32 tokens;
# the mnist1d CNN: a conv's column matrix (C_out, 3 * C_in) with batch * L_out rows, at the
# problem's 16 channels and batch 64 and at the prototype's 32 channels and batch 128).
# rule: the rule the model asks ("linear": stepsim.nn.nm_linear.sparse_pays, "conv":
# stepsim.nn.conv.sparse_pays), or None where the model takes the dense product whatever
# the table says (the CNN's head).
CROSSOVER_SHAPES = (
    ("digits", 128, (("w1", 256, 64), ("w2", 256, 256), ("w3", 10, 256)), "linear"),
    ("lm (lm.md)", 1024, (("qkv", 96, 32), ("wo", 32, 32), ("w1", 128, 32), ("w2", 32, 128),
                          ("head", 16, 32)), "linear"),
    ("lm defaults", 1024, (("qkv", 192, 64), ("wo", 64, 64), ("w1", 256, 64),
                           ("w2", 64, 256), ("head", 16, 64)), "linear"),
    ("mnist1d 16ch", 640, (("conv2", 16, 48),), "conv"),
    ("mnist1d 16ch", 320, (("conv3", 16, 48),), "conv"),
    ("mnist1d 16ch", 64, (("head", 10, 80),), None),
    ("mnist1d 32ch", 1280, (("conv2", 32, 96),), "conv"),
    ("mnist1d 32ch", 640, (("conv3", 32, 96),), "conv"),
)
CROSSOVER_NM = ((2, 4), (1, 4), (2, 8), (1, 8), (1, 16))


def replay(problem, fwd, batch):
    """(dense, sparse): functions running the products of ``problem.loss_and_grad(fwd,
    batch)`` on OpenBLAS and on kept weights (sparse is None when the step takes none);
    None for a model not known here."""
    mlp = getattr(problem, "mlp", None)
    if mlp is not None:
        return _mlp(fwd, batch.x.shape[0], mlp.sizes, batch.x.dtype)
    cnn = getattr(problem, "cnn", None)
    if cnn is not None:
        return _cnn(cnn, fwd, len(batch.y))
    cfg = getattr(problem, "model", None)
    if cfg is not None and hasattr(cfg, "heads"):
        return _transformer(cfg, fwd, batch.inputs.shape)
    if "w1" in fwd and "w2" in fwd and hasattr(batch, "x"):  # regression's 2 layers
        w1, w2, x = fwd["w1"], fwd["w2"], batch.x

        def regression():
            h = x @ w1.T
            r = h @ w2.T
            r.T @ h
            dh = r @ w2
            dh.T @ x
        return regression, None
    return None


class _Products:
    """Two lists of calls, dense and sparse, run by :meth:`functions`."""

    def __init__(self):
        self.dense, self.sparse = [], []

    def forward(self, x, w):
        """x @ w.T with w dense or a SparseWeight (as the model computes it)."""
        from stepsim.nn import nm_linear

        (self.dense if isinstance(w, np.ndarray) else self.sparse).append(
            lambda: nm_linear.product(x, w))

    def input_grad(self, d, w):
        from stepsim.nn import nm_linear

        (self.dense if isinstance(w, np.ndarray) else self.sparse).append(
            lambda: nm_linear.input_grad(d, w))

    def blas(self, fn):
        self.dense.append(fn)

    def functions(self):
        def run(calls):
            def all_of():
                for call in calls:
                    call()
            return all_of
        return run(self.dense), (run(self.sparse) if self.sparse else None)


def _mlp(fwd, rows: int, sizes, dtype):
    """The MLP's products: per layer the forward product, the weight gradient and (but for
    the first layer) the input gradient."""
    from stepsim.nn import nm_linear

    p = _Products()
    layers = len(sizes) - 1
    hs = [np.zeros((rows, size), dtype) for size in sizes]
    for l in range(1, layers + 1):
        w, back = nm_linear.weights_for(fwd, f"w{l}", rows)
        p.forward(hs[l - 1], w)
        p.blas(lambda d=hs[l], h=hs[l - 1]: d.T @ h)
        if l > 1:
            p.input_grad(hs[l], back)
    return p.functions()


def _cnn(cnn, fwd, batch: int):
    """The products of :meth:`stepsim.nn.cnn.CNN.loss_and_grad`: each conv's forward,
    weight-gradient and -- but the first's -- input-gradient product on its column matrix
    (the first and the last on the kept entries where the model takes them), the head's
    three, on zero arrays shaped and laid out as that code makes them."""
    from stepsim.nn import conv, nm_linear

    dt = fwd["head.w"].dtype
    p = _Products()
    convs = []
    c_in = cnn.in_channels
    for l, (c, k, l_out) in enumerate(zip(cnn.channels, cnn.kernel_sizes, cnn.lengths()[1:]),
                                      1):
        rows = batch * l_out
        w, back = nm_linear.weights_for(fwd, f"conv{l}.w", rows, conv.sparse_pays)
        convs.append((np.zeros((rows, k * c_in), dt), w, back, np.zeros((rows, c), dt),
                      l > 1))
        c_in = c
    head = np.asarray(fwd["head.w"])
    flat = np.zeros((batch, head.shape[1]), dt)
    dlogits = np.zeros((batch, cnn.classes), dt)
    for cols, w, _, _, _ in convs:
        p.forward(cols, w)
    p.blas(lambda: flat @ head.T)
    p.blas(lambda: dlogits @ head)
    p.blas(lambda: dlogits.T @ flat)
    for cols, _, back, dout, need_dx in reversed(convs):
        p.blas(lambda dout=dout, cols=cols: dout.T @ cols)
        if need_dx:
            p.input_grad(dout, back)
    return p.functions()


def _transformer(cfg, fwd, shape):
    """The products of :func:`stepsim.nn.transformer.loss_and_grad` (forward and backward,
    every block), on zero arrays shaped and laid out as that code makes them."""
    from stepsim.nn import nm_linear

    b, t = shape
    rows = b * t
    d, f, v, h = cfg.width, cfg.hidden, cfg.vocab, cfg.heads
    dh = d // h
    dt = fwd["pos_emb"].dtype
    x = np.zeros((rows, d), dt)
    heads = np.zeros((3, b, h, t, dh), dt)  # q, k, v: contiguous heads
    scores = np.zeros((b, h, t, t), dt)
    hidden = np.zeros((rows, f), dt)
    logits = np.zeros((rows, v), dt)
    qkv_out = np.zeros((rows, 3 * d), dt)
    dout_heads = np.zeros((b, t, h, dh), dt).transpose(0, 2, 1, 3)  # a view, as the code
    p = _Products()
    blocks = []
    for i in range(cfg.blocks):
        s = f"blocks.{i}."
        qkv = nm_linear.stacked_weights_for(fwd, [s + "attn." + w for w in ("wq", "wk", "wv")],
                                            rows)
        blocks.append((qkv,) + tuple(nm_linear.weights_for(fwd, s + name, rows)
                                     for name in ("attn.wo", "mlp.w1", "mlp.w2")))
    head = (fwd["tok_emb"],) * 2 if cfg.tied else nm_linear.weights_for(fwd, "head.w", rows)
    for (qkv, wo, w1, w2) in blocks:  # forward
        p.forward(x, qkv[0])
        q, k, vv = heads
        p.blas(lambda q=q, k=k: q @ k.swapaxes(-1, -2))
        p.blas(lambda vv=vv: scores @ vv)
        p.forward(x, wo[0])
        p.forward(x, w1[0])
        p.forward(hidden, w2[0])
    p.forward(x, head[0])
    p.input_grad(logits, head[1])  # backward
    p.blas(lambda: logits.T @ x)
    for (qkv, wo, w1, w2) in blocks:
        p.input_grad(x, w2[1])
        p.blas(lambda: x.T @ hidden)
        p.input_grad(hidden, w1[1])
        p.blas(lambda: hidden.T @ x)
        p.input_grad(x, wo[1])
        p.blas(lambda: x.T @ x)
        q, k, vv = heads
        p.blas(lambda: scores.swapaxes(-1, -2) @ dout_heads)
        p.blas(lambda vv=vv: dout_heads @ vv.swapaxes(-1, -2))
        p.blas(lambda k=k: scores @ k)
        p.blas(lambda q=q: scores.swapaxes(-1, -2) @ q)
        p.input_grad(qkv_out, qkv[1])
        p.blas(lambda: qkv_out.T @ x)
    return p.functions()


def crossover_rows(bench) -> None:
    """Forward product and input gradient of each layer of :data:`CROSSOVER_SHAPES`,
    dense (OpenBLAS, the masked weight) and sparse (the kept entries), at every N:M of
    :data:`CROSSOVER_NM`: timed interleaved on one thread (CPU time), one row each, with
    the ratio and what :func:`stepsim.nn.nm_linear.sparse_pays` chooses there."""
    import time

    from stepsim.core.masks import nm_mask
    from stepsim.nn import conv, nm_linear

    rng = np.random.default_rng(0)
    reps = 3 if bench.quick else 7
    bench.print("  sparse products against dense (1 thread, CPU time; >1: sparse faster; "
                "[sparse]: the rule takes the sparse product there):")
    rules = {"linear": nm_linear.sparse_pays, "conv": conv.sparse_pays, None: None}
    for model, rows, layers, rule in CROSSOVER_SHAPES:
        if bench.quick:
            rows = min(rows, 64)
        for layer, out, n_in in layers:
            w = rng.standard_normal((out, n_in)).astype(np.float32)
            x = rng.standard_normal((rows, n_in)).astype(np.float32)
            dy = rng.standard_normal((rows, out)).astype(np.float32)
            cells = []
            for n, m in CROSSOVER_NM:
                if n_in % m:
                    continue
                mask = nm_mask(w, n, m, axis=-1)
                wd = np.where(mask, w, np.float32(0))
                sw = nm_linear.pack(w, mask, n, m)
                number = max(1, int(2e6 / (rows * out * n_in)))
                t = bench.compare({
                    "fwd dense": lambda x=x, wd=wd: x @ wd.T,
                    "fwd sparse": lambda x=x, sw=sw: nm_linear.product(x, sw),
                    "bwd dense": lambda dy=dy, wd=wd: dy @ wd,
                    "bwd sparse": lambda dy=dy, sw=sw: nm_linear.input_grad(dy, sw),
                }, repeats=reps, number=number, clock=time.thread_time)
                for which, outputs, width in (("fwd", out, n_in), ("bwd", n_in, out)):
                    ratio = t[f"{which} dense"] / t[f"{which} sparse"]
                    chosen = rule is not None and rules[rule](rows, outputs, width, n, m)
                    row = bench.emit(
                        "train", f"{model} {layer} ({out}x{n_in}) x {rows} rows {n}:{m} "
                        f"{'forward' if which == 'fwd' else 'input gradient'}",
                        "sparse product", t[f"{which} sparse"], units=rows * outputs,
                        unit="output", partner=t[f"{which} dense"], show=False,
                        dense_seconds=float(t[f"{which} dense"]), sparse_vs_dense=ratio,
                        rule_takes_sparse=chosen)
                    cells.append(f"{n}:{m} {which} {ratio:4.2f}x{' [sparse]' if chosen else ''}"
                                 f"{'' if row['reliable'] else ' (unreliable)'}")
            bench.print(f"    {model:12s} {layer:5s} {out:4d}x{n_in:<4d} x{rows:5d}: "
                        + ", ".join(cells))
