"""Issue 28.3: the threads phase on engine targets. An engine target whose engine documents concurrent calls on one
engine object (``EngineTarget.thread_safe``, the document in ``threads_doc``) runs 2-4 streams at once against that
one object; a race on per-stream state kept in the shared object (tests/support/engine_threads.py) is found there
and only there, its clean twin passes, and an engine without the promise gets "n/a" naming its document."""

from __future__ import annotations

import pytest

from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.ops import Case, Instance
from fuzz.targets.base import Mismatch
from tests.support.engine_threads import FakeEngineTarget, Unpromised


def _campaign(target, seconds):
    return fuzz_target(target, CampaignConfig(seconds=seconds, campaign_seed=3, save_seeds=False))


def test_a_race_on_the_shared_engine_object_is_found_by_the_threads_phase_only():
    res = _campaign(FakeEngineTarget(racy=True), 8)
    assert res.phases_run["threads"]["status"] == "ran", res.phases_run["threads"]
    assert res.failures, "the threads phase missed a race on one shared engine object"
    for f in res.failures:  # one thread at a time the racy engine is right: every failure is a threaded case
        assert f.kind == "mismatch" and f.case.threads and f.case.instance_count >= 2, f.case
        assert "one shared engine object, all at once" in f.error, f.error


def test_its_clean_twin_passes_every_phase_threads_included():
    res = _campaign(FakeEngineTarget(racy=False), 4)
    assert not res.failures, [f.error for f in res.failures]
    assert res.phases_run["threads"]["status"] == "ran" and res.phases_run["threads"]["examples"] > 0


def test_an_engine_without_the_promise_gets_na_naming_its_document():
    res = _campaign(Unpromised(racy=False), 2)
    rec = res.phases_run["threads"]
    assert rec["status"] == "n/a" and rec["examples"] == 0
    assert Unpromised.threads_doc in rec["why"] and "not driven from several threads" in rec["why"], rec


def test_a_threaded_failure_names_the_case_op_of_its_thread():
    """Thread 0's stream is ops #0 and #2 of the case; its mismatch at its own op 1 is the case's op #2 (the first
    failing thread in thread order is raised)."""
    t = FakeEngineTarget(racy=False)
    t.engine.extend = lambda held, start, n, w: list(range(start + n))[-w:] if start == 0 else []
    case = Case.parse(4, "@0 push @1 push @0 push @1 push", instances=[Instance(4)]).replace(threads=True)
    with pytest.raises(Mismatch, match=r"after op #2 \(push\): thread 0 of 2 \(one shared engine object"):
        t.run(case)


@pytest.mark.parametrize("kind", ["gqa", "attention"])
def test_ort_declares_the_promise_and_a_threaded_case_passes_on_one_session(kind):
    pytest.importorskip("onnxruntime")
    from fuzz.targets.engines.ort import make
    from impl.engines import EngineUnavailable

    try:
        t = make(kind, strict=True)
    except EngineUnavailable as e:  # this release lacks the op: unavailable with its reason
        pytest.skip(f"ort:{kind} unavailable: {e}")
    assert t.thread_safe and "onnxruntime#19301" in t.threads_doc
    case = Case.parse(5, "@0 chunk:4 @1 chunk:6 @0 push @1 chunk:3", instances=[Instance(3)]).replace(threads=True)
    assert t.accepts(case) is None
    assert t.run(case).tokens == 14


@pytest.mark.parametrize("module, cls, cites", [
    ("fuzz.targets.engines.mlx", "MlxTarget", "ml-explore/mlx#3078"),
    ("fuzz.targets.engines.mlx_models", "MlxModelTarget", "ml-explore/mlx#3078"),
    ("fuzz.targets.engines.llama", "LlamaTarget", "ggml-org/llama.cpp#9274"),
    ("fuzz.targets.engines.ct2", "Ct2Target", "docs/parallel.md"),
])
def test_engines_without_the_promise_name_their_document(module, cls, cites):
    import importlib

    target = getattr(importlib.import_module(module), cls)
    assert not target.thread_safe and cites in target.threads_doc
    if cls == "Ct2Target":  # the engine promises it; the adapter is what cannot take it: said so
        assert "adapter" in target.threads_doc and "not safe across threads" in target.threads_doc


def test_a_known_finding_met_in_one_thread_stays_known():
    """The fake's finding: a stream longer than its window (here only thread 1's). Strict, it is a mismatch naming
    thread 1; with the finding applying, the threaded case reproduces it (read on thread 1's own stream)."""
    from fuzz.targets.known import Finding

    class Known(FakeEngineTarget):
        findings = (Finding("fake-beyond", frozenset({"fake-engine:clean"}), ("1.0",), ("1.0",),
                            lambda c: any(sum(getattr(op, "tokens", 0) for _, op in ops) > w for w, ops in c.streams()),
                            failure=lambda e: "holds positions" in str(e)),)

    t = Known(racy=False)
    t.engine.extend = lambda held, start, n, w: (held + list(range(start, start + n)))  # never evicts
    case = Case.parse(4, "@0 push @1 chunk:3 @1 chunk:3", instances=[Instance(3)]).replace(threads=True)
    t.strict = True
    with pytest.raises(Mismatch, match=r"after op #2 \(@1 chunk:3\): thread 1 of 2"):
        t.run(case)
    t.strict = False
    assert t.run(case).known == {"fake-beyond": True}
