"""C12 (Table 5): memory of BERT-Base and GPT-2 at 2:4, 1:4, 1:16 (2 bytes a value plus metadata).

Quantity. stepsim's memory calculator (``stepsim.sparse24.memory``) counts the bytes of
every tensor of bert-base-uncased and GPT-2 124M, dense and N:M-compressed, with the
metadata the hardware format needs (``ceil(log2 M)`` bits per kept value, the CUTLASS
nibble at 2:4). The paper's accounting is identified from its own numbers
(paper_checks/table5_memory.md): the sparsified weights plus the token embedding.

Rule (PROTOCOL §7, C12; its outcome was known before the rule was registered): split in
two. (1) The numbers, the verdict: a cell matches when stepsim's figure for the paper's
tensor set at 2 bytes a value with no metadata, rounded to the paper's two decimals
(within 0.01 MB), equals the printed one; REPRODUCED if all 8 cells match, NOT REPRODUCED
if any does not (no CI: the counts are exact). (2) The metadata sentence ("plus the
metadata each pattern needs"), reported beside the verdict: how many cells match when the
metadata is counted. Every tensor counted is reported too.
"""

from __future__ import annotations

from stepsim.checks import plots
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import NOT_REPRODUCED, REPRODUCED, ClaimResult, rule_of
from stepsim.experiments.tasks import Task

MODELS = ("bert-base", "gpt2")
ACCOUNTINGS = {"stated (paper tensors + index metadata)": ("paper", "index"),
               "paper tensors, no metadata": ("paper", "none"),
               "all tensors + index metadata": ("all", "index")}


def cell_verdict(cell) -> str:
    """REPRODUCED if a :class:`~stepsim.sparse24.memory.Table5Cell` matches, else NOT REPRODUCED."""
    return REPRODUCED if cell.matches else NOT_REPRODUCED


def jobs(budget):
    return [Task("stepsim.checks.c12_memory:memory_job", {})]


def memory_job() -> dict:
    from stepsim.sparse24.memory import table5_cells

    out = {}
    for label, (counted, metadata) in ACCOUNTINGS.items():
        out[label] = [{"model": c.model, "setting": c.setting, "paper_mb": c.paper_mb,
                       "stepsim_mb": c.stepsim_mb, "verdict": cell_verdict(c)}
                      for model in MODELS
                      for c in table5_cells(model, counted=counted, metadata=metadata)]
    return out


def decide_claim(budget, results) -> ClaimResult:
    cells = results[jobs(budget)[0].digest]
    stated = cells["stated (paper tensors + index metadata)"]
    bare = cells["paper tensors, no metadata"]
    misses = [c for c in bare if c["verdict"] != REPRODUCED]
    verdict = NOT_REPRODUCED if misses else REPRODUCED
    n_stated = sum(c["verdict"] == REPRODUCED for c in stated)
    reason = (f"(1) numbers: {len(bare) - len(misses)}/{len(bare)} cells match at 2 bytes a "
              f"value with no metadata; (2) the metadata sentence: {n_stated}/{len(stated)} "
              f"match when the metadata is counted (e.g. BERT 2:4: {stated[1]['stepsim_mb']:.2f}"
              f" vs {stated[1]['paper_mb']:.2f} MB) — the table does not count the metadata "
              "its text says it does" if n_stated < len(stated) else
              f"(1) numbers: {len(bare) - len(misses)}/{len(bare)} cells match; (2) the "
              f"metadata sentence: {n_stated}/{len(stated)} cells match with metadata")
    numbers = {"cells": {k: v for k, v in cells.items() if k != "seconds"},
               "metadata_sentence_matches": n_stated}
    return ClaimResult(CLAIM.id, CLAIM.title, verdict, reason, CLAIM.rule, None,
                       "bert-base-uncased, GPT-2 124M (exact counts)", (), budget.mode, numbers)


def figure(result, path):
    import numpy as np

    plt = plots.pyplot()
    cells = result.numbers["cells"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), dpi=90)
    for ax, model in zip(axes, MODELS):
        paper = [c for c in cells["paper tensors, no metadata"] if c["model"] == model]
        x = np.arange(len(paper))
        ax.bar(x - 0.3, [c["paper_mb"] for c in paper], 0.2, color="k", label="paper Table 5")
        for i, label in enumerate(ACCOUNTINGS):
            rows = [c for c in cells[label] if c["model"] == model]
            ax.bar(x - 0.1 + 0.2 * i, [c["stepsim_mb"] for c in rows], 0.2, color=f"C{i}",
                   label=f"stepsim: {label}")
        ax.set_xticks(x, [c["setting"] for c in paper])
        ax.set_ylabel("weight memory (MB = 10^6 bytes)")
        ax.set_title(model, fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle(f"C12 Table 5: memory, paper vs stepsim's exact counts — {result.verdict}",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    plots.footer(fig, "2 bytes a value; index metadata = ceil(log2 M) bits per kept value; "
                  "exact counts (no seeds, no CI)")
    return plots.save(fig, path)


CLAIM = register(Claim(
    id="C12",
    title="Table 5: BERT-Base / GPT-2 memory at 2:4, 1:4, 1:16 (2 bytes a value + metadata)",
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, figure=figure))
