"""`stepsim theorem1` end to end on a tiny case, and the lazy-import contract."""

from __future__ import annotations

import subprocess
import sys

from stepsim._ground.provenance import load_json
from stepsim.cli import main


def test_cli_tiny_run_writes_json_and_png(tmp_path, capsys):
    out_json, out_png = tmp_path / "r.json", tmp_path / "fig" / "r.png"
    out_png.parent.mkdir()  # stepsim makes no directory for an output
    code = main(["theorem1", "--process", "ar1", "--param", "rho=0.99", "--beta2", "0.99",
                 "--trials", "12", "--dim", "3", "--horizon", "200", "--seed", "4",
                 "--json", str(out_json), "--plot", str(out_png)])
    assert code == 0
    text = capsys.readouterr().out
    assert "process ar1 (rho=0.99)" in text and "overall over" in text
    doc = load_json(out_json)
    result, prov = doc["result"], doc["provenance"]
    assert result["process"] == "ar1" and result["trials"] == 12 and result["dim"] == 3
    rows = result["rows"]
    assert rows[-1]["lag"] == 200 and all(r["coord"]["verdict"] for r in rows)
    assert prov["seed"] == 4 and prov["params"]["param"] == ["rho=0.99"]
    assert prov["versions"]["numpy"]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_same_seed_same_numbers(tmp_path):
    args = ["theorem1", "--beta2", "0.9", "--trials", "5", "--dim", "2", "--horizon", "30"]
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for p in paths:
        assert main(args + ["--json", str(p)]) == 0
    a, b = (load_json(p)["result"] for p in paths)
    a.pop("seconds"), b.pop("seconds")
    assert a["rows"] == b["rows"] and a == b


def test_cli_list_processes_and_errors(capsys):
    assert main(["theorem1", "--list-processes"]) == 0
    listed = capsys.readouterr().out
    for name in ("uniform", "ar1", "regime", "drift", "decay", "NONSTATIONARY"):
        assert name in listed
    assert main(["theorem1", "--delta", "2"]) == 2
    assert "delta" in capsys.readouterr().err
    assert main(["theorem1", "--k0", "soon"]) == 2
    assert main(["theorem1", "--param", "rho"]) == 2
    assert main(["theorem1", "--process", "nope"]) == 2


def test_import_is_lazy():
    code = ("import sys, stepsim.theorem1, stepsim.cli.theorem1; "
            "print('numba' in sys.modules, 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
