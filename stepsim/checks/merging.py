"""A check's report merged into the report already in its directory, never overwriting it
silently.

A check of some claims (or problems) in a directory whose report holds others merges into
it: the other claims' results and figures stay, the learning rates and tuning tables are
merged config by config, the stability map is made again for the settings this check
tuned, and ``compute`` counts every finished run in ``runs/`` (or the old report's count,
if larger) — provided both were made in the same mode under the same protocol rules;
otherwise :func:`previous_report` refuses, in one line, before any work.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from stepsim.checks.drawing import FIGURES_DIR
from stepsim.checks.outputs import RUN_ID_FILE, Report, load_report
from stepsim.checks.registry import ORDER


def protocol_record(altered: bool, names=(), rules=None) -> dict:
    """What the report records of the protocol: the commit of PROTOCOL.md, the SHA-256 of
    the rules (default the protocol's), its draft, whether a test altered the run lengths
    or learning rates, and for each extra comparison among ``names`` ("S1") its own rules'
    SHA-256 and commit (``extras``)."""
    from stepsim.checks import protocol

    rules = protocol.RULES if rules is None else rules
    out = {"commit": protocol.protocol_commit(), "rules_sha256": rules.digest,
           "rules_version": rules.version, "altered_for_testing": bool(altered)}
    extras = {c: protocol.extra_record(c) for c in names if c in protocol.EXTRAS}
    if extras:
        out["extras"] = extras
    return out


def covers(covered: set, claim) -> bool:
    """Whether a check covering ``covered`` ((claim, setting) pairs) redoes ``claim``, a
    verdict of an earlier report: its setting, or the setting its operating point or tied
    lr ("digits/main@sr-ste 1:8 lr=0.001") belongs to, is covered."""
    return ((claim.claim, claim.setting) in covered
            or (claim.claim, claim.setting.split("@")[0]) in covered)


def previous_report(out_dir, mode: str, record: dict, covered: set) -> Report | None:
    """The report already in ``out_dir`` that a check covering ``covered`` ((claim,
    setting) pairs) under protocol ``record`` (:func:`protocol_record`) merges into: None
    when there is none or this check covers all of its verdicts (then it is replaced, as
    a resumed check replaces its own). A report of another mode, other protocol rules or
    a test's altered settings is refused with a one-line ValueError, before any work:
    merging would mix evidence of two kinds."""
    path = Path(out_dir) / "report.json"
    figures = Path(out_dir) / FIGURES_DIR
    if figures.exists() and not path.exists() and not (figures / RUN_ID_FILE).exists():
        # the report's figures replace out_dir/figures whole: never a folder it did not write
        raise ValueError(f"--out {out_dir} holds a {FIGURES_DIR}/ folder that no stepsim check "
                         f"wrote (no report.json, no {FIGURES_DIR}/{RUN_ID_FILE}); choose "
                         f"another --out")
    if not path.exists():
        return None
    try:
        old = load_report(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--out {out_dir}: its report.json cannot be read ({exc}); move it "
                         f"away or choose another --out") from None
    others = sorted({c.claim for c in old.claims if not covers(covered, c)}, key=ORDER.index)
    if not others:
        return None
    why = None
    if old.mode != mode:
        why = f"a {old.mode}-mode report"
    elif old.protocol.get("rules_sha256") != record["rules_sha256"]:
        draft = old.protocol.get("rules_version")
        why = (f"a report made under protocol draft {draft} (this check runs draft "
               f"{record['rules_version']})" if draft != record["rules_version"]
               else "a report made under other protocol rules")
    elif bool(old.protocol.get("altered_for_testing")) != record["altered_for_testing"]:
        why = "a report made with " + ("altered" if not record["altered_for_testing"]
                                       else "the registered") + \
            " run lengths or learning rates"
    if why:
        raise ValueError(f"--out {out_dir} holds {why} with claims {', '.join(others)} that "
                         f"this check would not redo; choose another --out, or check all "
                         f"its claims to replace it")
    return old


def tables(old: dict, new: dict) -> dict:
    """setting -> config -> value tables merged config by config (``new`` wins)."""
    out = {k: dict(v) for k, v in old.items()}
    for setting, configs in new.items():
        out[setting] = {**out.get(setting, {}), **configs}
    return out


def numbers(tuning: dict) -> dict:
    """A tuning table read back from report.json with its numbers as floats (JSON keeps a
    diverged grid value's mean, inf, as the text "inf")."""
    return {setting: {key: dict(t, grid=[float(g) for g in t["grid"]],
                                means=[float(m) for m in t["means"]])
                      for key, t in configs.items()}
            for setting, configs in tuning.items()}


def merged_record(old: dict, now: dict) -> dict:
    """The protocol record of a merged report: this check's, with the extras of both and
    the earlier check's commit kept in ``earlier_commits`` when it differs (the claims it
    decided name the PROTOCOL.md commit they ran under)."""
    out = dict(now)
    extras = {**(old.get("extras") or {}), **(now.get("extras") or {})}
    if extras:
        out["extras"] = extras
    earlier = [c for c in [*(old.get("earlier_commits") or []), old.get("commit")]
               if c and c != now.get("commit")]
    if earlier:
        out["earlier_commits"] = list(dict.fromkeys(earlier))
    for key in ("choices", "provisional_configs"):
        out.pop(key, None)
    out.update(_merged_choices(old, now))
    return out


def _merged_choices(old: dict, now: dict) -> dict:
    """Quick mode's provisional choices in a merged report: ``choices``, the label (the
    verdicts kept from the old report rest on its choices, so its label stays beside this
    check's), and ``provisional_configs``, the configs whose choices are provisional
    (both checks'; none kept when either had every choice provisional: a label without
    them)."""
    out = {}
    labels = [r["choices"] for r in (now, old) if r.get("choices")]
    if labels:
        out["choices"] = (labels[0] if len(set(labels)) == 1 else
                          f"{labels[0]}; for the verdicts kept from the earlier check: "
                          f"{labels[1]}")
    if not any(r.get("choices") and not r.get("provisional_configs") for r in (now, old)):
        marked = {}
        for r in (now, old):
            for problem, configs in (r.get("provisional_configs") or {}).items():
                marked[problem] = sorted({*marked.get(problem, ()), *configs})
        if marked:
            out["provisional_configs"] = marked
    return out


def check_ledger(old: dict | None, this_check: dict, stopped=()) -> dict:
    """The checks that made a report, oldest first: the old report's ledger (``old``: its
    ``compute``; a report from before the ledger adds none), the checks that stopped
    before their report in the same folder since (``stopped``: entries with ``"stopped":
    True``, :mod:`stepsim.checks.stopped`), and ``this_check``, with ``wall_s`` their sum.
    A first check, each resume and each merge is one entry; every finished run counts in
    ``worker_s``, whoever ran it."""
    checks = [*(old or {}).get("checks", []), *stopped, this_check]
    return {"checks": checks, "wall_s": sum(c["wall_s"] or 0.0 for c in checks)}


def replaced_ledger(out_dir, mode: str, record: dict) -> dict:
    """The ``compute`` of the report in ``out_dir`` that a check replaces whole (it covers
    every verdict: :func:`previous_report` gave None) when that report was made in the same
    mode under the same rules — its checks made the runs this one finds in the store, so
    they stay in the ledger; else {} (no report, or one of another kind)."""
    path = Path(out_dir) / "report.json"
    if not path.exists():
        return {}
    try:
        old = load_report(path)
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    same = old.mode == mode and old.protocol.get("rules_sha256") == record["rules_sha256"]
    return dict(old.compute or {}) if same else {}


def close_ledger(compute: dict, wall_s: float) -> dict:
    """``compute`` with this check (the ledger's last entry) taking ``wall_s`` seconds, and
    the ledger's total again."""
    checks = [*compute["checks"][:-1], {**compute["checks"][-1], "wall_s": wall_s}]
    return {**compute, "checks": checks, "wall_s": sum(c["wall_s"] or 0.0 for c in checks)}


def store_compute(root: Path) -> dict:
    """{"runs", "worker_s"} of every finished run and task in a RunStore folder: what a
    merged report rests on (its claims were decided by several checks)."""
    import json

    runs, seconds = 0, 0.0
    for path in Path(root).glob("[!.]*.json"):
        try:
            value = json.loads(path.read_text())["provenance"]["params"].get("runtime_s")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        runs += 1
        seconds += float(value or 0.0)
    return {"runs": runs, "worker_s": seconds}


@dataclasses.dataclass(frozen=True)
class Merged:
    """The pieces of a report after the merge: claims (this check's, then the old report's
    kept ones), tuning, lrs, skipped, protocol record, compute, the stability map's input
    and the settings whose map is made again (None: every setting of the input), the old
    report's stability map and figures to keep, and the kept figures to copy."""

    claims: list
    tuning: dict
    lrs: dict
    skipped: list
    protocol: dict
    compute: dict
    stability_input: dict
    remake: set | None = None
    old_stability: dict = dataclasses.field(default_factory=dict)
    old_stability_figures: list = dataclasses.field(default_factory=list)
    kept_figures: list = dataclasses.field(default_factory=list)


def merge(old: Report | None, new: Merged, covered: set, stored: dict | None) -> Merged:
    """``new`` (this check's pieces) merged with ``old`` (None: nothing to merge). stored:
    :func:`store_compute` of the report directory's runs/."""
    if old is None:
        return new
    kept = [c for c in old.claims if not covers(covered, c)]
    remake = set(new.stability_input)
    tuning = tables(numbers(old.tuning), new.tuning)
    stability = None if new.stability_input is new.tuning else tables(
        tuning, new.stability_input)  # --extended's seeds joined to the merged table
    before = old.operating or {}
    compute = dict(new.compute, **{key: max((stored or {}).get(key, new.compute[key]),
                                            old.compute.get(key, 0))
                                   for key in ("runs", "tuning_runs", "worker_s")})
    return Merged(
        claims=[*new.claims, *kept], tuning=tuning, lrs=tables(old.lrs, new.lrs),
        skipped=list(dict.fromkeys([*before.get("skipped", []), *new.skipped])),
        protocol=merged_record(old.protocol, new.protocol), compute=compute,
        stability_input=tuning if stability is None else stability, remake=remake,
        old_stability=dict(before.get("stability", {})),
        old_stability_figures=list(before.get("stability_figures", [])),
        kept_figures=[f for c in kept for f in c.figures])


__all__ = ["Merged", "check_ledger", "close_ledger", "covers", "merge", "merged_record",
           "numbers", "previous_report", "protocol_record", "replaced_ledger", "store_compute",
           "tables"]
