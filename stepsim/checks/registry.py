"""The claims a check decides: one :class:`Claim` record per claim module, registered by it.

:data:`CLAIMS` names the paper's claims C1-C12 and :data:`EXTRAS` the comparisons beyond the
paper (S1), each with the module under ``stepsim.checks`` that holds it, in report order. A
claim module ends with ``CLAIM = register(Claim(...))``: its id, title, rule (the "Rule"
paragraph of its docstring), how it makes its jobs and decides, its parts and primary
parts, and how it draws its figures. :func:`get_claim` imports the module on first use
(``import stepsim.checks`` imports neither NumPy nor the claim modules) and returns its
record.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from pathlib import Path

#: claim -> module under stepsim.checks (the order of the report)
CLAIMS = {
    "C1": "c01_srste_adam",
    "C2": "c02_v_norm",
    "C3": "c03_variance_change",
    "C4": "c04_switch_criteria",
    "C5": "c05_step_vs_baselines",
    "C6": "c06_high_sparsity",
    "C7": "c07_switch_fraction",
    "C8": "c08_frozen_v",
    "C9": "c09_layerwise",
    "C10": "c10_decaying_mask",
    "C11": "c11_theorem1",
    "C12": "c12_memory",
}
#: beyond the paper: comparisons registered in PROTOCOL.md sections of their own (their own
#: rules block and digest), run only when named ("stepsim check S1"), reported after the
#: claims. "all" stays the paper's claims C1-C12.
EXTRAS = {
    "S1": "s01_successors",
}
#: the report's order: the paper's claims, then the extras
ORDER = [*CLAIMS, *EXTRAS]


def _every_part(budget) -> tuple:
    return ()


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim of the check, as its module registers it.

    id: "C1".."C12" or an extra ("S1"); title: the claim in one line; rule: the "Rule"
    paragraph of its module's docstring (``verdict.rule_of``). jobs(budget) -> [RunSpec |
    Task]: every run and task it needs on a budget (``budget.Budget``, or ``NoProblem``
    for a claim that trains nothing); decide(budget, results) -> ClaimResult, results:
    digest -> the job's view (``execution.view``). parts(budget) -> the names of the parts
    it decides on that budget, in report order; primary(budget) -> the parts its verdict
    rests on (None: every part; a claim decided without parts, C11 and C12, has none).
    Figures: ``figure(result, path)`` draws one file whose name the check chooses, or
    ``figures(result, folder) -> [paths]`` draws several (:meth:`draw` calls either).
    markdown(result) -> lines: a table of its own in report.md (S1). gather(budget,
    results) -> ``outcome.Gathered``: its parts measured but not decided, for draft 5's
    decision of every reading of a claim on a problem together (None: the claim decides
    each budget on its own: C11, C12, S1).
    """

    id: str
    title: str
    rule: str
    jobs: Callable
    decide: Callable
    parts: Callable = _every_part
    primary: Callable | None = None
    figure: Callable | None = None
    figures: Callable | None = None
    markdown: Callable | None = None
    gather: Callable | None = None

    def __post_init__(self):
        if self.id not in ORDER:
            raise ValueError(f"claim id must be one of {ORDER}, got {self.id!r}")
        if self.figure is not None and self.figures is not None:
            raise ValueError(f"claim {self.id}: give figure or figures, not both")
        if not self.rule.startswith("Rule"):
            raise ValueError(f"claim {self.id}: its rule must be the docstring's 'Rule' "
                             f"paragraph, got {self.rule[:40]!r}")

    @property
    def extra(self) -> bool:
        """Beyond the paper (run only when named)."""
        return self.id in EXTRAS

    @property
    def draws_several(self) -> bool:
        return self.figures is not None

    def primary_parts(self, budget) -> tuple:
        """The parts the verdict rests on (every part unless the claim names some)."""
        return tuple(self.parts(budget) if self.primary is None else self.primary(budget))

    def draw(self, result, folder: Path) -> list[Path]:
        """Draw ``result``'s figures into ``folder``: their paths (none if it draws none)."""
        folder = Path(folder)
        if self.figures is not None:
            return [Path(p) for p in self.figures(result, folder)]
        if self.figure is None:
            return []
        stem = result.claim.lower() + ("" if result.setting in ("", "none") else
                                       "-" + result.setting.replace("/", "-"))
        return [Path(self.figure(result, folder / f"{stem}.png"))]


#: id -> its Claim, filled by the claim modules as they are imported (:func:`register`)
REGISTRY: dict[str, Claim] = {}


def register(claim: Claim) -> Claim:
    """Record ``claim`` (called once by its module, at import) and return it. Its decide
    function must live in the module :data:`CLAIMS` / :data:`EXTRAS` names for its id."""
    if not isinstance(claim, Claim):
        raise TypeError(f"register needs a Claim, got {type(claim).__name__}")
    home = f"{__package__}.{({**CLAIMS, **EXTRAS})[claim.id]}"
    if getattr(claim.decide, "__module__", None) != home:
        raise ValueError(f"claim {claim.id} must be registered by {home}, not by "
                         f"{getattr(claim.decide, '__module__', None)}")
    REGISTRY[claim.id] = claim
    return claim


def get_claim(claim: str) -> Claim:
    """The :class:`Claim` of ``claim`` ("C1".."C12", an extra such as "S1"; any case)."""
    key = str(claim).upper()
    modules = {**CLAIMS, **EXTRAS}
    if key not in modules:
        raise ValueError(f"unknown claim {claim!r}; choose from {ORDER} or 'all'")
    if key not in REGISTRY:
        importlib.import_module(f"{__package__}.{modules[key]}")
        if key not in REGISTRY:
            raise RuntimeError(f"{__package__}.{modules[key]} did not register claim {key}")
    return REGISTRY[key]


def parse_claims(names) -> list[str]:
    """["all"] or claim names -> the claims in report order (duplicates removed; "all" is
    the paper's claims, an extra such as "S1" joins only when named)."""
    names = [str(n).upper() for n in (names or ["all"])]
    modules = {**CLAIMS, **EXTRAS}
    for n in names:  # every name is checked, "all C99" included
        if n != "ALL" and n not in modules:
            raise ValueError(f"unknown claim {n!r}; choose from {ORDER} or 'all'")
    if "ALL" in names:
        return list(CLAIMS) + [c for c in EXTRAS if c in names]
    return [c for c in ORDER if c in names]


__all__ = ["CLAIMS", "EXTRAS", "ORDER", "REGISTRY", "Claim", "get_claim", "parse_claims",
           "register"]
