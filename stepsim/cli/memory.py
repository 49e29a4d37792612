"""stepsim memory: weight memory of BERT-Base / GPT-2, dense vs N:M (the paper's Table 5)."""

from __future__ import annotations

from stepsim.cli.args import integer, nm, output_path, registry_names

HELP = "bytes of BERT-Base / GPT-2 weights dense vs N:M-compressed, beside the paper's Table 5"


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True,
                        choices=registry_names("stepsim.sparse24.memory", "MODELS"),
                        help="the model whose weights are counted: %(choices)s (the "
                             "architectures of the paper's Table 5)")
    parser.add_argument("--nm", type=nm, action="append", metavar="N:M",
                        help="an N:M setting (repeatable; default 2:4, 1:4 and 1:16)")
    parser.add_argument("--counted", default="all", choices=("all", "paper"),
                        help="all: every parameter tensor; paper: sparsified weights + token "
                             "embedding (the set the paper's numbers count)")
    parser.add_argument("--metadata", default="index", choices=("index", "bitmask", "none"),
                        help="index: ceil(log2 M) bits per kept value (default); bitmask: 1 bit "
                             "per dense element; none")
    parser.add_argument("--value-bytes", type=integer, default=2,
                        help="bytes per value (default 2)")
    parser.add_argument("--json", metavar="PATH",
                        help="also save the tables (with provenance) as JSON")


def run(args) -> int:
    from stepsim.checks.c12_memory import cell_verdict
    from stepsim.sparse24.memory import memory_table, table5_cells

    json_path = output_path(args.json, option="--json")  # checked before any work
    nms = args.nm or [(2, 4), (1, 4), (1, 16)]
    table = memory_table(args.model, nms, value_bytes=args.value_bytes, counted=args.counted,
                         metadata=args.metadata)
    print(table)
    paper_view = memory_table(args.model, nms, value_bytes=2, counted="paper", metadata="none")
    print("\npaper Table 5 vs stepsim with the paper's accounting (counted=paper, metadata=none, "
          "2 bytes, MB = 1e6 B):")
    comparison = []
    shown = {r.setting for r in table.rows}
    for cell in table5_cells(args.model, counted="paper", metadata="none"):
        if cell.setting not in shown:
            continue
        verdict = cell_verdict(cell)
        mine = table.row(cell.setting).mb
        comparison.append({"setting": cell.setting, "paper_mb": cell.paper_mb,
                           "paper_accounting_mb": cell.stepsim_mb, "chosen_accounting_mb": mine,
                           "verdict": verdict})
        print(f"  {cell.setting:<6} paper {cell.paper_mb:8.2f} MB  "
              f"stepsim {cell.stepsim_mb:8.3f} MB"
              f"  {verdict:<15} (chosen accounting: {mine:.2f} MB)")
    if json_path is not None:
        from stepsim._ground.provenance import save_json

        save_json(json_path, {"table": table, "paper_accounting": paper_view,
                              "comparison": comparison},
                  params={"model": args.model, "nm": [f"{n}:{m}" for n, m in nms],
                          "counted": args.counted, "metadata": args.metadata,
                          "value_bytes": args.value_bytes})
        print(f"saved {json_path}")
    return 0
