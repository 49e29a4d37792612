"""The import graph of stepsim, read statically from every module's imports (function-local
ones included: an import inside a function is still a dependency, only a later one):

* it runs one way, down the layers of README's "Layout of the code" (nothing lower imports
  anything higher);
* it has no circle anywhere, not even between the modules of one package;
* no module reaches into another's private names: across modules only public seams are
  used, in stepsim/ and in the paper_checks/ scripts.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "stepsim"

#: module, package or module inside a package -> layer (lower numbers sit lower); a module
#: takes the layer of its longest dotted prefix listed here (core.masks: 2, core._mask_kernels: 1,
#: _ground.validate: 0)
LAYER = {
    "_ground": 0, "_ground.libm": 1, "_ground.libm_kernels": 1,
    "core._mask_kernels": 1, "core._optim_kernels": 1, "core._step_kernels": 1,
    "core.reference": 1, "nn._kernels": 1, "nn._conv_kernels": 1, "nn._nm_kernels": 1,
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

# Files allowed to import another module's private names: none (the list stays so that a
# temporary exception is written down, with its reason, rather than hidden).
PRIVATE_IMPORTS_ALLOWED: set = set()

# Import circles allowed inside stepsim: none.
CIRCLES_ALLOWED: list = []


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


@functools.cache
def _is_module(dotted: str) -> bool:
    path = REPO.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _module_name(path: Path) -> str:
    """stepsim/core/masks.py -> "stepsim.core.masks"; a package's __init__ -> the package."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _ours(dotted: str | None) -> bool:
    return bool(dotted) and dotted.split(".")[0] in ("stepsim", "paper_checks")


@functools.cache
def _imports(path: Path) -> tuple:
    """(target, line) of every import of a stepsim module or name in ``path``, anywhere in
    it: ``from A import b`` gives "A.b" (a module or a name in A), ``import A.b`` "A.b",
    and an attribute ``m.x`` of a module m imported there gives "<m's module>.x"."""
    return tuple(_read_imports(path))


def _read_imports(path: Path):
    import stepsim

    tree = ast.parse(path.read_text())
    modules = {}  # local name -> the module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _ours(node.module):
            for a in node.names:
                if node.module == "stepsim" and not _is_module(f"stepsim.{a.name}"):
                    # a public name of the package: it lives where the lazy table says
                    yield f"{stepsim._EXPORTS.get(a.name, 'stepsim')}.{a.name}", node.lineno
                    continue
                target = f"{node.module}.{a.name}"
                if _is_module(target):
                    modules[a.asname or a.name] = target
                yield target, node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                if _ours(a.name):
                    modules[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0])
                    yield a.name, node.lineno
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in modules:
            yield f"{modules[node.value.id]}.{node.attr}", node.lineno


@functools.cache
def _module_of(target: str) -> str:
    """The module an import target loads: itself if it is one, else its longest module
    prefix ("stepsim.core.masks.nm_mask" -> "stepsim.core.masks")."""
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        if _is_module(".".join(parts[:n])):
            return ".".join(parts[:n])
    return parts[0]


def _sources(*tops):
    for top in tops:
        yield from sorted((REPO / top).rglob("*.py"))


# ------------------------------------------------------------------------------ layers
def test_every_module_has_a_layer_and_imports_only_its_own_or_lower_ones():
    upward, unknown = [], set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        here = _key(".".join(rel.parts))
        if here is None:
            unknown.add(".".join(rel.parts))
            continue
        for target, _ in _imports(path):
            target = _module_of(target)
            there = _key(_part(target))
            if there is None:
                unknown.add(_part(target))
            elif LAYER[there] > LAYER[here] and here != "__init__":
                upward.append(f"{'/'.join(rel.parts)} imports {target}")
    assert not unknown, f"give these a layer in LAYER (and README's layout): {sorted(unknown)}"
    assert not upward, upward


# ------------------------------------------------------------------------------ circles
def _graph() -> dict:
    """module -> the stepsim modules it imports (top-level and function-local alike)."""
    graph = {}
    for path in _sources("stepsim"):
        here = _module_name(path)
        graph[here] = {m for m in (_module_of(t) for t, _ in _imports(path)) if m != here}
    return graph


def _circles(graph: dict) -> list[set]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_even_inside_a_package():
    """A circle (a imports b, b imports a, however deep and whether the imports sit at the
    top or inside functions) makes the order modules load in matter; inside a package it
    hides behind function-local imports. Each module's imports must reach back to it by
    no path."""
    circles = [sorted(c) for c in _circles(_graph())
               if not any(c <= allowed for allowed in CIRCLES_ALLOWED)]
    assert not circles, f"import circles: {circles}"


def test_the_circle_check_sees_a_circle_behind_a_function_local_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [{"a", "b", "c"}]
    assert _circles({"a": {"b"}, "b": set()}) == []


# ------------------------------------------------------------------------------ seams
def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _owners(owner: str) -> tuple[str, ...]:
    """Who may use a private part whose owner (the dotted name before it) is ``owner``:
    the owner itself and what it contains. ``stepsim._ground`` is the repository's private
    ground floor (atomic writes, provenance, argument checks): stepsim and its
    paper_checks/ scripts share it."""
    return (owner, "paper_checks") if owner == "stepsim" else (owner,)


def _reaches_into(importer: str, target: str) -> bool:
    """Whether module ``importer`` uses a private part of ``target`` it does not own: a
    private module or package is private to the package that holds it, a private name to
    its module."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if _private(part) and not any(importer == o or importer.startswith(o + ".")
                                      for o in _owners(".".join(parts[:i]))):
            return True
    return False


def test_no_module_imports_another_modules_private_names():
    """Across modules, only public names: a private one (``_name``) is the module's own, a
    private module (``core/_step_kernels.py``) its package's. What is really shared has a
    public name."""
    found, stale = [], set(PRIVATE_IMPORTS_ALLOWED)
    for path in _sources("stepsim", "paper_checks"):
        rel = str(path.relative_to(REPO))
        here = _module_name(path)
        private = sorted({f"{rel}:{line} {target}" for target, line in _imports(path)
                          if _reaches_into(here, target)})
        if rel in PRIVATE_IMPORTS_ALLOWED:
            stale.discard(rel if private else None)
            continue
        found += private
    assert not found, "\n".join(found)
    assert not stale, f"no longer import private names: drop them from the allowlist {stale}"


def test_the_seam_check_knows_what_is_private_to_whom():
    assert _reaches_into("stepsim.bench.train", "stepsim.training._Run")
    assert _reaches_into("stepsim.recipes.lean", "stepsim.core._step_kernels")
    assert _reaches_into("stepsim.recipes.maskers", "stepsim.recipes.transforms._nm_masks")
    assert _reaches_into("paper_checks.successors", "stepsim.cli._args.nm")
    assert not _reaches_into("stepsim.core.select", "stepsim.core._step_kernels.where_zero")
    assert not _reaches_into("stepsim.core._step_kernels", "stepsim.core._optim_kernels")
    assert not _reaches_into("stepsim.training", "stepsim._ground.validate.check_int")
    assert not _reaches_into("paper_checks.lm_closing", "stepsim._ground.atomic.write_text")
    assert _reaches_into("stepsim.training", "stepsim._ground.validate._show")
