"""The README's worked examples of ``kvwindow gate`` give their verdicts (README "Release gate").

1. the decoder's C-ring backend against its torch backend, ``layout``, ``exact``: every step passes
   (quality slices are not applicable to an exact kind), exit 0 — the documented ``--quick`` command;
2. a decoder mutant whose next position is the cache length: fails, and step 4 names the cell and the
   position where cached and uncached first disagree;
3. an HF family's static cache against its dynamic cache (``hf`` marker): on the layers API (4.57+,
   the README's table) parity and the negative controls pass, and transformers' caches record no model
   identity, so a weights update serves stale state and a new window is silently ignored (steps 8 and 3
   fail on both subjects, marked as shared with the baseline); on the legacy API the static sliding
   cache carries a written-up finding, so only what holds on every release is asserted there.
"""

from __future__ import annotations

import pytest

from tests.support.gate import run_gate, steps


def test_c_ring_against_torch_layout_exact_passes(tmp_path):
    rc, doc = run_gate(tmp_path, "decoder", "decoder@c", "layout", "exact", budget="--quick")
    s = steps(doc)
    assert rc == 0 and doc["verdict"] == "pass" and doc["exit"] == 0
    assert {n: s[n]["verdict"] for n in s} == {1: "pass", 2: "pass", 3: "pass", 4: "pass", 5: "pass", 6: "pass",
                                               7: "n/a", 8: "pass"}
    assert "exact kind" in s[7]["summary"]
    # the claim is bit-identical logits: every candidate-vs-baseline cell of step 4 was compared, none skipped
    pairs = [c for c in s[4]["checks"] if c["name"].startswith("candidate vs baseline")]
    assert pairs and all(c["verdict"] == "pass" for c in pairs if "batch" not in c["name"])
    assert {c["name"] for c in s[5]["checks"]} == {"position off by one", "stale adapter", "truncated block",
                                                     "window + 1", "window - 1", "cross-request handle"}
    assert all(c["verdict"] == "pass" for c in s[5]["checks"])
    for name in ("report.md", "report.html", "report.json", "perf_ratios.png", "decode_latency.png"):
        assert (tmp_path / "report" / name).stat().st_size > 0


def test_wrong_position_mutant_fails_at_step_4_named(wrong_position_report):
    rc, doc, out = wrong_position_report
    s = steps(doc)
    assert rc == 1 and doc["verdict"] == "fail"
    assert s[4]["verdict"] == "fail"
    first = next(c for c in s[4]["checks"] if c["verdict"] == "fail")
    assert first["name"].startswith("cached vs uncached") and "cache-length-position" in first["subject"]
    # W = 8: positions 0..8 are right (the cache length equals n until the first eviction), 9 is the first wrong one
    assert "logits of position 9 differ" in first["detail"]
    assert s[4]["summary"].startswith("cached vs uncached")
    assert s[2]["verdict"] == "fail"  # the exact claim does not hold either
    assert s[1]["verdict"] == s[3]["verdict"] == s[5]["verdict"] == s[8]["verdict"] == "pass"
    md = (out / "report.md").read_text()
    assert md.splitlines()[0] == "# kvwindow gate — FAIL at step 2 (equivalence claim), step 4 (positive parity)"


@pytest.mark.hf
def test_hf_static_against_dynamic(tmp_path):
    pytest.importorskip("transformers")
    from fuzz.gate.subjects import SubjectUsageError, resolve
    from impl.hf import compat

    try:
        resolve("hf:mistral+static", "candidate")
    except SubjectUsageError as e:  # e.g. 4.45.2, whose SlidingWindowCache cannot be built
        pytest.skip(str(e))
    rc, doc = run_gate(tmp_path, "hf:mistral", "hf:mistral+static", "layout", "logits:1e-4")
    s = steps(doc)
    assert rc == 1
    # on every release: the baseline's cached path holds, every control is seen where it can be, and a
    # weights update serves the stale cache (transformers' caches carry no model identity)
    assert not [c for c in s[4]["checks"] if c["verdict"] == "fail" and c["subject"].startswith("baseline ")]
    assert s[5]["verdict"] == "pass" and s[7]["verdict"] == "n/a"
    weights = {c["subject"]: c for c in s[8]["checks"] if c["name"] == "weights update"}
    assert weights["baseline hf:mistral"]["verdict"] == "fail"
    assert "stale state served" in weights["baseline hf:mistral"]["detail"]
    if compat.info().api != "layers":
        # the legacy SlidingWindowCache evicts one step early (docs/findings/hf-445-sliding-cache.md, part 1,
        # 4.45-4.51) and fails prompts longer than W: the static candidate fails step 4 there; the table of
        # the README is the layers API's
        return
    for n in (1, 2, 4, 6):
        assert s[n]["verdict"] == "pass", (n, s[n]["summary"])
    assert all(c["verdict"] == "fail" and "stale state served" in c["detail"] for c in weights.values())
    assert set(weights) == {"baseline hf:mistral", "candidate hf:mistral+static"}
    assert s[8]["summary"].endswith("the baseline fails it too (not a regression)")
    controls = {(c["subject"], c["name"]): c["verdict"] for c in s[5]["checks"]}
    assert len(controls) == 12 and set(controls.values()) == {"pass"}  # six controls on each subject
    replay = [c for c in s[8]["checks"] if c["name"] == "replay after reset"]
    assert [c["verdict"] for c in replay] == ["pass", "pass"]
    # the cache layers keep the window they were built with: the live stream ignores a new one
    window = [c for c in s[3]["checks"] if c["name"] == "window"]
    assert [c["verdict"] for c in window] == ["fail", "fail"]
    assert all("silently accepted" in c["detail"] for c in window)
