"""The campaign report shows a kernel target's calls/s (issue 29: "the report shows calls/s"): a case's
``RunStats.calls`` / ``call_seconds`` add up in ``TargetResult.kernel_calls`` / ``kernel_seconds``, survive the JSON
report and a merge of workers, come back from an isolated child, and the summary prints one ``kernel calls:`` line
per target that made any. Runs everywhere (no triton needed: a stand-in target counts its launches)."""

from __future__ import annotations

import io

from rich.console import Console

from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.display import kernel_lines, summary
from fuzz.ops import Case
from fuzz.results import TargetResult, merge
from fuzz.targets.base import RunStats, Target


class TwoLaunchesPerCase(Target):
    """Passes every case, reporting two kernel launches of 10 ms each."""

    name = "two-launches"

    def run(self, case: Case) -> RunStats:
        return RunStats(case.tokens, calls=2, call_seconds=0.02)


def test_a_campaign_counts_launches_and_prints_calls_per_second(tmp_path):
    res = fuzz_target(TwoLaunchesPerCase(), CampaignConfig(seconds=2, max_examples=25, campaign_seed=1,
                                                           seeds_dir=str(tmp_path)))
    assert res.examples > 0 and res.kernel_calls == 2 * res.examples
    assert abs(res.kernel_seconds - 0.02 * res.examples) < 1e-6 and abs(res.kernel_calls_per_s - 100.0) < 1e-6
    out = io.StringIO()
    summary(Console(file=out, width=200), [res])
    assert f"kernel calls: two-launches: {res.kernel_calls:,} launches in" in out.getvalue()
    assert "100.00 calls/s" in out.getvalue()


def test_json_round_trip_and_merge_keep_the_counts():
    a = TargetResult("k", kernel_calls=6, kernel_seconds=3.0)
    b = TargetResult.from_json(a.to_json())
    assert (b.kernel_calls, b.kernel_seconds, a.to_json()["kernel_calls_per_s"]) == (6, 3.0, 2.0)
    m = merge("k", [a, TargetResult("k", kernel_calls=4, kernel_seconds=2.0)])
    assert (m.kernel_calls, m.kernel_seconds) == (10, 5.0)
    assert kernel_lines([TargetResult("quiet")]) == []  # a target that launches nothing prints no line


def test_an_isolated_child_returns_the_counts():
    from fuzz.targets.isolated_child import run_one

    reply = run_one(TwoLaunchesPerCase(), Case.parse(3, "push push"), None, {}, False)
    assert reply[0] == "ok" and reply[6:] == (2, 0.02)
