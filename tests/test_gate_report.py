"""The gate's report: ``report.md``, ``report.html`` and ``report.json`` in one folder, written atomically;
the first screen of each is the verdict table; the HTML is self-contained (opens offline: no URL, no
script, plots inlined). A headless-browser rendering is checked by hand (README "Release gate")."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from fuzz.gate import files
from tests.support.gate import run_gate

TITLES = ["Intervention named", "Equivalence claim", "Cache identity", "Positive parity", "Negative controls",
          "Phase-specific performance", "Quality slices", "Invalidation and recovery"]


@pytest.fixture
def report(wrong_position_report):
    rc, doc, out = wrong_position_report
    assert rc == 1
    return out, doc


def test_json_holds_every_step_and_check(report):
    out, doc = report
    assert [s["number"] for s in doc["steps"]] == list(range(1, 9))
    assert [s["title"] for s in doc["steps"]] == TITLES
    for s in doc["steps"]:
        assert s["verdict"] in ("pass", "fail", "n/a") and s["summary"] and s["checks"]
        assert all(c["verdict"] in ("pass", "fail", "n/a") and c["detail"] for c in s["checks"])
    assert doc["subjects"]["candidate"]["identity"]["window"] == [8, None]
    assert doc["config"]["sources"]["claim"] == "--claim"
    ratios = doc["steps"][5]["data"]["ratios"]
    assert set(ratios) == {"ttft_s", "decode_p50_s", "decode_p95_s", "tokens_per_s_b1", "tokens_per_s_b8", "kv_bytes"}


def test_markdown_opens_with_the_verdict_table(report):
    out, doc = report
    lines = (out / "report.md").read_text().splitlines()
    assert lines[0].startswith("# kvwindow gate — FAIL at ")
    assert lines[2] == "| step | verdict | evidence |"
    rows = lines[4:12]
    assert [r.split(" | ")[0] for r in rows] == [f"| {i}. {t}" for i, t in enumerate(TITLES, 1)]
    assert "**FAIL**" in rows[3] and "cache-length-position" in rows[3]
    assert "![perf_ratios.png](perf_ratios.png)" in "\n".join(lines)


def test_html_is_self_contained_and_opens_with_the_verdict_table(report):
    out, doc = report
    html = (out / "report.html").read_text()
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:", html)
    assert not re.search(r"[a-z]+://|//[a-z]|url\(", text, re.I), "an external reference"
    assert "<script" not in html and "<link" not in html and "@import" not in html
    srcs = re.findall(r'src="([^"]*)"', html)
    assert len(srcs) == 2 and all(s.startswith("data:image/png;base64,") for s in srcs)
    body = html[html.index("<body>"):]
    first_table = body[body.index("<table>"):body.index("</table>")]
    assert body.index('class="banner') < body.index("<table>")
    assert [t for t in TITLES if t in first_table] == TITLES
    assert "FAIL" in body[:body.index("<table>")]


def test_reports_are_written_atomically(tmp_path, monkeypatch, wrong_position_report):
    import fuzz.gate.run as run

    out = tmp_path / "report"
    shutil.copytree(wrong_position_report[2], out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = os.replace
    monkeypatch.setattr(run, "STEPS", run.STEPS[:1])  # what is written does not matter here, only how

    def failing(src, dst):
        if str(dst).endswith("report.md"):
            raise OSError(28, "No space left on device")
        return real(src, dst)
    monkeypatch.setattr(files.os, "replace", failing)
    rc, _ = run_gate(tmp_path, "decoder", "decoder@c")
    assert rc == 3  # the report could not be written: a harness fault
    assert (out / "report.md").read_bytes() == before["report.md"]  # the old one is whole
    new = json.loads((out / "report.json").read_text())  # written (whole) before the failure
    assert new["verdict"] == "pass" and len(new["steps"]) == 1
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_atomic_write_keeps_the_umask_mode(tmp_path):
    files.atomic_write(tmp_path / "a.txt", "x")
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o666 & ~mask
