"""Memory calculator: parameter counts, Table 5 of the paper, and bytes of real storage."""

import numpy as np
import pytest

from stepsim import apply_nm
from stepsim.sparse24.layout import compress_2to4
from stepsim.sparse24.memory import PAPER_TABLE5, Param, memory_table, model_layers
from stepsim.sparse24.nm_storage import compress_nm


def test_parameter_counts_match_the_published_models():
    # bert-base-uncased (with pooler) and GPT-2 small (LM head tied) as HF reports them
    assert sum(p.size for p in model_layers("bert-base")) == 109_482_240
    assert sum(p.size for p in model_layers("gpt2")) == 124_439_808
    for model in ("bert-base", "gpt2"):
        sparse = [p for p in model_layers(model) if p.sparse]
        assert len(sparse) == 12 * (6 if model == "bert-base" else 4)
        assert sum(p.size for p in sparse) == 84_934_656  # 12 layers x 12 * 768^2


@pytest.mark.parametrize("model", ["bert-base", "gpt2"])
def test_paper_accounting_reproduces_table5(model):
    """Sparsified weights + token embedding, 2 bytes a value, no metadata, MB = 1e6 B."""
    table = memory_table(model, counted="paper", metadata="none")
    for setting, mb in PAPER_TABLE5[model].items():
        assert round(table.row(setting).mb, 2) == mb


@pytest.mark.parametrize("model", ["bert-base", "gpt2"])
def test_full_accounting_with_metadata_does_not(model):
    table = memory_table(model, counted="all", metadata="index")
    for setting, mb in PAPER_TABLE5[model].items():
        assert round(table.row(setting).mb, 2) != mb
    # metadata at 2:4 is 2 bits per kept value = 1/16 of the sparse weights' fp16 bytes
    row = table.row("2:4")
    assert row.metadata_bytes * 16 == 84_934_656 * 2


def test_table_bytes_equal_the_bytes_stepsim_actually_stores():
    rng = np.random.default_rng(0)
    shapes = {"w1": (64, 128), "w2": (32, 64)}
    params = [Param(name, shape, "linear", sparse=True) for name, shape in shapes.items()]
    params.append(Param("b", (64,), "bias"))
    for n, m in [(2, 4), (1, 4), (1, 16), (3, 8)]:
        table = memory_table(params, [(n, m)], value_bytes=2)
        stored = 64 * 2  # the dense bias
        for shape in shapes.values():
            w = apply_nm(rng.standard_normal(shape).astype(np.float16), n, m)
            stored += compress_nm(w, n, m).nbytes
        assert table.row(f"{n}:{m}").total_bytes == stored
    # the CUTLASS 2:4 operand (fp16) costs the same as the 2:4 row
    cut = 64 * 2
    for shape in shapes.values():
        v, meta = compress_2to4(apply_nm(rng.standard_normal(shape).astype(np.float16), 2, 4))
        cut += v.nbytes + meta.nbytes
    assert memory_table(params, [(2, 4)]).row("2:4").total_bytes == cut


def test_bitmask_and_bad_arguments():
    t = memory_table("gpt2", [(1, 16)], metadata="bitmask")
    assert t.row("1:16").metadata_bytes == 84_934_656 // 8
    assert "1:16" in str(t) and "MiB" in str(t)
    with pytest.raises(ValueError, match="unknown model"):
        model_layers("gpt3")
    with pytest.raises(ValueError, match="unknown counted"):
        memory_table("gpt2", counted="some")
    with pytest.raises(ValueError, match="n must be <= m"):
        memory_table("gpt2", [(4, 2)])


def test_errors_name_the_setting_and_the_parameter():
    table = memory_table("gpt2", [(2, 4)])
    with pytest.raises(ValueError, match=r"setting '3:4' is not in this table; it holds "
                                         r"\['dense', '2:4'\]"):
        table.row("3:4")
    odd = [Param("w", (3, 5), "linear", sparse=True)]
    with pytest.raises(ValueError, match=r"sparse parameter 'w' has shape \(3, 5\) \(15 values\)"):
        memory_table(odd, [(2, 4)])


def test_the_printed_table_names_its_columns_for_what_they_hold_and_they_add_up():
    """Every byte column says "(B)"; each row's total is the sum of its parts as printed
    (the old "values" column held bytes, not values)."""
    from stepsim.sparse24.memory import memory_table

    text = str(memory_table("gpt2", [(2, 4), (1, 16)]))
    header = text.splitlines()[1]
    assert header.split() == ["setting", "total", "(B)", "MB", "MiB", "ratio", "kept", "dense",
                              "(B)", "N:M", "values", "(B)", "metadata", "(B)"]
    rows = [line.split() for line in text.splitlines()[2:5]]
    assert [r[0] for r in rows] == ["dense", "2:4", "1:16"]
    for r in rows:
        total, kept, values, meta = (int(r[i].replace(",", "")) for i in (1, 5, 6, 7))
        assert total == kept + values + meta, r
    assert text.splitlines()[-1].strip().startswith("(B) = bytes;")
