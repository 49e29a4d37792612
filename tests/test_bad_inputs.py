"""Bad inputs, table-driven (issue 10, item 7): the command line and the public API.

Every row is one bad input. For the CLI (``stepsim.cli.main`` in-process, plus a few real
subprocess runs) each must give a non-zero exit and ONE error line naming the option or
file — argparse's usage block may precede it — and no traceback; outputs are refused
before any work starts (nothing printed on stdout, no file written). For the API each
must raise the right exception type with a one-line message naming the argument. Never a
traceback, a segfault or a silent rc 0 / a silently wrong number.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stepsim.cli import main

REPO = Path(__file__).resolve().parents[1]




# --------------------------------------------------------------------------- input files
@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    """Named paths (str) of good and bad input files, and places for outputs."""
    d = tmp_path_factory.mktemp("bad_inputs")
    sparse = np.zeros((32, 64))
    sparse[:, ::2] = 1.5  # 2:4 already: compress needs no mask
    paths = {}

    def save(name, array):
        paths[name] = str(d / f"{name}.npy")
        np.save(paths[name], array)

    save("good", sparse.astype(np.float32))
    nan = sparse.copy()
    nan[3, 4] = np.nan
    save("nan", nan)
    inf = sparse.copy()
    inf[0, 2] = -np.inf
    save("inf", inf)
    save("big", sparse * 1e6 / 1.5)
    save("huge", sparse * 1e39)
    save("i32", (sparse / 1.5 * 70000).astype(np.int32))
    save("bool", sparse.astype(bool))
    save("complex", sparse.astype(complex))
    save("strings", np.array(["abc", "def", "ghi", "jkl"]))
    save("scalar", np.float32(1.0))
    save("odd", np.ones((4, 6), np.float32))
    paths["train"] = str(d / "train.npz")  # a `stepsim train` result with a NaN weight
    np.savez(paths["train"], **{"weights/W1": nan, "weights/b1": np.ones(4), "loss": np.ones(3)})
    paths["compressed"] = str(d / "compressed.npz")
    from stepsim.sparse24 import compress_nm, save_compressed

    save_compressed(paths["compressed"], {"w": compress_nm(sparse, 2, 4)})
    paths["good_npz"] = str(d / "good.npz")
    np.savez(paths["good_npz"], w=sparse)
    whole = Path(paths["good_npz"]).read_bytes()
    paths["truncated"] = str(d / "truncated.npz")
    Path(paths["truncated"]).write_bytes(whole[: len(whole) // 2])
    paths["text_npz"] = str(d / "text.npz")
    Path(paths["text_npz"]).write_text("this is a text file\n")
    paths["text_npy"] = str(d / "text.npy")
    Path(paths["text_npy"]).write_text("1 2 3\n")
    paths["empty_npz"] = str(d / "empty.npz")
    Path(paths["empty_npz"]).write_bytes(b"")
    paths["objects"] = str(d / "objects.npz")
    np.savez(paths["objects"], o=np.array([{"a": 1}], dtype=object))
    paths["csv"] = str(d / "w.csv")
    Path(paths["csv"]).write_text("1,2\n")
    paths["dir"] = str(d / "a_dir")
    os.mkdir(paths["dir"])
    tiny = sparse * 1e-9 / 1.5  # every kept weight underflows to 0 in float16
    save("tiny", tiny.astype(np.float32))
    save("tiny64", sparse * 1e-50)  # ... and in float32
    for name, text in (("spec_list", "[1, 2]"), ("spec_string", '"dense"'),
                       ("spec_options_list", '{"recipes": [{"name": "dense", "options": [1]}]}')):
        paths[name] = str(d / f"{name}.json")
        Path(paths[name]).write_text(text)
    for name in ("fifo.npy", "fifo.json"):  # a named pipe: reading it would block forever
        paths[name.replace(".", "_")] = str(d / name)
        os.mkfifo(paths[name.replace(".", "_")])
    paths.update(_sweep_dirs(d))
    paths["missing"] = str(d / "missing.npz")
    paths["out"] = str(d / "out.npz")  # must never be written by a failing command
    paths["out_json"] = str(d / "out.json")
    paths["out_png"] = str(d / "out.png")
    paths["d"] = str(d)
    return paths


def _sweep_dirs(d: Path) -> dict:
    """A finished one-run sweep ("sweep") and copies of it spoiled one file at a time."""
    import json
    import shutil

    from stepsim.experiments import run_sweep

    good = d / "sweep"
    run_sweep({"recipes": ["dense"], "steps": 2, "seeds": 1}, good, jobs=1, progress=False)
    out = {"sweep": str(good)}
    plans = {"plan_list": "[1]", "plan_no_result": '{"provenance": {}}',
             "plan_run_no_params": '{"result": {"runs": [{"name": "a", "run_id": "b", '
                                   '"rng_seed": 1}]}}', "plan_not_json": "{oops"}
    results = {"result_string": lambda doc: dict(doc, result="none"),
               "result_no_metrics": lambda doc: dict(doc, result={
                   k: v for k, v in doc["result"].items() if k != "metrics"})}
    for name in (*plans, *results, "plan_fifo"):
        shutil.copytree(good, d / name)
        out[name] = str(d / name)
    for name, text in plans.items():
        (d / name / "sweep.json").write_text(text)
    (d / "plan_fifo" / "sweep.json").unlink()
    os.mkfifo(d / "plan_fifo" / "sweep.json")
    for name, spoil in results.items():
        (result,) = (d / name / "runs").glob("*.json")
        result.write_text(json.dumps(spoil(json.loads(result.read_text()))))
    return out


# --------------------------------------------------------------------------- CLI table
def case(argv: str, pattern: str, *marks, id: str):
    """argv: a command line with {name} placeholders for ``files``; pattern: a regex the one
    error line must match (it names the option or the file)."""
    return pytest.param(argv, pattern, marks=marks, id=id)


C = "compress {good} -o {out}"  # a good compress command to spoil one piece at a time
T = "theorem1 --trials 4 --dim 2 --horizon 10"  # tiny: a row that slips through is fast
TR = "train --steps 3"

CLI_CASES = [
    # ---- global
    case("nope", r"argument COMMAND: invalid choice: 'nope'", id="unknown-command"),
    case("theorem1 --bogus 1", r"unrecognized arguments: --bogus", id="unknown-option"),
    # ---- compress: input files
    case("compress {missing} -o {out}", r"input file .*missing\.npz does not exist",
         id="compress-missing-input"),
    case("compress {dir} -o {out}", r"input file .*a_dir is a directory", id="compress-dir-input"),
    case("compress {text_npz} -o {out}", r"input file .*text\.npz is not a \.npz file",
         id="compress-text-named-npz"),
    case("compress {text_npy} -o {out}", r"input file .*text\.npy is not a \.npy file",
         id="compress-text-named-npy"),
    case("compress {empty_npz} -o {out}", r"input file .*empty\.npz is not a \.npz file",
         id="compress-empty-npz"),
    case("compress {truncated} -o {out}", r"input file .*truncated\.npz is truncated or corrupt",
         id="compress-truncated-npz"),
    case("compress {objects} -o {out}", r"objects\.npz: array 'o' holds Python objects",
         id="compress-object-array"),
    case("compress {csv} -o {out}", r"input file must be a \.npy or \.npz file, got w\.csv",
         id="compress-wrong-suffix"),
    # ---- compress: values (NaN/inf, overflow, dtypes, shapes)
    case("compress {nan} -o {out}", r"nan in .*nan\.npy contains 1 NaN", id="compress-nan"),
    case("compress {inf} -o {out}", r"inf in .*contains 0 NaN and 1 infinite", id="compress-inf"),
    case("compress {train} -o {out}", r"weights/W1 in .*train\.npz contains 1 NaN",
         id="compress-nan-in-train-result"),
    case("compress {big} --dtype fp16 --verify -o {out}",
         r"big: largest \|value\| 1e\+06 does not fit float16 \(finite range ±65504",
         id="compress-fp16-overflow"),
    case("compress {huge} --dtype bf16 -o {out}",
         r"huge: largest \|value\| 1\.5e\+39 does not fit bfloat16", id="compress-bf16-overflow"),
    case("compress {huge} --dtype fp32 -o {out}", r"huge: largest .* does not fit float32",
         id="compress-fp32-overflow"),
    case("compress {i32} --dtype fp16 -o {out}", r"i32: largest \|value\| 70000 does not fit",
         id="compress-int-to-fp16-overflow"),
    case("compress {good} --dtype int8 -o {out}", r"--dtype int8 needs int8 input",
         id="compress-int8-from-float"),
    case("compress {good} --saturate -o {out}", r"--saturate applies to a conversion",
         id="compress-saturate-without-dtype"),
    case("compress {bool} -o {out}", r"has dtype bool; only real numeric", id="compress-bool"),
    case("compress {complex} -o {out}", r"has dtype complex128; only real numeric",
         id="compress-complex"),
    case("compress {strings} -o {out}", r"has dtype <U3; only real numeric", id="compress-str"),
    case("compress {scalar} -o {out}", r"scalar: a 0-d array cannot be N:M compressed",
         id="compress-0d"),
    case("compress {odd} -o {out}", r"odd: shape \(4, 6\) .* not divisible by m = 4",
         id="compress-axis-not-divisible"),
    case(C + " --axis 5", r"--axis 5 is out of range for good", id="compress-axis-out-of-range"),
    case(C + " --axis x", r"argument --axis: invalid int value: 'x'", id="compress-axis-not-int"),
    case(C + " --keys nope", r"--keys \['nope'\] not in the input", id="compress-unknown-key"),
    case("compress {compressed} -o {out}", r"the input is already a stepsim compressed file",
         id="compress-a-compressed-file"),
    case(C + " --format cutlass --nm 2:4", r"good: the CUTLASS layout does not apply",
         id="compress-cutlass-not-applicable"),
    case(C + " --dtype fp8", r"argument --dtype: invalid choice: 'fp8'", id="compress-dtype"),
    case(C + " --format csr", r"argument --format: invalid choice", id="compress-format"),
    # ---- compress: N:M strings
    case(C + " --nm 5:4", r"argument --nm: needs 1 <= N <= M, got '5:4'", id="nm-n-above-m"),
    case(C + " --nm 0:4", r"argument --nm: needs 1 <= N <= M, got '0:4'", id="nm-zero"),
    case(C + " --nm 2:4:8", r"argument --nm: must look like N:M", id="nm-three-parts"),
    case(C + " --nm a:b", r"argument --nm: must look like N:M", id="nm-letters"),
    case(C + " --nm=-2:4", r"argument --nm: must look like N:M", id="nm-negative"),
    case(C + " --nm 2.5:4", r"argument --nm: must look like N:M", id="nm-float"),
    case(C + " --nm=", r"argument --nm: must look like N:M .*, got ''", id="nm-empty"),
    case(C + " --nm", r"argument --nm: expected one argument", id="nm-missing-value"),
    # ---- compress: outputs
    case("compress {good_npz} -o {good_npz}", r"-o .*good\.npz is the input file",
         id="compress-output-is-input"),
    case("compress {good_npz} -o {d}/a_dir/../good.npz", r"-o .*good\.npz is the input file",
         id="compress-output-is-input-other-spelling"),
    case("compress {good} -o {dir}", r"-o .*a_dir is a directory", id="compress-output-dir"),
    case("compress {good} -o=", r"-o: empty path", id="compress-output-empty"),
    case("compress {good} -o {d}/w.bin", r"-o .*w\.bin must end in \.npz",
         id="compress-output-suffix"),
    case("compress {good} -o {good}/x.npz", r"-o .*x\.npz: .*good\.npy is a file, not a dir",
         id="compress-output-under-a-file"),
    case("compress {good}", r"the following arguments are required: -o", id="compress-no-output"),
    # ---- theorem1: numbers out of range, NaN/inf, wrong types
    case(T + " --seed -1", r"argument --seed: a seed must be a non-negative integer, got '-1'",
         id="theorem1-seed-negative"),
    case(T + " --seed 1.5", r"argument --seed: must be an integer, got '1.5'",
         id="theorem1-seed-float"),
    case(T + " --trials 0", r"argument --trials: must be a positive integer", id="trials-zero"),
    case(T + " --trials 2.5", r"argument --trials: must be an integer", id="trials-float"),
    case(T + " --dim -3", r"argument --dim: must be a positive integer", id="dim-negative"),
    case(T + " --horizon 0", r"argument --horizon: must be a positive integer", id="horizon-0"),
    case(T + " --horizon 99999999999999999999", r"--horizon must be <= 1073741823",
         id="horizon-huge"),
    case(T + " --per-decade 0", r"argument --per-decade: must be a positive", id="per-decade-0"),
    case(T + " --beta2 nan", r"argument --beta2: must be a finite number, got 'nan'",
         id="beta2-nan"),
    case(T + " --beta2 inf", r"argument --beta2: must be a finite number", id="beta2-inf"),
    case(T + " --beta2 1.5", r"beta2 must be in \(0\.0, 1\.0\), got 1\.5", id="beta2-above-1"),
    case(T + " --beta2 1", r"beta2 must be in \(0\.0, 1\.0\)", id="beta2-one"),
    case(T + " --beta2 abc", r"argument --beta2: must be a number, got 'abc'", id="beta2-text"),
    case(T + " --delta 0", r"delta must be in \(0\.0, 1\.0\), got 0\.0", id="delta-zero"),
    case(T + " --delta=-inf", r"argument --delta: must be a finite number", id="delta-inf"),
    case(T + " --G 0", r"G must be in \(0\.0, inf\), got 0\.0", id="G-zero"),
    case(T + " --G -1", r"G must be in \(0\.0, inf\)", id="G-negative"),
    case(T + " --ci-level 1", r"ci_level must be in \(0\.0, 1\.0\)", id="ci-level-one"),
    case(T + " --k0 abc", r"--k0 must be an integer, 'statement' or 'proof', got 'abc'",
         id="k0-text"),
    case(T + " --k0 0", r"k0 must be >= 1, got 0", id="k0-zero"),
    case(T + " --engine gpu", r"argument --engine: invalid choice: 'gpu'", id="engine"),
    case(T + " --process nope", r"unknown process 'nope'", id="process-unknown"),
    # ---- theorem1 --bound (issue 25): unknown kind, assumptions not met, delta, d
    case(T + " --bound nope", r"argument --bound: invalid choice: 'nope'", id="bound-unknown"),
    case(T + " --bound markov --process sine",
         r"bound 'markov': process 'sine' is not a function of a chain with an absolute "
         r"spectral gap", id="bound-markov-sine"),
    case(T + " --bound gaussian --process uniform",
         r"bound 'gaussian': process 'uniform' is neither Gaussian", id="bound-gaussian-iid"),
    case(T + " --bound markov --process drift", r"process 'drift' is not stationary",
         id="bound-nonstationary"),
    case(T + " --bound markov-chernoff --process ar1",
         r"process 'ar1' is not a finite-state Markov modulation", id="bound-markov-chernoff-ar1"),
    case(T + " --bound gaussian-chernoff --process regime",
         r"process 'regime' has no Gaussian g", id="bound-gaussian-chernoff-regime"),
    case(T + " --bound chebyshev --delta 1.5", r"delta must be in \(0\.0, 1\.0\)",
         id="bound-delta"),
    case(T + " --bound chebyshev --dim 0", r"argument --dim: ", id="bound-dim-zero"),
    case(T + " --trials 100000000 --dim 100000000",
         r"--trials 100000000 x --dim 100000000 x \d+ lags .* would need .* of memory; "
         r".* available", id="theorem1-memory"),
    # ---- theorem1: KEY=VALUE options
    case(T + " --param rho", r"--param must look like KEY=VALUE, got 'rho'", id="param-no-eq"),
    case(T + " --param =1", r"--param must look like KEY=VALUE, got '=1'", id="param-no-key"),
    case(T + " --param rho=x", r"--param rho: bad value 'x'", id="param-bad-value"),
    case(T + " --param nope=1", r"unknown parameter\(s\) \['nope'\] for process 'uniform'",
         id="param-unknown"),
    case(T + " --process ar1 --param rho=nan", r"rho must be finite, got nan", id="param-nan"),
    case(T + " --process ar1 --param rho=1.5", r"rho must be in \(-1\.0, 1\.0\)",
         id="param-out-of-range"),
    # ---- theorem1: outputs (checked before the simulation)
    case(T + " --json=", r"--json: empty path", id="theorem1-json-empty"),
    case(T + " --json {dir}", r"--json .*a_dir is a directory", id="theorem1-json-dir"),
    case(T + " --plot {dir}", r"--plot .*a_dir is a directory", id="theorem1-plot-dir"),
    case(T + " --plot {d}/figure", r"--plot .*figure must end in \.png or \.pdf or \.svg",
         id="theorem1-plot-no-suffix"),
    case(T + " --plot {d}/figure.jpg", r"--plot .*figure\.jpg must end in", id="plot-jpg"),
    case(T + " --json {out_png} --plot {out_png}", r"--json and --plot name the same file",
         id="theorem1-json-equals-plot"),
    case(T + " --json {good}/t.json", r"--json .*: .*good\.npy is a file, not a directory",
         id="theorem1-json-under-a-file"),
    # ---- train (cli/train.py belongs to the nn branch; its API checks are already here)
    case(TR + " --seed -1", r"argument --seed: a seed must be a non-negative integer",
         id="train-seed-negative"),
    case(TR + " --json {d}/t.npz", r"--json .*t\.npz must not end in \.npz: the \.npz file",
         id="train-json-collides-with-trace"),
    case(TR + " --json {dir}", r"--json .*a_dir is a directory", id="train-json-dir"),
    case(TR + " --json=", r"--json: empty path", id="train-json-empty"),
    case("train --steps 1 --d-in 1000000000 --d-hidden 1000000000", r"would need .* available",
         id="train-memory"),
    # (either the API's message or, once train uses cli._args, argparse's)
    case("train --steps 0", r"steps must be >= 1, got 0|argument --steps: must be a positive",
         id="train-steps-zero"),
    case("train --steps x", r"argument --steps: (invalid int value|must be an integer)",
         id="train-steps-text"),
    case(TR + " --lr nan", r"lr must be finite, got nan", id="train-lr-nan"),
    case(TR + " --lr inf", r"lr must be finite, got inf", id="train-lr-inf"),
    case(TR + " --lr -1", r"lr must be in \[0\.0, inf\), got -1\.0", id="train-lr-negative"),
    case(TR + " --lr -1e-3", r"lr must be in \[0\.0, inf\), got -0\.001",
         id="train-lr-negative-exponent"),  # argparse would read -1e-3 as an option
    case(TR + " --recipe nope", r"unknown recipe 'nope'", id="train-recipe"),
    case(TR + " --criterion nope", r"unknown criterion 'nope'", id="train-criterion"),
    case(TR + " --optimizer nope", r"unknown optimizer 'nope'", id="train-optimizer"),
    case(TR + " -o lam", r"--option must look like KEY=VALUE, got 'lam'", id="train-option-no-eq"),
    case(TR + " -o nope=1", r"unknown option\(s\) \['nope'\] for recipe 'step'",
         id="train-option-unknown"),
    case(TR + " -o weight_decay=-1", r"weight_decay must be in \[0\.0, inf\), got -1\.0",
         id="train-option-range"),
    case(TR + " -o beta1=1", r"beta1 must be in \[0\.0, 1\.0\), got 1\.0", id="train-beta1"),
    case(TR + " -c k0=5", r"criterion 'autoswitch' has no option\(s\) \['k0'\]",
         id="train-criterion-option-unknown"),
    case(TR + " --recipe dense -c fraction=0.2", r"criterion options .* need a criterion name",
         id="train-criterion-option-alone"),
    # ---- issue 24: the successors' options
    case(TR + " --recipe s-ste -o mask_every=0", r"mask_every must be >= 1, got 0",
         id="train-mask-every-zero"),
    case(TR + " --recipe masked-decay -o dense_tail=1.5", r"dense_tail must be in \[0\.0, 1\.0\]",
         id="train-dense-tail-range"),
    case(TR + " --recipe masked-decay -o dense_tail=1", r"dense_tail must be below 1",
         id="train-dense-tail-all"),
    case(TR + " --recipe masked-decay -o decay=-1", r"decay must be in \[0\.0, inf\), got -1\.0",
         id="train-masked-decay-negative"),
    case(TR + " --recipe s-ste -o transposable=maybe", r"transposable must be True or False",
         id="train-transposable-text"),
    case(TR + " --recipe s-ste -o lam=0.1", r"unknown option\(s\) \['lam'\] for recipe 's-ste'",
         id="train-sste-no-decay"),
    case(TR + " --nm 5:4", r"argument --nm: needs 1 <= N <= M", id="train-nm"),
    case(TR + " --teacher-nm 2", r"argument --teacher-nm: must look like N:M", id="teacher-nm"),
    case(TR + " --d-in 0", r"d_in must be >= 1, got 0", id="train-d-in-zero"),
    case(TR + " --batch-size 0", r"batch_size must be >= 1, got 0", id="train-batch-zero"),
    case(TR + " --noise nan", r"noise must be finite, got nan", id="train-noise-nan"),
    case(TR + " --dtype float16", r"argument --dtype: invalid choice: 'float16'",
         id="train-dtype"),
    # ---- issue 16: options silently reinterpreted, values that overflow or underflow
    case(TR + " --problem digits -p hidden=", r"--problem-option hidden: empty value",
         id="train-problem-option-empty"),
    case(TR + " --problem nqm -p sparse=off", r"sparse must be True or False, got 'off'",
         id="train-nqm-sparse-off"),
    case(TR + " -p bias=off", r"bias must be True or False, got 'off'", id="train-bias-off"),
    case(TR + " --problem teacher -p hidden=abc", r"hidden must be an int or a tuple of ints",
         id="train-hidden-text"),
    case("train --steps 1 --problem lm -p temperature=0.05",
         r"condition number 5\.59e\+10 .* raise the temperature \(-p temperature=",
         id="train-lm-temperature-too-low"),
    case(TR + " -o lr=1e39 --dtype float32", r"lr=1e\+39 is too large for float32",
         id="train-lr-overflows-float32"),
    case(TR + " -o eps=1e-50 --dtype float32", r"eps=1e-50 is 0 in float32",
         id="train-eps-underflows-float32"),
    case("compress {tiny} --dtype fp16 -o {out}",
         r"tiny: smallest nonzero \|value\| 1e-09 underflows to 0 in float16 .*"
         r"\(--flush-to-zero", id="compress-fp16-underflow"),
    case("compress {tiny64} --dtype fp32 -o {out}",
         r"tiny64: smallest nonzero \|value\| 1\.5e-50 underflows to 0 in float32",
         id="compress-fp32-underflow"),
    case(C + " --flush-to-zero", r"--flush-to-zero applies to a conversion",
         id="compress-flush-without-dtype"),
    case("compress {fifo_npy} -o {out}", r"input file .*fifo\.npy is a FIFO",
         id="compress-fifo-input"),
    case("check all C99", r"unknown claim 'C99'", id="check-all-and-unknown"),
    case("check C1 --problem regression", r"invalid choice: 'regression'",
         id="check-problem-not-in-protocol"),
    case("check C5 --quick --extended", r"--extended adds to the full check",
         id="check-extended-with-quick"),
    # ---- sweep specs of the wrong shape, empty options
    case("sweep {spec_list} --dry-run", r"sweep spec .*spec_list\.json'? must hold a JSON "
         r"object .*got list \[1, 2\]", id="sweep-spec-list"),
    case("sweep {spec_string} --dry-run", r"spec_string\.json'? must hold a JSON object .*got "
         r"str 'dense'", id="sweep-spec-string"),
    case("sweep {spec_options_list} --dry-run",
         r"recipes\[0\] \('dense'\): 'options' must be a table", id="sweep-options-list"),
    case("sweep {fifo_json} --dry-run", r"sweep spec .*fifo\.json is a FIFO",
         id="sweep-spec-fifo"),
    case("sweep --recipes dense --steps 1 --out=", r"--out: empty path", id="sweep-out-empty"),
    case("sweep --recipes dense --steps 1 --dry-run --grid recipe.lr=nan,1e-3",
         r"recipes\[0\] \('dense'\): lr must be finite, got nan", id="sweep-grid-lr-nan"),
    case("sweep --recipes dense --steps 3 --seeds 2 --jobs 1 --out {sweep}",
         r"holds another sweep \(1 planned runs, 1 finished\); .* --force",
         id="sweep-out-holds-another-sweep"),
    case("check C3 --problem lm --out {out}", r"no verdict to make: claim\(s\) C3 on "
         r"problem\(s\) lm have no setting in full mode", id="check-no-verdict"),
    # ---- issue 27, item 8: sizes that cannot fit, empty paths, arguments the protocol
    # does not use (each refused in one line before any work)
    case("sweep --recipes dense --steps 1 --seeds 1000000000 --dry-run",
         r"spec: the grid's 1,000,000,000 runs .* would need .* of memory; .* available",
         id="sweep-seeds-memory"),
    case("check C12 --quick --out=", r"--out: empty path; give a directory",
         id="check-out-empty"),
    case("bench --quick --only layout --json=", r"--json: empty path", id="bench-json-empty"),
    case("check C1 --quick --problem lm", r"problem 'lm' is not in quick mode, which runs only "
         r"\['digits'\]; check it in full mode", id="check-quick-problem-not-in-quick-mode"),
    case("sweep --recipes dense --steps 1 --dry-run -p scale=", r"--problem-option scale: "
         r"empty value", id="sweep-option-empty"),
    # ---- report: sweep directories whose files have the wrong shape; unknown names
    case("report {plan_list}", r"sweep plan .*plan_list/sweep\.json is not a sweep's plan",
         id="report-plan-list"),
    case("report {plan_no_result}", r"plan_no_result/sweep\.json is not a sweep's plan .*"
         r"no 'result'", id="report-plan-no-result"),
    case("report {plan_run_no_params}", r"sweep\.json is not a sweep's plan .*no 'params'",
         id="report-plan-run-no-params"),
    case("report {plan_not_json}", r"sweep plan .*sweep\.json is not valid JSON",
         id="report-plan-not-json"),
    case("report {plan_fifo}", r"sweep plan .*plan_fifo/sweep\.json is a FIFO",
         id="report-plan-fifo"),
    case("report {result_string}", r"run result .*\.json is not a sweep run's result",
         id="report-result-string"),
    case("report {result_no_metrics}", r"run result .*\.json is not a sweep run's result "
         r"\(no 'metrics'\)", id="report-result-no-metrics"),
    case("report {sweep} --baseline nope", r"--baseline 'nope' is not a recipe of this sweep; "
         r"recipes: \['dense'\]", id="report-baseline-unknown"),
    case("report {sweep} --metric=", r"--metric: empty value", id="report-metric-empty"),
    case("report {sweep} --figure=", r"--figure: empty path", id="report-figure-empty"),
    # ---- memory
    case("memory", r"the following arguments are required: --model", id="memory-no-model"),
    case("memory --model bert", r"argument --model: invalid choice: 'bert'", id="memory-model"),
    case("memory --model gpt2 --nm 4:2", r"argument --nm: needs 1 <= N <= M", id="memory-nm"),
    case("memory --model gpt2 --value-bytes 0", r"value_bytes must be >= 1, got 0",
         id="memory-value-bytes-zero"),
    case("memory --model gpt2 --value-bytes two", r"argument --value-bytes: invalid int",
         id="memory-value-bytes-text"),
    case("memory --model gpt2 --metadata csr", r"argument --metadata: invalid choice",
         id="memory-metadata"),
    case("memory --model gpt2 --json=", r"--json: empty path", id="memory-json-empty"),
    # ---- bench (each row fails before any timing starts)
    case("bench --only nonsense", r"unknown bench section\(s\) \['nonsense'\]", id="bench-only"),
    case("bench --only=", r"unknown bench section\(s\) \[''\]", id="bench-only-empty"),
    case("bench --quick=3", r"argument --quick: ignored explicit argument '3'", id="bench-quick"),
]


@contextlib.contextmanager
def _address_space_limit(extra: int = 2 << 30):
    """Cap this process's address space at its current size + ``extra`` bytes.

    Rows that give huge sizes run under it: fixed code refuses them from an estimate
    (check_memory reads this limit), and code that still tries to allocate fails fast with
    MemoryError instead of touching gigabytes of a shared machine.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = used + extra if hard == resource.RLIM_INFINITY else min(hard, used + extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextlib.contextmanager
def _deadline(seconds: int = 60):
    """Fail a row that hangs (a FIFO read blocks forever) instead of hanging the suite."""
    import signal

    def hung(signum, frame):
        raise AssertionError(f"no answer in {seconds} s: the command hangs")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _limit_if_huge(text: str):
    if "fifo" in text:
        return _deadline()
    huge = "memory" in text
    return _address_space_limit() if huge else contextlib.nullcontext()


def _error_lines(err: str) -> list[str]:
    """stderr without argparse's usage block (``usage:`` and its indented continuation)."""
    return [line for line in err.splitlines()
            if line.strip() and not line.startswith(("usage:", " "))]


@pytest.mark.parametrize("argv, pattern", CLI_CASES)
def test_cli_bad_input_is_one_clear_line(argv, pattern, files, capsys, request):
    args = [a.format(**files) for a in argv.split()]
    with _limit_if_huge(request.node.callspec.id):
        rc = main(args)
    captured = capsys.readouterr()
    assert isinstance(rc, int) and rc != 0, f"rc {rc}: {captured.out[-300:]}"
    assert "Traceback" not in captured.err
    lines = _error_lines(captured.err)
    assert len(lines) == 1, captured.err
    assert re.search(pattern, lines[0]), lines[0]
    assert "saved" not in captured.out and "wrote" not in captured.out  # nothing written...
    for name in ("out", "out_json", "out_png"):
        assert not os.path.exists(files[name])  # ...not even a partial file


# --------------------------------------------------------------------------- CLI, subprocess
def _obey_permission_bits():
    """preexec_fn: drop root's power to ignore permission bits (see test_jit_config)."""
    if os.geteuid() != 0:
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


SUBPROCESS_CASES = [
    ("compress {text_npz} -o {out}", 2, r"is not a \.npz file"),
    ("compress {truncated} -o {out}", 2, r"is truncated or corrupt"),
    ("compress {good} -o {ro}/w.npz", 2, r"-o .*w\.npz: cannot write in .*read_only"),
    ("theorem1 --json {ro}/t.json", 2, r"--json .*t\.json: cannot write in .*read_only"),
    ("theorem1 --seed -1", 2, r"argument --seed: a seed must be a non-negative integer"),
]


@pytest.mark.parametrize("argv, want_rc, pattern", SUBPROCESS_CASES,
                         ids=[c[0].split()[0] + "-" + str(i) for i, c in
                              enumerate(SUBPROCESS_CASES)])
def test_real_process_prints_one_line_and_no_traceback(argv, want_rc, pattern, files):
    """A real ``python -m stepsim`` (not main() in-process): exit status, stderr, no signal.
    A read-only directory is read-only for root too here (capabilities dropped)."""
    ro = Path(files["d"]) / "read_only"
    ro.mkdir(exist_ok=True)
    os.chmod(ro, 0o555)
    args = [a.format(ro=ro, **files) for a in argv.split()]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        run = subprocess.run([sys.executable, "-m", "stepsim", *args], capture_output=True,
                             text=True, env=env, cwd=REPO, timeout=120,
                             preexec_fn=_obey_permission_bits)
    except subprocess.SubprocessError as exc:  # root without CAP_SETPCAP: cannot simulate
        pytest.skip(f"cannot make a directory read-only for root here: {exc}")
    assert run.returncode == want_rc, run.stderr  # negative = killed by a signal (segfault)
    assert "Traceback" not in run.stderr
    lines = _error_lines(run.stderr)
    assert len(lines) == 1 and re.search(pattern, lines[0]), run.stderr
    assert run.stdout == ""
    assert not list(ro.iterdir())


def test_a_full_disk_is_one_line_before_and_after_the_work(files, monkeypatch, capsys):
    """No space left: refused by the probe before work; if the disk fills during the run,
    the write fails as one line too (and leaves no partial file)."""
    from stepsim import _atomic
    from stepsim.cli import _args

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(_args.tempfile, "TemporaryFile", full)
        assert main(["compress", files["good"], "-o", files["out"]]) == 2
        err = _error_lines(capsys.readouterr().err)
        assert len(err) == 1 and "cannot write in" in err[0] and "No space left" in err[0]

    with monkeypatch.context() as patch:  # the disk fills while the result is written
        patch.setattr(_atomic.Path, "write_bytes", full)
        rc = main(["theorem1", "--trials", "4", "--dim", "2", "--horizon", "10", "--json",
                   files["out_json"]])
    captured = capsys.readouterr()
    assert rc == 1 and "Traceback" not in captured.err
    err = _error_lines(captured.err)
    assert len(err) == 1 and "No space left on device" in err[0]
    assert not os.path.exists(files["out_json"])
    assert not [p for p in os.listdir(files["d"]) if p.startswith(".out.json")]


# --------------------------------------------------------------------------- public API
def _adam_arrays(n=8, v_value=1.0):
    w, g, m = (np.ones(n, np.float32) for _ in range(3))
    return w, g, m, np.full(n, v_value, np.float32)


def _adam(**kw):
    from stepsim import adam_step

    w, g, m, v = kw.pop("arrays", None) or _adam_arrays()
    return adam_step(w, kw.pop("g", g), m, kw.pop("v", v), **dict({"step": 1, "lr": 0.1}, **kw))


def _read_only_g_is_accepted_or_refused_for_its_real_reason():
    from stepsim import adam_step

    w, g, m, v = _adam_arrays()
    g.setflags(write=False)
    try:
        adam_step(w, g, m, v, step=1, lr=0.1)
    except ValueError as exc:
        if "updated in place" in str(exc):  # g is never written: that is not the reason
            raise AssertionError(f"read-only g refused for a wrong reason: {exc}") from None
        raise ValueError(f"g: {exc}") from None  # an honest refusal is acceptable
    w2, g2, m2, v2 = _adam_arrays()
    adam_step(w2, g2, m2, v2, step=1, lr=0.1)
    assert np.array_equal(w, w2)
    raise ValueError("g read-only accepted: ok")  # the row expects a ValueError naming g


def _fit(**kw):
    from stepsim.problems import SyntheticRegression
    from stepsim.recipes import make_recipe
    from stepsim.training import fit

    problem = kw.pop("problem", SyntheticRegression())
    return fit(problem, make_recipe("dense"), kw.pop("steps", 3), progress=False, **kw)


def _corrupt_meta():
    from stepsim.sparse24 import compress_2to4, spmm_2to4

    dense = np.zeros((32, 32), np.float16)
    dense[:, ::2] = 1
    values, meta = compress_2to4(dense)
    return spmm_2to4(values, np.zeros_like(meta), np.ones((32, 4), np.float16))


def _truncated_compressed(files):
    from stepsim.sparse24 import load_compressed

    return load_compressed(files["truncated"])


def _missing_array(files, tmp_name="missing_key.npz"):
    import json

    from stepsim.sparse24 import compress_2to4, load_compressed, save_compressed

    dense = np.zeros((32, 32), np.float16)
    dense[:, ::2] = 1
    path = Path(files["d"]) / tmp_name
    save_compressed(path, {"w": compress_2to4(dense)})
    with np.load(path) as z:
        kept = {k: z[k] for k in z.files if k != "w.meta"}
    assert "w" in json.loads(str(kept["__stepsim__"]))["tensors"]
    np.savez(path, **kept)
    return load_compressed(path)


class _BadAnswer:
    """A custom problem (the regression) whose loss_and_grad answer is spoiled by ``spoil``."""

    def __init__(self, spoil, **options):
        from stepsim.problems import SyntheticRegression

        self._inner, self._spoil = SyntheticRegression(**options), spoil

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def loss_and_grad(self, params, batch):
        loss, grads = self._inner.loss_and_grad(params, batch)
        return self._spoil(loss, dict(grads))


def _spoil_first(change):
    """A spoil function changing the first parameter's gradient with ``change``."""
    def spoil(loss, grads):
        first = next(iter(grads))
        return loss, dict(grads, **{first: change(grads[first])})
    return spoil


def _bad_fit(spoil, **options):
    return lambda files: _fit(problem=_BadAnswer(spoil, **options))


def _sweep_table(files):
    from stepsim.experiments import load_table

    return load_table(files["sweep"])


def api(call, exc, pattern, *marks, id):
    return pytest.param(call, exc, pattern, marks=marks, id=id)


def _np(f):
    return lambda files: f()


def _bound(kind, *, process="ar1", delta=0.05, dim=1):
    from stepsim.theorem1 import make_process
    from stepsim.theorem1.bounds import bound

    return bound(kind, make_process(process), beta2=0.9, k0=20, lags=[1, 5], delta=delta,
                 dim=dim)


API_CASES = [
    # ---- optimizer steps
    api(_np(lambda: _adam(lr=-1.0)), ValueError, r"lr must be in \[0\.0, inf\)", id="adam-lr"),
    api(_np(lambda: _adam(lr=float("nan"))), ValueError, r"lr must be finite", id="adam-lr-nan"),
    api(_np(lambda: _adam(beta1=1.0)), ValueError, r"beta1 must be in \[0\.0, 1\.0\)",
        id="adam-beta1"),
    api(_np(lambda: _adam(beta2=-0.1)), ValueError, r"beta2", id="adam-beta2"),
    api(_np(lambda: _adam(step=0)), ValueError, r"step must be >= 1", id="adam-step"),
    api(_np(lambda: _adam(g=np.ones(4, np.float32))), ValueError, r"g has shape \(4,\)",
        id="adam-shape"),
    api(_np(lambda: _adam(g=np.ones(8))), TypeError, r"g has dtype float64", id="adam-dtype"),
    api(_np(lambda: _adam(g=[1.0] * 8)), TypeError, r"g must be a numpy\.ndarray",
        id="adam-list"),
    api(_np(lambda: _adam(g=np.full(8, np.nan, np.float32))), ValueError,
        r"g contains 8 non-finite", id="adam-nan-gradient"),
    api(_np(lambda: _adam(arrays=_adam_arrays(), eps=0.0)), ValueError, r"eps",
        id="adam-eps-zero"),
    api(_np(lambda: _adam(arrays=_adam_arrays(v_value=-1.0), freeze_v=True)), ValueError,
        r"\bv\b.*(negative|>= 0)", id="adam-frozen-negative-v"),
    api(_np(_read_only_g_is_accepted_or_refused_for_its_real_reason), ValueError, r"\bg\b",
        id="adam-read-only-g"),
    api(_np(lambda: __import__("stepsim").sgdm_step(*_adam_arrays()[:3], lr=0.1,
                                                      momentum=1.0)),
        ValueError, r"momentum must be in \[0\.0, 1\.0\)", id="sgdm-momentum"),
    # ---- masks
    api(_np(lambda: __import__("stepsim").nm_mask(np.ones((2, 8)), 5, 4)), ValueError,
        r"n must be <= m", id="nm_mask-n-above-m"),
    api(_np(lambda: __import__("stepsim").nm_mask(np.ones((2, 6)), 2, 4)), ValueError,
        r"not divisible by m = 4", id="nm_mask-not-divisible"),
    api(_np(lambda: __import__("stepsim").nm_mask(np.full((2, 8), np.nan), 2, 4)), ValueError,
        r"w contains 16 NaN", id="nm_mask-nan"),
    api(_np(lambda: __import__("stepsim").nm_mask(np.ones((2, 8), int), 2, 4)), TypeError,
        r"w must have dtype", id="nm_mask-int"),
    api(_np(lambda: __import__("stepsim").nm_mask(np.ones((2, 8)), 2.0, 4)), TypeError,
        r"n must be an integer", id="nm_mask-n-float"),
    api(_np(lambda: __import__("stepsim").nm_mask(np.ones((2, 8)), 2, 4, axis=5)), ValueError,
        r"axis=5 is out of range", id="nm_mask-axis"),
    # ---- 2:4 layout, spmm, casts, files
    api(_np(_corrupt_meta), ValueError, r"meta holds nibble 0x0 for row 0, group 0",
        id="spmm-corrupt-meta"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.compress_2to4(
        np.zeros((32, 32)))), TypeError, r"the 2:4 layout supports dense dtypes",
        id="compress_2to4-float64"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.compress_2to4(
        np.zeros((30, 32), np.float16))), ValueError, r"dense has shape \(m, k\) = \(30, 32\)",
        id="compress_2to4-shape"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.compress_2to4(
        np.ones((32, 32), np.float16))), ValueError, r"dense is not 2:4 sparse: row 0",
        id="compress_2to4-dense"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.round_tf32(np.array(["a"]))),
        TypeError, r"x must be a real numeric array", id="round_tf32-strings"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.cast_values(
        np.full(4, 1e6), np.float16)), ValueError, r"largest \|value\| 1e\+06 does not fit",
        id="cast_values-overflow"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.cast_values(
        np.full(4, np.nan), np.float16, name="w")), ValueError, r"w contains 4 NaN",
        id="cast_values-nan"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.cast_values(
        np.ones(4), np.int8)), TypeError, r"converts to float dtypes", id="cast_values-int8"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.compress_nm(
        [[1.0] * 8], 2, 4)), TypeError, r"dense must be a numpy\.ndarray", id="compress_nm-list"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.save_compressed(
        "unused.npz", {})), TypeError, r"tensors must be a non-empty dict",
        id="save_compressed-empty"),
    api(_truncated_compressed, ValueError, r"compressed file .*truncated\.npz is truncated",
        id="load_compressed-truncated"),
    api(lambda files: __import__("stepsim.sparse24").sparse24.load_compressed(
        files["text_npz"]), ValueError, r"compressed file .*text\.npz is not a \.npz file",
        id="load_compressed-text"),
    api(lambda files: __import__("stepsim.sparse24").sparse24.load_compressed(
        files["good_npz"]), ValueError, r"good\.npz is not a stepsim compressed file",
        id="load_compressed-foreign"),
    api(_missing_array, ValueError, r"missing_key\.npz: the header lists 'w' but the file has "
        r"no w\.meta", id="load_compressed-missing-array"),
    # ---- theorem1
    api(_np(lambda: __import__("stepsim.theorem1").theorem1.check_theorem1(
        trials=0, dim=2, horizon=10)), ValueError, r"trials must be >= 1",
        id="check_theorem1-trials"),
    api(_np(lambda: __import__("stepsim.theorem1").theorem1.check_theorem1(
        trials=2, dim=2, horizon=10, bound="nope")), ValueError,
        r"bound must be one of .*'nope'|unknown bound 'nope'", id="check_theorem1-bound"),
    api(_np(lambda: _bound("chebyshev", delta=0.0)), ValueError, r"delta must be in",
        id="bound-delta-zero"),
    api(_np(lambda: _bound("chebyshev", delta=1.0)), ValueError, r"delta must be in",
        id="bound-delta-one"),
    api(_np(lambda: _bound("chebyshev", dim=0)), ValueError, r"dim must be >= 1",
        id="bound-dim-zero"),
    api(_np(lambda: _bound("nope")), ValueError, r"bound must be one of .*'nope'|unknown "
        r"bound 'nope'", id="bound-kind"),
    api(_np(lambda: _bound("plugin")), ValueError, r"the plug-in bound needs y_pre",
        id="bound-plugin-no-data"),
    api(_np(lambda: _bound("markov-chernoff", delta=1.5, process="regime")), ValueError,
        r"delta must be in", id="bound-chernoff-delta"),
    api(_np(lambda: _bound("markov-chernoff", dim=0, process="regime")), ValueError,
        r"dim must be >= 1", id="bound-chernoff-dim"),
    api(_np(lambda: __import__("stepsim.theorem1.chernoff").theorem1.chernoff.gaussian_log_mgf(
        np.ones(3), np.ones(1), gamma_g=np.array([1.0, 2.0, 0.0]))), ValueError,
        r"gamma_g is not positive semi-definite", id="chernoff-gaussian-not-psd"),
    api(_np(lambda: _bound("markov", process="sine")), ValueError,
        r"process 'sine' is not a function of a chain", id="bound-markov-sine"),
    api(_np(lambda: __import__("stepsim.theorem1").theorem1.check_theorem1(
        trials=2, dim=2, horizon=10, seed=-1)), ValueError, r"seed must be >= 0",
        id="check_theorem1-seed"),
    api(_np(lambda: __import__("stepsim.theorem1").theorem1.check_theorem1(
        trials=2, dim=2, horizon=10, engine="gpu")), ValueError, r"unknown engine 'gpu'",
        id="check_theorem1-engine"),
    api(_np(lambda: __import__("stepsim.theorem1").theorem1.check_theorem1(
        trials=10**8, dim=10**8, horizon=10)), ValueError, r"would need .* available",
        id="check_theorem1-memory"),
    # ---- recipes, criteria, problems, fit
    api(_np(lambda: __import__("stepsim.recipes").recipes.make_recipe("nope")), ValueError,
        r"unknown recipe 'nope'", id="make_recipe-name"),
    api(_np(lambda: __import__("stepsim.recipes.criteria").recipes.criteria.make_criterion(
        "fixed-fraction", fraction=2.0)), ValueError, r"fraction must be in \[0\.0, 1\.0\]",
        id="make_criterion-fraction"),
    api(_np(lambda: __import__("stepsim.problems.registry").problems.registry.make_problem(
        "nope")), ValueError, r"unknown problem 'nope'", id="make_problem-name"),
    api(_np(lambda: __import__("stepsim.problems").problems.SyntheticRegression(d_in=0)),
        ValueError, r"d_in must be >= 1", id="SyntheticRegression-d_in"),
    api(_np(lambda: __import__("stepsim.problems").problems.SyntheticRegression(nm="2:4")),
        TypeError, r"\bnm\b", id="SyntheticRegression-nm-string"),
    api(_np(lambda: __import__("stepsim.problems").problems.SyntheticRegression(
        d_in=10**9, d_hidden=10**9)), ValueError, r"would need .* available",
        id="SyntheticRegression-memory"),
    api(_np(lambda: _fit(steps=0)), ValueError, r"steps must be >= 1", id="fit-steps"),
    api(_np(lambda: _fit(threads=0)), ValueError, r"threads must be >= 1", id="fit-threads"),
    api(_np(lambda: _fit(rng="abc")), TypeError, r"\brng\b", id="fit-rng-text"),
    api(_np(lambda: _fit(rng=-1)), ValueError, r"\brng\b", id="fit-rng-negative"),
    api(_np(lambda: _fit(nm="2:4")), TypeError, r"\bnm\b", id="fit-nm-string"),
    api(_np(lambda: _fit(criterion=42)), TypeError, r"\bcriterion\b",
        id="fit-criterion-int"),
    api(_np(lambda: _fit(problem=None)), TypeError, r"\bproblem\b", id="fit-problem-none"),
    # ---- issue 16: overflow and underflow in the parameters' dtype
    api(_np(lambda: _adam(lr=1e39)), ValueError, r"lr=1e\+39 is too large for float32",
        id="adam-lr-overflows-float32"),
    api(_np(lambda: _adam(lr=1e38)), ValueError, r"lr=1e\+38 is too large for float32",
        id="adam-lr-step-overflows-float32"),
    api(_np(lambda: _adam(eps=1e-50)), ValueError, r"eps=1e-50 is 0 in float32",
        id="adam-eps-underflows-float32"),
    api(_np(lambda: _adam(eps=1e-50, eps_mode="outside")), ValueError, r"eps=1e-50 is 0",
        id="adam-eps-outside-underflows"),
    api(_np(lambda: _adam(lr=1e20, weight_decay=1e30)), ValueError,
        r"1 - lr \* weight_decay = -1e\+50 overflows float32", id="adam-decay-overflows"),
    api(_np(lambda: __import__("stepsim").sgdm_step(*_adam_arrays()[:3], lr=1e38)),
        ValueError, r"lr=1e\+38 is too large for float32", id="sgdm-lr-overflows-float32"),
    api(_np(lambda: __import__("stepsim").sgdm_step(*_adam_arrays()[:3], lr=0.1,
                                                      weight_decay=1e39)),
        ValueError, r"weight_decay = 1e\+39 overflows float32", id="sgdm-decay-overflows"),
    api(_np(lambda: __import__("stepsim.sparse24").sparse24.cast_values(
        np.full(4, 1e-9), np.float16, name="w")), ValueError,
        r"w: smallest nonzero \|value\| 1e-09 underflows to 0 in float16",
        id="cast_values-underflow"),
    # ---- lists where arrays or objects are expected
    api(_np(lambda: __import__("stepsim.core.optim").core.optim.adam_apply_many(
        [[1.0] * 4, [1.0] * 4], *([np.ones(4, np.float32)] * 2 for _ in range(3)),
        __import__("stepsim.core.optim").core.optim.adam_hyper(step=1, lr=0.1))),
        TypeError, r"ws\[0\] must be a numpy\.ndarray, got list", id="adam_apply_many-lists"),
    api(_np(lambda: __import__("stepsim.core.optim").core.optim.adam_apply_many(
        (w for w in [np.ones(4, np.float32)]), [np.ones(4, np.float32)], [np.ones(4, np.float32)],
        [np.ones(4, np.float32)],
        __import__("stepsim.core.optim").core.optim.adam_hyper(step=1, lr=0.1))),
        TypeError, r"ws must be a list or tuple of arrays", id="adam_apply_many-generator"),
    api(_np(lambda: __import__("stepsim.core.optim").core.optim.sgdm_apply_many(
        [[1.0] * 4, [1.0] * 4], *([np.ones(4, np.float32)] * 2 for _ in range(2)), lr=0.1)),
        TypeError, r"ws\[0\] must be a numpy\.ndarray, got list", id="sgdm_apply_many-lists"),
    api(_np(lambda: __import__("stepsim.stats").stats.mean_ci(["1.5", "2"])), TypeError,
        r"values must be a sequence or array of real numbers .*got <U3 values",
        id="mean_ci-strings"),
    api(lambda files: __import__("stepsim.experiments").experiments.summarize(
        list(_sweep_table(files).rows), "final_loss"), TypeError,
        r"table must be a stepsim\.experiments\.Table .*got list", id="summarize-rows-list"),
    api(lambda files: __import__("stepsim.experiments").experiments.compare(
        _sweep_table(files), "nope"), ValueError, r"metric 'nope' is not a column of the table",
        id="compare-missing-metric"),
    api(lambda files: __import__("stepsim.experiments").experiments.summarize(
        _sweep_table(files), "recipe"), TypeError, r"metric 'recipe' is not numeric: run .* "
        r"has 'dense'", id="summarize-text-metric"),
    api(_np(lambda: __import__("stepsim.recipes.criteria").recipes.criteria.make_criterion(
        "autoswitch", adam="adam")), TypeError, r"adam must be the Adam the criterion watches",
        id="make_criterion-adam-string"),
    # ---- a custom problem answering loss_and_grad wrongly
    api(_bad_fit(lambda loss, grads: (loss, list(grads.values()))), TypeError,
        r"_BadAnswer\.loss_and_grad must return its gradients as a dict .*got list",
        id="fit-grads-list"),
    api(_bad_fit(lambda loss, grads: (loss, {k: g for k, g in list(grads.items())[1:]})),
        ValueError, r"returned no gradient for \['w2'\]", id="fit-grads-missing"),
    api(_bad_fit(lambda loss, grads: (loss, dict(grads, typo=grads["w1"]))), ValueError,
        r"returned gradients for \['typo'\], which are not parameters", id="fit-grads-extra"),
    api(_bad_fit(_spoil_first(lambda g: g[:1])), ValueError,
        r"the gradient of 'w2' has shape \(1, 16\), but the parameter has shape \(4, 16\)",
        id="fit-grads-broadcastable-shape"),
    api(_bad_fit(_spoil_first(lambda g: g.astype(np.float64)), dtype=np.float32), TypeError,
        r"the gradient of 'w2' has dtype float64, but the parameter has dtype float32",
        id="fit-grads-dtype"),
    api(_bad_fit(_spoil_first(lambda g: g.tolist())), TypeError,
        r"the gradient of 'w2' must be a numpy\.ndarray, got list", id="fit-grads-nested-list"),
    api(_bad_fit(lambda loss, grads: (None, grads)), TypeError,
        r"loss_and_grad must return a real number as its loss, got None", id="fit-loss-none"),
    api(_bad_fit(lambda loss, grads: (np.array([loss, loss]), grads)), TypeError,
        r"must return a real number as its loss, got array", id="fit-loss-array"),
    api(_bad_fit(lambda loss, grads: (loss, grads, {})), TypeError,
        r"must return \(loss, grads\), got a tuple of 3 items", id="fit-answer-triple"),
    # ---- problems: options read the wrong way; a chain too cold to solve
    api(_np(lambda: __import__("stepsim.problems.nqm").problems.nqm.NoisyQuadratic(
        sparse="off")), TypeError, r"sparse must be True or False, got 'off'", id="nqm-sparse-off"),
    api(_np(lambda: __import__("stepsim.problems").problems.SyntheticRegression(bias="no")),
        TypeError, r"bias must be True or False", id="SyntheticRegression-bias-text"),
    api(_np(lambda: __import__("stepsim.problems.digits").problems.digits.Digits(hidden="")),
        TypeError, r"hidden must be an int or a tuple of ints, got ''", id="Digits-hidden-empty"),
    api(_np(lambda: __import__("stepsim.problems.lm").problems.lm.LanguageModel(sparse=" , ")),
        ValueError, r"sparse: no kind in ' , '", id="LanguageModel-sparse-empty"),
    api(_np(lambda: __import__("stepsim.problems.markov").problems.markov.MarkovLanguage(
        temperature=0.05)), ValueError, r"condition number .* raise the temperature",
        id="MarkovLanguage-too-cold"),
    # ---- files and specs of the wrong kind or shape
    api(lambda files: __import__("stepsim._validate")._validate.load_arrays(files["fifo_npy"]),
        ValueError, r"input file .*fifo\.npy is a FIFO", id="load_arrays-fifo"),
    api(lambda files: __import__("stepsim.experiments.sweep_spec").experiments.sweep_spec
        .read_spec_file(files["spec_list"]), TypeError, r"must hold a JSON object", id="read_spec_file-list"),
    api(lambda files: __import__("stepsim.experiments").experiments.load_table(
        files["plan_no_result"]), ValueError, r"is not a sweep's plan .*no 'result'",
        id="load_table-no-result"),
    api(_np(lambda: __import__("stepsim.checks").checks.parse_claims(["all", "C99"])),
        ValueError, r"unknown claim 'C99'", id="parse_claims-all-and-unknown"),
    api(_np(lambda: __import__("stepsim.checks.report").checks.report.run_checks(
        ["C3"], mode="slow")), ValueError, r"mode must be 'quick' or 'full', got 'slow'",
        id="run_checks-mode"),
    api(_np(lambda: __import__("stepsim.checks.report").checks.report.run_checks(
        ["C3"], mode="full", problems=["regression"])), ValueError,
        r"problem must be one of \['digits', 'lm'\], got 'regression'",
        id="run_checks-problem"),
    api(_np(lambda: __import__("stepsim.checks.report").checks.report.run_checks(
        ["C3"], mode="full", steps=50)), ValueError, r"steps must be an integer >= 200, got 50",
        id="run_checks-steps"),
    api(_np(lambda: __import__("stepsim.checks.protocol").checks.protocol.parse_key(
        "adam|sr-ste")), ValueError, r"config key must be", id="parse_key-short"),
    api(_np(lambda: __import__("stepsim.checks.report").checks.report.run_checks(
        ["C5"], mode="quick", extended=True)), ValueError,
        r"extended must be True or False and needs mode 'full'", id="run_checks-extended"),
    api(_np(lambda: __import__("stepsim.checks.protocol").checks.protocol.document_rules(
        draft=2)), ValueError, r"draft must be one of \[3, 4\], got 2",
        id="document_rules-draft"),
    api(_np(lambda: __import__("stepsim.checks.protocol").checks.protocol.draft_of(
        {"rules_version": 4, "rules_sha256": "0" * 64})), ValueError,
        r"declares draft 4 but its rules digest", id="draft_of-digest"),
    api(_np(lambda: __import__("stepsim.checks.operating").checks.operating.tie_set(
        [1e-3], [[1.0]], 1e-2)), ValueError, r"choice 0\.01 is not in the grid",
        id="tie_set-choice"),
    api(_np(lambda: __import__("stepsim.checks.operating").checks.operating.clopper_pearson(
        4, 3)), ValueError, r"need integers 0 <= k <= n", id="clopper_pearson-k"),
    api(_np(lambda: __import__("stepsim.checks._setup").checks._setup.Budget(
        "full", "digits", "main", (0,), schedule="linear")), ValueError,
        r"schedule must be 'constant' or one of \['cosine-warmup'\], got 'linear'",
        id="budget-schedule"),
    # ---- issue 27, item 8: sizes that cannot fit, empty paths and lists, arguments the
    # protocol does not use (each refused in one line before anything is allocated or run)
    api(_np(lambda: __import__("stepsim").nm_mask(
        np.broadcast_to(np.float32(1), (10**6, 10**6)), 2, 4)), ValueError,
        r"the N:M mask of w with shape \(1000000, 1000000\) \(float32\) would need "
        r"4\.55 TiB of memory; .* available", id="nm_mask-broadcast-memory"),
    api(_np(lambda: __import__("stepsim").nm_mask_conv(
        np.broadcast_to(np.float64(1), (10**4, 10**4, 10, 10)), 1, 4)), ValueError,
        r"the N:M mask of w with shape \(10000, 10000, 10, 10\) \(float64\) would need "
        r".* of memory", id="nm_mask_conv-broadcast-memory"),
    api(_np(lambda: __import__("stepsim.experiments").experiments.plan_sweep(
        {"recipes": ["dense"], "steps": 1, "seeds": 10**9})), ValueError,
        r"spec: the grid's 1,000,000,000 runs .* would need .* of memory",
        id="plan_sweep-seeds-memory"),
    api(_np(lambda: __import__("stepsim.experiments").experiments.plan_sweep(
        {"recipes": [{"name": "sr-ste", "grid": {"lam": list(range(1, 10**4 + 1))}}],
         "steps": list(range(1, 10**3 + 1)), "seeds": 10**3})), ValueError,
        r"spec: the grid's 10,000,000,000 runs", id="plan_sweep-grid-memory"),
    api(_np(lambda: __import__("stepsim.sparse24.memory").sparse24.memory.memory_table([])),
        ValueError, r"params is empty: give the model's Param s or a model name",
        id="memory_table-empty"),
    api(_np(lambda: __import__("stepsim.sparse24.memory").sparse24.memory.memory_table(
        ["bert-base"])), TypeError, r"params must be Param s \(or a model name\), got "
        r"'bert-base' \(str\)", id="memory_table-names-list"),
    api(lambda files: __import__("stepsim.bench").bench.run_bench(
        quick=True, only=["layout"], json_path=""), ValueError,
        r"json_path: empty path; give a file name \(None: do not save\)",
        id="run_bench-json-empty"),
    api(_np(lambda: __import__("stepsim.checks.report").checks.report.run_checks(
        ["C12"], mode="quick", out="")), ValueError, r"--out: empty path; give a directory",
        id="run_checks-out-empty"),
    api(_np(lambda: __import__("stepsim.checks.report").checks.report.run_checks(
        ["C1"], mode="quick", problems=["lm"])), ValueError,
        r"problem 'lm' is not in quick mode, which runs only \['digits'\]",
        id="run_checks-quick-problem-not-in-quick-mode"),
    # ---- shared helpers the CLI and problems use
    api(_np(lambda: __import__("stepsim._validate")._validate.check_memory(
        "the activations", 8 * 10**18, available=2**30)), ValueError,
        r"the activations would need 6\.94 EiB|the activations would need .* of memory; 1 GiB",
        id="check_memory"),
    api(_np(lambda: __import__("stepsim._validate")._validate.check_finite_array(
        "x", np.array([1.0, np.inf]))), ValueError, r"x contains 0 NaN and 1 infinite",
        id="check_finite_array"),
    api(_np(lambda: __import__("stepsim.cli._args").cli._args.seed("-1")), ValueError,
        r"non-negative integer, got '-1'", id="args-seed"),
    api(_np(lambda: __import__("stepsim.cli._args").cli._args.positive_int("0")), ValueError,
        r"positive integer, got '0'", id="args-positive-int"),
    api(_np(lambda: __import__("stepsim.cli._args").cli._args.finite_float("nan")), ValueError,
        r"finite number, got 'nan'", id="args-finite-float"),
    api(lambda files: __import__("stepsim.cli._args").cli._args.output_path(
        files["d"] + "/t.npz", option="--json", sidecars=(".npz",)), ValueError,
        r"--json .*t\.npz must not end in \.npz: the \.npz file written beside it would be "
        r".*t\.npz itself",
        id="output_path-sidecar"),
    api(lambda files: __import__("stepsim.cli._args").cli._args.output_path(
        files["d"] + "/good.json", option="--json", sidecars=(".npy",),
        inputs=(files["good"],)), ValueError, r"\(its \.npy file .*good\.npy\) is the input",
        id="output_path-sidecar-is-input"),
    # ---- issue 24: S-STE's soft threshold, transposable masks, the new recipes
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.soft_threshold(
        np.zeros((2, 4), np.float16), 2, 4)), TypeError, r"w must have dtype in \(float32",
        id="soft_threshold-float16"),
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.soft_threshold(
        np.zeros((2, 4)), 2, 4, beta=float("nan"))), ValueError, r"beta must be finite",
        id="soft_threshold-beta-nan"),
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.soft_threshold(
        np.array([[np.nan, 0.0, 0.0, 0.0]]), 2, 4)), ValueError, r"w contains 1 NaN",
        id="soft_threshold-nan"),
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.soft_threshold(
        np.zeros((2, 4)), 5, 4)), ValueError, r"n must be <= m", id="soft_threshold-n-gt-m"),
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.soft_threshold(
        np.zeros((2, 6)), 2, 4)), ValueError, r"not divisible by m = 4",
        id="soft_threshold-axis"),
    api(_np(lambda: __import__("stepsim.core.soft").core.soft.sste_beta(
        np.zeros((2, 4)), np.zeros((2, 5)))), ValueError, r"s has shape \(2, 5\)",
        id="sste_beta-shape"),
    api(_np(lambda: __import__("stepsim.core.transposable").core.transposable
            .transposable_mask(np.zeros((4, 6)), 2, 4)), ValueError,
        r"both dimensions of shape \(4, 6\) divisible by m = 4", id="transposable-shape"),
    api(_np(lambda: __import__("stepsim.core.transposable").core.transposable
            .transposable_mask(np.zeros((4, 4, 4)), 2, 4)), ValueError, r"needs a 2-D weight",
        id="transposable-ndim"),
    api(_np(lambda: __import__("stepsim.recipes").recipes.make_recipe(
        "ste", layerwise=True, mask_every=3)), ValueError,
        r"recipe 'ste' does not use option\(s\) \['mask_every'\]", id="make_recipe-every-lw"),
    api(_np(lambda: __import__("stepsim.recipes").recipes.make_recipe(
        "s-ste-step", layerwise=True)), ValueError,
        r"unknown option\(s\) \['layerwise'\] for recipe 's-ste-step'",
        id="make_recipe-sste-step-layerwise"),
]


@pytest.mark.parametrize("call, exc, pattern", API_CASES)
def test_api_bad_input_raises_a_one_line_error_naming_the_argument(call, exc, pattern, files,
                                                                  request):
    with pytest.raises(exc) as raised, _limit_if_huge(request.node.callspec.id):
        call(files)
    message = str(raised.value)
    assert "\n" not in message, message
    assert re.search(pattern, message), message


def test_saturate_is_explicit_and_exact(files, tmp_path, capsys):
    """--saturate (saturate=True) clips to the dtype's largest finite value, nothing else."""
    from stepsim.sparse24 import cast_values, load_compressed

    x = np.array([1e6, -1e6, 1.0, -0.5, 65504.0, 65519.0])
    out = cast_values(x, np.float16, saturate=True)
    assert out.tolist() == [65504.0, -65504.0, 1.0, -0.5, 65504.0, 65504.0]
    target = tmp_path / "sat.npz"
    assert main(["compress", files["big"], "--dtype", "fp16", "--saturate", "-o",
                 str(target)]) == 0
    stored = load_compressed(target)["big"].to_dense()
    assert stored.dtype == np.float16 and np.isfinite(stored).all()
    assert float(np.abs(stored).max()) == 65504.0
    assert "wrote" in capsys.readouterr().out


def test_flush_to_zero_is_explicit_and_exact(files, tmp_path, capsys):
    """--flush-to-zero (flush_to_zero=True) stores values below the dtype's smallest
    subnormal as 0 and changes nothing else; subnormal results are kept, not refused."""
    from stepsim.sparse24 import cast_values, load_compressed

    x = np.array([1e-9, -1e-9, 1.0, 1e-7, 0.0])
    out = cast_values(x, np.float16, flush_to_zero=True)
    assert out.tolist() == [0.0, 0.0, 1.0, float(np.float16(1e-7)), 0.0]
    assert cast_values(x[2:], np.float16).tolist() == out[2:].tolist()  # 1e-7: subnormal, kept
    target = tmp_path / "flushed.npz"
    assert main(["compress", files["tiny"], "--dtype", "fp16", "--flush-to-zero", "-o",
                 str(target)]) == 0
    assert not load_compressed(target)["tiny"].to_dense().any()
    assert "wrote" in capsys.readouterr().out


def test_available_memory_sees_an_address_space_limit():
    """check_memory's default budget includes RLIMIT_AS (ulimit -v), not only free RAM."""
    from stepsim._validate import available_memory, check_memory

    before = available_memory()
    assert before is not None and before > 0
    with _address_space_limit(extra=256 << 20):
        capped = available_memory()
        assert capped <= 256 << 20
        with pytest.raises(ValueError, match=r"the test arrays would need 1 GiB of memory"):
            check_memory("the test arrays", 1 << 30)
    assert check_memory("small", 1024) == 1024


def test_an_empty_output_path_is_never_the_current_directory(tmp_path, monkeypatch, capsys):
    """``--out=`` / ``--json=`` once wrote the report into the current directory (check) or
    silently saved nothing (bench): refused in one line, and nothing appears here."""
    monkeypatch.chdir(tmp_path)
    for argv in (["check", "C12", "--quick", "--out="],
                 ["bench", "--quick", "--only", "layout", "--json="],
                 ["sweep", "--recipes", "dense", "--steps", "1", "--out="]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "empty path" in err and "Traceback" not in err, err
        assert list(tmp_path.iterdir()) == [], argv
