"""Save/load of compressed files and the `stepsim compress` / `stepsim memory` commands."""

import json

import ml_dtypes
import numpy as np
import pytest

from stepsim import apply_nm
from stepsim.cli import main
from stepsim.sparse24.io import load_compressed, load_header, save_compressed
from stepsim.sparse24.layout import Compressed24, compress_2to4
from stepsim.sparse24.nm_storage import NMCompressed, compress_nm, decompress_nm

BF16 = np.dtype(ml_dtypes.bfloat16)


def test_save_load_round_trip_all_formats(tmp_path):
    rng = np.random.default_rng(0)
    a = apply_nm(rng.standard_normal((32, 64)).astype(np.float32), 2, 4).astype(BF16)
    b = apply_nm(rng.standard_normal((4, 6, 8)), 1, 8, axis=2)
    tensors = {"a": compress_2to4(a), "b": compress_nm(b, 1, 8, axis=2),
               "c": Compressed24.from_dense(
                   apply_nm(rng.standard_normal((32, 16)).astype(np.float32), 1, 2))}
    path = save_compressed(tmp_path / "m.npz", tensors, params={"why": "test"}, seed=3)
    header = load_header(path)
    assert header["format"] == "stepsim.sparse/1" and header["provenance"]["seed"] == 3
    assert header["tensors"]["a"] == {"format": "cutlass-2:4", "dtype": "bfloat16",
                                      "shape": [32, 64], "n": 2, "m": 4, "axis": 1,
                                      "meta_dtype": "uint16"}
    assert header["tensors"]["c"]["n"] == 1 and header["tensors"]["c"]["m"] == 2
    back = load_compressed(path)
    assert isinstance(back["a"], Compressed24) and back["a"].dtype == BF16
    assert np.array_equal(back["a"].to_dense().view(np.uint16), a.view(np.uint16))
    assert isinstance(back["b"], NMCompressed) and np.array_equal(decompress_nm(back["b"]), b)
    assert np.array_equal(back["c"].values, tensors["c"].values)


def test_save_refuses_bad_input(tmp_path):
    with pytest.raises(TypeError, match="non-empty dict"):
        save_compressed(tmp_path / "x.npz", {})
    with pytest.raises(TypeError, match="must be Compressed24"):
        save_compressed(tmp_path / "x.npz", {"w": np.zeros(3)})
    np.savez(tmp_path / "plain.npz", w=np.zeros(3))
    with pytest.raises(ValueError, match="not a stepsim compressed file"):
        load_compressed(tmp_path / "plain.npz")


def test_cli_compress_npz_masks_dense_input(tmp_path, capsys):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((32, 64)).astype(np.float32)
    conv = rng.standard_normal((8, 3, 2, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", w=w, conv=conv)
    out = tmp_path / "out.npz"
    assert main(["compress", str(tmp_path / "in.npz"), "--nm", "2:4", "--dtype", "fp16",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "w: (32, 64) float16 -> CUTLASS 2:4 layout (masked)" in text
    assert "conv: (8, 3, 2, 4) float16 -> nm 2:4 (masked)" in text
    dense_bytes = (w.size + conv.size) * 2
    stored = 32 * 32 * 2 + 32 * 4 * 2 + conv.size + conv.size // 4 * 2 * 2 // 8
    assert f"total: {dense_bytes:,} B dense -> {stored:,} B stored" in text
    back = load_compressed(out)
    assert np.array_equal(back["w"].to_dense(), apply_nm(w.astype(np.float16), 2, 4))
    assert np.array_equal(decompress_nm(back["conv"]), apply_nm(conv.astype(np.float16), 2, 4))
    header = load_header(out)
    assert header["provenance"]["params"]["nm"] == "2:4"


def test_cli_compress_npy_keeps_an_already_sparse_pattern(tmp_path, capsys):
    x = np.zeros((16, 64), dtype=np.int8)
    x[:, ::4] = 7  # 1 non-zero per group: valid 2:4, must not be re-masked
    np.save(tmp_path / "x.npy", x)
    assert main(["compress", str(tmp_path / "x.npy"), "-o", str(tmp_path / "x.npz")]) == 0
    assert "(masked)" not in capsys.readouterr().out
    assert np.array_equal(load_compressed(tmp_path / "x.npz")["x"].to_dense(), x)


def test_cli_compress_errors(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones((32, 64), dtype=np.float32))
    args = ["compress", str(tmp_path / "x.npy"), "-o", str(tmp_path / "o.npz")]
    assert main(args + ["--nm", "5:4"]) == 2
    assert main(args + ["--dtype", "int8"]) == 2
    assert main(args + ["--format", "cutlass"]) == 2  # float32 in CUTLASS's layout is 1:2
    assert main(["compress", str(tmp_path / "missing.npy"), "-o", str(tmp_path / "o.npz")]) == 2
    err = capsys.readouterr().err
    assert "argument --nm: needs 1 <= N <= M, got '5:4'" in err
    assert "does not quantize" in err and "1:2" in err


def test_cli_memory_prints_table_and_verdicts(tmp_path, capsys):
    path = tmp_path / "mem.json"
    assert main(["memory", "--model", "gpt2", "--json", str(path)]) == 0
    text = capsys.readouterr().out
    assert "248.88" in text and text.count("REPRODUCED") == 4 and "NOT REPRODUCED" not in text
    doc = json.loads(path.read_text())
    assert doc["result"]["comparison"][1]["paper_mb"] == 162.13
    assert main(["memory", "--model", "bert-base", "--nm", "2:8", "--counted", "paper"]) == 0
    assert "2:8" in capsys.readouterr().out


def test_a_trained_conv_weight_exports_to_the_24_layout_as_its_gemm_matrix(tmp_path, capsys):
    """A CNN trained with a transposable SR-STE 2:4: each conv weight (out, k, in), input
    channels innermost, is stored in CUTLASS's layout as its GEMM matrix (out, k * in) and
    comes back exactly, in its own shape; the head (10 rows) takes the general N:M storage;
    the dense first conv (one input channel) is left out."""
    run = tmp_path / "run.json"
    assert main(["train", "--problem", "mnist1d", "--recipe", "sr-ste", "--nm", "2:4",
                 "-o", "transposable=true", "--steps", "8", "-p", "channels=32,32,32",
                 "-p", "n_train=400",
                 "-p", "n_validation=100", "-p", "n_test=100", "--json", str(run)]) == 0
    trained = np.load(tmp_path / "run.npz")
    out = tmp_path / "conv24.npz"
    assert main(["compress", str(tmp_path / "run.npz"), "--dtype", "fp16", "--verify",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert ("weights/conv2.w: (32, 3, 32) float16 -> CUTLASS 2:4 layout of its GEMM matrix "
            "(32, 96): ") in text
    assert "weights/conv2.w" in text and "mask transposable (2:4 along both axes)" in text
    assert "verify weights/conv3.w: spmm_2to4 from the compressed operands" in text
    assert "weights/head.w: (10, 160) float16 -> nm 2:4" in text
    assert "(masked)" not in text  # the trained weights are 2:4 already
    header = load_header(out)["tensors"]["weights/conv2.w"]
    assert header["shape"] == [32, 96] and header["tensor_shape"] == [32, 3, 32]
    back = load_compressed(out)
    for name in ("weights/conv2.w", "weights/conv3.w"):
        w = trained[name].astype(np.float16)
        assert isinstance(back[name], Compressed24) and back[name].tensor_shape == w.shape
        assert np.array_equal(back[name].to_tensor(), w)
        assert np.array_equal(back[name].to_dense(), w.reshape(32, 96))
    assert np.array_equal(decompress_nm(back["weights/head.w"]),
                          trained["weights/head.w"].astype(np.float16))
    assert "weights/conv1.w" not in back  # the dense first conv: no group of 4 tiles in = 1
    assert "weights/conv1.w" in text.split("not compressed: ")[1].splitlines()[0]


def test_compressed24_refuses_a_tensor_shape_of_another_gemm_matrix():
    a = apply_nm(np.random.default_rng(0).standard_normal((32, 64)).astype(np.float16), 2, 4)
    values, meta = compress_2to4(a)
    with pytest.raises(ValueError, match=r"tensor_shape \(32, 4, 8\) is not a weight"):
        Compressed24(values, meta, (32, 4, 8))
