"""`kvwindow bench` runs end to end on a tiny budget and writes a well-formed report.

Speed is measured by the bench, never asserted here: these tests only check the
shape of what it writes (files, sections, positive ratios, valid PNGs).
"""

import json
import math

import pytest

from fuzz.bench import run as bench
from fuzz.bench import sections
from fuzz.bench.budgets import BUDGETS
from impl.errors import Unavailable

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SECTIONS = ("throughput", "peer", "isolation", "mutants", "decode", "gpu", "long", "paged")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    assert bench.main(["--smoke", "--quiet", "--out", str(out)]) == 0
    return out, json.loads((out / "report.json").read_text())


def _ratios(report):
    for name in SECTIONS:
        yield from report["sections"][name].get("ratios", [])


def test_report_files_exist(smoke):
    out, report = smoke
    assert (out / "report.json").is_file() and (out / "report.md").is_file()
    md = (out / "report.md").read_text()
    for heading in ("## 1. Throughput", "## 2. Peer", "## 2b. Isolation", "## 3. Mutants", "## 4. Decode",
                    "## 5. GPU"):
        assert heading in md


def test_json_has_every_section_with_a_status(smoke):
    _, report = smoke
    assert set(SECTIONS) <= set(report["sections"])
    for name in SECTIONS:
        status = report["sections"][name]["status"]
        # either measured, or a line that says why not
        assert status == "ok" or status.startswith(("not available: ", "skipped")), (name, status)
    m = report["machine"]
    assert m["cpu"] and m["usable_cores"] >= 1
    for pkg in ("python", "torch", "numpy", "hypothesis"):
        assert m["versions"][pkg]
    assert "transformers" in m["versions"]


def test_throughput_measured(smoke):
    _, report = smoke
    sec = report["sections"]["throughput"]
    assert sec["status"] == "ok"
    assert any(r["target"] == "pyring" and r["mode"] == "stateful" for r in sec["rows"])
    for r in sec["rows"]:
        assert r["tokens_per_s"]["median"] > 0
    names = {r["target"] for r in sec["rows"]}
    if "ring-c" in names:  # the C ring is there: its bulk / stateful comparison must be too
        assert any("bulk / stateful" in r["label"] for r in sec["ratios"])


def test_ratios_are_positive_numbers_with_min_median_max(smoke):
    _, report = smoke
    for r in _ratios(report):
        assert r["n"] >= 1, r
        for k in ("min", "median", "max"):
            assert isinstance(r[k], (int, float)) and math.isfinite(r[k]) and r[k] > 0, (r["label"], k, r[k])
        assert r["min"] <= r["median"] <= r["max"]


def test_gpu_section_says_why_when_skipped(smoke):
    _, report = smoke
    gpu = report["sections"]["gpu"]
    if gpu["status"] != "ok":
        assert len(gpu["status"]) > len("skipped: ")
        md = (smoke[0] / "report.md").read_text()
        assert gpu["status"] in md


def test_plots_are_valid_pngs(smoke):
    out, report = smoke
    assert "throughput" in report["plots"]
    for name, fname in report["plots"].items():
        data = (out / fname).read_bytes()
        assert data[:8] == PNG_MAGIC, name
        assert len(data) > 2000, name
        assert report["sections"][name]["status"] == "ok"


def test_missing_helper_is_reported_not_raised(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise Unavailable("helper not built")

    # Every section's helper is missing: what is checked is the report, not the measurements (the smoke fixture
    # measures them), and a real section here would spend most of a minute measuring.
    for name in list(sections.SECTIONS):
        monkeypatch.setitem(sections.SECTIONS, name, lambda b, log: boom())
    rep = bench.run_bench(BUDGETS["smoke"], tmp_path, command="test", log=lambda s: None)
    for name in sections.SECTIONS:
        assert rep["sections"][name]["status"] == "not available: helper not built"
    assert (tmp_path / "report.md").is_file()


def test_peer_comparison_measured_side_by_side(smoke):
    """The campaign and the hand-written state machine, each W measured by both in every repeat."""
    _, report = smoke
    sec = report["sections"]["peer"]
    assert sec["status"] == "ok"
    for r in sec["rows"]:
        assert r["campaign_tokens_per_s"]["n"] == r["peer_tokens_per_s"]["n"] == report["budget"]["repeats"]
        assert r["campaign_tokens_per_s"]["median"] > 0 and r["peer_tokens_per_s"]["median"] > 0
        assert r["peer_examples"] > 0 and all(v > 0 for v in r["campaign_phases"].values())
    assert {r["window"] for r in sec["ratios"]} == set(report["budget"]["peer_windows"])


def test_only_runs_the_sections_asked_for(tmp_path):
    assert bench.main(["--smoke", "--quiet", "--only", "gpu", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    for name in SECTIONS:
        if name != "gpu":
            assert report["sections"][name]["status"] == "skipped: not selected (--only)"


def test_the_peer_catches_a_broken_ring(monkeypatch):
    """The peer is a real check, not a loop that only counts: against a ring that reads one entry
    short once full, its invariant fails."""
    from hypothesis.errors import Flaky

    from fuzz.bench import peer
    from impl.ring import CRing

    real = CRing.contents
    monkeypatch.setattr(CRing, "contents", lambda self: real(self)[1:] if len(self) == self.window else real(self))
    with pytest.raises((AssertionError, Flaky)):
        peer.measure_peer(4, 5.0)


def test_isolation_cost_measured_side_by_side(smoke):
    """ring-c in process and in an isolated child, each repeat both sides, at the budget's windows."""
    _, report = smoke
    sec = report["sections"]["isolation"]
    assert sec["status"] == "ok"
    for r in sec["rows"]:
        a, c = r["in_process_tokens_per_s"], r["child_tokens_per_s"]
        assert a["n"] == c["n"] == report["budget"]["repeats"] and a["median"] > 0 and c["median"] > 0
        assert r["in_process_examples"] > 0 and r["child_examples"] > 0
    assert {r["window"] for r in sec["ratios"]} == set(report["budget"]["isolation_windows"])
    assert all(r["goal"] == "<= 1.5" for r in sec["ratios"])


def test_long_section_reports_the_bulk_phase_share_in_process_and_isolated(smoke):
    """The bulk phase of a default ring-c campaign, in this process and in the isolated child kvwindow fuzz
    uses (its bulk phase a request to the child): tokens and a share of the time; pyring has none."""
    from fuzz.targets.ring_bulk import BULK_TOKENS

    _, report = smoke
    sec = report["sections"]["long"]
    assert sec["status"] == "ok"
    rows = {r["target"]: r for r in sec["rows"]}
    assert set(rows) == {"ring-c", "ring-c (isolated)", "pyring"}
    for name in ("ring-c", "ring-c (isolated)"):
        assert rows[name]["bulk_tokens"]["median"] >= BULK_TOKENS, name
        assert 0 < rows[name]["bulk_time_share"]["median"] < 1 and rows[name]["long_tour_s"]["median"] > 0
    assert rows["pyring"]["bulk_tokens"]["median"] == 0
