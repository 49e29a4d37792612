"""C11 (Theorem 1): the precondition-error bound holds under its stated assumptions.

Quantity. For every built-in process (``stepsim.theorem1.PROCESSES``: i.i.d. families,
stationary time-dependent ones, and the nonstationary controls) the Monte-Carlo engine
simulates ``trials`` x ``dim`` coordinates of Adam's vhat from step 1 to k0 + 10^4, at
the statement's k0 (smallest k0 > log_b2(1 - 1/sqrt 2)), b2 = 0.999, delta = 0.05, G = 1,
and records |vhat_k - vhat_k0| at log-spaced lags. Per lag: the violation probability of
the paper's bound sqrt(4 G^2 (1-b2)^2 n log(2/delta)) with a Clopper-Pearson interval,
per coordinate and for the inf-norm over d coordinates (``stepsim.theorem1.check``).

Beyond the paper (reported, not part of the verdict): the corrected bounds of
``stepsim.theorem1.corrected`` (Chebyshev with the exact variance: proved; sub-Gaussian
with the exact variance: heuristic; both with a union bound over d for the inf-norm),
their violation rates (|X| > bound) and tightness (empirical (1 - delta)-quantile / bound), and per
process the smallest factor c by which the paper's bound must be multiplied to hold at
delta: c = max over lags of the empirical (1 - delta)-quantile / bound.

Rule (PROTOCOL §7, C11; its outcome was known before the rule was registered): part (a),
the claim, is the statement as written, per
coordinate. For every built-in STATIONARY process the paper's bound gets one overall
verdict over all lags (Clopper-Pearson, Bonferroni over lags: ``check.overall``).
REPRODUCED if every stationary process HOLDS; NOT REPRODUCED if any stationary process is
VIOLATED; INCONCLUSIVE otherwise. Nonstationary processes are negative controls (the
theorem makes no claim about them) and the inf-norm verdicts are reported beside the
verdict, not folded in. Part (b), reported beside the verdict: the proved Chebyshev
bound is never violated by construction, so what it is reported by is its tightness: the
share of lags where it equals the trivial worst-case bound (vacuous). Part (c) (PROTOCOL.md,
"C11 part (c) (issue 25)"), reported beside the verdict: on every stationary process that
meets the assumptions of Statement A or B (``stepsim.theorem1.bounds``), the corrected
bound min(Chebyshev, A, A+, A'+, B, B+ where each applies, trivial) (amended before its
evidence: exact Chernoff A+ / B+ added; amended again: A'+ for ar1), per coordinate
(d = 1) and for the inf-norm (union
over d), HOLDS (Clopper-Pearson, Bonferroni over lags) and is below the trivial bound at
>= 90% of the lags where the paper's bound is VIOLATED in that form: MET; NOT MET if any
such process fails either; INCONCLUSIVE if none fails but some is not HOLDS.

Part (c)'s coverage (paper_checks/theorem1.md §5.10, §5.11): the exact Chernoff bound B+
covers ``regime`` and ``regime shared`` (finite-state modulation) and takes them below the
trivial bound at every lag; ``ar1`` (continuous-state Gaussian copula) is covered by A'+
(``copula-chernoff``: Chernoff with the exact m.g.f. of a Gaussian quadratic majorant;
before it, A' and B stayed at the trivial bound at most failing lags for rho >= 0.99).
"""

from __future__ import annotations

import math

import numpy as np

from stepsim.checks import plots
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    ClaimResult,
    rule_of,
)
from stepsim.experiments.tasks import Task

BETA2, DELTA = 0.999, 0.05

#: (label, process, parameters): every built-in, the dependent ones at several strengths
PROCESSES = (
    ("uniform", "uniform", {}), ("twopoint", "twopoint", {}), ("rademacher", "rademacher", {}),
    ("clipped_gaussian", "clipped_gaussian", {}), ("spikes", "spikes", {}),
    ("ar1 rho=0.9", "ar1", {"rho": 0.9}), ("ar1 rho=0.99", "ar1", {"rho": 0.99}),
    ("ar1 rho=0.999", "ar1", {"rho": 0.999}), ("ar1 rho=0.9999", "ar1", {"rho": 0.9999}),
    ("regime", "regime", {}), ("regime shared", "regime", {"shared": 1.0}),
    ("sine", "sine", {}), ("drift (control)", "drift", {}), ("decay (control)", "decay", {}),
)


def _size(mode):
    return {"trials": 100, "dim": 20, "per_decade": 4} if mode == "quick" else \
        {"trials": 500, "dim": 100, "per_decade": 8}


#: full mode: processes whose coordinates share one chain have one independent sample per
#: trial, so they get more trials (and a seed of their own): PROTOCOL.md, "C11 part (c):
#: the sample of `regime shared`"
FULL_SAMPLE = {"regime shared": {"trials": 5000, "seed": 1}}


def _jobs(budget):
    return {label: Task("stepsim.checks.c11_theorem1:process_job", {
        "process": name, "params": params, "seed": 0, **_size(budget.mode),
        **(FULL_SAMPLE.get(label, {}) if budget.mode == "full" else {})})
        for label, name, params in PROCESSES}


def jobs(budget):
    return list(_jobs(budget).values())


def process_job(*, process: str, params: dict, trials: int, dim: int, per_decade: int,
                seed: int, horizon: int = 10_000) -> dict:
    """One process: the paper's bound and the corrected bounds against simulation."""
    from stepsim.theorem1 import analyse, k0_statement, lag_grid, make_process, simulate
    from stepsim.theorem1.check import clopper_pearson, overall, verdicts
    from stepsim.theorem1.corrected import corrected_bounds

    proc = make_process(process, **params)
    k0 = k0_statement(BETA2)
    lags = lag_grid(horizon, per_decade)
    sim = simulate(proc, beta2=BETA2, k0=k0, lags=lags, trials=trials, dim=dim, seed=seed)
    paper = analyse(sim.stats, process=proc, G=proc.G, beta2=BETA2, delta=DELTA, k0=k0,
                    lags=lags, seed=seed, max_g2=sim.max_g2,
                    coordinate_steps=sim.coordinate_steps, seconds=sim.seconds)
    out = {"process": process, "params": proc.params, "stationary": proc.stationary,
           "trials": trials, "dim": dim, "k0": k0, "seed": seed, "lags": lags.tolist(),
           "paper": {"coord_overall": paper.coord_overall, "inf_overall": paper.inf_overall,
                     "bound": paper.column("bound").tolist(),
                     "coord_quantile": paper.column("coord.quantile").tolist(),
                     "inf_quantile": paper.column("inf.quantile").tolist(),
                     "coord_rate": paper.column("coord.rate").tolist(),
                     "inf_rate": paper.column("inf.rate").tolist()}}
    bound = paper.column("bound")
    # smallest factor c with P(stat >= c * bound) <= delta at every lag
    out["inflation"] = {s: float(np.max(paper.column(f"{s}.quantile") / bound))
                        for s in ("coord", "inf")}
    if not proc.stationary:
        return out
    independent = bool(proc.independent_coordinates)
    coord = sim.stats.reshape(-1, len(lags)) if independent else sim.stats[:, 0, :]
    inf = sim.stats.max(axis=1)
    bounds = corrected_bounds(proc, beta2=BETA2, k0=k0, lags=lags, delta=DELTA, dim=dim)
    if not np.any(bounds["variance"] > 0):
        # g^2 constant: the statistic is 0 up to rounding (~1e-16), every bound is 0; a
        # corrected bound has nothing to say here
        out["corrected"] = {"degenerate": True, "kappa": bounds["kappa"].tolist()}
        return out
    corrected = {"kappa": bounds["kappa"].tolist(), "variance": bounds["variance"].tolist(),
                 "worst_case": bounds["worst_case"].tolist()}
    for kind in ("chebyshev", "gauss"):
        for sample_name, sample in (("coord", coord), ("inf", inf)):
            b = bounds[f"{kind}_{sample_name}"]
            # a corrected bound t claims P(|X| > t) <= delta: strict, so that the
            # degenerate case (Var = 0, X = 0 a.s., t = 0) is not a violation
            violations = np.count_nonzero(sample > b, axis=0)
            lo, hi = clopper_pearson(violations, sample.shape[0], 0.95)
            q = np.quantile(sample, 1 - DELTA, axis=0, method="inverted_cdf")
            with np.errstate(invalid="ignore", divide="ignore"):
                tight = np.where(b > 0, q / b, np.nan)
            corrected[f"{kind}_{sample_name}"] = {
                "bound": b.tolist(), "n": int(sample.shape[0]),
                "violations": violations.tolist(), "ci_high": hi.tolist(),
                "verdicts": list(verdicts(lo, hi, DELTA)),
                "overall": overall(violations, sample.shape[0], DELTA, 0.95),
                "tightness_max": _nanmax(tight), "tightness_median": _nanmedian(tight)}
    out["corrected"] = corrected
    out["part_c"] = _part_c(proc, paper, coord, inf, lags, k0, dim)
    return out


def _part_c(proc, paper, coord, inf, lags, k0, dim) -> dict | None:
    """Part (c): the corrected bound min(Chebyshev, A, A+, A'+, B, B+, trivial) against simulation
    (``bounds.corrected_bound``: every proved statement whose assumptions the process meets).

    None when neither Statement A nor B (nor A+ / B+, whose processes B or A also cover)
    applies to the process (then (c) makes no claim).
    Per form (coordinate: d = 1; inf-norm: d = dim): the bound, its violations (|X| > b),
    Clopper-Pearson verdicts (Bonferroni overall) and the share of the lags where the
    paper's bound is VIOLATED (in that form) at which the corrected bound is below the
    trivial bound.
    """
    from stepsim.theorem1.bounds import applicable, corrected_bound
    from stepsim.theorem1.check import clopper_pearson, overall, verdicts

    if all(applicable(kind, proc) is not None for kind in ("gaussian", "markov")):
        return None
    trivial = np.asarray(paper.column("worst_case"), dtype=float)
    out = {}
    for form, sample, d in (("coord", coord, 1), ("inf", inf, dim)):
        b, used = corrected_bound(proc, beta2=BETA2, k0=k0, lags=lags, delta=DELTA, dim=d)
        violations = np.count_nonzero(sample > b, axis=0)
        lo, hi = clopper_pearson(violations, sample.shape[0], 0.95)
        failing = np.asarray(paper.column(f"{form}.verdict")) == "VIOLATED"
        below = b < trivial
        out[form] = {
            "bound": b.tolist(), "uses": used, "n": int(sample.shape[0]),
            "violations": violations.tolist(), "ci_high": hi.tolist(),
            "verdicts": list(verdicts(lo, hi, DELTA)),
            "overall": overall(violations, sample.shape[0], DELTA, 0.95),
            "paper_failing_lags": int(failing.sum()),
            "share_below_trivial_where_paper_fails": (
                float(np.mean(below[failing])) if failing.any() else None),
            "share_below_trivial": float(np.mean(below))}
    return out


#: part (c): the corrected bound must be below the trivial bound at this share of the lags
#: where the paper's bound fails (PROTOCOL.md, "C11 part (c) (issue 25)")
PART_C_SHARE = 0.9


def decide_part_c(per: dict) -> tuple[str, str, dict]:
    """(outcome, reason, table) of part (c): MET / NOT MET / INCONCLUSIVE (see PROTOCOL)."""
    table, failures, unsure = {}, [], []
    for label, v in per.items():
        c = v.get("part_c")
        if not v["stationary"] or c is None:
            continue
        row = {}
        for form in ("coord", "inf"):
            f = c[form]
            share = f["share_below_trivial_where_paper_fails"]
            row[form] = {"overall": f["overall"], "uses": f["uses"], "share": share,
                         "paper_failing_lags": f["paper_failing_lags"]}
            if f["paper_failing_lags"] == 0:
                continue
            if f["overall"] == "VIOLATED":
                failures.append(f"{label} ({form}: corrected bound VIOLATED)")
            elif share < PART_C_SHARE:
                failures.append(f"{label} ({form}: below trivial at {share:.0%} of "
                                f"{f['paper_failing_lags']} failing lags)")
            elif f["overall"] != "HOLDS":
                unsure.append(f"{label} ({form}: {f['overall']})")
        table[label] = row
    if not table:
        return "NOT EVALUATED", "no stationary process with Statement A or B computed", table
    if failures:
        return "NOT MET", "; ".join(failures), table
    if unsure:
        return "INCONCLUSIVE", "; ".join(unsure), table
    return "MET", "holds and is below the trivial bound where the paper's bound fails", table


def _vacuous_share(corrected: dict) -> float:
    """Share of lags where the proved Chebyshev bound (per coordinate) is at least the
    trivial worst-case bound: there it says nothing the trivial bound does not."""
    cheb = np.asarray(corrected["chebyshev_coord"]["bound"], dtype=float)
    trivial = np.asarray(corrected["worst_case"], dtype=float)
    return float(np.mean(cheb >= trivial)) if cheb.size else math.nan


def _nanmax(x):
    x = np.asarray(x, dtype=float)
    return float(np.nanmax(x)) if np.any(np.isfinite(x)) else math.nan


def _nanmedian(x):
    x = np.asarray(x, dtype=float)
    return float(np.nanmedian(x)) if np.any(np.isfinite(x)) else math.nan


def decide_claim(budget, results) -> ClaimResult:
    per = {label: results[job.digest] for label, job in _jobs(budget).items()}
    stationary = {k: v for k, v in per.items() if v["stationary"]}
    coord = {k: v["paper"]["coord_overall"] for k, v in stationary.items()}
    violated = sorted(k for k, v in coord.items() if v == "VIOLATED")
    if violated:
        verdict = NOT_REPRODUCED
        reason = (f"paper's bound VIOLATED per coordinate for stationary {', '.join(violated)} "
                  f"(needs x{max(per[k]['inflation']['coord'] for k in violated):.2f} at most)")
    elif all(v == "HOLDS" for v in coord.values()):
        verdict, reason = REPRODUCED, "the paper's bound HOLDS for every stationary process"
    else:
        verdict, reason = INCONCLUSIVE, "some stationary processes INCONCLUSIVE, none VIOLATED"
    checked = {k: v for k, v in stationary.items() if not v["corrected"].get("degenerate")}
    vacuous = {k: _vacuous_share(v["corrected"]) for k, v in checked.items()}
    cheb_fail = sorted(k for k, v in checked.items() for s in ("coord", "inf")
                       if v["corrected"][f"chebyshev_{s}"]["overall"] == "VIOLATED")
    gauss_fail = sorted({k for k, v in checked.items() for s in ("coord", "inf")
                         if v["corrected"][f"gauss_{s}"]["overall"] == "VIOLATED"})
    reason = "(a) " + reason + "; (b) the proved Chebyshev bound: " + (
        "never violated" if not cheb_fail else f"VIOLATED for {', '.join(cheb_fail)}")
    shares = [f"{k} at {share:.0%} of lags" for k, share in vacuous.items() if share > 0]
    reason += (", vacuous (equal to the trivial bound) for " + ", ".join(shares) if shares
               else ", never equal to the trivial bound")
    if gauss_fail:
        reason += "; the sub-Gaussian bound (heuristic, not proved) fails for " + ", ".join(
            gauss_fail)
    part_c, part_c_reason, part_c_table = decide_part_c(per)
    reason += (f"; (c) corrected bound min(Chebyshev, A, A+, A'+, B, B+): {part_c}: "
               f"{part_c_reason}")
    table = {label: {
        "stationary": v["stationary"], "paper_coord": v["paper"]["coord_overall"],
        "paper_inf": v["paper"]["inf_overall"], "inflation_coord": v["inflation"]["coord"],
        "inflation_inf": v["inflation"]["inf"],
        **({f"{kind}_{s}": v["corrected"][f"{kind}_{s}"]["overall"]
            for kind in ("chebyshev", "gauss") for s in ("coord", "inf")} if label in checked
           else {}),
        **({f"{kind}_{s}_tightness_max": v["corrected"][f"{kind}_{s}"]["tightness_max"]
            for kind in ("chebyshev", "gauss") for s in ("coord", "inf")} if label in checked
           else {}),
        "kappa_max": _nanmax(v["corrected"]["kappa"]) if v["stationary"] else None,
    } for label, v in per.items()}
    size = _size(budget.mode)
    numbers = {"table": table, "per_process": per, "beta2": BETA2, "delta": DELTA,
               "chebyshev_vacuous_share": vacuous, "part_c": part_c,
               "part_c_reason": part_c_reason, "part_c_table": part_c_table, **size}
    more = "".join(f" ({label}: {s['trials']} trials, seed {s['seed']})"
                   for label, s in FULL_SAMPLE.items() if budget.mode == "full")
    problem = (f"Theorem 1 engine: {size['trials']} trials x {size['dim']} coordinates per "
               f"process{more}, b2={BETA2}, delta={DELTA}, k0 = statement's, lags 1..10^4")
    return ClaimResult(CLAIM.id, CLAIM.title, verdict, reason, CLAIM.rule, None, problem, (0,),
                       budget.mode, numbers)


def figures(result, out_dir):
    """Two figures: the inflation factor per process; bounds vs simulation for AR(1)."""
    from pathlib import Path

    plt = plots.pyplot()
    table = result.numbers["table"]
    labels = list(table)
    fig, ax = plt.subplots(figsize=(8, 3.8), dpi=90)
    x = np.arange(len(labels))
    for i, (key, name) in enumerate((("inflation_coord", "per coordinate"),
                                     ("inflation_inf", f"inf-norm, d={result.numbers['dim']}"))):
        ax.bar(x + (i - 0.5) * 0.38, [max(table[k][key], 1e-3) for k in labels], 0.38,
               color=f"C{i}", label=name)
    ax.axhline(1.0, color="k", lw=1, ls="--", label="paper's bound (factor 1)")
    ax.set_yscale("log")
    ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("factor c: (1-delta)-quantile / bound\n(max over lags)")
    ax.set_title(f"C11 Theorem 1: factor the paper's bound needs to hold at delta={DELTA} — "
                 f"{result.verdict}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    plots.footer(fig, f"{result.problem}; seed 0; c > 1: the bound fails (c = how much it "
                  "must be inflated); point estimates from the empirical quantile")
    paths = [plots.save(fig, Path(out_dir) / "c11_inflation.png")]

    per = result.numbers["per_process"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), dpi=90)
    for ax, label in zip(axes, ("ar1 rho=0.999", "regime")):
        v = per[label]
        lags = np.asarray(v["lags"])
        ax.loglog(lags, v["paper"]["bound"], "k-", lw=2, label="paper's bound")
        ax.loglog(lags, v["corrected"]["chebyshev_coord"]["bound"], "C2--",
                  label="corrected, Chebyshev (proved)")
        ax.loglog(lags, v["corrected"]["gauss_coord"]["bound"], "C4-.",
                  label="corrected, sub-Gaussian (heuristic)")
        ax.loglog(lags, v["corrected"]["gauss_inf"]["bound"], "C4:",
                  label=f"sub-Gaussian, inf-norm (union over d={v['dim']})")
        ax.loglog(lags, v["paper"]["coord_quantile"], "C0o-", ms=3,
                  label=f"simulated {1 - DELTA:g}-quantile, coordinate")
        ax.loglog(lags, v["paper"]["inf_quantile"], "C3s-", ms=3,
                  label=f"simulated {1 - DELTA:g}-quantile, inf-norm")
        ax.set_xlabel("lag k - k0 (steps)")
        ax.set_ylabel("|vhat_k - vhat_k0| (units of G)")
        ax.set_title(f"{label}: original vs corrected bounds", fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle(f"C11: Theorem 1 bound vs simulation (b2={BETA2}, delta={DELTA})", fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    plots.footer(fig, f"{result.problem}; seed 0; quantiles are point estimates")
    paths.append(plots.save(fig, Path(out_dir) / "c11_bounds.png"))
    return paths


CLAIM = register(Claim(
    id="C11",
    title=("Theorem 1: ||vhat_k - vhat_k0||_inf < sqrt(4 G^2 (1-b2)^2 (k-k0) log(2/delta)) "
           "w.p. >= 1-delta"),
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, figures=figures))
