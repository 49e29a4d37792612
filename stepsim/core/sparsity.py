"""Which parameters a recipe sparsifies, with which N:M, along which axis.

A model's parameters are a ``dict`` name -> ndarray; beside it a ``dict`` name ->
:class:`ParamSpec` says, for every parameter, whether it is sparsified (``n, m`` set) or
kept dense (biases, norms: ``ParamSpec()``), and along which axis the groups of M
consecutive entries run: the reduction (input) axis, ``-1`` for a Linear weight stored
(out, in), ``1`` for a conv weight (out, in, kh, kw) (groups over input channels, as
:func:`stepsim.core.masks.nm_mask_conv`), ``-1`` for the 1-D conv weights of
:mod:`stepsim.nn.conv`, stored (out, k, in) with the input channels innermost (cuDNN's
channels-last filter layout), whose GEMM matrix is the reshape (out, k * in).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from stepsim._ground.validate import check_int, check_nm, normalize_axis


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """Sparsity of one parameter: N:M along ``axis``, or dense when ``n`` and ``m`` are None."""

    n: int | None = None
    m: int | None = None
    axis: int = -1

    def __post_init__(self):
        if (self.n is None) != (self.m is None):
            raise ValueError(f"ParamSpec needs both n and m or neither, got n={self.n}, m={self.m}")
        if self.n is not None:
            check_nm(self.n, self.m)
        check_int("axis", self.axis)

    @property
    def sparse(self) -> bool:
        """True when the parameter is N:M-sparsified."""
        return self.n is not None

    @property
    def nm(self) -> tuple[int, int] | None:
        return None if self.n is None else (self.n, self.m)

    def with_nm(self, n: int, m: int) -> ParamSpec:
        """The same axis with another N:M (a dense spec stays dense)."""
        return self if not self.sparse else dataclasses.replace(self, n=n, m=m)


def check_divides(name: str, shape: tuple[int, ...], axis: int, m: int) -> None:
    """Raise ValueError unless groups of ``m`` tile axis ``axis`` of parameter ``name``."""
    if len(shape) == 0:
        raise ValueError(f"parameter {name!r} is 0-d; an N:M mask needs at least one axis")
    ax = normalize_axis(axis, len(shape), name=f"axis of {name!r}")
    if shape[ax] % m:
        raise ValueError(
            f"parameter {name!r} has shape {tuple(shape)}: axis {ax} has length {shape[ax]}, "
            f"not divisible by M = {m} (N:M groups must tile the axis; stepsim never pads)"
        )


def check_specs(params: Mapping[str, np.ndarray], specs: Mapping[str, ParamSpec]) -> None:
    """Every parameter has a spec (and no spec lacks a parameter); every N:M tiles its axis."""
    missing = sorted(set(params) - set(specs))
    extra = sorted(set(specs) - set(params))
    if missing or extra:
        raise ValueError(f"specs do not match params: no spec for {missing}, no param for {extra}")
    for name, spec in specs.items():
        if not isinstance(spec, ParamSpec):
            raise TypeError(f"specs[{name!r}] must be a ParamSpec, got {type(spec).__name__}")
        if spec.sparse:
            check_divides(name, params[name].shape, spec.axis, spec.m)


def with_nm(specs: Mapping[str, ParamSpec], n: int, m: int) -> dict[str, ParamSpec]:
    """Specs with every sparse parameter set to N:M (dense parameters stay dense): new specs
    by :meth:`ParamSpec.with_nm`, never a frozen spec changed in place."""
    n, m = check_nm(n, m)
    return {name: spec.with_nm(n, m) for name, spec in specs.items()}


def sparsity(specs: Mapping[str, ParamSpec], shapes: Mapping[str, tuple[int, ...]],
             nm: Mapping[str, tuple[int, int]] | None = None) -> float:
    """Fraction of sparsified-parameter entries an N:M assignment prunes (dense params excluded).

    nm: name -> (n, m) overriding the specs' (e.g. a layer-wise allocation).
    """
    kept = total = 0
    for name, spec in specs.items():
        if not spec.sparse:
            continue
        n, m = (nm or {}).get(name, spec.nm)
        size = int(np.prod(shapes[name]))
        kept += size // m * n
        total += size
    return 0.0 if total == 0 else 1.0 - kept / total
