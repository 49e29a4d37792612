"""The seams of ``stepsim.checks``: public names only, and an import graph without circles.

* No module of ``stepsim/checks`` (nor ``stepsim/cli/check.py``) imports a private
  (``_name``) module or name of another module of the package, and ``paper_checks/``
  imports no private name of stepsim (``stepsim._ground``, the ground floor every layer
  builds on: tests/package/test_layers.py, aside). Read statically, function-local imports
  included.
* The modules of ``stepsim/checks`` import each other without a circle, function-local
  imports included: an import moved into a function hides a circle, it does not remove it.
  ``from stepsim.checks import verdict`` is an edge to the module ``verdict``; a name
  taken from the package itself is an edge to its ``__init__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "stepsim" / "checks"
PACKAGE = "stepsim.checks"
#: private by name, shared on purpose: the layer every other one builds on
GROUND = "stepsim._ground"


def _module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path, root: Path = ROOT):
    """(dotted target, line) of every import in ``path`` (a file under ``root``),
    function-local ones included: ``from a.b import c`` gives "a.b.c", ``import a.b``
    gives "a.b"."""
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1 packages
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno


def private(dotted: str) -> list[str]:
    """The private components of a dotted name (``_x``; dunders such as ``__future__``
    are not private)."""
    return [p for p in dotted.split(".") if p.startswith("_") and not p.endswith("__")]


def _is_module(dotted: str, root: Path = ROOT) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def private_imports(paths, inside: str, root: Path = ROOT) -> list[str]:
    """Imports in ``paths`` (files under ``root``) of a private module or name under
    ``inside`` (a dotted package) defined in another module: "file:line target"."""
    found = []
    for path in paths:
        here = _module_name(path, root)
        for target, line in imports(path, root):
            if not target.startswith(inside + ".") or target.startswith(GROUND + "."):
                continue
            owner = target if _is_module(target, root) else target.rpartition(".")[0]
            if owner != here and private(target[len("stepsim."):]):
                found.append(f"{path.relative_to(root)}:{line} {target}")
    return found


def test_no_private_name_crosses_a_module_in_checks_or_into_paper_checks():
    checks = sorted(CHECKS.glob("*.py")) + [ROOT / "stepsim" / "cli" / "check.py"]
    assert private_imports(checks, PACKAGE) == []
    assert private_imports(checks, "stepsim.cli") == []
    assert private_imports(sorted((ROOT / "paper_checks").glob("*.py")), "stepsim") == []


def test_the_private_import_finder_finds_them(tmp_path):
    """The finder on files of its own: a private module, a private name, a relative and a
    function-local import are found; the ground floor and a module's own names are not."""
    package = tmp_path / "stepsim" / "checks"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_hidden.py").write_text("def _helper():\n    pass\n")
    (package / "shown.py").write_text(
        "from stepsim.checks import _hidden\n"
        "from stepsim._ground.atomic import write_text\n"
        "def f():\n    from stepsim.checks.verdict import _estimate_of\n"
        "from ._hidden import _helper\n"
        "def _mine():\n    pass\n")
    found = private_imports([package / "shown.py"], PACKAGE, tmp_path)
    assert sorted(f.split(" ")[1] for f in found) == [
        "stepsim.checks._hidden", "stepsim.checks._hidden._helper",
        "stepsim.checks.verdict._estimate_of"]


def graph(package_dir: Path, package: str) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (short names; "__init__" for the
    package itself), function-local imports included."""
    modules = {p.stem for p in package_dir.glob("*.py")}
    edges = {}
    for path in package_dir.glob("*.py"):
        targets = set()
        for target, _ in imports(path, package_dir.parents[len(package.split(".")) - 1]):
            if target == package:
                targets.add("__init__")
            elif target.startswith(package + "."):
                first = target[len(package) + 1:].split(".")[0]
                targets.add(first if first in modules else "__init__")
        targets.discard(path.stem)
        edges[path.stem] = targets
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary import circle found by a depth-first search (each reported once,
    starting at its smallest module)."""
    found = set()

    def walk(start, node, trail):
        for nxt in sorted(edges.get(node, ())):
            if nxt == start:
                found.add(tuple(trail))
            elif nxt > start and nxt not in trail:
                walk(start, nxt, trail + [nxt])

    for start in sorted(edges):
        walk(start, start, [start])
    return [list(c) for c in sorted(found)]


def test_no_import_circle_inside_checks():
    edges = graph(CHECKS, PACKAGE)
    assert circles(edges) == []
    # nothing inside the package takes names from its __init__ (a facade over the modules)
    assert sorted(m for m, targets in edges.items() if "__init__" in targets) == []


def test_the_circle_finder_finds_a_hidden_circle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from pkg.c import g\n")
    (package / "c.py").write_text("import pkg.a\n")
    (package / "d.py").write_text("from pkg import a\n")
    assert circles(graph(package, "pkg")) == [["a", "b", "c"]]
