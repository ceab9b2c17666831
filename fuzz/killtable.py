"""The kill table: a campaign against every mutant (and the uniform-random baseline beside it).

:mod:`impl.mutants.catalogue` lists the mutants and builds each buggy
implementation; :mod:`fuzz.targets.mutants` wraps one as a campaign target.

``run_mutants`` is what ``kvwindow mutants`` prints and what ``kvwindow bench``
reuses. Mutant kills write no seeds unless ``seeds_dir`` is given, and use no
example database, so every kill is found afresh and the counts are comparable.

The measurement (``baseline=True``, ``repeats=N``): each mutant is run under
both testers — the boundary-biased strategies (:func:`fuzz.strategies.cases`)
and the naive uniform-random tester (:func:`fuzz.strategies.uniform_cases`) —
with the same budget (``time_per`` seconds and ``max_examples`` examples) for
each of ``N`` campaign seeds ``seed, seed + 1, ...``. Every run is kept
(:attr:`KillResult.biased_runs`, :attr:`KillResult.baseline_runs`); the
summary gives the kill rate and min / median / max of examples- and
tokens-to-kill, where a run that did not kill within its budget counts as
"more than what it spent" (a lower bound, printed ``>N``) rather than being
dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.ops import Case
from fuzz.results import TargetResult
from fuzz.targets import registry
from fuzz.targets import isolated
from fuzz.targets.base import Target, TargetError
from fuzz.targets.mutants import PREFIX, mutant_target
from impl.mutants.catalogue import Mutant, MutantError, catalogue, select

__all__ = ["COST_METRICS", "KillResult", "Mutant", "MutantError", "catalogue", "censored_stats",
           "median_ratio", "run_mutants", "select", "summarize"]


#: The cost metrics of one kill: test cases run and tokens pushed until the first failing case.
COST_METRICS = ("examples", "tokens")


def run_record(res: TargetResult, campaign_seed: int, t0: float) -> dict[str, Any]:
    """One campaign of one tester against one mutant, as a plain dict.

    ``examples``/``tokens``/``seconds`` are the cost to the first failing case
    (``None`` when it survived); ``examples_run``/``tokens_run``/``seconds_run``
    are what the run spent in all (for a survivor: the budget it used up).
    """
    killed = bool(res.failures)
    return {
        "campaign_seed": campaign_seed,
        "killed": killed,
        "examples": res.examples_to_fail if killed else None,
        "tokens": res.tokens_to_fail if killed else None,
        "seconds": res.seconds_to_fail if killed else None,
        "examples_run": res.examples,
        "tokens_run": res.tokens,
        "seconds_run": round(time.monotonic() - t0, 3),
    }


def censored_stats(runs: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    """min / median / max of ``metric`` over ``runs``, survivors counted as lower bounds.

    A run that did not kill contributes ``>{metric}_run`` (what it spent): it is
    ordered after every kill, and a statistic that lands on it is reported with
    ``*_lower_bound: True``. A median of an even count averages the two middle
    values (a lower bound if either is one).
    """
    vals = sorted(((0, r[metric]) if r["killed"] else (1, r[f"{metric}_run"]) for r in runs),
                  key=lambda cv: (cv[0], cv[1]))
    if not vals:
        return {"min": None, "median": None, "max": None,
                "min_lower_bound": False, "median_lower_bound": False, "max_lower_bound": False}
    n = len(vals)
    if n % 2:
        med, med_lb = float(vals[n // 2][1]), bool(vals[n // 2][0])
    else:
        a, b = vals[n // 2 - 1], vals[n // 2]
        med, med_lb = (a[1] + b[1]) / 2, bool(a[0] or b[0])
    return {"min": vals[0][1], "median": med, "max": vals[-1][1],
            "min_lower_bound": bool(vals[0][0]), "median_lower_bound": med_lb,
            "max_lower_bound": bool(vals[-1][0])}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Kill rate and censored min / median / max of each cost metric over one tester's runs."""
    kills = sum(r["killed"] for r in runs)
    return {"runs": len(runs), "kills": kills, "kill_rate": kills / len(runs) if runs else None,
            **{m: censored_stats(runs, m) for m in COST_METRICS}}


def median_ratio(biased: dict[str, Any], baseline: dict[str, Any], metric: str) -> dict[str, Any] | None:
    """Median baseline cost over median biased cost (> 1: the boundary bias kills with less).

    ``lower_bound`` when the baseline median is itself a lower bound (it mostly
    survived); ``None`` when the biased median is a lower bound or zero (no
    meaningful ratio).
    """
    b, u = biased[metric], baseline[metric]
    if b["median"] is None or u["median"] is None or b["median_lower_bound"] or not b["median"]:
        return None
    return {"value": u["median"] / b["median"], "lower_bound": u["median_lower_bound"]}


@dataclass
class KillResult:
    name: str
    bug_class: str
    kind: str
    reference: str
    available: bool = True
    reason: str = ""
    # -- the first repeat (the config's campaign seed): the biased tester --
    killed: bool = False
    examples: int | None = None  #: examples until the first failing one (before shrinking)
    tokens: int | None = None  #: tokens pushed until then
    seconds: float | None = None
    examples_run: int = 0
    case: Case | None = None  #: the shrunk failing case
    error: str | None = None
    note: str | None = None  #: the finding's note (a race's re-run count, a reduction cut short)
    seed_path: str | None = None
    # -- the first repeat: the uniform baseline --
    baseline_killed: bool | None = None
    baseline_examples: int | None = None
    baseline_tokens: int | None = None
    baseline_seconds: float | None = None
    baseline_examples_run: int = 0
    # -- every repeat (one dict per campaign seed, see run_record) --
    repeats: int = 1
    biased_runs: list[dict[str, Any]] = field(default_factory=list)
    baseline_runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        """Baseline examples-to-kill over biased examples-to-kill (``None`` when either did not kill)."""
        if not (self.killed and self.baseline_killed) or not self.examples:
            return None
        return self.baseline_examples / self.examples

    @property
    def tokens_ratio(self) -> float | None:
        """Baseline tokens-to-kill over biased tokens-to-kill: the work each tester spent."""
        if not (self.killed and self.baseline_killed) or not self.tokens or self.baseline_tokens is None:
            return None
        return self.baseline_tokens / self.tokens

    @property
    def killed_every_repeat(self) -> bool:
        """The biased tester killed the mutant under every campaign seed."""
        return bool(self.biased_runs) and all(r["killed"] for r in self.biased_runs)

    def biased_summary(self) -> dict[str, Any]:
        return summarize(self.biased_runs)

    def baseline_summary(self) -> dict[str, Any] | None:
        return summarize(self.baseline_runs) if self.baseline_runs else None

    def median_ratios(self) -> dict[str, Any]:
        """Per cost metric, :func:`median_ratio` of baseline over biased (empty without a baseline)."""
        u = self.baseline_summary()
        if u is None:
            return {}
        b = self.biased_summary()
        return {m: median_ratio(b, u, m) for m in COST_METRICS}

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["case"] = None if self.case is None else self.case.to_json()
        d["ratio"] = self.ratio
        d["tokens_ratio"] = self.tokens_ratio
        if self.available:
            d["summary"] = {"biased": self.biased_summary(), "uniform": self.baseline_summary(),
                            "median_ratio": self.median_ratios()}
        return d


def run_mutants(
    config: CampaignConfig,
    *,
    mode: str = "biased",
    repeats: int = 1,
    only: list[str] | None = None,
    mutants: list[Mutant] | None = None,
    on_result: Callable[[KillResult], None] | None = None,
    on_run: Callable[[str, str, dict[str, Any]], None] | None = None,
) -> list[KillResult]:
    """A campaign against each mutant under ``config`` (its ``seconds`` and ``max_examples`` are the
    budget per run), ``repeats`` times.

    ``mode`` picks what runs: ``"biased"`` (the harness's strategies; the default),
    ``"uniform"`` (only the naive baseline :func:`fuzz.strategies.uniform_cases`, reported
    in the main fields ``killed``/``examples``/``seconds``) or ``"both"`` (biased in the
    main fields, the baseline under the same budget in ``baseline_*``). Repeat ``i`` uses
    campaign seed ``config.campaign_seed + i`` for both testers; the main and
    ``baseline_*`` fields are repeat 0, every repeat is in ``biased_runs`` /
    ``baseline_runs``. Only repeat 0 of the main tester shrinks (its shrunk case is the
    reported seed) and saves a seed, when ``config.save_seeds`` (in ``config.seeds_dir``).
    ``on_run(mutant, tester, record)`` is called after each single campaign. Unavailable
    mutants (no C ring, no torch) are reported with the reason, not skipped silently.
    """
    if mode not in ("biased", "uniform", "both"):
        raise ValueError(f"mode must be biased, uniform or both, got {mode!r}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    base_seed = config.campaign_seed or 0
    main_tester = "uniform" if mode == "uniform" else "biased"
    out = []
    for m in (mutants if mutants is not None else select(only)):
        kr = KillResult(m.name, m.bug_class, m.kind, m.reference, repeats=repeats)
        try:
            target, why = registry.try_build(lambda: _campaign_target(m, config))
        except (MutantError, TargetError) as e:
            target, why = None, f"{type(e).__name__}: {e}"
        if target is None:
            kr.available, kr.reason = False, why
            out.append(kr)
            if on_result:
                on_result(kr)
            continue
        # A fresh target per campaign; an isolated one forks fresh runners for each campaign's configuration.
        again = (lambda: target) if isinstance(target, isolated.IsolatedTarget) else (lambda: mutant_target(m))
        try:
            for rep in range(repeats):
                first = rep == 0
                # A kill is the first finding: its time and case are what the table measures (--stop-on-first).
                run = config.replace(campaign_seed=base_seed + rep, db=None, tester=main_tester, shrink=first,
                                     save_seeds=first and config.save_seeds, stop_on_first=True)
                t0 = time.monotonic()
                res = fuzz_target(target if first else again(), run)
                rec = run_record(res, run.campaign_seed, t0)
                kr.biased_runs.append(rec)
                if on_run:
                    on_run(m.name, main_tester, rec)
                if first:
                    kr.examples_run = res.examples
                    if res.failures:
                        kr.killed = True
                        kr.examples, kr.tokens = res.examples_to_fail, res.tokens_to_fail
                        kr.seconds = res.seconds_to_fail
                        kr.case = res.failures[0].case
                        kr.error = res.failures[0].error.splitlines()[0][:300]
                        kr.note = res.failures[0].note
                        kr.seed_path = res.failures[0].seed_path
                if mode == "both":
                    t0 = time.monotonic()
                    b = fuzz_target(again(), run.replace(tester="uniform", shrink=False, save_seeds=False))
                    brec = run_record(b, run.campaign_seed, t0)
                    kr.baseline_runs.append(brec)
                    if on_run:
                        on_run(m.name, "uniform", brec)
                    if first:
                        kr.baseline_examples_run = b.examples
                        kr.baseline_killed = bool(b.failures)
                        if b.failures:
                            kr.baseline_examples, kr.baseline_tokens = b.examples_to_fail, b.tokens_to_fail
                            kr.baseline_seconds = b.seconds_to_fail
                        else:
                            kr.baseline_seconds = brec["seconds_run"]
        finally:
            isolated.close(target)
        out.append(kr)
        if on_result:
            on_result(kr)
    return out


def _campaign_target(m: Mutant, config: CampaignConfig) -> Target:
    """``m`` as a campaign runs it: a C mutant in an isolated child, like every native target
    (:func:`fuzz.targets.isolated.should_isolate`). Its library is built here first, so a machine that
    cannot build it reports the reason (:class:`impl.errors.Unavailable`) as for any mutant."""
    spec = PREFIX + m.name
    if not isolated.should_isolate(spec, config):
        return mutant_target(m)
    m.implementation()
    return isolated.resolve(spec, config)


# ---------------------------------------------------------------------------
# The printed table


def _bound(stats: dict, key: str) -> str:
    v = stats[key]
    if v is None:
        return ""
    text = f"{v:g}" if isinstance(v, float) else str(v)
    return (">" if stats[f"{key}_lower_bound"] else "") + text


def _spread(stats: dict) -> str:
    """``median (min-max)``; survivors show as ``>N`` (the budget they spent)."""
    return f"{_bound(stats, 'median')} ({_bound(stats, 'min')}-{_bound(stats, 'max')})"


def _ratio_text(r) -> str:
    if r is None:
        return ""
    return ("≥" if r["lower_bound"] else "") + f"{r['value']:.1f}x"


def print_kill_table(console, results: list[KillResult], baseline: bool) -> None:
    """The kill table ``kvwindow mutants`` prints: one row per mutant, the uniform baseline beside it."""
    from rich.table import Table

    avail = [k for k in results if k.available]
    repeats = max((len(k.biased_runs) for k in avail), default=1)
    t = Table(title="mutant kill table", title_justify="left")
    t.add_column("mutant")
    t.add_column("class")
    t.add_column("killed")
    if repeats == 1 and not baseline:
        for col in ("examples", "tokens", "seconds"):
            t.add_column(col, justify="right")
    else:
        t.add_column("examples med (min-max)", justify="right")
        t.add_column("tokens med (min-max)", justify="right")
    if baseline:
        t.add_column("uniform killed")
        t.add_column("uniform ex med (min-max)", justify="right")
        t.add_column("uniform tokens med (min-max)", justify="right")
        t.add_column("ex ratio", justify="right")
        t.add_column("tokens ratio", justify="right")
    t.add_column("shrunk seed")
    for k in results:
        if not k.available:
            t.add_row(k.name, k.bug_class, "n/a", *([""] * (len(t.columns) - 4)), k.reason[:60])
            continue
        b = k.biased_summary()
        kills = f"{b['kills']}/{b['runs']}"
        kills = f"[green]{kills}[/]" if b["kills"] == b["runs"] else f"[bold red]{kills}[/]"
        row = [k.name, k.bug_class, kills]
        if repeats == 1 and not baseline:
            row += [str(k.examples) if k.killed else f">{k.examples_run}", str(k.tokens or ""),
                    f"{k.seconds:.3f}" if k.seconds is not None else ""]
        else:
            row += [_spread(b["examples"]), _spread(b["tokens"])]
        if baseline:
            u = k.baseline_summary()
            ratios = k.median_ratios()
            row += [f"{u['kills']}/{u['runs']}", _spread(u["examples"]), _spread(u["tokens"]),
                    _ratio_text(ratios.get("examples")), _ratio_text(ratios.get("tokens"))]
        row.append(str(k.case) if k.killed else "")
        t.add_row(*row)
    console.print(t)
    if baseline:
        console.print("uniform = the naive uniform-random tester under the same budget and campaign seeds. "
                      "Costs are to the first failing case: examples (test cases) and tokens pushed; "
                      "'>N' = not killed within the budget (counted as what it spent, so medians and ratios "
                      "marked > / ≥ are lower bounds). Ratios = median uniform cost / median biased cost.")
    console.print(f"killed {sum(k.killed_every_repeat for k in avail)}/{len(avail)} available mutants"
                  + (f" under every one of {repeats} seeds" if repeats > 1 else "")
                  + (f" ({len(results) - len(avail)} unavailable)" if len(avail) < len(results) else ""))
