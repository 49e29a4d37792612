"""Bad inputs on the command line, table-driven (issue 10, item 7).

Every row is one bad input to ``stepsim.cli.main`` in-process, plus a few real subprocess
runs: each must give a non-zero exit and ONE error line naming the option or file (no
usage block; argparse's errors end with a --help hint) and no traceback; outputs are refused before any
work starts (nothing printed on stdout, no file written). Never a traceback, a segfault or
a silent rc 0 / a silently wrong number. The input files are conftest.py's ``files``.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stepsim.cli import main
from tests.bad_inputs.limits import _error_lines, _limit_if_huge


REPO = Path(__file__).resolve().parents[2]


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
    case("theorem1 --bogus 1", r"^stepsim theorem1: error: unrecognized arguments: --bogus 1 "
         r"\(see stepsim theorem1 --help\)$", id="unknown-option"),
    case("train --nm 3:2", r"^stepsim train: error: argument --nm: needs 1 <= N <= M, got "
         r"'3:2' \(see stepsim train --help\)$", id="argparse-error-is-one-line"),
    case("train --steps -5", r"^stepsim train: error: argument --steps: must be a positive "
         r"integer, got '-5' \(see stepsim train --help\)$", id="train-steps-negative"),
    case("train --lr abc", r"^stepsim train: error: argument --lr: must be a number, got "
         r"'abc' \(see stepsim train --help\)$", id="train-lr-text"),
    case("train --batch-size x", r"argument --batch-size: must be an integer, got 'x'",
         id="train-batch-size-text"),
    case("memory --model gpt3", r"^stepsim memory: error: argument --model: invalid choice: "
         r"'gpt3' .*\(see stepsim memory --help\)$", id="memory-model-unknown"),
    case("sweep --bogus", r"^stepsim sweep: error: unrecognized arguments: --bogus",
         id="sweep-unknown-option"),
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
    case(C + " --axis x", r"argument --axis: must be an integer, got 'x'", id="compress-axis-not-int"),
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
    case(T + " --bound copula-chernoff --process regime",
         r"process 'regime' is not g\^2 = G Phi\(x\) of a stationary Gaussian AR\(1\)",
         id="bound-copula-chernoff-regime"),
    case(T + " --bound sticky-chernoff --process ar1",
         r"process 'ar1' is not the stationary sticky chain", id="bound-sticky-chernoff-ar1"),
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
    # every problem refuses a size that cannot fit before allocating, under its options
    case("train --steps 1 --problem lm -p width=100000", r"^stepsim train: error: problem lm "
         r"with .*width=100000.* would need .* of memory; .* available$", id="train-lm-memory"),
    case("train --steps 1 --problem digits -p hidden=10000000", r"problem digits with "
         r"hidden=\(10000000,\).* would need .* of memory", id="train-digits-memory"),
    case("train --steps 1 --problem teacher -p n_train=10000000000", r"problem teacher with "
         r".*n_train=10000000000.* would need", id="train-teacher-memory"),
    case("train --steps 1 --problem nqm -p dim=100000000000", r"problem nqm with "
         r"dim=100000000000.* would need", id="train-nqm-memory"),
    case("train --steps 1 -p n_samples=10000000000", r"problem regression with "
         r".*n_samples=10000000000.* would need", id="train-regression-samples-memory"),
    # a missing output directory is refused, never created
    case(TR + " --json {d}/no/such/t.json", r"--json .*no/such/t\.json: directory .*no/such "
         r"does not exist; create it first", id="train-json-missing-dir"),
    case("memory --model gpt2 --json {d}/no/such/m.json", r"--json .*: directory .*no/such "
         r"does not exist", id="memory-json-missing-dir"),
    case(T + " --plot {d}/no/such/t.png", r"--plot .*: directory .*no/such does not exist",
         id="theorem1-plot-missing-dir"),
    case("compress {good} -o {d}/no/such/w.npz", r"-o .*: directory .*no/such does not exist",
         id="compress-output-missing-dir"),
    case("bench --only layout --json {d}/no/such/b.json", r"--json .*: directory .*no/such "
         r"does not exist", id="bench-json-missing-dir"),
    case("sweep --recipes dense --steps 1 --out {d}/no/such/sweep", r"--out .*no/such/sweep: "
         r"directory .*no/such does not exist", id="sweep-out-missing-parent"),
    case("sweep --recipes dense --steps 1 --out {good}", r"--out .*good\.npy is a file",
         id="sweep-out-is-a-file"),
    case("check C12 --quick --out {d}/no/such/check", r"--out .*no/such/check: directory "
         r".*no/such does not exist", id="check-out-missing-parent"),
    case("report {sweep} --figure {d}/no/such/f.png", r"--figure .*: directory .*no/such does "
         r"not exist", id="report-figure-missing-dir"),
    # (either the API's message or, once train uses cli.args, argparse's)
    case("train --steps 0", r"steps must be >= 1, got 0|argument --steps: must be a positive",
         id="train-steps-zero"),
    case("train --steps x", r"argument --steps: (invalid int value|must be an integer)",
         id="train-steps-text"),
    case(TR + " --lr nan", r"error: --lr must be finite, got nan$", id="train-lr-nan"),
    case(TR + " --lr inf", r"error: --lr must be finite, got inf$", id="train-lr-inf"),
    case(TR + " --lr -1", r"error: --lr must be in \[0\.0, inf\), got -1\.0$",
         id="train-lr-negative"),
    case(TR + " --lr -1e-3", r"error: --lr must be in \[0\.0, inf\), got -0\.001$",
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
    # a flag's number goes through its option's declared constraint, named as typed
    case(TR + " --d-in 0", r"error: --d-in must be >= 1, got 0$", id="train-d-in-zero"),
    case(TR + " --batch-size 0", r"error: --batch-size must be >= 1, got 0$",
         id="train-batch-zero"),
    case(TR + " --noise nan", r"error: --noise must be finite, got nan$", id="train-noise-nan"),
    case(TR + " --noise -1", r"error: --noise must be in \[0\.0, inf\), got -1\.0$",
         id="train-noise-negative"),
    case(TR + " --grad-noise inf", r"error: --grad-noise must be finite, got inf$",
         id="train-grad-noise-inf"),
    case(TR + " --scale 0", r"error: --scale must be in \(0\.0, inf\), got 0\.0$",
         id="train-scale-zero"),
    case(TR + " --condition 0.5", r"error: --condition must be in \[1\.0, inf\), got 0\.5$",
         id="train-condition-below-one"),
    case(TR + " --lr 1e999", r"error: --lr must be finite, got inf$", id="train-lr-overflows"),
    case(TR + " --optimizer sgdm --lr -1", r"error: --lr must be in \[0\.0, inf\), got -1\.0$",
         id="train-sgdm-lr-negative"),
    case(TR + " --problem teacher --batch-size -2", r"error: --batch-size must be >= 1, got -2$",
         id="train-teacher-batch-negative"),
    # ... and a KEY=VALUE number through the declaration of its owner, named by its key
    case(TR + " --problem nqm -p alpha=nan", r"error: alpha must be finite, got nan$",
         id="train-nqm-alpha-nan"),
    case(TR + " -p seed=-1", r"error: seed must be >= 0, got -1$", id="train-regression-seed"),
    case(TR + " --recipe sr-ste -o lam=inf", r"error: lam must be finite, got inf$",
         id="train-srste-lam-inf"),
    case(TR + " --recipe decaying-mask -o decay_rate=-1",
         r"error: decay_rate must be in \[0\.0, inf\), got -1\.0$", id="train-decay-rate-negative"),
    case(TR + " --criterion fixed-fraction -c fraction=inf",
         r"error: fraction must be finite, got inf$",
         id="train-fixed-fraction-inf"),
    case(TR + " --criterion fixed-step -c k0=0", r"error: k0 must be >= 1, got 0$",
         id="train-fixed-step-zero"),
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
    case(TR + " --problem mnist1d -p channels=8,6,8 --nm 2:4",
         r"parameter 'conv3.w' has shape \(8, 3, 6\): axis 2 has length 6, not divisible by "
         r"M = 4", id="train-mnist1d-channels-not-divisible"),
    case(TR + " --problem mnist1d -p strides=2,2", r"strides must give one value "
         r"per conv layer \(3: one per entry of channels\), got 2", id="train-mnist1d-strides"),
    case(TR + " --problem mnist1d -p n_test=1001", r"n_train \+ n_test = 5001 must be a "
         r"multiple of 10", id="train-mnist1d-sizes"),
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
    case("check C3 --problem lm --extended --out {out}",
         r"no verdict to make: claim\(s\) C3 on problem\(s\) lm have no setting in full mode",
         id="check-no-verdict"),
    case("check C3 --problem lm --out {out}", r"problem 'lm' belongs to the extended set of "
         r"the protocol .*: check it with --extended", id="check-extended-problem"),
    # ---- issue 27, item 8: sizes that cannot fit, empty paths, arguments the protocol
    # does not use (each refused in one line before any work)
    case("sweep --recipes dense --steps 1 --seeds 1000000000 --dry-run",
         r"spec: the grid's 1,000,000,000 runs .* would need .* of memory; .* available",
         id="sweep-seeds-memory"),
    case("check C12 --quick --out=", r"--out: empty path; give a directory",
         id="check-out-empty"),
    case("bench --quick --only layout --json=", r"--json: empty path", id="bench-json-empty"),
    case("check C1 --quick --problem lm", r"no verdict to make: claim\(s\) C1 on problem\(s\) "
         r"lm have no setting in quick mode", id="check-quick-claim-not-in-quick-mode"),
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
    case("report {result_edited}", r"1 damaged run in .*result_edited/runs \(1 \.json changed "
         r"since it was saved\); `stepsim sweep SPEC --out .*result_edited` \(the same "
         r"command\) sets them aside in .*/runs/damaged and redoes them",
         id="report-result-edited"),
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
    case("memory --model gpt2 --value-bytes two", r"argument --value-bytes: must be an integer, got 'two'",
         id="memory-value-bytes-text"),
    case("memory --model gpt2 --metadata csr", r"argument --metadata: invalid choice",
         id="memory-metadata"),
    case("memory --model gpt2 --json=", r"--json: empty path", id="memory-json-empty"),
    # ---- bench (each row fails before any timing starts)
    case("bench --only nonsense", r"unknown bench section\(s\) \['nonsense'\]", id="bench-only"),
    case("bench --only=", r"unknown bench section\(s\) \[''\]", id="bench-only-empty"),
    case("bench --quick=3", r"argument --quick: ignored explicit argument '3'", id="bench-quick"),
]


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
    assert not os.path.exists(Path(files["d"]) / "no")  # nor a missing output directory


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
    from stepsim._ground import atomic as _atomic
    from stepsim.cli import args as cli_args

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(cli_args.tempfile, "TemporaryFile", full)
        assert main(["compress", files["good"], "-o", files["out"]]) == 2
        err = _error_lines(capsys.readouterr().err)
        assert len(err) == 1 and "cannot write in" in err[0] and "No space left" in err[0]

    with monkeypatch.context() as patch:  # the disk fills while the result is written
        patch.setattr(_atomic.Path, "write_bytes", full)
        rc = main(["theorem1", "--trials", "4", "--dim", "2", "--horizon", "10", "--quiet",
                   "--json", files["out_json"]])  # quiet: no progress line on a slow day
    captured = capsys.readouterr()
    assert rc == 1 and "Traceback" not in captured.err
    err = _error_lines(captured.err)
    assert len(err) == 1 and "No space left on device" in err[0]
    assert not os.path.exists(files["out_json"])
    assert not [p for p in os.listdir(files["d"]) if p.startswith(".out.json")]


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
