"""The import graph of stepsim runs one way, down the layers of README's "Layout of the code"
(nothing lower imports anything higher), read statically from every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "stepsim"

#: top-level module or package -> layer (lower numbers sit lower)
LAYER = {
    "_validate": 0, "_jit": 0, "_threads": 0, "_atomic": 0, "_provenance": 0, "_progress": 0,
    "_lazy": 0, "_bits": 0, "_portability": 0, "_malloc": 0,
    "_mask_kernels": 1, "_optim_kernels": 1, "_nn_kernels": 1, "_step_kernels": 1,
    "_libm": 1, "_libm_kernels": 1, "reference": 1,
    "masks": 2, "optim": 2, "sparsity": 2, "stats": 2,
    "nn": 3, "theorem1": 3, "sparse24": 3,
    "problems": 4,
    "criteria": 5, "recipes": 5,
    "training": 6,
    "experiments": 7,
    "checks": 8, "bench": 8,
    "cli": 9,
    # the package itself re-exports public names of layers <= 7 (run_sweep): importing it
    # is importing them
    "__init__": 7, "__main__": 10,
}


def _part(dotted: str) -> str:
    """The top-level module or package of a dotted stepsim name."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path):
    import stepsim

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("stepsim"):
            if node.module == "stepsim":  # a module (from stepsim import stats) or a public
                # name, which lives where the package's lazy table says (stepsim.masks ...)
                yield from (stepsim._EXPORTS.get(a.name, f"stepsim.{a.name}")
                            for a in node.names)
            else:
                yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("stepsim"))


def test_every_module_has_a_layer_and_imports_only_its_own_or_lower_ones():
    upward, unknown = [], set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        here = rel.parts[0]
        if here not in LAYER:
            unknown.add(here)
            continue
        for target in _imports(path):
            there = _part(target)
            if there not in LAYER:
                unknown.add(there)
            elif LAYER[there] > LAYER[here] and here != "__init__":
                upward.append(f"{'/'.join(rel.parts)} imports {target}")
    assert not unknown, f"give these a layer in LAYER (and README's layout): {sorted(unknown)}"
    assert not upward, upward
