"""Memory of a model's weights, dense vs N:M-compressed (values + metadata): Table 5 of STEP.

A model is a tuple of :class:`Param` (name, shape, kind, sparse). :func:`model_layers`
gives every parameter tensor of BERT-Base (bert-base-uncased: vocab 30522, 512 positions,
2 token types, pooler) and GPT-2 124M (vocab 50257, 1024 positions, LM head tied to the
token embedding so counted once), flagged ``sparse`` as the STEP paper sparsifies them:
BERT — every Linear weight in attention (query, key, value, attention output),
intermediate and output; GPT-2 — every Conv1D weight (c_attn, attn c_proj, c_fc, mlp
c_proj). Biases, LayerNorms, embeddings and BERT's pooler stay dense.

:func:`memory_table` counts bytes under an explicit accounting:

* ``counted="all"``: every parameter tensor; ``counted="paper"``: only the sparsified
  weight matrices plus the token-embedding matrix — the set that reproduces the paper's
  Table 5 to the last printed digit (see ``paper_checks/table5_memory.md``).
* ``metadata="index"`` (default): every kept value of a sparsified weight carries its
  in-group index, ``ceil(log2 m)`` bits (2 bits at 2:4 — exactly the CUTLASS layout's
  4-bit nibble per group of 4 — 2 at 1:4, 4 at 1:16), packed per tensor and rounded up to
  whole bytes (stepsim's :mod:`.nm_storage` format). ``"bitmask"``: one bit per dense
  element of a sparsified weight instead. ``"none"``: values only.

Units: bytes; tables show MB (10^6 bytes, what the paper's figures turn out to be) and MiB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "MODELS",
    "PAPER_TABLE5",
    "MemoryRow",
    "MemoryTable",
    "Param",
    "Table5Cell",
    "memory_table",
    "model_layers",
    "table5_cells",
]

#: The paper's Table 5 (MB, 2 bytes a value): model -> setting -> MB.
PAPER_TABLE5 = {
    "bert-base": {"dense": 216.75, "2:4": 131.82, "1:4": 89.35, "1:16": 57.50},
    "gpt2": {"dense": 247.06, "2:4": 162.13, "1:4": 119.66, "1:16": 87.81},
}

KINDS = ("linear", "token_embedding", "position_embedding", "type_embedding", "bias",
         "layernorm", "pooler")


@dataclass(frozen=True)
class Param:
    """One parameter tensor: name, shape, kind (one of KINDS), sparse (N:M-sparsified)."""

    name: str
    shape: tuple
    kind: str
    sparse: bool = False

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _layernorm(prefix: str, h: int) -> list:
    """A LayerNorm's weight and bias, (h,) each."""
    return [Param(f"{prefix}.{part}", (h,), "layernorm") for part in ("weight", "bias")]


def _bert_base(vocab=30522, hidden=768, layers=12, inter=3072, positions=512, types=2):
    h = hidden
    out = [
        Param("embeddings.word_embeddings.weight", (vocab, h), "token_embedding"),
        Param("embeddings.position_embeddings.weight", (positions, h), "position_embedding"),
        Param("embeddings.token_type_embeddings.weight", (types, h), "type_embedding"),
        Param("embeddings.LayerNorm.weight", (h,), "layernorm"),
        Param("embeddings.LayerNorm.bias", (h,), "layernorm"),
    ]
    for i in range(layers):
        p = f"encoder.layer.{i}."
        linears = [("attention.self.query", h, h), ("attention.self.key", h, h),
                   ("attention.self.value", h, h), ("attention.output.dense", h, h),
                   ("intermediate.dense", inter, h), ("output.dense", h, inter)]
        for name, fan_out, fan_in in linears:
            # torch Linear weight is (out, in); N:M groups run along `in` (the last axis)
            out.append(Param(p + name + ".weight", (fan_out, fan_in), "linear", sparse=True))
            out.append(Param(p + name + ".bias", (fan_out,), "bias"))
            if name in ("attention.output.dense", "output.dense"):
                ln = p + name.replace("dense", "LayerNorm")
                out += _layernorm(ln, h)
    out += [Param("pooler.dense.weight", (h, h), "pooler"),
            Param("pooler.dense.bias", (h,), "pooler")]
    return tuple(out)


def _gpt2(vocab=50257, hidden=768, layers=12, positions=1024):
    h = hidden
    out = [
        # lm_head.weight is tied to wte: one tensor, counted once
        Param("transformer.wte.weight (= lm_head.weight)", (vocab, h), "token_embedding"),
        Param("transformer.wpe.weight", (positions, h), "position_embedding"),
    ]
    for i in range(layers):
        p = f"transformer.h.{i}."
        out += _layernorm(p + "ln_1", h)
        for name, fan_in, fan_out in (("attn.c_attn", h, 3 * h), ("attn.c_proj", h, h)):
            # HF Conv1D weight is (in, out)
            out.append(Param(p + name + ".weight", (fan_in, fan_out), "linear", sparse=True))
            out.append(Param(p + name + ".bias", (fan_out,), "bias"))
        out += _layernorm(p + "ln_2", h)
        for name, fan_in, fan_out in (("mlp.c_fc", h, 4 * h), ("mlp.c_proj", 4 * h, h)):
            out.append(Param(p + name + ".weight", (fan_in, fan_out), "linear", sparse=True))
            out.append(Param(p + name + ".bias", (fan_out,), "bias"))
    out += [Param("transformer.ln_f.weight", (h,), "layernorm"),
            Param("transformer.ln_f.bias", (h,), "layernorm")]
    return tuple(out)


MODELS = {"bert-base": _bert_base, "gpt2": _gpt2}


def model_layers(model: str) -> tuple:
    """Every parameter tensor of ``model`` ("bert-base" or "gpt2") as :class:`Param` s."""
    from stepsim._ground.validate import check_choice

    check_choice("model", model, MODELS)
    return MODELS[model]()


@dataclass(frozen=True)
class MemoryRow:
    """One setting: "dense" or "n:m". Bytes of dense-kept tensors, of the kept values of
    sparse tensors, and of their metadata; total; ratio = dense total / this total."""

    setting: str
    dense_part_bytes: int
    sparse_values_bytes: int
    metadata_bytes: int
    total_bytes: int
    ratio: float

    @property
    def mb(self) -> float:
        return self.total_bytes / 1e6

    @property
    def mib(self) -> float:
        return self.total_bytes / 2**20


@dataclass(frozen=True)
class MemoryTable:
    """Rows of :func:`memory_table` with the accounting that produced them."""

    model: str
    counted: str
    metadata: str
    value_bytes: int
    n_params: int
    n_sparse_params: int
    rows: tuple

    def row(self, setting: str) -> MemoryRow:
        """The row of ``setting`` ("dense" or "n:m", e.g. "2:4")."""
        for r in self.rows:
            if r.setting == setting:
                return r
        raise ValueError(f"setting {setting!r} is not in this table; it holds "
                         f"{[r.setting for r in self.rows]}")

    def __str__(self) -> str:
        head = (f"{self.model}: counted={self.counted} ({self.n_params:,} parameters, "
                f"{self.n_sparse_params:,} sparsified), metadata={self.metadata}, "
                f"{self.value_bytes} bytes a value")
        lines = [head, (f"  {'setting':<8} {'total (B)':>13} {'MB':>9} {'MiB':>9} "
                       f"{'ratio':>7} {'kept dense (B)':>15} {'N:M values (B)':>15} "
                       f"{'metadata (B)':>13}")]
        for r in self.rows:
            lines.append(f"  {r.setting:<8} {r.total_bytes:>13,} {r.mb:>9.2f} {r.mib:>9.2f} "
                         f"{r.ratio:>6.2f}x {r.dense_part_bytes:>15,} "
                         f"{r.sparse_values_bytes:>15,} {r.metadata_bytes:>13,}")
        lines.append("  (B) = bytes; total = kept dense (tensors never sparsified) + N:M values "
                     "(the kept values of the sparsified tensors: all of them in the dense "
                     "row) + metadata; MB = 10^6 B, MiB = 2^20 B; ratio = dense total / total")
        return "\n".join(lines)

    __repr__ = __str__


def memory_table(params, nms=((2, 4), (1, 4), (1, 16)), *, value_bytes: int = 2,
                 counted: str = "all", metadata: str = "index",
                 model: str = "custom") -> MemoryTable:
    """Bytes of ``params`` dense and N:M-compressed for each (n, m) in ``nms``.

    params: iterable of :class:`Param` (or a model name for :func:`model_layers`).
    counted: "all" (every tensor) or "paper" (sparse weights + token embedding only).
    metadata: "index" (ceil(log2 m) bits per kept value), "bitmask" (1 bit per dense
    element) or "none"; per-tensor rounding up to whole bytes. value_bytes: bytes per
    stored value (2 = fp16/bf16).
    A sparse tensor keeps size*n/m values (its size along the grouped axis is a multiple of
    m for every built-in model); dense tensors keep every value.
    """
    from stepsim._ground.validate import check_choice, check_int, check_nm
    from stepsim.sparse24.nm_storage import index_bits

    if isinstance(params, str):
        model = params
        params = model_layers(params)
    params = tuple(params)
    if not params:
        raise ValueError("params is empty: give the model's Param s or a model name "
                         f"({sorted(MODELS)}); an empty model has no memory to compare")
    bad = [p for p in params if not isinstance(p, Param)]
    if bad:
        raise TypeError(f"params must be Param s (or a model name), got {bad[0]!r:.80} "
                        f"({type(bad[0]).__name__})")
    check_choice("counted", counted, ("all", "paper"))
    check_choice("metadata", metadata, ("index", "bitmask", "none"))
    value_bytes = check_int("value_bytes", value_bytes, minimum=1)
    if counted == "paper":
        params = tuple(p for p in params if p.sparse or p.kind == "token_embedding")
        if not params:
            raise ValueError("counted='paper' keeps no parameter of this model (none is "
                             "sparse or a token embedding); use counted='all'")
    sparse = [p for p in params if p.sparse]
    dense_kept = sum(p.size for p in params if not p.sparse)
    n_sparse = sum(p.size for p in sparse)
    total_dense = (dense_kept + n_sparse) * value_bytes
    rows = [MemoryRow("dense", dense_kept * value_bytes, n_sparse * value_bytes, 0,
                      total_dense, 1.0)]
    for n, m in nms:
        n, m = check_nm(n, m)
        for p in sparse:
            if p.size * n % m:
                raise ValueError(
                    f"sparse parameter {p.name!r} has shape {p.shape} ({p.size} values): "
                    f"{n}:{m} would keep {p.size} * {n} / {m}, not a whole number of values")
        kept = [p.size * n // m for p in sparse]
        values = sum(kept) * value_bytes
        if metadata == "index":
            meta = sum(math.ceil(kv * index_bits(m) / 8) for kv in kept)
        elif metadata == "bitmask":
            meta = sum(math.ceil(p.size / 8) for p in sparse)
        else:
            meta = 0
        total = dense_kept * value_bytes + values + meta
        rows.append(MemoryRow(f"{n}:{m}", dense_kept * value_bytes, values, meta, total,
                              total_dense / total))
    return MemoryTable(model, counted, metadata, value_bytes, dense_kept + n_sparse,
                       n_sparse, tuple(rows))


@dataclass(frozen=True)
class Table5Cell:
    """One cell of the paper's Table 5 beside stepsim's count under a stated accounting.

    paper_mb: the printed figure (MB = 10^6 B, two decimals); stepsim_mb: stepsim's bytes
    / 10^6 under ``counted`` and ``metadata`` (see :func:`memory_table`); matches: equal
    once stepsim's figure is rounded to the paper's two decimals. The verdict built on
    it lives with the paper checks (``stepsim.checks.c12_memory``).
    """

    model: str
    setting: str
    paper_mb: float
    stepsim_mb: float
    counted: str
    metadata: str

    @property
    def matches(self) -> bool:
        return round(self.stepsim_mb, 2) == self.paper_mb


def table5_cells(model: str, *, counted: str = "paper", metadata: str = "none",
                 value_bytes: int = 2) -> tuple:
    """Every cell of the paper's Table 5 row of ``model`` as :class:`Table5Cell` s."""
    from stepsim._ground.validate import check_choice

    check_choice("model", model, PAPER_TABLE5)
    paper = PAPER_TABLE5[model]
    nms = [tuple(int(x) for x in s.split(":")) for s in paper if s != "dense"]
    table = memory_table(model, nms, value_bytes=value_bytes, counted=counted,
                         metadata=metadata)
    return tuple(Table5Cell(model, setting, mb, table.row(setting).mb, counted, metadata)
                 for setting, mb in paper.items())
