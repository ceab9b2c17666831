"""ct2:<model_type>: the CTranslate2 targets (tiny seeded HF models converted by CTranslate2's own
TransformersConverter). Skips with the reason when ctranslate2 is not installed (``pip install
'kvwindow[ct2]'``; ``make test`` installs it)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from fuzz.ops import Case
from fuzz.targets.base import Crash, Mismatch

ct2mod = pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install 'kvwindow[ct2]')")

from fuzz.targets.engines.ct2 import Ct2Target  # noqa: E402
from impl.engines import ct2, store, tiny  # noqa: E402
from impl.hf import reference  # noqa: E402

warnings.filterwarnings("ignore")


def needs(*paths: str) -> None:
    """Skip, naming what the release lacks, where it cannot drive one of ``paths`` (ct2 < 4.4: no
    return_logits_vocab, so no generate paths)."""
    lacking = {p: why for p, why in ct2.lacking_paths().items() if p in paths}
    if lacking:
        pytest.skip(f"ctranslate2 {ct2.release()}: " + "; ".join(f"{p}: {why}" for p, why in lacking.items()))


@pytest.fixture(scope="module")
def mistral():
    return Ct2Target("mistral", strict=True)


def ref(t: tiny.TinyModel, ids, w=None):
    return reference.forward(reference.ref_spec(t.arch, t.config, w or t.window), t.state, ids)[0].numpy()


def test_convention_window_is_hf_sliding_window(mistral):
    """The converted model's stepped decode sees exactly W keys: equal to the reference at W, not W +- 1."""
    needs("stepped")
    m = mistral.model(4, 1)
    ids = list(range(3, 15))
    gen, logits = m.generate([ids], 1, stepped=True)[0]
    full = ids + gen
    for w, close in ((4, True), (3, False), (5, False)):
        want = ref(m.tiny, full, w)[len(full) - 1 - len(logits):len(full) - 1]
        assert np.allclose(logits, want, atol=2e-4, rtol=2e-4) is close, w


def test_paths_pass_within_window():
    """A stream no longer than W on every path but the ragged forward_batch (which always raises on a
    sliding-window model: ct2-forward-past-window) agrees with the reference."""
    t = Ct2Target("mistral", strict=True, paths=("forward", "score", "stepped", "generate"))
    for seed_text in ("chunk:3 push push", "chunk:2 chunk:2 push push"):
        assert t.run(Case.parse(8, seed_text)).tokens == sum(int(x.split(":")[1]) if ":" in x else 1
                                                              for x in seed_text.split())


def test_ragged_forward_batch_raises(mistral):
    with pytest.raises(Crash, match="forward_batch"):
        Ct2Target("mistral", strict=True, paths=("batch",)).run(Case.parse(8, "chunk:3"))


@pytest.mark.parametrize("text,kind,finding", [
    ("chunk:5 push", Crash, "forward_batch"),                      # ct2-forward-past-window
])
def test_findings_reproduce_strict(mistral, text, kind, finding):
    with pytest.raises(kind, match=finding):
        mistral.run(Case.parse(4, text))


def test_chunked_prefill_finding():
    """ct2-chunked-prefill-window: a prompt of W + 2 tokens forwarded at once disagrees (generate path only)."""
    needs("generate")
    t = Ct2Target("mistral", strict=True, paths=("generate",))
    with pytest.raises(Mismatch, match=r"\[generate_batch"):
        t.run(Case.parse(4, "chunk:6 push"))
    t.run(Case.parse(4, "chunk:5 push"))  # W + 1: chunked into W and one decode step: exact


def test_known_findings_are_reported_not_raised():
    t = Ct2Target("mistral")
    stats = t.run(Case.parse(4, "chunk:6 push"))
    assert any(v is True for v in stats.known.values()), stats.known


def test_gemma2_window_dropped_by_converter():
    needs("stepped")
    t = Ct2Target("gemma2", strict=True, paths=("stepped",))
    with pytest.raises(Mismatch, match="stepped"):
        t.run(Case.parse(3, "chunk:6 push"))


def test_conversion_cache_rebuilds_a_corrupt_entry(tmp_path, monkeypatch):
    monkeypatch.setenv(store.ENV, str(tmp_path))
    tm = tiny.build("mistral", 3)
    first = ct2.converted(tm)
    again = ct2.converted(tm)
    assert first == again
    (first / "model.bin").write_bytes(b"corrupt")
    assert not store.verify(first.parent, json.loads((first.parent / store.MANIFEST).read_text())["key"])
    rebuilt = ct2.converted(tm)
    assert store.verify(rebuilt.parent, json.loads((rebuilt.parent / store.MANIFEST).read_text())["key"])
    assert (rebuilt / "model.bin").stat().st_size > 1000


def test_unknown_arch_is_unavailable():
    from impl.engines import EngineUnavailable

    with pytest.raises(EngineUnavailable, match="no tiny model"):
        Ct2Target("llama4")


def test_registry_lists_ct2():
    from fuzz.targets import registry

    names = [n for n, _ in registry.listed_names()]
    assert "ct2:mistral" in names and "ct2:gemma3_text" in names


def test_forward_past_window_counts_only_the_cases_that_exercise_it():
    """The default paths count ct2-forward-past-window only for a stream longer than W; the opt-in ragged batch
    path (which raises for every window below 32) counts every case, and reproduces it."""
    t = Ct2Target("mistral")
    assert "batch" not in t.paths
    assert "ct2-forward-past-window" not in t.known_hits(Case.parse(8, "chunk:3 push push"))
    assert "ct2-forward-past-window" in t.known_hits(Case.parse(4, "chunk:5 push"))
    tb = Ct2Target("mistral", paths=("batch",))
    assert "ct2-forward-past-window" in tb.known_hits(Case.parse(8, "chunk:3"))
    assert tb.run(Case.parse(8, "chunk:3")).known == {"ct2-forward-past-window": True}


def test_two_threads_agree_with_the_reference():
    """Campaigns run one intra-op thread (two are ~100x slower on this loaded machine); two are driven here."""
    t = Ct2Target("mistral", strict=True, threads=2, paths=("forward", "score", "stepped", "generate"))
    t.run(Case.parse(8, "chunk:3 push push"))


def test_chunked_prefill_finding_gemma3_at_w1():
    """ct2-chunked-prefill-window on Gemma 3 reaches W = 1 (found by a campaign: push chunk:2 push); the stepped
    path of the same stream agrees, so the window itself is right."""
    needs("generate", "stepped")
    from impl.engines import EngineUnavailable

    try:
        ct2.check("gemma3_text")
    except EngineUnavailable as e:  # before 4.7: no Gemma 3 loader
        pytest.skip(str(e))
    case = Case.parse(1, "push chunk:2 push")
    with pytest.raises(Mismatch, match=r"\[generate_batch"):
        Ct2Target("gemma3_text", strict=True, paths=("generate",)).run(case)
    Ct2Target("gemma3_text", strict=True, paths=("stepped",)).run(case)
    assert "ct2-chunked-prefill-window" in Ct2Target("gemma3_text").known_hits(case)


def test_gemma2_window_dropped_counts_the_ragged_generations_second_row():
    """A stream within W whose first ragged generate_batch's second row (``s.other`` plus the generated
    pushes) queries past W hits ct2-gemma2-window-dropped; a campaign once reported it as new (W=6, a
    6-token second row generating two tokens: its last query sees 7)."""
    needs("generate")
    case = Case.parse(6, "push chunk:1 push push")
    t = Ct2Target("gemma2")
    assert "ct2-gemma2-window-dropped" in t.known_hits(case)
    assert t.run(case).known.get("ct2-gemma2-window-dropped") is True


def test_every_finding_a_case_reproduces_is_recorded_and_its_cases_are_never_left_out():
    """A stream of W + 2 forwarded at once reproduces ct2-forward-past-window (forward, score) and
    ct2-chunked-prefill-window (generate) in one run: both are recorded. Since every path runs, a
    saturated finding does not leave cases out (before: a 120 s campaign recorded chunked-prefill 0 times and
    drove only streams within W once forward-past-window had reproduced 3 times)."""
    needs("generate")
    from fuzz.phases.known import KnownBudget
    from fuzz.results import TargetResult

    t = Ct2Target("mistral")
    case = Case.parse(4, "chunk:6 push")
    known = t.run(case).known
    assert known.get("ct2-forward-past-window") is True and known.get("ct2-chunked-prefill-window") is True
    budget = KnownBudget(1, TargetResult(name=t.name))
    budget.count(known)
    assert t.every_path_runs and not budget.saturated(t, case)


def test_static_prompt_past_the_window_corrupts_the_heap():
    """docs/findings/ct2-static-prompt-heap-overflow.md, in a child (glibc's MALLOC_CHECK_=3 makes the detection
    certain): a static prompt of 10 onto a prompt of 5 at W = 4 dies; a static prompt of W does not. The
    campaign never drives what static_prompt_overflows covers (the measured cases and more)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from fuzz.targets.engines.ct2 import static_prompt_overflows

    needs("generate")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root), MALLOC_CHECK_="3")
    run = lambda *a: subprocess.run([sys.executable, str(root / "scripts/repro/ct2_static_prompt_overflow.py"),  # noqa: E731
                                     *map(str, a)], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    ok = run(4, 4, 5)
    assert ok.returncode == 0 and "survived" in ok.stdout, ok.stderr[-2000:]
    bad = run(4, 10, 5)
    assert bad.returncode != 0 and "survived" not in bad.stdout, (
        f"ctranslate2 {ct2.release()} no longer corrupts its heap (exit {bad.returncode}): update the note's releases")
    for w, st, p in ((4, 7, 5), (4, 8, 6), (4, 10, 5), (8, 12, 8), (8, 11, 9)):
        assert static_prompt_overflows(w, st, p)
    assert not static_prompt_overflows(4, 4, 5) and not static_prompt_overflows(8, 8, 9)
