"""Run a set of paper checks and write their report: report.json, report.md, figures
(the files are written, and read back, by :mod:`stepsim.checks.report_files`).

:func:`run_checks` collects every claim's jobs (RunSpecs and Tasks), runs the distinct
ones once and only those not already in ``OUT/runs/`` (``stepsim.experiments``: in this
process, a process pool or a Dask cluster; a RunStore by digest), reads every job back
from the store, decides each claim by its module's rule, draws its figures aside and
writes, in this order (a kill never leaves new figures beside an old report.json):

* ``figures/`` swapped in (after the old report.json is removed), with ``RUN_ID``;

* ``report.md``: the verdict table (one line of evidence each), then per claim its rule,
  effect, numbers in brief and figure links;
* ``report.json`` last: ``{"result": {"mode", "claims": [ClaimResult...], "runtime_s",
  "run_id"}, "provenance": {...}}`` (``stepsim._ground.provenance.save_json``).

A claim's ``runtime_s`` is the wall time of its own jobs when they ran (shared jobs count
for each claim that uses them) plus its decision and figures.

Nothing is overwritten silently: a check of some claims (or problems) in a directory whose
report holds others merges into it — the other claims' results and figures stay, the
learning rates and tuning tables are merged by setting, and ``compute`` counts every
finished run in ``runs/`` (or the old report's count, if larger) — provided both were made
in the same mode under the same protocol rules; otherwise it refuses, in one line, before any work. A selection that
gives no verdict at all (e.g. ``C1 --quick --problem lm``: quick mode has no LM setting)
is an error, not an empty report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import time
import types
import uuid
from pathlib import Path

from stepsim.checks import ORDER, claim_module, parse_claims

RUNS_DIR = "runs"  # finished runs by digest (stepsim.experiments.store.RunStore)
FIGURES_DIR = "figures"
RUN_ID_FILE = "RUN_ID"  # in figures/: the run id of the report.json they belong to


@dataclasses.dataclass(frozen=True)
class Report:
    """mode, claims (tuple of ClaimResult, report order; one per claim and setting),
    runtime_s, out (directory), protocol (``protocol_record``), tuning (setting -> config
    -> {"grid", "means", "choice", "edge"}; empty when the lrs were not tuned in this run),
    lrs (setting -> config -> the learning rate used), compute ({"runs", "tuning_runs",
    "worker_s"}: every distinct run and task the report rests on and the sum of their own
    run times, also for runs a resumed check found finished)."""

    mode: str
    claims: tuple
    runtime_s: float
    out: str | None
    protocol: dict = dataclasses.field(default_factory=dict)
    tuning: dict = dataclasses.field(default_factory=dict)
    lrs: dict = dataclasses.field(default_factory=dict)
    compute: dict = dataclasses.field(default_factory=dict)
    # draft 4 (PROTOCOL §D4): {"stability": operating.stability_map, "switch_findings":
    # operating.switch_findings, "robustness": claim/setting -> the tie set's verdicts,
    # "skipped": operating points without a learning rate (quick mode), "extended": bool}
    operating: dict = dataclasses.field(default_factory=dict)

    def table(self) -> str:
        """The verdict table as plain text, one line per claim and setting."""
        label = "" if self.mode == "full" else f"[{self.mode}: indicative, not evidence]\n"
        return label + "\n".join(f"{c.claim:<4} {c.setting:<12} {c.verdict:<15} {c.reason}"
                                  for c in self.claims)


def default_out(mode: str) -> Path:
    """The default report directory: ``$STEPSIM_CHECK_DIR/MODE`` if set, else the user's
    cache (``$XDG_CACHE_HOME`` or ``~/.cache``) ``/stepsim/check/MODE`` — never the current
    directory, which may be read-only (a repository checkout, a system path)."""
    import os

    root = os.environ.get("STEPSIM_CHECK_DIR")
    if root:
        return Path(root) / mode
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "stepsim" / "check" / mode


def probe_out(out) -> Path:
    """Check, before any work, that report directory ``out`` can be created and written
    (a small file is created and written there: the only test that also holds for root,
    read-only mounts and full disks). Returns it as a Path; ValueError if not."""
    import tempfile

    if not str(out).strip():  # before Path(""), which is "." (the current directory)
        raise ValueError("--out: empty path; give a directory")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out must be a directory, got {str(out)!r}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out) as f:
            f.write(b"\0" * 4096)
            f.flush()
    except OSError as exc:
        raise ValueError(f"--out {str(out)!r} is not writable "
                         f"({exc.strerror or type(exc).__name__})") from None
    return out


def run_checks(claims=("all",), *, mode: str = "quick", out=None,
               jobs: int | None = None, scheduler: str | None = None, progress: bool = True,
               problems=None, steps: int | None = None, lrs: dict | None = None,
               extended: bool = False) -> Report:
    """Run the paper checks ``claims`` ("all" or "C1".."C12") by the registered protocol
    (``paper_checks/PROTOCOL.md``, :mod:`stepsim.checks.protocol`) and write the report.

    mode: "full" (the evidence: learning rates tuned on the tuning seeds, then 8 evaluation
    seeds, every problem of the protocol) or "quick" (digits only, 3 seeds, the fast
    timescale, the learning rates of the committed full run: indicative, not evidence).
    out: a directory (probed before any work); its ``runs/`` keeps every finished run by
    digest, so the same call after a kill redoes only the runs in flight, and runs equal
    across claims run once (None: a temporary directory, no report written). jobs: local
    worker processes (default every usable core; 1 runs here); scheduler: a Dask address.
    problems: restrict to these protocol problems ("digits", "lm"). steps, lrs: for tests
    of the machinery only — shorter runs, and learning rates {setting: {config: lr}}
    instead of tuning or the committed ones; a report made with either is labelled so.
    extended: full mode plus PROTOCOL §D4.8's ``--extended`` set (meant for Dask).

    Draft 4 (PROTOCOL §D4): beside each setting the in-place claims (C5, C6) run at its
    operating points (``_setup.operating_points``: STEP's own lr, fixed switch fractions,
    the cosine schedule; after tuning, ``tuning.tie_budgets``: every tied SR-STE lr), each
    a verdict line of its own; the report adds the stability map, the switch findings and
    whether each in-place verdict is robust across its tie set.
    """
    import tempfile

    from stepsim._ground.atomic import _umask
    from stepsim._ground.provenance import versions
    from stepsim.checks import _setup, protocol, tuning
    from stepsim.checks.report_files import write_report  # it imports this module
    from stepsim.experiments.store import RunStore

    start = time.perf_counter()
    names = parse_claims(claims)
    if mode not in ("quick", "full"):
        raise ValueError(f"mode must be 'quick' or 'full', got {mode!r}")
    if steps is not None and (not isinstance(steps, int) or steps < 200):
        raise ValueError(f"steps must be an integer >= 200, got {steps!r}")
    if extended not in (True, False) or (extended and mode != "full"):
        raise ValueError(f"extended must be True or False and needs mode 'full', got "
                         f"extended={extended!r} with mode={mode!r}")
    modules = {c: claim_module(c) for c in names}
    seeds = tuple(getattr(protocol.RULES.seeds, mode))
    budgets = [_setup.Budget(mode, p, ts, seeds, only=only, steps=steps or 0)
               for p, ts, only in protocol.RULES.settings(mode, problems)]
    budgets += [o for b in budgets
                for o in _setup.operating_points(b, names, extended=extended)]
    budgets = [b for b in budgets if any(b.applies(c) for c in names)]
    plain = _setup.NoProblem(mode)
    covered = {(c, b.key) for b in budgets for c in names if b.applies(c)} | {
        (c, plain.key) for c in names if c in protocol.RULES.claims_on("none")}
    if not covered:
        where = ", ".join(f"{p} ({ts})" for p, ts, _ in protocol.RULES.settings(mode)) or "none"
        raise ValueError(f"no verdict to make: claim(s) {', '.join(names)} on problem(s) "
                         f"{', '.join(problems or ['every'])} have no setting in {mode} mode "
                         f"(its settings: {where}); nothing was run or written")
    altered = steps is not None or lrs is not None
    out_dir = None if out is None else probe_out(out)  # after every argument is checked
    previous = None if out_dir is None else mergeable(out_dir, mode, altered, covered)
    planned = {}  # recording pass: which configs need a learning rate, and a first check
    for b in budgets:
        planned[b.key] = [job for c in names if b.applies(c) for job in modules[c].jobs(b)]
    free = {c: modules[c].jobs(plain) for c in names if c in protocol.RULES.claims_on("none")}
    for task in [t for ts in planned.values() for t in ts] + [t for ts in free.values()
                                                              for t in ts]:
        if hasattr(task, "check"):  # bad names, options or N:M: an error before any work
            task.check()
    if out_dir is not None:  # figures a killed check was drawing
        import shutil

        for stale in out_dir.glob(".figures-*"):
            shutil.rmtree(stale, ignore_errors=True)
    with contextlib.ExitStack() as stack:
        if out_dir is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="stepsim-check")))
        else:
            root = out_dir / RUNS_DIR
        store = RunStore(root)
        store.remove_temporaries()

        def execute(tasks, label):
            return _execute(tasks, store, label=f"stepsim check ({mode}): {label}",
                            jobs=jobs, scheduler=scheduler, progress=progress)

        done, stability_table = {}, None
        if lrs is not None:
            chosen, table = {k: dict(v) for k, v in lrs.items()}, {}
        elif mode == "quick":
            chosen, table = (tuning.committed() if budgets else {}), {}
        else:  # tune: every config a full budget needs, and quick mode's at its timescale
            needs = {}
            quick = [_setup.Budget("quick", p, ts, protocol.RULES.seeds.quick,
                                   steps=steps or 0)
                     for p, ts, _ in protocol.RULES.settings("quick", problems)]
            quick += [o for q in quick for o in _setup.operating_points(q, names)]
            for q in quick:
                for c in names:
                    if q.applies(c):
                        modules[c].jobs(q)
            for b in budgets + quick:  # one tuning per setting (operating points share it)
                base, keys = needs.get(b.setting, (b, set()))
                needs[b.setting] = (base, keys | b.needed)
            tune_jobs = tuning.jobs(needs)
            done = execute([t for group in tune_jobs.values() for t in group["tasks"]],
                           "tuning")
            chosen, table = tuning.choose(tune_jobs, done)
            if extended:  # more tuning seeds for the stability map only (PROTOCOL §D4.3)
                adam = {s: (b, {k for k in keys if k.startswith("adam|")})
                        for s, (b, keys) in needs.items()}
                more = tuning.jobs(adam, seeds=protocol.RULES.extended.stability_seeds)
                seen = execute([t for g in more.values() for t in g["tasks"]], "stability")
                done = {**done, **seen}
                stability_table = tuning.extend_errors(table, tuning.choose(more, seen)[1])
        final = [dataclasses.replace(b, lrs=chosen.get(b.setting, {})) for b in budgets]
        final += [t for b in final for t in tuning.tie_budgets(b, table, names)]
        tasks, skipped, kept = {}, [], []
        for b in final:
            try:
                jobs_of = {}
                for c in names:
                    if not b.applies(c):
                        continue
                    try:
                        jobs_of[c] = modules[c].jobs(b)
                    except _setup.MissingRate as exc:
                        if c not in protocol.EXTRAS or mode != "quick":
                            raise
                        # an extra in quick mode without the committed run's lrs: a note
                        skipped.append(f"{c} on {b.key}: {exc.args[0]} (quick mode reuses "
                                       f"the committed full run's learning rates)")
            except _setup.MissingRate as exc:
                if not b.tag and b.schedule == "constant":
                    raise  # a registered setting needs every learning rate
                skipped.append(f"{b.key}: {exc.args[0]}")  # an operating point, quick mode
                continue
            kept.append(b)
            tasks.update({(c, b.key): j for c, j in jobs_of.items()})
        final = kept
        for c, claim_tasks in free.items():
            tasks[(c, plain.key)] = claim_tasks
        if not tasks:
            raise ValueError("no verdict to make: " + "; ".join(skipped))
        results = execute([t for ts in tasks.values() for t in ts], "evaluation")
    decided = []
    info = versions()
    run_id = uuid.uuid4().hex
    staging = None
    if out_dir is not None:
        staging = Path(tempfile.mkdtemp(prefix=".figures-", dir=out_dir))
        staging.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would become figures/' mode
    by_key = {b.key: b for b in final}
    by_key[plain.key] = plain
    undrawn = []  # (result, its seconds so far), in this order; the figures come after
    for (claim, key), claim_tasks in tasks.items():
        module, budget = modules[claim], by_key[key]
        t0 = time.perf_counter()
        result = module.decide_claim(budget, results)
        lost = [t for t in claim_tasks if results[t.digest].get("diverged")]
        if lost:  # said in the verdict line, not only in the numbers
            configs = sorted({t.replace(seed=0).describe() for t in lost})
            result = dataclasses.replace(
                result, reason=f"{result.reason} [{len(lost)} diverged run(s) in "
                f"{len(configs)} configuration(s): an outcome, left out of the error "
                f"effects (PROTOCOL 'Draft 4: statistics')]",
                numbers=dict(result.numbers, diverged=sorted(t.describe() for t in lost)))
        result = dataclasses.replace(result, setting=key)
        job_seconds = sum(results[t.digest]["seconds"] for t in claim_tasks)
        undrawn.append((result, job_seconds + time.perf_counter() - t0))
    drawn = _draw_all([r for r, _ in undrawn], staging, _figure_workers(jobs, scheduler))
    for (result, seconds), (figures, draw_s) in zip(undrawn, drawn):
        decided.append(dataclasses.replace(result, figures=figures, versions=info,
                                           runtime_s=seconds + draw_s))
    decided = _robustness(decided)
    every = {**done, **results}
    compute = {"runs": len(every), "tuning_runs": len(set(done) - set(results)),
               "worker_s": sum(v["seconds"] for v in every.values()),
               "step_runs_without_diagnostics": _undiagnosed(tasks, results)}
    record = protocol_record(altered, names)
    if previous is not None:  # the other claims of the report in out_dir stay, with figures
        kept = [c for c in previous.claims if not _covers(covered, c)]
        for c in kept:
            _keep_figures(c, out_dir, staging)
        decided += kept
        # merged config by config: a check of other claims on a setting the report holds
        # (S1 on digits/main) keeps the report's other configs of that setting
        touched = set(stability_table or table)
        table = _merge(_numbers(previous.tuning), table)
        chosen = _merge(previous.lrs, chosen)
        if stability_table is not None:
            stability_table = _merge(table, stability_table)
        before = getattr(previous, "operating", None) or {}
        skipped = list(dict.fromkeys([*before.get("skipped", []), *skipped]))
        record = _merge_record(previous.protocol, record)
    # after the merge: the stability map and switch findings cover every kept claim too
    operating = _operating(decided, stability_table or table, skipped, extended, staging,
                           only=None if previous is None else touched)
    if previous is not None:
        operating["stability"] = {**before.get("stability", {}), **operating["stability"]}
        figs = [f for f in before.get("stability_figures", [])
                if f not in operating["stability_figures"]]
        for f in figs:  # the untouched settings' stability figures stay
            _keep_figures(types.SimpleNamespace(figures=(f,)), out_dir, staging)
        operating["stability_figures"] = figs + operating["stability_figures"]
        # every run in runs/ (all the checks made here), or the old report's count if
        # larger (a report copied in without its runs): never less than either knew
        stored, old = _store_compute(out_dir / RUNS_DIR), previous.compute
        compute = dict(compute, **{key: max(stored.get(key, compute[key]), old.get(key, 0))
                                   for key in ("runs", "tuning_runs", "worker_s")})
    decided.sort(key=lambda r: (ORDER.index(r.claim), r.setting))
    report = Report(mode, tuple(decided), time.perf_counter() - start,
                    None if out_dir is None else str(out_dir),
                    record, table, chosen, compute, operating)
    if out_dir is not None:
        write_report(report, out_dir, params={"claims": names, "mode": mode, "jobs": jobs,
                                              "scheduler": _address(scheduler),
                                              "problems": problems, "steps": steps,
                                              "run_id": run_id, "extended": extended},
                     figures=staging, run_id=run_id)
    return report


def mergeable(out_dir, mode: str, altered: bool, covered: set) -> Report | None:
    """The report already in ``out_dir`` that a check covering ``covered`` ((claim,
    setting) pairs) merges into: None when there is none or this check covers all of its
    verdicts (then it is replaced, as a resumed check replaces its own). A report of
    another mode, other protocol rules or a test's altered settings is refused with a
    one-line ValueError, before any work: merging would mix evidence of two kinds."""
    from stepsim.checks.report_files import load_report  # it imports this module

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
    others = sorted({c.claim for c in old.claims if not _covers(covered, c)},
                    key=ORDER.index)
    if not others:
        return None
    now = protocol_record(altered)
    why = None
    if old.mode != mode:
        why = f"a {old.mode}-mode report"
    elif old.protocol.get("rules_sha256") != now["rules_sha256"]:
        draft = old.protocol.get("rules_version")
        why = (f"a report made under protocol draft {draft} (this check runs draft "
               f"{now['rules_version']})" if draft != now["rules_version"]
               else "a report made under other protocol rules")
    elif bool(old.protocol.get("altered_for_testing")) != now["altered_for_testing"]:
        why = "a report made with " + ("altered" if not altered else "the registered") + \
            " run lengths or learning rates"
    if why:
        raise ValueError(f"--out {out_dir} holds {why} with claims {', '.join(others)} that "
                         f"this check would not redo; choose another --out, or check all "
                         f"its claims to replace it")
    return old


def _covers(covered: set, claim) -> bool:
    """Whether a check covering ``covered`` ((claim, setting) pairs) redoes ``claim``, a
    verdict of an earlier report: its setting, or the setting its operating point or tied
    lr ("digits/main@sr-ste 1:8 lr=0.001") belongs to, is covered."""
    return ((claim.claim, claim.setting) in covered
            or (claim.claim, claim.setting.split("@")[0]) in covered)


def _numbers(tuning: dict) -> dict:
    """A tuning table read back from report.json with its numbers as floats (JSON keeps a
    diverged grid value's mean, inf, as the text "inf")."""
    return {setting: {key: dict(t, grid=[float(g) for g in t["grid"]],
                                means=[float(m) for m in t["means"]])
                      for key, t in configs.items()}
            for setting, configs in tuning.items()}


def _keep_figures(claim, out_dir: Path, staging: Path) -> None:
    """Copy a kept claim's figures from ``out_dir/figures`` into the new figures folder."""
    import shutil

    for figure in claim.figures:
        source = out_dir / figure
        if source.is_file():
            target = staging / Path(figure).relative_to(FIGURES_DIR)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _store_compute(root: Path) -> dict:
    """{"runs", "worker_s"} of every finished run and task in a RunStore folder: what a
    merged report rests on (its claims were decided by several checks)."""
    import json

    runs, seconds = 0, 0.0
    for path in root.glob("[!.]*.json"):
        try:
            value = json.loads(path.read_text())["provenance"]["params"].get("runtime_s")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        runs += 1
        seconds += float(value or 0.0)
    return {"runs": runs, "worker_s": seconds}


def _address(scheduler):
    """A scheduler as recorded in the report: its address (a Client: the one it is on)."""
    if scheduler is None or isinstance(scheduler, str):
        return scheduler
    return getattr(getattr(scheduler, "scheduler", None), "address", None) or repr(scheduler)


def _robustness(decided: list) -> list:
    """PROTOCOL §D4.2: each registered in-place verdict (C5, C6 at a setting without an
    operating-point tag) is labelled "robust across the tie set" when every tied SR-STE
    lr of every N:M gives it the same verdict, else "fragile (lr choice)" with the
    verdicts; the tie set's lines are those tagged "sr-ste N:M lr=...". """
    out = []
    for r in decided:
        ties = [t for t in decided if t.claim == r.claim and "@sr-ste " in t.setting
                and t.setting.split("@")[0] == r.setting]
        if "@" in r.setting or not ties:
            out.append(r)
            continue
        verdicts = {t.setting.split("@", 1)[1]: t.verdict for t in ties}
        per_nm = {}
        for tag, v in verdicts.items():
            per_nm.setdefault(tag.split()[1], set()).add(v)
        robust = all(len(v) == 1 for v in per_nm.values())
        label = ("robust across the tie set" if robust else "fragile (lr choice)") + (
            ": " + "; ".join(f"{tag}: {v}" for tag, v in sorted(verdicts.items())))
        out.append(dataclasses.replace(
            r, reason=f"{r.reason} [tie set: {label}]",
            numbers=dict(r.numbers, tie_set={"robust": robust, "verdicts": verdicts})))
    return out


def _undiagnosed(tasks: dict, results: dict) -> int:
    """How many STEP runs (runs that froze v and switched) carry no g^2/v* record: runs a
    store kept from before draft 4 (PROTOCOL §D4.7)."""
    seen, count = set(), 0
    for jobs in tasks.values():
        for t in jobs:
            if t.digest in seen or getattr(t, "recipe", None) not in ("step", "layerwise-step"):
                continue
            seen.add(t.digest)
            view = results[t.digest]
            if view.get("switch_step") is not None and view.get("stopped_at") is None:
                count += not (view.get("switch") or {}).get("g2_over_vstar")
    return count


def _operating(decided, table, skipped, extended, staging, only=None) -> dict:
    """The report's draft-4 record (Report.operating); the stability figures are drawn
    into ``staging`` (None: not drawn). only: the settings whose stability map is made
    (None: every setting of ``table``)."""
    from stepsim.checks import operating

    if only is not None:
        table = {k: v for k, v in table.items() if k in only}
    stability = operating.stability_map(table) if table else {}
    figures = []
    if staging is not None:
        for setting, rows in stability.items():
            path = staging / f"stability-{setting.replace('/', '-')}.png"
            figures.append(str(Path(FIGURES_DIR) / path.name))
            operating.stability_figure(setting, rows, path)
    robustness = {f"{c.claim} {c.setting}": c.numbers["tie_set"] for c in decided
                  if isinstance(c.numbers, dict) and "tie_set" in c.numbers}
    return {"stability": stability, "stability_figures": figures,
            "switch_findings": operating.switch_findings(decided),
            "robustness": robustness, "skipped": skipped, "extended": bool(extended)}


def protocol_record(altered: bool, names=()) -> dict:
    """What the report records of the protocol: the commit of PROTOCOL.md, the SHA-256 of
    the rules in code, whether a test altered the run lengths or learning rates, and for
    each extra comparison among ``names`` ("S1") its own rules' SHA-256 and commit
    (``extras``)."""
    from stepsim.checks import protocol

    out = {"commit": protocol.protocol_commit(), "rules_sha256": protocol.rules_digest(),
           "rules_version": protocol.RULES.version, "altered_for_testing": bool(altered)}
    extras = {c: protocol.extra_record(c) for c in names if c in protocol.EXTRAS}
    if extras:
        out["extras"] = extras
    return out


def _merge(old: dict, new: dict) -> dict:
    """setting -> config -> value tables merged config by config (``new`` wins)."""
    out = {k: dict(v) for k, v in old.items()}
    for setting, configs in new.items():
        out[setting] = {**out.get(setting, {}), **configs}
    return out


def _merge_record(old: dict, now: dict) -> dict:
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
    return out


def _execute(tasks, store, *, label, jobs, scheduler, progress) -> dict:
    """Run the distinct ``tasks`` not yet in ``store`` (longest first), then read every one
    back: digest -> its view (:func:`_view`). A resumed check and a straight one decide on
    the same numbers, read from the store (a run this call makes is read back as soon as
    it is saved, so the reading overlaps the runs still training)."""
    from threadpoolctl import threadpool_limits

    from stepsim.experiments import executors

    distinct = {t.digest: t for t in tasks}
    for task in distinct.values():  # PROTOCOL §D4.7: a STEP run stored without its
        if _undiagnosed_run(store, task):  # diagnostics runs again (same RunSpec, same bits)
            store.path(task).unlink()
    views = {}

    def read_back(task, output):  # each run as it is saved, while the workers train on
        views[task.digest] = _view(store, task)

    # one BLAS thread here: a read-back multiplies small matrices (the test set's logits),
    # after which OpenBLAS's idle threads spin for ~50 ms, taking a core from the workers
    # (measured: 2.3 s of CPU for 40 read-backs vs 0.26 s); the item errors of all 291
    # runs of a quick check are the same bits with 1 or 2 threads (measured)
    with threadpool_limits(limits=1):
        executors.run(sorted(distinct.values(), key=_cost, reverse=True), read_back,
                      jobs=jobs, scheduler=scheduler or None, store=store, label=label,
                      progress=None if progress else False, wait_note="check")
        # the runs finished before (a resumed check) or by another process are read here
        return {d: views[d] if d in views else _view(store, t) for d, t in distinct.items()}


def _undiagnosed_run(store, task) -> bool:
    """A STEP run stored before fit recorded its g^2/v* diagnostics (PROTOCOL §D4.7): it is
    run again (same RunSpec, same bits) so that every STEP run carries them."""
    return getattr(task, "recipe", None) in ("step", "layerwise-step") and store.lacks(
        task, "diagnostics")


def _cost(task) -> float:
    """A rough relative cost for ordering (the transformer's step is ~20x the MLP's). A
    Task (a Theorem 1 simulation, a memory count) has no steps: it goes first, because
    C11's quick simulations take up to ~3x a quick digits run (0.5-4 s, measured) and a
    check that ended on them left one worker idle for that long."""
    if not hasattr(task, "steps"):
        return math.inf
    return task.steps * (20.0 if getattr(task, "problem", "") == "lm" else 1.0)


def _view(store, task) -> dict:
    """What a claim reads of a finished task: a run's ``traces.summary`` with its per-item
    test errors (``items``), their mean (``error``), ``diverged`` (the run went non-finite:
    its items are the problem's ``diverged_item_errors``, every image wrong / the uniform
    prediction's loss) and ``stopped_at``, or a task's output; with ``seconds`` (its wall
    time when it ran)."""
    import numpy as np

    from stepsim.experiments import traces
    from stepsim.experiments.run import RunSpec

    loaded = store.load(task)
    if not isinstance(task, RunSpec):
        out = dict(loaded)
    else:
        out = dict(traces.summary(loaded))
        out["stopped_at"] = loaded.stopped_at
        problem = task.build_problem()
        if hasattr(problem, "item_errors"):
            items = None
            if loaded.stopped_at is None:  # finite weights can still overflow the logits
                with np.errstate(over="ignore", invalid="ignore"):
                    items = np.asarray(problem.item_errors(loaded.weights), dtype=np.float64)
            out["diverged"] = items is None or not bool(np.all(np.isfinite(items)))
            if out["diverged"]:  # a run that went non-finite predicts nothing
                items = np.asarray(problem.diverged_item_errors(), dtype=np.float64)
            out["items"], out["error"] = items, float(np.mean(items))
    out["seconds"] = store.runtime_s(task)
    return out


#: fewer claims than this draw their figures in this process: starting a process that
#: imports matplotlib (~1-2 s) costs more than it saves on a few figures
_FIGURE_POOL_MIN = 8


def _figure_workers(jobs, scheduler) -> int:
    """Local processes that draw the figures: ``jobs`` (every core when not given or when
    the runs went to a Dask scheduler), at most the usable cores."""
    from stepsim.experiments.executors import usable_cores

    cores = usable_cores()
    return min(cores if jobs is None or scheduler is not None else jobs, cores)


def _draw_all(results, staging, workers: int) -> list:
    """Draw each claim result's figures into ``staging`` (None: none drawn): [(figure
    paths as report.json names them, seconds)], in the order of ``results``.

    On ``workers`` spawned processes (``executors.pool``) when there are at least
    ``_FIGURE_POOL_MIN`` results: matplotlib's layout and PNG rendering are most of what a
    quick check does after its runs (~14 s of CPU for its 23 figures, measured), and the
    runs' workers are idle by then. Each figure is the same file whichever process draws
    it (one figure per file; nothing is shared between figures)."""
    if staging is None:
        return [((), 0.0)] * len(results)
    if workers <= 1 or len(results) < _FIGURE_POOL_MIN:
        return [_draw_one(r, staging) for r in results]
    from stepsim.experiments import executors

    # a claim that draws several figures (C11: 2.5 s of the 13 s, measured) goes first,
    # so that the workers finish together
    first = sorted(results, key=lambda r: not hasattr(claim_module(r.claim), "figures"))
    with executors.pool(min(workers, len(results))) as figure_pool:
        futures = {id(r): figure_pool.submit(_draw_one, r, str(staging)) for r in first}
        try:
            return [futures[id(r)].result() for r in results]
        except BaseException:
            for f in futures.values():
                f.cancel()
            if not isinstance(sys.exc_info()[1], Exception):  # Ctrl-C: do not wait
                executors._stop(figure_pool)
            raise


def _draw_one(result, staging) -> tuple:
    """(figure paths under ``FIGURES_DIR``, seconds): ``result``'s figures drawn into
    ``staging`` by its claim's module (in this process or a figure worker)."""
    t0 = time.perf_counter()
    staging = Path(staging)
    paths = _draw(claim_module(result.claim), result, staging)
    return (tuple(str(Path(FIGURES_DIR) / Path(p).relative_to(staging)) for p in paths),
            time.perf_counter() - t0)


def _draw(module, result, fig_dir: Path) -> list:
    if hasattr(module, "figures"):
        return list(module.figures(result, fig_dir))
    if hasattr(module, "figure"):
        stem = result.claim.lower() + ("" if result.setting in ("", "none") else
                                       "-" + result.setting.replace("/", "-"))
        return [module.figure(result, fig_dir / f"{stem}.png")]
    return []
