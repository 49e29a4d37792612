"""End to end from the CLI: learn an N:M mask, export it to the 2:4 layout, multiply."""

import numpy as np

from stepsim.cli import main


def test_train_then_compress_then_multiply(tmp_path, capsys):
    run = tmp_path / "run.json"
    assert main(["train", "--recipe", "step", "--criterion", "fixed-fraction", "-c",
                 "fraction=0.3", "--nm", "2:4", "--steps", "60", "--d-in", "64",
                 "--d-hidden", "32", "--dtype", "float32", "--json", str(run)]) == 0
    weights = np.load(tmp_path / "run.npz")
    w1 = weights["weights/w1"]
    # the learned inference weights are 2:4 sparse
    assert ((w1.reshape(-1, 4) != 0).sum(axis=1) <= 2).all()

    out = tmp_path / "w24.npz"
    capsys.readouterr()
    assert main(["compress", str(tmp_path / "run.npz"), "--nm", "2:4", "--dtype", "fp16",
                 "--verify", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "weights/w1: (32, 64) float16 -> CUTLASS 2:4 layout" in printed
    assert "verify weights/w1: spmm_2to4 from the compressed operands" in printed
    assert "weights/b1" in printed.splitlines()[0]  # biases and trace are left out, and said so

    from stepsim import decompress_2to4, load_compressed, spmm_2to4

    stored = load_compressed(out)["weights/w1"]

    np.testing.assert_array_equal(decompress_2to4(stored.values, stored.meta),
                                  w1.astype(np.float16))
    b = np.random.default_rng(1).standard_normal((64, 8)).astype(np.float16)
    expected = w1.astype(np.float16).astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(spmm_2to4(stored.values, stored.meta, b), expected, rtol=1e-3,
                               atol=1e-3)


def test_compress_keys_must_exist(tmp_path, capsys):
    path = tmp_path / "a.npz"
    np.savez(path, w=np.ones((32, 32), np.float32))
    assert main(["compress", str(path), "--keys", "nope", "-o", str(tmp_path / "o.npz")]) == 2
    assert "--keys ['nope'] not in the input" in capsys.readouterr().err
