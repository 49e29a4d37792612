"""The registered protocol of ``stepsim check`` in code: ``paper_checks/PROTOCOL.md``, §1-§6.

:data:`RULES` holds every number the protocol fixes (problems, N:M, seeds, learning-rate
grids, run lengths, margins, alpha); ``PROTOCOL.md`` repeats it as a JSON block between its
``RULES`` markers, and a test fails when the two differ. The report records
:func:`rules_digest` (SHA-256 of the canonical JSON of :data:`RULES`) and
:func:`protocol_commit` (the git commit that last changed ``PROTOCOL.md``).

Vocabulary:

* a **problem** is one of ``RULES["problems"]`` ("digits", "lm"): a registry problem with
  fixed options, its N:M ratios, its error unit and margin;
* a **timescale** is "main" (beta2 = 0.999, T_w = 1000, T = 5000) or "fast" (time-scaled:
  beta2 = 0.99, T_w = 100, T = 2000);
* a **config** is what one learning rate is chosen for: optimizer, tuned recipe and N:M
  (or layer-wise M), written ``"adam|sr-ste|1:8"``; the STEP readings reuse SR-STE's
  (:data:`TUNED_AS`).

Importing this module imports neither NumPy nor numba.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from stepsim._switch_steps import CLIP_BOUNDS

#: Every number the protocol fixes (PROTOCOL.md, the JSON block inside RULES).
RULES = {
    "version": 3,
    "problems": {
        "digits": {"registry": "digits",
                   "options": {"hidden": [64], "test_fraction": 0.5, "batch_size": 128},
                   "nms": [[1, 8], [1, 16]], "units": "error points (%)", "margin": 0.5,
                   "timescales": ["main", "fast"]},
        "lm": {"registry": "lm",
               "options": {"vocab": 16, "order": 2, "temperature": 0.7, "context": 32,
                           "width": 32, "blocks": 2, "heads": 2, "batch_size": 32,
                           "n_test": 512},
               "nms": [[2, 4], [1, 8]], "units": "nats (test-loss gap to the entropy floor)",
               "margin": 0.02, "timescales": ["fast"]},
    },
    "seeds": {"tuning": [1000, 1001, 1002], "full": [0, 1, 2, 3, 4, 5, 6, 7],
              "quick": [0, 1, 2]},
    "grids": {"digits": {"adam": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2],
                         "sgdm": [3e-3, 0.01, 0.03, 0.1, 0.3, 1.0]},
              "lm": {"adam": [3e-3, 1e-2, 3e-2, 1e-1], "sgdm": [0.1, 0.3, 1.0, 3.0]}},
    "momentum": 0.9,
    "srste_lam": 2e-4,
    "timescales": {"main": {"beta2": 0.999, "steps": 5000},
                   "fast": {"beta2": 0.99, "steps": 2000}},
    "clip": list(CLIP_BOUNDS),  # AutoSwitch's clip, defined once (stepsim._switch_steps)
    "eval_points": 10,
    "alpha": 0.05,
    "claims": {"digits": ["C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10"],
               "lm": ["C1", "C2", "C5", "C6"], "none": ["C11", "C12"]},
    "agreement": {"claim": "C5", "problem": "digits", "nm": [1, 8],
                  "timescales": ["main", "fast"]},
    "quick": {"problems": ["digits"], "timescale": "fast"},
    "layerwise": {"ms": [8, 16], "target": 0.75},
    "c4_loss_scales": [0.01, 1.0, 100.0],
    "c7_fractions": [0.1, 0.2, 0.4, 0.6, 0.8],
    "c7_landing": {"interval": [0.1, 0.3], "fired_at_least": 0.75, "loss_scales": [1.0, 0.01]},
    "c8_switch_windows": [0.4, 1.6],
    "c3_margin_decades": 0.1,
}

#: recipe key -> the config key's recipe whose tuned lr it reuses (the paper: STEP reuses
#: the hyper-parameters tuned for SR-STE)
TUNED_AS = {"step-a1": "sr-ste", "step-sr": "sr-ste", "step-a1-bc": "sr-ste",
            "step-sr-bc": "sr-ste", "step-a1-vupd": "sr-ste", "step-sr-vupd": "sr-ste",
            "lw-step-a1": "lw-sr-ste", "lw-step-sr": "lw-sr-ste"}
#: the two readings of STEP (PROTOCOL §5): reading -> extra recipe options
READINGS = {"A1": {}, "SR": {"srste_lam": RULES["srste_lam"]}}

PROTOCOL_PATH = Path(__file__).resolve().parents[2] / "paper_checks" / "PROTOCOL.md"
BEGIN, END = "<!-- RULES BEGIN -->", "<!-- RULES END -->"


def canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def rules_digest(rules: dict | None = None) -> str:
    """SHA-256 (hex) of the canonical JSON of ``rules`` (default :data:`RULES`)."""
    return hashlib.sha256(canonical(RULES if rules is None else rules).encode()).hexdigest()


def document_rules(path=None) -> dict:
    """The JSON block (```json ... ```) between PROTOCOL.md's RULES markers, parsed."""
    import re

    text = Path(path or PROTOCOL_PATH).read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path or PROTOCOL_PATH} has no {BEGIN} ... {END} block")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    found = re.findall(r"```json\n(.*?)```", block, flags=re.DOTALL)
    if len(found) != 1:
        raise ValueError(f"the RULES block must hold exactly one ```json block, found {len(found)}")
    return json.loads(found[0])


def protocol_commit() -> str | None:
    """The git commit that last changed PROTOCOL.md (None outside a git checkout, or when
    the file has uncommitted changes: evidence must name a committed protocol)."""
    root = PROTOCOL_PATH.parents[1]
    try:
        dirty = subprocess.run(["git", "status", "--porcelain", "--", str(PROTOCOL_PATH)],
                               cwd=root, capture_output=True, text=True, timeout=20,
                               check=False)
        log = subprocess.run(["git", "log", "-1", "--format=%H", "--", str(PROTOCOL_PATH)],
                             cwd=root, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if dirty.returncode or log.returncode or dirty.stdout.strip():
        return None
    return log.stdout.strip() or None


def problem_rules(problem: str) -> dict:
    if problem not in RULES["problems"]:
        raise ValueError(f"problem must be one of {list(RULES['problems'])}, got {problem!r}")
    return RULES["problems"][problem]


def nm_label(nm) -> str:
    return f"{nm[0]}:{nm[1]}"


def config_key(optimizer: str, recipe: str, nm=None, m: int | None = None) -> str:
    """The key of one learning-rate choice: "optimizer|tuned recipe|N:M" (or "|M16" for a
    layer-wise recipe, "|-" for dense)."""
    recipe = TUNED_AS.get(recipe, recipe)
    where = f"M{m}" if m is not None else ("-" if nm is None else nm_label(nm))
    return f"{optimizer}|{recipe}|{where}"


def parse_key(key: str) -> tuple[str, str, tuple | None, int | None]:
    """(optimizer, recipe, nm, m) of a :func:`config_key`."""
    fields = key.split("|") if isinstance(key, str) else ()
    if len(fields) != 3:
        raise ValueError(f"config key must be 'optimizer|recipe|N:M' (or '|-', '|M16'), "
                         f"got {key!r}")
    optimizer, recipe, where = fields
    if where == "-":
        return optimizer, recipe, None, None
    if where.startswith("M"):
        return optimizer, recipe, None, int(where[1:])
    n, m = where.split(":")
    return optimizer, recipe, (int(n), int(m)), None


def grid(problem: str, optimizer: str) -> list[float]:
    return list(RULES["grids"][problem][optimizer])


def settings(mode: str, problems=None) -> list[tuple[str, str, tuple | None]]:
    """The (problem, timescale, only_claims) settings a check of ``mode`` runs, in report
    order: every problem at each of its timescales (the fast timescale on digits runs
    only the agreement claim in full mode, and everything in quick mode)."""
    chosen = list(RULES["problems"]) if problems is None else list(problems)
    for p in chosen:
        problem_rules(p)
    out = []
    quick = RULES["quick"]["problems"]
    if mode == "quick" and problems is not None and not set(chosen) <= set(quick):
        # refused, not ignored: a quick check of these would run nothing of them
        raise ValueError(f"problem {sorted(set(chosen) - set(quick))[0]!r} is not in quick "
                         f"mode, which runs only {quick}; check it in full mode")
    if mode == "quick":
        for p in RULES["quick"]["problems"]:
            if p in chosen:
                out.append((p, RULES["quick"]["timescale"], None))
        return out
    agreement = RULES["agreement"]
    for p in chosen:
        main = problem_rules(p)["timescales"][0]
        out.append((p, main, None))
        if p == agreement["problem"]:
            out.append((p, "fast", (agreement["claim"],)))
    return out


__all__ = ["READINGS", "RULES", "TUNED_AS", "config_key", "document_rules", "grid",
           "parse_key", "problem_rules", "protocol_commit", "rules_digest", "settings"]
