"""Time to bug (the FuzzBench / Magma measure): for every real bug this project knows — each written-up
transformers finding on a release it applies to, and every mutant of the catalogue — the seconds and
examples until its first reproduction from an empty example database, for three testers side by side:

* ``kvwindow``: the default campaign (:func:`fuzz.campaign.fuzz_target`: every phase, boundary-biased);
* ``uniform``: the same campaign loop with the naive uniform tester (:func:`fuzz.strategies.uniform_cases`);
* ``machine``: a plain hand-written Hypothesis ``RuleBasedStateMachine`` over the same target (rules push,
  chunk, reset; the case it built is run at teardown), what a user would write without this harness.

A mutant is reproduced when the target fails; a finding when a case reproduces it (the target reports it
as known, :attr:`fuzz.targets.base.RunStats.known`). Findings on a release other than the installed one
run in that release's venv (``scripts/hf_matrix.sh --build-only --releases R`` builds
``.venv-hf-R``), one subprocess per measurement (``python -m fuzz.bench.bugs --one JSON``). A run that
does not reproduce its bug within the budget is censored at the budget (shown as ``>budget``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from fuzz.bench.summary import stats
from impl.errors import Unavailable

TESTERS = ("kvwindow", "uniform", "machine")

#: Each written-up transformers finding, one release it applies to (the newest supported where it
#: still applies, else the oldest the CI builds) and the target it is reproduced on.
FINDING_PLAN = (
    ("hf-sliding-window-1", "hf-dynamic", "5.24.0"),
    ("hf-static-sliding-empty-update", "hf-static", "5.24.0"),
    ("hf-dynamic-reset-stale", "hf-dynamic", "5.10.4"),
    ("hf-445-sliding-cache", "hf-static", "4.45.2"),
    ("hf-window-ignored", "hf:qwen2", "4.45.2"),
    ("hf-gemma2-padded-decode-mask", "hf:gemma2", "4.45.2"),
)


@dataclass(frozen=True)
class Bug:
    name: str
    #: ``"mutant"`` or ``"finding"``.
    kind: str
    #: The ``--target`` it is reproduced on.
    spec: str
    #: transformers release it needs (findings); ``None``: the installed packages.
    release: Optional[str] = None


class Reproduced(Exception):
    """Raised by the state machine's teardown when its case reproduced the finding it is looking for."""


#: Mutant kinds this section leaves out: the uniform tester and the plain state machine drive ring ops, which a
#: paged cache does not take (an isolated paged target answered them with a failure the machine counted as a
#: kill). The paged mutants' cost to kill is the kill table's (``kvwindow mutants --only paged-``).
PAGED_KINDS = ("paged-c", "py-paged")


def mutant_bugs(only: Optional[tuple[str, ...]] = None) -> list[Bug]:
    from impl.mutants.catalogue import catalogue

    return [Bug(m.name, "mutant", "mutant:" + m.name) for m in catalogue()
            if m.name != "decoder-*" and m.kind not in PAGED_KINDS and (only is None or m.name in only)]


def finding_bugs() -> list[Bug]:
    return [Bug(fid, "finding", spec, release) for fid, spec, release in FINDING_PLAN]


def _installed_transformers() -> Optional[str]:
    try:
        from importlib.metadata import version

        return version("transformers")
    except Exception:  # noqa: BLE001
        return None


def _target(bug: Bug) -> Any:
    from fuzz.config import CampaignConfig
    from fuzz.targets import isolated

    return isolated.resolve(bug.spec, CampaignConfig())


def _reproduced(bug: Bug) -> Callable[[Any], bool]:
    if bug.kind == "finding":
        return lambda r: bug.name in r.known_first
    return lambda r: r.examples_to_fail is not None or bool(r.failures)


def _campaign(bug: Bug, target: Any, tester: str, seed: int, seconds: float) -> dict[str, Any]:
    from fuzz.campaign import fuzz_target
    from fuzz.config import CampaignConfig

    done = _reproduced(bug)
    cfg = CampaignConfig(seconds=seconds, campaign_seed=seed, tester="biased" if tester == "kvwindow" else "uniform",
                         save_seeds=False, shrink=False, known_repeats=None, stop_on_first=True)
    r = fuzz_target(target, cfg, database=None, enough=done)
    if r.faults:
        raise Unavailable(f"{bug.spec}: harness fault: {r.faults[0]}")
    if bug.kind == "finding":
        first = r.known_first.get(bug.name)
        if first is None:
            return {"found": False, "seconds": r.seconds, "examples": r.examples}
        return {"found": True, "seconds": first["seconds"], "examples": first["examples"]}
    if r.examples_to_fail is None:
        return {"found": False, "seconds": r.seconds, "examples": r.examples}
    return {"found": True, "seconds": r.seconds_to_fail, "examples": r.examples_to_fail + 1}


def plain_machine(target: Any, bug: Bug, window_max: int, counter: list[int]) -> type:
    """The hand-written machine: a window, then rules that append a push, a chunk or a reset; the case is run
    through ``target`` at teardown (a failure, or for a finding its reproduction, ends the search)."""
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

    from fuzz.ops import Case, Chunk, Push, Reset

    limit = target.max_tokens

    class Plain(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.window, self.ops, self.tokens = 1, [], 0

        def room(self, n: int) -> bool:
            return limit is None or self.tokens + n <= limit

        @initialize(w=st.integers(1, window_max))
        def start(self, w: int) -> None:
            self.window = w

        @rule()
        def push(self) -> None:
            if self.room(1):
                self.ops.append(Push())
                self.tokens += 1

        @rule(n=st.integers(0, 2 * window_max))
        def chunk(self, n: int) -> None:
            if self.room(n):
                self.ops.append(Chunk(n))
                self.tokens += n

        @rule(w=st.integers(1, window_max))
        def reset(self, w: int) -> None:
            self.ops.append(Reset(w))

        def teardown(self) -> None:
            counter[0] += 1
            stats = target.run(Case(self.window, tuple(self.ops)))
            if bug.kind == "finding" and stats.known.get(bug.name):
                raise Reproduced(bug.name)

    return Plain


def _machine(bug: Bug, target: Any, seed: int, seconds: float, window_max: int = 16) -> dict[str, Any]:
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import seed as hyp_seed
    from hypothesis.stateful import run_state_machine_as_test

    from fuzz.targets.base import HARNESS, failure_kind

    counter = [0]
    machine = plain_machine(target, bug, window_max, counter)
    start = time.monotonic()
    batch = 0
    while time.monotonic() - start < seconds:
        run = settings(max_examples=20, deadline=None, database=None, phases=[Phase.generate],
                       suppress_health_check=list(HealthCheck), print_blob=False)

        @hyp_seed(seed * 1_000_003 + batch)
        def go() -> None:
            run_state_machine_as_test(machine, settings=run)

        batch += 1
        try:
            go()
        except Reproduced:
            return {"found": True, "seconds": time.monotonic() - start, "examples": counter[0]}
        except Exception as e:  # noqa: BLE001 - the target failed: a mutant's kill (a finding's other failure)
            if failure_kind(e) == HARNESS:
                raise Unavailable(f"{bug.spec}: harness fault: {e}") from e
            if bug.kind == "mutant":
                return {"found": True, "seconds": time.monotonic() - start, "examples": counter[0]}
    return {"found": False, "seconds": time.monotonic() - start, "examples": counter[0]}


def measure_here(bug: Bug, tester: str, seed: int, seconds: float, target: Any = None) -> dict[str, Any]:
    """One measurement in this process (the bug's release must be the installed one)."""
    own = target is None
    target = _target(bug) if own else target
    try:
        if tester == "machine":
            return _machine(bug, target, seed, seconds)
        return _campaign(bug, target, tester, seed, seconds)
    finally:
        if own:
            from fuzz.targets.isolated import close

            close(target)


def release_python(release: str) -> Path:
    """The interpreter of ``release``'s venv, or :class:`Unavailable` saying how to build it."""
    root = Path(__file__).resolve().parents[2]
    py = root / f".venv-hf-{release}" / "bin" / "python"
    if not py.exists():
        raise Unavailable(f"no venv for transformers {release} ({py.parent.parent.name}); build it with "
                          f"scripts/hf_matrix.sh --build-only --releases {release}")
    return py


def measure_elsewhere(bug: Bug, tester: str, seed: int, seconds: float) -> dict[str, Any]:
    """One measurement in the bug's release venv (a subprocess of ``--one``)."""
    py = release_python(bug.release or "")
    job = json.dumps({"bug": asdict(bug), "tester": tester, "seed": seed, "seconds": seconds})
    proc = subprocess.run([str(py), "-m", "fuzz.bench.bugs", "--one", job], capture_output=True, text=True,
                          timeout=seconds * 4 + 120, env=dict(os.environ, PYTHONHASHSEED="0"))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise Unavailable(f"{bug.name} on transformers {bug.release}: the measurement failed (exit "
                          f"{proc.returncode}): {(proc.stderr.strip().splitlines() or [''])[-1][:300]}")
    out = json.loads(lines[-1])
    if "unavailable" in out:
        raise Unavailable(out["unavailable"])
    return out


def measure_bug(bug: Bug, testers: tuple[str, ...], seeds: range, seconds: float,
                log: Callable[[str], None]) -> dict[str, Any]:
    """Every tester, every seed, for one bug, interleaved seed by seed (so load hits the testers alike)."""
    here = bug.release is None or bug.release == _installed_transformers()
    runs: dict[str, list[dict]] = {t: [] for t in testers}
    target = _target(bug) if here else None
    try:
        for s in seeds:
            for t in testers:
                runs[t].append(measure_here(bug, t, s, seconds, target) if here
                               else measure_elsewhere(bug, t, s, seconds))
    finally:
        if target is not None:
            from fuzz.targets.isolated import close

            close(target)
    row: dict[str, Any] = {"bug": bug.name, "kind": bug.kind, "target": bug.spec, "release": bug.release,
                           "budget_s": seconds, "runs": runs}
    for t in testers:
        found = [r for r in runs[t] if r["found"]]
        row[t] = {"found": len(found), "of": len(runs[t]),
                  "seconds": stats([r["seconds"] if r["found"] else seconds for r in runs[t]]),
                  "examples": stats([float(r["examples"]) for r in runs[t]])}
    k, m = row.get("kvwindow"), row.get("machine")
    if k and m:
        kv, mv = k["seconds"]["median"], m["seconds"]["median"]
        censored = m["found"] < m["of"] // 2 + 1
        row["speedup"] = {"value": mv / kv if kv > 0 else None, "lower_bound": censored}
    log(f"  {bug.name}: " + "; ".join(f"{t} {row[t]['found']}/{row[t]['of']} in {row[t]['seconds']['median']:.3g} s"
                                      for t in testers))
    return row


def section_bugs(b: Any, log: Callable[[str], None]) -> dict[str, Any]:
    """The bench section: every bug, every tester, ``b.bug_repeats`` seeds."""
    bugs = mutant_bugs(b.bug_only) + ([] if b.bug_only is not None else finding_bugs())
    rows, skipped = [], {}
    for bug in bugs:
        seconds = b.bug_finding_s if bug.kind == "finding" else b.bug_s
        try:
            rows.append(measure_bug(bug, TESTERS, range(b.bug_repeats), seconds, log))
        except Unavailable as e:
            skipped[bug.name] = str(e)
            log(f"  {bug.name}: not measured: {e}")
    if not rows:
        raise Unavailable("no bug could be measured: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    found = {t: sum(1 for r in rows if r[t]["found"] > r[t]["of"] // 2) for t in TESTERS}
    ten_x = [r["bug"] for r in rows if (r.get("speedup") or {}).get("value") is not None
             and r["speedup"]["value"] >= 10]
    return {"status": "ok", "rows": rows, "skipped": skipped, "testers": list(TESTERS), "found": found,
            "bugs": len(rows), "at_least_10x": ten_x, "repeats": b.bug_repeats}


def plot_bugs(sec: dict, path: Path) -> None:
    """Bugs found (by the median run of each bug) against seconds, one line per tester."""
    from fuzz.bench.plots import _plt

    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for t in sec["testers"]:
        times = sorted(r[t]["seconds"]["median"] for r in sec["rows"] if r[t]["found"] > r[t]["of"] // 2)
        xs, ys = [0.0], [0]
        for i, x in enumerate(times, 1):
            xs += [x, x]
            ys += [i - 1, i]
        ax.step(xs + [max(r["budget_s"] for r in sec["rows"])], ys + [len(times)], where="post", label=t)
    ax.set_xscale("symlog", linthresh=0.01)
    ax.set_xlabel("seconds to first reproduction (median over seeds)")
    ax.set_ylabel(f"bugs reproduced (of {sec['bugs']})")
    ax.set_title("time to bug: kvwindow vs the uniform tester vs a plain state machine")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(sec: dict) -> list[str]:
    """The report's table of the section."""
    def cell(c: dict, budget: float) -> str:
        med = c["seconds"]["median"]
        text = f"{med:.3g}" if c["found"] > c["of"] // 2 else f">{budget:g}"
        return f"{text} ({c['seconds']['min']:.3g}–{c['seconds']['max']:.3g}), {c['found']}/{c['of']}"

    L = ["| bug | kind | target | release | " + " | ".join(f"{t} s (range), found" for t in sec["testers"])
         + " | machine / kvwindow |", "|---|---|---|---|" + "---|" * len(sec["testers"]) + "---:|"]
    for r in sec["rows"]:
        sp = r.get("speedup") or {}
        ratio = "—" if sp.get("value") is None else (">" if sp.get("lower_bound") else "") + f"{sp['value']:.3g}×"
        L.append(f"| {r['bug']} | {r['kind']} | `{r['target']}` | {r['release'] or '—'} | "
                 + " | ".join(cell(r[t], r["budget_s"]) for t in sec["testers"]) + f" | {ratio} |")
    L += ["", "Found (median run within the budget): " + ", ".join(f"{t} {n}/{sec['bugs']}"
                                                                  for t, n in sec["found"].items())
          + f"; kvwindow at least 10× sooner than the plain machine on {len(sec['at_least_10x'])} of {sec['bugs']}."]
    if sec.get("skipped"):
        L += ["", "Not measured: " + "; ".join(f"{k} ({v})" for k, v in sec["skipped"].items()) + "."]
    L += ["", "Not in this table: the paged mutants (the uniform tester and the plain machine drive ring ops, which "
              "a paged cache does not take); `kvwindow mutants --only paged-` measures their cost to kill."]
    return L


def main(argv: list[str] | None = None) -> int:
    """``--one JSON``: one measurement in this interpreter (what :func:`measure_elsewhere` starts)."""
    ap = argparse.ArgumentParser(prog="python -m fuzz.bench.bugs")
    ap.add_argument("--one", required=True)
    job = json.loads(ap.parse_args(argv).one)
    bug = Bug(**job["bug"])
    try:
        out = measure_here(bug, job["tester"], job["seed"], job["seconds"])
    except Unavailable as e:
        out = {"unavailable": str(e)}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
