"""Linear products from the kept weights of an N:M layer: values + column indices.

An N:M Linear weight W (out, in) keeps n of every m consecutive inputs of each row (groups
along the input axis, as every stepsim model stores its weights). Its forward product
``x @ W.T`` and its input gradient ``dy @ W`` need only the kept entries: k = in * n / m
multiply-adds an output instead of ``in``. :class:`SparseWeight` holds W that way
(values (out, k), their columns (out, k), increasing along each row: the values + indices
of :func:`stepsim.sparse24.nm_storage.compress_nm`, with the indices unpacked to columns
for computing); :func:`product` and :func:`input_grad` take either it or a dense array,
so a model calls them the same way for dense and sparse layers. The weight gradient
``dy.T @ x`` stays dense: SR-STE and STEP update every entry of W.

**Bits.** The sparse products sum in a fixed order (:mod:`stepsim.nn._nm_kernels`:
increasing input column for the forward product, increasing output for the input
gradient, each product and each sum rounded, no fused multiply-add): the same bits on
every CPU, for any thread count, and the same bits as their NumPy references here
(:func:`product_reference`, :func:`input_grad_reference`). They are not the bits of
OpenBLAS's dense product of the masked weight (that sums other terms in another order),
so whether a layer takes them must not depend on the machine: :func:`sparse_pays` decides
from the shapes and N:M alone, never from a timing at run time.

**Where the masks come from** (the hook between a recipe's step and a model): a recipe's
forward weights for a masked module are Pi * w. The step wraps its forward-weight dict in
:class:`ForwardWeights`, which also carries each such module's mask and (n, m); a model
asks :func:`weights_for` for a layer's weights and gets, for its forward product and for
its input gradient each, the :class:`SparseWeight` (packed from the forward weight at the
mask's entries, once per step, on first request) where :func:`sparse_pays` says so for its
batch, else the dense array. A plain dict (a dense recipe, an evaluation of final
weights, a hand-written call) always gives the dense array.
"""

from __future__ import annotations

import sys

import numpy as np

from stepsim.nn import layers as L

_K = None


def _kernels():
    """stepsim.nn._nm_kernels, imported on first use (numba), not when stepsim is imported."""
    global _K
    if _K is None:
        from stepsim.nn import _nm_kernels

        _K = _nm_kernels
    return _K


class SparseWeight:
    """A Linear weight (out, in) whose rows keep k entries each, in both of the forms its
    products read.

    values (out, k): the kept weights, in increasing column order along each row; columns
    (out, k) int32: their columns. n, m: the N:M the rows were masked with (k = in * n / m).
    by_input: the same entries regrouped by input column (the rows of W.T), each column's
    by increasing output: (indptr (in + 1,) int64, outputs (out * k,) int32, values
    (out * k,)): what :func:`input_grad` multiplies with. Made on first use: a layer whose
    input gradient stays dense (the rule's choice) never pays for it.
    """

    __slots__ = ("_by_input", "columns", "m", "n", "shape", "values")

    def __init__(self, values, columns, shape, n, m):
        self.values, self.columns, self.shape = values, columns, tuple(shape)
        self.n, self.m = n, m
        self._by_input = None

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def by_input(self) -> tuple:
        if self._by_input is None:
            out, n_in = self.shape
            k = self.values.shape[1]
            by_input = (np.empty(n_in + 1, np.int64), np.empty(out * k, np.int32),
                        np.empty(out * k, self.values.dtype))
            _kernels().transpose_rows(self.columns, self.values, n_in, *by_input)
            self._by_input = by_input
        return self._by_input

    def dense(self) -> np.ndarray:
        """The (out, in) array with the kept values and zeros elsewhere."""
        out = np.zeros(self.shape, self.values.dtype)
        np.put_along_axis(out, self.columns.astype(np.intp), self.values, axis=1)
        return out


def pack(w: np.ndarray, mask: np.ndarray, n: int, m: int) -> SparseWeight:
    """The :class:`SparseWeight` of weight w (out, in) at the entries of ``mask`` (bool, w's
    shape), which keeps exactly n of every m consecutive entries of each row (what
    :func:`stepsim.nm_mask` gives along the last axis). w's values are copied bit for bit
    (w need not be zero elsewhere)."""
    from stepsim._ground.validate import check_nm

    w = L.check_float("w", w)
    n, m = check_nm(n, m)
    if w.ndim != 2:
        raise ValueError(f"w must be 2-d (out, in), got shape {w.shape}")
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != w.shape:
        raise TypeError(f"mask must be a bool array of w's shape {w.shape}, got "
                        f"{getattr(mask, 'dtype', type(mask).__name__)} "
                        f"{getattr(mask, 'shape', '')}")
    if w.shape[1] % m:
        raise ValueError(f"w has {w.shape[1]} inputs, not a multiple of m = {m}")
    return _pack(np.ascontiguousarray(w), np.ascontiguousarray(mask), n, m)


def _pack(w, mask, n, m) -> SparseWeight:
    """:func:`pack` of arguments already checked (C-contiguous w and mask)."""
    out, n_in = w.shape
    k = n_in // m * n
    values = np.empty((out, k), w.dtype)
    columns = np.empty((out, k), np.int32)
    word = _WORDS[next(b for b in (8, 4, 2, 1) if m % b == 0)]
    words = mask.view(np.uint8).view(word)
    if word.itemsize == m:  # a group a word (m = 1, 2, 4, 8): the branch-free kernel
        bad = _kernels().pack_group_words(w, words, n, values, columns)
    else:
        bad = _kernels().pack_words(w, words, n, m // word.itemsize, values, columns)
    if bad >= 0:
        counts = mask[bad].reshape(-1, m).sum(axis=1)
        raise ValueError(f"mask row {bad} is not {n}:{m} along the inputs: its groups of "
                         f"{m} keep {counts.tolist()} entries")
    return SparseWeight(values, columns, (out, n_in), n, m)


# a mask's bytes read as little-endian words of 8, 4, 2 or 1 bytes (pack_words); a
# big-endian machine reads them byte by byte
_WORDS = ({8: np.dtype("<u8"), 4: np.dtype("<u4"), 2: np.dtype("<u2"), 1: np.dtype("u1")}
          if sys.byteorder == "little" else dict.fromkeys((8, 4, 2, 1), np.dtype("u1")))


def pack_reference(w: np.ndarray, mask: np.ndarray, n: int, m: int) -> SparseWeight:
    """:func:`pack` in plain NumPy, for a mask already known to keep n of every m: each
    row's kept columns in increasing order (``np.nonzero``) and w's values there."""
    out, n_in = w.shape
    _, columns = np.nonzero(mask)  # row-major: row by row, each in increasing column
    columns = columns.astype(np.int32).reshape(out, n_in // m * n)
    values = np.take_along_axis(w, columns.astype(np.intp), axis=1)
    return SparseWeight(values, columns, w.shape, n, m)


# --------------------------------------------------------------------------- products
def product(x: np.ndarray, w) -> np.ndarray:
    """``x @ w.T``: x (..., in), w a dense (out, in) array or a :class:`SparseWeight`;
    returns (..., out). Dense w: NumPy's matmul (OpenBLAS), exactly ``x @ w.T``."""
    if type(w) is not SparseWeight:
        return x @ w.T
    out, n_in = w.shape
    x2 = _rows(x, n_in, w.dtype, "x", "w's in")
    y = np.empty((x2.shape[0], out), x2.dtype)
    _kernels().sparse_product(x2, _uniform_indptr(out, w.values.shape[1]),
                              w.columns.reshape(-1), w.values.reshape(-1), y)
    return y if x.ndim == 2 else y.reshape(x.shape[:-1] + (out,))


def input_grad(dy: np.ndarray, w) -> np.ndarray:
    """``dy @ w``: dy (..., out), w dense (out, in) or a :class:`SparseWeight`; (..., in)."""
    if type(w) is not SparseWeight:
        return dy @ w
    out, n_in = w.shape
    d2 = _rows(dy, out, w.dtype, "dy", "w's out")
    dx = np.empty((d2.shape[0], n_in), d2.dtype)
    _kernels().sparse_product(d2, *w.by_input, dx)
    return dx if dy.ndim == 2 else dx.reshape(dy.shape[:-1] + (n_in,))


def _rows(x, width: int, dtype, name: str, ref: str) -> np.ndarray:
    """x (..., width) of ``dtype`` as a C-contiguous 2-d array (x itself when it is one)."""
    if not (type(x) is np.ndarray and x.dtype == dtype and x.ndim == 2 and
            x.shape[1] == width and x.flags.c_contiguous):
        L.check_float(name, x)
        if x.dtype != dtype:
            raise TypeError(f"{name} has dtype {x.dtype} but the weight has {dtype}; "
                            "layers compute in one dtype")
        if x.ndim < 1 or x.shape[-1] != width:
            raise ValueError(f"{name} has shape {x.shape}; its last axis must be {width} "
                             f"({ref})")
        x = np.ascontiguousarray(x.reshape(-1, width))
    return x


_INDPTR: dict = {}


def _uniform_indptr(rows: int, k: int) -> np.ndarray:
    """(0, k, 2k, .., rows*k) int64: the row starts of rows of k entries (kept, read-only:
    a model asks for the same few shapes every step)."""
    got = _INDPTR.get((rows, k))
    if got is None:
        got = _INDPTR[(rows, k)] = np.arange(rows + 1, dtype=np.int64) * k
        got.flags.writeable = False
    return got


# --------------------------------------------------------------------------- references
def product_reference(x: np.ndarray, w: SparseWeight) -> np.ndarray:
    """:func:`product` in plain NumPy: y = 0, then y += x[:, column] * value for each kept
    entry of every row, in storage order (one NumPy pass per slot of the rows): the same
    rounded products and sums in the same order, so the same bits."""
    x2 = x.reshape(-1, w.shape[1])
    y = np.zeros((x2.shape[0], w.shape[0]), x2.dtype)
    for j in range(w.values.shape[1]):
        y += x2[:, w.columns[:, j]] * w.values[:, j]
    return y.reshape(x.shape[:-1] + (w.shape[0],))


def input_grad_reference(dy: np.ndarray, w: SparseWeight) -> np.ndarray:
    """:func:`input_grad` in plain NumPy: dx = 0, then for each output o in increasing
    order dx[:, columns[o]] += dy[:, o] * values[o] (the columns of a row are distinct):
    the same bits."""
    d2 = dy.reshape(-1, w.shape[0])
    dx = np.zeros((d2.shape[0], w.shape[1]), d2.dtype)
    for o in range(w.shape[0]):
        dx[:, w.columns[o]] += d2[:, o, None] * w.values[o][None, :]
    return dx.reshape(dy.shape[:-1] + (w.shape[1],))


# --------------------------------------------------------------------------- dispatch
# When a sparse product is taken: its weight keeps at most MAX_DENSITY of its entries, its
# input is at least MIN_WIDTH wide and every output sums at least MIN_TERMS kept products.
# Read from the crossover table of ``stepsim bench --only train`` (sparse against
# OpenBLAS's pinned kernels at the shapes of the digits MLP and the transformers, with
# numba compiling for AVX-512 and for AVX2): at 2:4 the sparse products were slower about
# as often as faster (and mostly slower for AVX2), at a quarter or less they were faster
# at every shape but inputs narrower than a few vector lanes, where the kernel's
# per-output work and the edges of its transposes are most of the cost.
MAX_DENSITY = (1, 4)  # n / m at most 1/4
MIN_WIDTH = 16
MIN_TERMS = 2


def sparse_pays(rows: int, outputs: int, width: int, n: int, m: int) -> bool:
    """Whether a product with an n:m weight runs on its kept entries: ``rows`` rows of an
    input of ``width`` entries to ``outputs`` entries each (the forward product: width =
    in, outputs = out; the input gradient: width = out, outputs = in). A function of these
    integers only, so the same answer (and the same bits) on every machine."""
    if rows < 1 or outputs < 1 or width < MIN_WIDTH:
        return False
    most, of = MAX_DENSITY
    return n * of <= most * m and width * n >= MIN_TERMS * m


class ForwardWeights(dict):
    """A recipe step's forward weights (name -> array, as any params dict) that also says,
    for each module masked this step, its mask and (n, m): ``masks``, ``nm`` (name ->
    value). The forward weight of such a module is zero outside its mask. Made by the step
    (:func:`stepsim.recipes.transforms.with_masks`); read through :func:`weights_for`."""

    def __init__(self, weights, masks: dict, nm: dict):
        super().__init__(weights)
        self.masks = masks
        self.nm = nm
        self._packed = {}

    def packed(self, name: str) -> SparseWeight:
        """Module ``name``'s forward weight as a SparseWeight (packed on first request)."""
        got = self._packed.get(name)
        if got is None:
            n, m = self.nm[name]
            w, mask = self[name], self.masks[name]  # the step's own: checked there
            got = self._packed[name] = _pack(_matrix(np.ascontiguousarray(w)),
                                             _matrix(np.ascontiguousarray(mask)), n, m)
        return got

    def packed_stack(self, names: tuple) -> SparseWeight:
        """The weights ``names`` (one N:M, one input size) stacked along their outputs, as
        one SparseWeight (packed on first request)."""
        got = self._packed.get(names)
        if got is None:
            n, m = self.nm[names[0]]
            got = self._packed[names] = _pack(np.concatenate([self[k] for k in names]),
                                              np.concatenate([self.masks[k] for k in names]),
                                              n, m)
        return got

    @property
    def packed_keys(self) -> tuple:
        """The names (and stacks of names) packed so far, in the order they were."""
        return tuple(self._packed)

    def repacked(self) -> ForwardWeights:
        """These weights with every form packed so far packed again, by input too where
        that was made: the packing a step with the same products pays (``stepsim bench``
        times it)."""
        fresh = ForwardWeights(self, self.masks, self.nm)
        for key, form in self._packed.items():
            again = fresh.packed_stack(key) if isinstance(key, tuple) else fresh.packed(key)
            if form._by_input is not None:
                again.by_input  # noqa: B018 (made on first use)
        return fresh


def weights_for(params, name: str, rows: int, pays=sparse_pays):
    """(forward, backward): what a model multiplies by for parameter ``name`` with ``rows``
    rows of input, in its forward product and in its input gradient. Each is the
    :class:`SparseWeight` when ``params`` is a :class:`ForwardWeights` that masks ``name``
    and the rule ``pays`` (:func:`sparse_pays`'s arguments; a convolution's is
    :func:`stepsim.nn.conv.sparse_pays`) says so for that product, else the dense
    ``params[name]``. A weight of more than 2 axes (a convolution's (C_out, K, C_in)) is
    taken as its matrix (shape[0], the product of the rest), N:M groups along its last
    axis staying runs of its rows: its dense form is that matrix (a view)."""
    w = _matrix(params[name])
    masks = getattr(params, "masks", None)
    if not masks or name not in masks or w.ndim != 2:
        return w, w
    n, m = params.nm[name]
    out, n_in = w.shape
    forward = params.packed(name) if pays(rows, out, n_in, n, m) else w
    backward = params.packed(name) if pays(rows, n_in, out, n, m) else w
    return forward, backward


def _matrix(w: np.ndarray) -> np.ndarray:
    """w itself when it has at most 2 axes, else its (shape[0], rest) matrix (a view of a
    C-contiguous w)."""
    return w if w.ndim <= 2 else w.reshape(w.shape[0], -1)


def stacked_weights_for(params, names, rows: int):
    """:func:`weights_for` of the weights ``names`` stacked along their outputs (the
    transformer's [wq; wk; wv], one product): for each product the stacked SparseWeight
    where all are masked with one N:M and that product pays, else ``np.concatenate`` of
    the dense weights."""
    names = tuple(names)
    masks = getattr(params, "masks", None)
    if masks and all(name in masks for name in names) and \
            len({tuple(params.nm[name]) for name in names}) == 1:
        n, m = params.nm[names[0]]
        out = sum(params[name].shape[0] for name in names)
        n_in = params[names[0]].shape[1]
        forward = sparse_pays(rows, out, n_in, n, m)
        backward = sparse_pays(rows, n_in, out, n, m)
        if forward and backward:
            both = params.packed_stack(names)
            return both, both
        if forward or backward:
            dense = np.concatenate([params[name] for name in names])
            sparse = params.packed_stack(names)
            return (sparse, dense) if forward else (dense, sparse)
    dense = np.concatenate([params[name] for name in names])
    return dense, dense
