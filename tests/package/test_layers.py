"""The import graph of stepsim runs one way, down the layers of README's "Layout of the code"
(nothing lower imports anything higher), read statically from every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "stepsim"

#: module, package or module inside a package -> layer (lower numbers sit lower); a module
#: takes the layer of its longest dotted prefix listed here (core.masks: 2, core._mask_kernels: 1,
#: _ground.validate: 0)
LAYER = {
    "_ground": 0, "_ground.libm": 1, "_ground.libm_kernels": 1,
    "core._mask_kernels": 1, "core._optim_kernels": 1, "core._step_kernels": 1,
    "core.reference": 1, "nn._kernels": 1, "nn._nm_kernels": 1,
    "core": 2, "core.masks": 2, "core.optim": 2, "core.optim_many": 2, "core.sparsity": 2,
    "stats": 2,
    "nn": 3, "theorem1": 3, "sparse24": 3,
    "problems": 4,
    "recipes": 5,
    "training": 6,
    "fit_result": 6,  # Trace, FitResult and their saving: what fit (training) returns
    "experiments": 7,
    "checks": 8, "bench": 8,
    "cli": 9,
    # the package itself re-exports public names of layers <= 7 (run_sweep): importing it
    # is importing them
    "__init__": 7, "__main__": 10,
}


def _key(dotted: str) -> str | None:
    """The LAYER key of a dotted name inside stepsim ("core.masks"): its longest listed
    prefix, or None."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYER:
            return ".".join(parts[:n])
    return None


def _part(dotted: str) -> str:
    """A dotted stepsim name without the leading ``stepsim.`` (the package: "__init__")."""
    parts = dotted.split(".")
    return ".".join(parts[1:]) if len(parts) > 1 else "__init__"


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split(".")[1:])
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path: Path):
    import stepsim

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("stepsim"):
            if node.module == "stepsim":  # a module (from stepsim import stats) or a public
                # name, which lives where the package's lazy table says (stepsim.core.masks ...)
                yield from (stepsim._EXPORTS.get(a.name, f"stepsim.{a.name}")
                            for a in node.names)
            else:  # from stepsim.core import masks: the module stepsim.core.masks
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    yield sub if _is_module(sub) else node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("stepsim"))


def test_every_module_has_a_layer_and_imports_only_its_own_or_lower_ones():
    upward, unknown = [], set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        here = _key(".".join(rel.parts))
        if here is None:
            unknown.add(".".join(rel.parts))
            continue
        for target in _imports(path):
            there = _key(_part(target))
            if there is None:
                unknown.add(_part(target))
            elif LAYER[there] > LAYER[here] and here != "__init__":
                upward.append(f"{'/'.join(rel.parts)} imports {target}")
    assert not unknown, f"give these a layer in LAYER (and README's layout): {sorted(unknown)}"
    assert not upward, upward
