"""SR-STE as a PyTorch user writes it, for the bench's torch peers (torch is imported by
the caller and passed in: it is optional, never a runtime dependency)."""

from __future__ import annotations


def sparse_ste(torch, n, m, lam):
    """SR-STE's autograd function at n:m: forward w * mask (the n largest |w| of every m
    consecutive inputs, by topk + scatter, every call), backward g + lam (1 - mask) w --
    what a PyTorch user pays for SR-STE: dense products with the masked weight."""

    class SparseSTE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w):
            groups = w.detach().abs().reshape(-1, m)
            idx = groups.topk(n, dim=1).indices
            mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, idx, True)
            mask = mask.reshape(w.shape)
            ctx.save_for_backward(w, mask)
            return w * mask

        @staticmethod
        def backward(ctx, grad):
            w, mask = ctx.saved_tensors
            return grad + lam * (~mask) * w

    return SparseSTE
