"""PyTorch peers for ``stepsim bench --torch``, run in a child process.

numba's OpenMP threading layer and torch's OpenMP runtime contend when both are loaded in
one process (PERF_NOTES), and the workaround — numba's ``workqueue`` layer — made an
``adam_step`` call several times slower: a bench that imported torch measured stepsim under a layer
no user runs. So torch never loads in the bench's process: :class:`TorchPeer` starts
``python -m stepsim.bench._torch_peer``, builds the peer models there, and asks it to time
N calls at a time. The bench interleaves those rounds with its own (N stepsim steps, then N
torch steps, ...), so both see the same state of the shared machine, and each side's
time is measured in its own process (the pipe's latency is outside both timings).

Peers (``build``): ``digits`` (the digits MLP, nn.Linear + ReLU, cross-entropy, fused Adam),
``digits-srste`` (the same with SR-STE: N:M masks of every sparse weight by topk + scatter
each step, the masked weights in the forward pass, the straight-through gradient plus
lam (1 - mask) w, fused Adam), ``regression`` (two nn.Linear, 0.5 sum of squares / B), ``lm``
(:func:`stepsim.bench._lm_steps.torch_model`), ``lm-srste`` (the same with SR-STE on the
problem's sparse linear weights), ``mnist1d`` and ``mnist1d-srste`` (the
CNN of the mnist1d problem, nn.Conv1d + ReLU and a linear head, dense or with SR-STE:
:mod:`stepsim.bench._cnn_steps`), ``adam`` (one fused Adam step on n float32) and
``mask`` (an N:M mask of n float32 by topk + scatter).
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np


class TorchPeer:
    """A child process that builds and times PyTorch peers (module docstring)."""

    def __init__(self, threads: int = 1):
        import os

        # torch's OpenMP workers spin for a while after each parallel region; on a small
        # machine they would then take the cores from the bench's own timings, which run
        # right after a peer's round. Passive: they sleep once their work is done.
        env = dict(os.environ)
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self.proc = subprocess.Popen([sys.executable, "-m", "stepsim.bench._torch_peer"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.version = self.call("hello", threads)

    def call(self, *message):
        pickle.dump(message, self.proc.stdin)
        self.proc.stdin.flush()
        ok, value = pickle.load(self.proc.stdout)
        if not ok:
            raise RuntimeError(f"torch peer failed on {message[0]!r}: {value}")
        return value

    def build(self, key: str, kind: str, **options) -> None:
        self.call("build", key, kind, options)

    def time(self, key: str, calls: int, clock: str = "wall") -> float:
        """Seconds for ``calls`` calls of peer ``key``, measured in the child: "wall"
        (perf_counter) or "cpu" (thread_time: its calling thread's CPU time, meaningful
        when torch runs on one thread)."""
        return self.call("time", key, calls, clock)

    def threads(self, n: int) -> None:
        self.call("threads", n)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call("stop")
            except (OSError, EOFError, RuntimeError):
                pass
            self.proc.wait(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def start_or_none(bench, threads: int = 1):
    """A :class:`TorchPeer` if the bench asked for torch peers and torch imports, else None."""
    if not bench.torch_peers:
        return None
    try:
        return TorchPeer(threads)
    except (RuntimeError, EOFError, OSError) as exc:
        bench.print(f"  (PyTorch peer unavailable: {exc})")
        return None


# ------------------------------------------------------------------------------ the child
def _digits_peer(torch, options, srste: bool):
    from stepsim.problems.registry import make_problem

    problem = make_problem("digits", **options.get("problem", {}))
    lr, lam = options.get("lr", 1e-3), options.get("lam", 2e-4)
    sizes = problem.mlp.sizes
    gen = torch.Generator().manual_seed(0)
    x = torch.from_numpy(np.ascontiguousarray(problem.x, dtype=np.float32))
    y = torch.from_numpy(problem.y)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(net.parameters(), lr=lr, fused=True)
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    sparse = [lin for l, lin in enumerate(linears, start=1)
              if problem.specs[f"w{l}"].sparse] if srste else []
    from stepsim.bench._torch_srste import sparse_ste

    SparseSTE = sparse_ste(torch, *problem.mlp.nm, lam)

    def forward(xb):
        h = xb
        for i, lin in enumerate(linears):
            w = SparseSTE.apply(lin.weight) if lin in sparse else lin.weight
            h = torch.nn.functional.linear(h, w, lin.bias)
            if i < len(linears) - 1:
                h = torch.relu(h)
        return h

    return minibatch_step(torch, forward, opt, x, y, problem.batch_size, gen)


def minibatch_step(torch, forward, opt, x, y, batch: int, gen):
    """One step of a classification peer: ``batch`` rows of x (and labels y) drawn with
    replacement by ``gen`` (as the problems' sample_batch), mean cross-entropy of
    ``forward``'s logits, backward, ``opt``'s step."""
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        idx = torch.randint(0, len(y), (batch,), generator=gen)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(forward(x[idx]), y[idx])
        loss.backward()
        opt.step()

    return step


def _regression_peer(torch, options):
    from stepsim.problems.registry import make_problem

    problem = make_problem("regression", **options.get("problem", {}))
    dtype = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}[
        problem.dtype]
    net = torch.nn.Sequential(torch.nn.Linear(problem.d_in, problem.d_hidden),
                              torch.nn.Linear(problem.d_hidden, problem.d_out)).to(dtype)
    opt = torch.optim.Adam(net.parameters(), lr=options.get("lr", 1e-3), fused=True)
    x, y = torch.from_numpy(problem.x), torch.from_numpy(problem.y)
    gen = torch.Generator().manual_seed(0)
    batch = problem.batch_size

    def step():
        idx = torch.randint(0, len(y), (batch,), generator=gen)
        opt.zero_grad(set_to_none=True)
        loss = 0.5 * ((net(x[idx]) - y[idx]) ** 2).sum() / batch
        loss.backward()
        opt.step()

    return step


def _lm_peer(torch, options, srste: bool = False):
    from stepsim.bench._lm_steps import step_functions

    lam = options.get("lam", 2e-4) if srste else None
    _, step = step_functions(options["problem"], lr=options.get("lr", 1e-3), srste_lam=lam)
    return step


def _cnn_peer(torch, options, srste: bool):
    from stepsim.bench._cnn_steps import peer_model

    model, forward, x, y, batch = peer_model(options.get("problem", {}), srste=srste,
                                             lam=options.get("lam", 2e-4))
    opt = torch.optim.Adam(model.parameters(), lr=options.get("lr", 1e-3), fused=True)
    return minibatch_step(torch, forward, opt, x, y, batch, torch.Generator().manual_seed(0))


def _adam_peer(torch, options):
    size = options["size"]
    rng = np.random.default_rng(0)
    p = torch.nn.Parameter(torch.from_numpy(rng.standard_normal(size).astype(np.float32)))
    p.grad = torch.from_numpy(rng.standard_normal(size).astype(np.float32))
    opt = torch.optim.Adam([p], lr=1e-9, fused=True)
    opt.step()  # creates the state
    return opt.step


def _mask_peer(torch, options):
    """N:M mask of n float32 (the kernels section's weights) by topk + scatter."""
    size, n, m = options["size"], options["n"], options["m"]
    tw = torch.from_numpy(np.random.default_rng(0).standard_normal(size).astype(np.float32))

    def step():
        groups = tw.view(-1, m)
        idx = groups.abs().topk(n, dim=1).indices
        return torch.zeros_like(groups, dtype=torch.bool).scatter_(1, idx, True)

    return step


def _serve() -> None:
    import time

    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but replies goes down the pipe
    inp = sys.stdin.buffer
    peers = {}
    torch = None
    while True:
        try:
            message = pickle.load(inp)
        except EOFError:
            return
        kind, args = message[0], message[1:]
        try:
            if kind == "stop":
                pickle.dump((True, None), out)
                out.flush()
                return
            if kind == "hello":
                import torch

                torch.set_num_threads(args[0])
                value = torch.__version__
            elif kind == "threads":
                torch.set_num_threads(args[0])
                value = None
            elif kind == "build":
                key, what, options = args
                builders = {"digits": lambda o: _digits_peer(torch, o, False),
                            "digits-srste": lambda o: _digits_peer(torch, o, True),
                            "regression": lambda o: _regression_peer(torch, o),
                            "lm": lambda o: _lm_peer(torch, o),
                            "mnist1d": lambda o: _cnn_peer(torch, o, False),
                            "mnist1d-srste": lambda o: _cnn_peer(torch, o, True),
                            "lm-srste": lambda o: _lm_peer(torch, o, True),
                            "adam": lambda o: _adam_peer(torch, o),
                            "mask": lambda o: _mask_peer(torch, o)}
                step = builders[what](options)
                step()
                step()  # warm: allocator, thread pool
                peers[key] = step
                value = None
            elif kind == "time":
                key, calls, clock = args
                clock = time.thread_time if clock == "cpu" else time.perf_counter
                step = peers[key]
                t0 = clock()
                for _ in range(calls):
                    step()
                value = clock() - t0
            else:
                raise ValueError(f"unknown request {kind!r}")
            reply = (True, value)
        except Exception as exc:  # noqa: BLE001 (reported to the bench, which names the request)
            reply = (False, f"{type(exc).__name__}: {exc}")
        pickle.dump(reply, out)
        out.flush()


if __name__ == "__main__":
    _serve()
