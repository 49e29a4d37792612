"""Counted loops in LLVM IR, for the kernels that write their inner loops as LLVM vectors
(numba intrinsics: ``core._optim_kernels``, ``nn._nm_kernels``). llvmlite is imported by
the caller's codegen, never at import time."""

from __future__ import annotations


def counted_loop(builder, start, stop, step: int, carried: list, body) -> list:
    """for p = start, start + step, .. while p < stop: carried = body(p, carried).

    start, stop: i64 LLVM values; carried: loop-carried LLVM values (their initial
    values); body(p, carried) emits the loop body at the builder's position and returns
    the new carried values (a list, same types). Returns the carried values after the
    loop, with the builder positioned after it."""
    from llvmlite import ir

    b = builder
    i64 = ir.IntType(64)
    before = b.block
    head, inside, after = (b.append_basic_block(f"loop.{part}") for part in ("head", "body", "end"))
    b.branch(head)
    b.position_at_end(head)
    p = b.phi(i64)
    p.add_incoming(start, before)
    phis = [b.phi(x.type) for x in carried]
    for phi, x in zip(phis, carried):
        phi.add_incoming(x, before)
    b.cbranch(b.icmp_signed("<", p, stop), inside, after)
    b.position_at_end(inside)
    new = body(p, phis)
    p.add_incoming(b.add(p, ir.Constant(i64, step)), b.block)
    for phi, x in zip(phis, new):
        phi.add_incoming(x, b.block)
    b.branch(head)
    b.position_at_end(after)
    return phis
