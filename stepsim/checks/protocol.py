"""The registered protocol of ``stepsim check`` in code: ``paper_checks/PROTOCOL.md``.

:data:`DRAFTS` holds every draft's numbers as the document states them (problems, N:M,
seeds, learning-rate grids, run lengths, margins, alpha, the operating points):
``PROTOCOL.md`` repeats draft 3's as a JSON block between its ``RULES`` markers and each
later draft's changes in a block of its own (``RULES 4`` markers), appended, so earlier
drafts stay byte for byte. A report declares its draft (``rules_version``) and is checked
against exactly that draft's rules and digest, and a test fails when code and document
disagree for any draft. :data:`RULES` is the current draft (:data:`CURRENT`) as a typed,
validated :class:`~stepsim.checks.rules.Rules` (``RULES.seeds.quick``); the report
records its digest (:func:`rules_digest`, SHA-256 of the canonical JSON of the draft's
rules) and :func:`protocol_commit` (the git commit that last changed ``PROTOCOL.md``).

Vocabulary:

* a **problem** is one of ``RULES.problems`` ("digits", "lm"): a registry problem with
  fixed options, its N:M ratios, its error unit and margin;
* a **timescale** is "main" (beta2 = 0.999, T_w = 1000, T = 5000) or "fast" (time-scaled:
  beta2 = 0.99, T_w = 100, T = 2000);
* a **config** is what one learning rate is chosen for: optimizer, tuned recipe and N:M
  (or layer-wise M), written ``"adam|sr-ste|1:8"``; the STEP readings reuse SR-STE's
  (:data:`TUNED_AS`).

Importing this module imports neither NumPy nor numba.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from stepsim._ground.switch_steps import CLIP_BOUNDS
from stepsim.checks.rules import Rules, SuccessorRules, canonical, digest

#: Draft 3's numbers (PROTOCOL.md, the JSON block between the first RULES markers): the
#: rules of the committed report figures/check/report.json, kept unchanged.
RULES_3 = {
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
    "clip": list(CLIP_BOUNDS),  # AutoSwitch's clip, defined once (stepsim._ground.switch_steps)
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

#: Draft 4's changes (PROTOCOL.md, "Draft 4", the block between the RULES 4 markers): its
#: top-level keys replace or join draft 3's.
CHANGES_4 = {
    "version": 4,
    "operating_points": {
        "claims": ["C5", "C6"],
        "step_lr": {"own": ["step-a1", "step-sr"]},
        "tie": {"se": 1.0, "readings": {"digits": ["A1", "SR"], "lm": ["SR"]}},
        "switch_fractions": {"fractions": [0.3, 0.5],
                             "readings": {"digits": ["A1", "SR"], "lm": ["SR"]}},
        "schedules": {"cosine-warmup": {"schedule": "cosine", "warmup_fraction": 0.1,
                                        "problems": ["digits"]}},
    },
    "plateau": {"window": 20, "max_ratio": 0.9, "claims": ["C5", "C6", "C9"]},
    "stability": {"level": 0.95},
    "v_star": {"c4_eq10": ["raw", "bias-corrected"], "c4_eq10_decides": "bias-corrected"},
    "diagnostics": {"after_switch": [1, 10, 100], "quantiles": [0.5, 0.99]},
    "extended": {"readings": {"lm": ["A1", "SR"]}, "schedule_problems": ["digits", "lm"],
                 "stability_seeds": [1003, 1004, 1005, 1006, 1007]},
    # "Draft 4: statistics": C7's landing by a fired rate, divergence as its own outcome
    "c7_landing": {"interval": [0.1, 0.3], "fired_rate": 0.5, "loss_scales": [1.0, 0.01]},
    "divergence": {"min_finite_pairs": 3, "test": "exact McNemar, two-sided"},
}

#: Draft 5's changes (PROTOCOL.md, "Draft 5", the block between the RULES 5 markers): its
#: top-level keys replace or join draft 4's.
CHANGES_5 = {'version': 5,
             'problems': {'digits': {'registry': 'digits',
                                     'options': {'hidden': [64],
                                                 'test_fraction': 0.5,
                                                 'batch_size': 128,
                                                 'validation_fraction': 0.25},
                                     'nms': [[1, 8], [1, 16]],
                                     'units': 'error points (%)',
                                     'margin': 0.5,
                                     'timescales': ['main']},
                          'lm': {'registry': 'lm',
                                 'options': {'vocab': 16,
                                             'order': 2,
                                             'temperature': 0.7,
                                             'context': 32,
                                             'width': 32,
                                             'blocks': 2,
                                             'heads': 2,
                                             'batch_size': 32,
                                             'n_test': 512,
                                             'n_validation': 512},
                                 'nms': [[2, 4], [1, 8]],
                                 'units': 'nats (test-loss gap to the entropy floor)',
                                 'margin': 0.02,
                                 'timescales': ['fast']},
                          'mnist1d': {'registry': 'mnist1d',
                                      'options': {'channels': [16, 16, 16],
                                                  'kernel_sizes': 3,
                                                  'strides': 2,
                                                  'sparsify': 'all',
                                                  'batch_size': 64,
                                                  'n_train': 4000,
                                                  'n_validation': 500,
                                                  'n_test': 1000,
                                                  'seed': 42},
                                      'nms': [[1, 4], [1, 8]],
                                      'units': 'error points (%)',
                                      'margin': 1.0,
                                      'timescales': ['cnn']}},
             'timescales': {'main': {'beta2': 0.999, 'steps': 5000},
                            'fast': {'beta2': 0.99, 'steps': 2000},
                            'cnn': {'beta2': 0.999, 'steps': 3000}},
             'claims': {'digits': ['C1', 'C2', 'C3', 'C4', 'C5', 'C6', 'C7', 'C8', 'C9', 'C10'],
                        'lm': ['C1', 'C2', 'C5', 'C6'],
                        'mnist1d': ['C1', 'C2', 'C5', 'C6'],
                        'none': ['C11', 'C12']},
             'grids': {'digits': {'adam': [0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03],
                                  'sgdm': [0.003, 0.01, 0.03, 0.1, 0.3, 1.0]},
                       'lm': {'adam': [0.003, 0.01, 0.03, 0.1], 'sgdm': [0.1, 0.3, 1.0, 3.0]},
                       'mnist1d': {'adam': [0.001, 0.003, 0.01, 0.03, 0.1],
                                   'sgdm': [0.01, 0.03, 0.1, 0.3]}},
             'splits': {'choices': 'validation', 'verdicts': 'test'},
             'regularisers': {'sr-ste': {'lam': [0.0002, 0.002, 0.02, 0.2]},
                              'step-sr': {'srste_lam': [0.0002, 0.002, 0.02, 0.2]},
                              'lw-sr-ste': {'lam': [0.0002, 0.002, 0.02, 0.2],
                                            'domino_decay': [2e-05, 0.0002, 0.002]},
                              'lw-step-sr': {'srste_lam': [0.0002, 0.002, 0.02, 0.2]},
                              'md-dense': {'decay': [6e-06, 6e-05, 0.0006]},
                              'md-nm': {'decay': [6e-06, 6e-05, 0.0006]},
                              't-sr-ste': {'lam': [0.0002, 0.002, 0.02, 0.2]}},
             'tuning': {'edge': {'extend_once': True},
                        'halving': {'rule': 'SH-3/2',
                                    'recipes': ['dense', 'sr-ste'],
                                    'rungs': [0.25, 0.5],
                                    'keep_after_first': 'third',
                                    'finalists': 2,
                                    'per_regulariser_value': True,
                                    'from_scratch': True}},
             'readings': {'primary': {'lr': ['in-place', 'own'], 'step': ['A1', 'SR']},
                          'step_claims': ['C4', 'C5', 'C6', 'C7', 'C8', 'C9'],
                          'secondary': {'freeze-sparse': {'claims': ['C5', 'C6', 'C8'],
                                                          'lr': ['in-place']},
                                        'fractions': {'claims': ['C5', 'C6'],
                                                      'fractions': [0.3, 0.5],
                                                      'lr': ['in-place']},
                                        'cosine-warmup': {'claims': ['C5', 'C6'],
                                                          'problems': [],
                                                          'lr': ['in-place', 'own']},
                                        'tie': {'claims': ['C5', 'C6']}},
                          'diverging': {'more_than': 0.5}},
             'premise': {'at': 'margin',
                         'harm': {'C1': 'gap_sgdm - gap_adam',
                                  'C5': 'e(step) - e(b)',
                                  'C6': 'e(step) - e(b)',
                                  'C8': 'e(frozen) - e(updated)',
                                  'C9': 'e(step) - e(b)',
                                  'C10': 'e(with dense) - e(no dense)'}},
             'claim_rules': {'C1': {'primary': 'every N:M'},
                             'C2': {'primary': 'direction parts', 'secondary': 'size'},
                             'C3': {'primary': 'every loss scale'},
                             'C4': {'primary': 'every criterion and loss scale'},
                             'C5': {'primary': 'every baseline and N:M'},
                             'C6': {'primary': 'every baseline and N:M'},
                             'C7': {'primary': 'every fraction and both landing parts'},
                             'C8': {'primary': 'raw v* at both switches',
                                    'secondary': 'bias-corrected v*'},
                             'C9': {'primary': 'every M'},
                             'C10': {'primary': 'every N:M'},
                             'C11': {'primary': 'part (a)', 'secondary': 'parts (b), (c)'},
                             'C12': {'primary': 'the numbers',
                                     'secondary': 'the metadata sentence'},
                             'reading': 'reproduced when every primary part with its premise '
                                        'present is, and one is',
                             'claim': 'reproduced when some primary reading is; not reproduced '
                                      'when every primary reading is'},
             'error_control': {'reproduced': 'alpha / K per part, K = primary readings',
                               'not_reproduced': 'Holm over every part of the claim at alpha'},
             'intervals': {'primary': 't, seeds x items SE',
                           'bootstrap': {'resamples': 20000, 'seed': 20261128},
                           'decide': 'both agree'},
             'divergence': {'min_finite_pairs': 3,
                            'test': 'exact McNemar, one-sided per direction',
                            'blowup': {'window': 20, 'multiple': 10.0},
                            'extension_seeds': [8, 9, 10, 11, 12, 13, 14, 15]},
             'tie': {'se': 1.0, 'se_kind': 'seeds x items, validation'},
             'freeze_scope': {'registered': 'all', 'options': ['all', 'sparse']},
             's1': {'masked_decay_transposable': True, 'margin': 'problem'},
             'budget': {'full_minutes': 90, 'quick_minutes': 3, 'cores': 2},
             'bimodal': {'far_margins': 20.0, 'extend': True,
                         'not_reproduced': "after the extension, where the part's values "
                                           "show both modes",
                         'part_far_values': 2},
             'quick': {'problems': ['digits', 'lm', 'mnist1d'],
                       'timescale': 'fast',
                       'steps': {'digits': 2000, 'lm': 500, 'mnist1d': 1000},
                       'claims': {'digits': ['C1',
                                             'C2',
                                             'C3',
                                             'C4',
                                             'C5',
                                             'C6',
                                             'C7',
                                             'C8',
                                             'C9',
                                             'C10'],
                                  'lm': ['C5'],
                                  'mnist1d': ['C1', 'C5']},
                       'nms': {'lm': [[2, 4]], 'mnist1d': [[1, 4]]},
                       'own_claims': ['C5', 'C6']},
             'extended': {'readings': {'lm': ['A1', 'SR']},
                          'schedule_problems': ['digits', 'lm'],
                          'stability_seeds': [1003, 1004, 1005, 1006, 1007],
                          'agreement': {'claim': 'C5',
                                        'problem': 'digits',
                                        'nm': [1, 8],
                                        'timescales': ['main', 'fast']},
                          'problems': ['lm'],
                          'secondary_problems': ['digits', 'mnist1d'],
                          'claims': ['C9', 'S1']}}

#: draft -> its full rules. A report declares its draft (``rules_version``) and is checked
#: against exactly that draft's rules and digest; later drafts only append to PROTOCOL.md.
DRAFTS = {3: RULES_3, 4: {**RULES_3, **CHANGES_4}}
DRAFTS[5] = {**DRAFTS[4], **CHANGES_5}
#: the draft this code runs
CURRENT = 5
#: every number the current draft fixes, typed and validated once (``rules.Rules``)
RULES = Rules.parse(DRAFTS[CURRENT], f"draft {CURRENT}'s rules")
#: every draft's rules typed (a report is checked against its own draft's)
TYPED = {d: RULES if d == CURRENT else Rules.parse(DRAFTS[d], f"draft {d}'s rules")
         for d in (4, 5)}

#: The successors comparison S1 (PROTOCOL.md, "S1", the block between the RULES S1 markers):
#: beyond the paper, its own rules and digest; draft 4's RULES and digest are untouched.
#: recipes: key -> [registry recipe, options] of the recipes new to S1 (tuned as a
#: baseline, section 3); "dense", "sr-ste" and STEP ("step_lr": "own": the own-lr reading
#: of "STEP at its own tuned learning rate") are the claims' runs. dense_result: recipes
#: whose trained model is dense.
RULES_S1 = {
    "id": "S1",
    "settings": {"digits": {"timescale": "main", "nms": [[1, 8], [1, 16]]},
                 "lm": {"timescale": "fast", "nms": [[2, 4]]}},
    "quick": {"problem": "digits", "timescale": "fast", "nms": [[1, 8]]},
    "reference": "dense",
    "baseline": "sr-ste",
    "step": {"readings": ["A1", "SR"], "lr": "own"},
    "recipes": {"s-ste": ["s-ste", {}],
                "md-dense": ["masked-decay", {}],
                "md-nm": ["masked-decay", {"dense_tail": 0.0}],
                "t-sr-ste": ["sr-ste", {"lam": 2e-4, "transposable": True}],
                "s-ste-step": ["s-ste-step", {}]},
    "dense_result": ["md-dense"],
    "successors": ["s-ste", "md-nm"],
    "margin": 0.0,
    "flip_tail": 0.1,
}
#: extra comparison -> its rules, typed (a report records each one's SHA-256 beside the
#: draft's)
EXTRAS = {"S1": SuccessorRules.parse(RULES_S1, "the rules of S1")}

#: recipe key -> the config key's recipe whose tuned lr it reuses (the paper: STEP reuses
#: the hyper-parameters tuned for SR-STE)
TUNED_AS = {"step-a1": "sr-ste", "step-sr": "sr-ste", "step-a1-bc": "sr-ste",
            "step-sr-bc": "sr-ste", "step-a1-vupd": "sr-ste", "step-sr-vupd": "sr-ste",
            "lw-step-a1": "lw-sr-ste", "lw-step-sr": "lw-sr-ste"}
#: the two readings of STEP (PROTOCOL §5): reading -> extra recipe options
READINGS = {"A1": {}, "SR": {"srste_lam": RULES.srste_lam}}

PROTOCOL_PATH = Path(__file__).resolve().parents[2] / "paper_checks" / "PROTOCOL.md"
BEGIN, END = "<!-- RULES BEGIN -->", "<!-- RULES END -->"


def rules_digest(rules=None) -> str:
    """SHA-256 (hex) of the canonical JSON of ``rules`` (a dict as registered, or a typed
    record; default :data:`RULES`)."""
    return digest(RULES if rules is None else rules)


def markers(draft) -> tuple[str, str]:
    """The (begin, end) markers of ``draft``'s JSON block in PROTOCOL.md (draft 3: the
    first RULES block, its full rules; a later draft: the block of its changes; an extra
    such as "S1": its own full rules)."""
    if isinstance(draft, str):
        return f"<!-- RULES {draft} BEGIN -->", f"<!-- RULES {draft} END -->"
    if draft <= 3:
        return BEGIN, END
    return f"<!-- RULES {draft} BEGIN -->", f"<!-- RULES {draft} END -->"


def _block(text: str, draft: int, where) -> dict:
    import re

    begin, end = markers(draft)
    if begin not in text or end not in text:
        raise ValueError(f"{where} has no {begin} ... {end} block")
    block = text.split(begin, 1)[1].split(end, 1)[0]
    found = re.findall(r"```json\n(.*?)```", block, flags=re.DOTALL)
    if len(found) != 1:
        raise ValueError(f"the RULES block must hold exactly one ```json block, found {len(found)}")
    return json.loads(found[0])


def document_rules(path=None, draft: int | None = None) -> dict:
    """The full rules of ``draft`` (default :data:`CURRENT`) as PROTOCOL.md states them:
    draft 3's JSON block, then each later draft's block of changes over it, in order."""
    draft = CURRENT if draft is None else int(draft)
    if draft not in DRAFTS:
        raise ValueError(f"draft must be one of {sorted(DRAFTS)}, got {draft!r}")
    where = path or PROTOCOL_PATH
    text = Path(where).read_text()
    rules = _block(text, 3, where)
    for d in range(4, draft + 1):
        rules = {**rules, **_block(text, d, where)}
    return rules


def document_extra(name: str, path=None) -> dict:
    """The rules of extra comparison ``name`` ("S1") as PROTOCOL.md states them."""
    if name not in EXTRAS:
        raise ValueError(f"extra must be one of {sorted(EXTRAS)}, got {name!r}")
    where = path or PROTOCOL_PATH
    return _block(Path(where).read_text(), name, where)


def extra_record(name: str) -> dict:
    """What a report records of extra comparison ``name``: its rules' SHA-256 and the
    commit of PROTOCOL.md it ran under (``protocol_commit``)."""
    return {"rules_sha256": EXTRAS[name].digest, "commit": protocol_commit()}


def draft_of(record: dict) -> int:
    """The draft a report's protocol record (``report.json``'s ``protocol``) declares, after
    checking that its rules digest is exactly that draft's. ValueError otherwise (an
    unknown draft, or a digest of other rules: the report was not made under its draft)."""
    version = record.get("rules_version") if isinstance(record, dict) else None
    if version not in DRAFTS:
        raise ValueError(f"the report declares protocol draft {version!r}; known drafts: "
                         f"{sorted(DRAFTS)}")
    if record.get("rules_sha256") != rules_digest(DRAFTS[version]):
        raise ValueError(f"the report declares draft {version} but its rules digest "
                         f"{record.get('rules_sha256')!r} is not draft {version}'s "
                         f"({rules_digest(DRAFTS[version])})")
    return version


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


def nm_label(nm) -> str:
    return f"{nm[0]}:{nm[1]}"


def config_key(optimizer: str, recipe: str, nm=None, m: int | None = None, *,
               own: bool = False) -> str:
    """The key of one learning-rate choice: "optimizer|tuned recipe|N:M" (or "|M16" for a
    layer-wise recipe, "|-" for dense). STEP's recipes map to SR-STE's choice
    (:data:`TUNED_AS`) unless ``own`` (draft 4: STEP tuned for itself, "adam|step-a1|1:8")."""
    if not own:
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


__all__ = ["CURRENT", "DRAFTS", "EXTRAS", "READINGS", "RULES", "RULES_S1", "TUNED_AS",
           "canonical", "config_key", "document_extra", "document_rules", "draft_of",
           "extra_record", "markers", "nm_label", "parse_key", "protocol_commit",
           "rules_digest"]
