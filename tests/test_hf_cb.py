"""``hf-cb:<model_type>``: transformers' continuous batching held to the spec (fuzz/targets/hf/cb.py).

Skipped where the installed transformers has no continuous batching with ``ContinuousBatchingConfig`` (4.45.2,
which CI runs the HF tests on too: :func:`impl.hf.cb.available` names what is missing).
"""

import pytest

pytest.importorskip("transformers")

from impl.hf import cb  # noqa: E402

WHY = cb.available()
if WHY is not None:
    pytest.skip(f"no continuous batching to drive: {WHY}", allow_module_level=True)

from fuzz.ops import Case, Chunk, Push, Reset  # noqa: E402
from fuzz.paged.checks import OverBound  # noqa: E402
from fuzz.targets.base import Mismatch, TargetError  # noqa: E402
from fuzz.targets.hf import findings  # noqa: E402
from fuzz.targets.hf.cb import HFCBTarget, instances, layout, make_hf_cb, requests_of  # noqa: E402
from impl.hf.cb import Output, Result, Snapshot  # noqa: E402


RELEASE = cb.compat.info().transformers
#: docs/findings/hf-cb-sliding-ring-start.md: before PR #47708 every request past W reads the ring wrongly.
RING = any(f.id == "hf-cb-sliding-ring-start" for f in findings.applicable("hf-cb:mistral", RELEASE))
past_w_ok = pytest.mark.skipif(RING, reason=f"transformers {RELEASE} has hf-cb-sliding-ring-start")


@pytest.fixture(scope="module")
def strict():
    return HFCBTarget("mistral", strict=True)


def _case_with_batched_prefill(window, ops_for):
    """The first case of ``ops_for(k)`` (k = 2, 3, ...) whose first stream's drawn ``max_batch_tokens`` is >= 2, so its
    first request's prefill is scheduled as one chunk of 2 or more tokens (layouts come from the case's seed)."""
    for k in range(2, 40):
        case = Case(window, ops_for(k))
        if layout(case, 0)[0] >= 2:
            return case
    raise AssertionError("no case with max_batch_tokens >= 2")  # pragma: no cover


def test_requests_of_a_stream():
    """Each chunk is a request; the pushes after it are its decode steps; a leading push is a one-token prompt."""
    seg = list(enumerate([Push(), Push(), Chunk(4), Chunk(0), Push(), Chunk(2)]))
    reqs = requests_of(seg)
    assert [(r.prompt_len, r.max_new) for r in reqs] == [(1, 2), (4, 2), (2, 1)]
    assert reqs[1].op_of_token(0) == (2, Chunk(4)) and reqs[1].op_of_token(1) == (4, Push())
    assert reqs[1].op_at(3) == (2, Chunk(4)) and reqs[1].op_at(4) == (4, Push())


@past_w_ok
def test_concurrent_requests_past_the_window_agree_with_the_spec(strict):
    """Several requests of different lengths (two longer than W, prefills split by max_batch_tokens), both attention
    implementations, two streams: tokens and logprobs match the spec-masked reference; the tables pass the audits."""
    case = Case(3, [Chunk(7), Push(), Push(), Chunk(2), Push(), Chunk(5), Push(), Reset(5), Chunk(9), Push(), Chunk(3)])
    stats = strict.run(case)
    assert stats.tokens == 31 and "chunk>W" in stats.phases


@past_w_ok
@pytest.mark.parametrize("window", [2, 4, 8])
def test_window_sweep_agrees(strict, window):
    strict.run(Case(window, [Chunk(window + 3), Push(), Push(), Chunk(window), Push(), Chunk(1), Push()]))


@pytest.mark.skipif(not RING, reason="the ring read is right on this release (PR #47708)")
def test_ring_start_finding_reproduces_and_is_known():
    """docs/findings/hf-cb-sliding-ring-start.md: a two-token prompt decoded through position W = 2."""
    case = Case(2, [Chunk(2), Push(), Push()])
    with pytest.raises(Mismatch, match=r"W=2"):
        HFCBTarget("mistral", strict=True).run(case)
    assert HFCBTarget("mistral").run(case).known == {"hf-cb-sliding-ring-start": True}


def test_a_window_off_by_one_is_caught():
    """Negative control: models built with W+1 (the adapter bug of converting W wrongly) disagree with the spec."""
    t = HFCBTarget("mistral", window_shift=1, strict=True)
    with pytest.raises(Mismatch, match=r"generated token \d+ at position \d+ \(W=3\)"):
        t.run(Case(3, [Chunk(8), Push(), Push(), Push()]))


def test_window_1_prefill_finding_reproduces_and_is_known():
    """docs/findings/hf-cb-window-1-prefill.md: a W = 1 prompt prefilled as one chunk of >= 2 tokens sees the
    earlier tokens of the chunk. Strict: a Mismatch at the chunk; by default: recorded as the known finding."""
    case = _case_with_batched_prefill(1, lambda k: [Chunk(k), Push()])
    with pytest.raises(Mismatch, match=r"W=1"):
        HFCBTarget("mistral", strict=True).run(case)
    assert HFCBTarget("mistral").run(case).known == {"hf-cb-window-1-prefill": True}
    # W = 1 with one-token prompts only: no chunk of 2, so not this finding (the ring finding where it applies)
    assert "hf-cb-window-1-prefill" not in HFCBTarget("mistral").run(Case(1, [Push(), Push(), Push(), Chunk(1), Push()])).known


def test_the_finding_applies_to_every_cb_target_and_not_to_hf_targets():
    release = cb.compat.info().transformers
    assert "hf-cb-window-1-prefill" in [f.id for f in findings.applicable("hf-cb:gemma2", release)]
    assert findings.hits("hf-cb:mistral", "5.15.1", [Case(2, [Chunk(2), Push()])])[0].id == "hf-cb-sliding-ring-start"
    assert not findings.hits("hf-cb:mistral", "5.25.0", [Case(2, [Chunk(2), Push()])])
    assert "hf-cb-window-1-prefill" not in {f.id for f in findings.applicable("hf:mistral", release)}
    assert findings.target_name("hf-cb:mistral") == "hf-cb:mistral"


def _result(snapshots, final=None):
    return Result(outputs=[Output([1], [0.0], None)], snapshots=snapshots, final_tables=final or {})


def test_audit_flags_a_block_shared_between_requests(strict):
    reqs = requests_of(list(enumerate([Chunk(3), Push(), Chunk(2)])))
    snap = Snapshot(0, {"sliding_attention": {0: [5], 1: [5]}}, {"sliding_attention": 4}, {0: 3, 1: 2}, {0: 3, 1: 2})
    (err,) = strict._audit(3, "[t]", reqs, _result([snap]))
    assert type(err) is Mismatch and "block 5 is in the tables of requests 0 and 1" in str(err)


def test_audit_flags_missing_and_excess_blocks(strict):
    reqs = requests_of(list(enumerate([Chunk(9)])))
    few = Snapshot(0, {"sliding_attention": {0: [1]}}, {"sliding_attention": 4}, {0: 9}, {0: 9})
    (err,) = strict._audit(8, "[t]", reqs, _result([few]))
    assert "fewer than the 2 its needed positions occupy" in str(err)
    many = Snapshot(0, {"sliding_attention": {0: [1, 2, 3, 4]}}, {"sliding_attention": 4}, {0: 9}, {0: 9})
    (err,) = strict._audit(3, "[t]", reqs, _result([many]))
    assert isinstance(err, OverBound) and "more than ceil((W-1)/B)+1 = 2" in str(err)


def test_audit_flags_tables_held_after_the_run(strict):
    reqs = requests_of(list(enumerate([Chunk(2)])))
    (err,) = strict._audit(3, "[t]", reqs, _result([], {"sliding_attention": {0: [7]}}))
    assert "still held" in str(err)


def test_the_run_reads_the_block_tables():
    """The tables are read at every step: a request longer than W holds ceil(W/B) sliding blocks (the ring),
    and none is held once every request finished."""
    res = cb.CBFamily("mistral").run(5, "sdpa", [cb.Request(list(range(3, 15)), 2), cb.Request([4, 5], 1)],
                                     max_batch_tokens=4, page_size=4)
    assert all(o.error is None for o in res.outputs) and res.reader_error is None
    held = [len(s.tables["sliding_attention"].get(0, [])) for s in res.snapshots]
    assert max(held) == 2 and res.final_tables == {"sliding_attention": {}}
    assert max(s.query.get(0, 0) for s in res.snapshots) == 4  # the 12-token prompt was split into chunks of 4


def test_registry_and_listing():
    from fuzz.targets.registry import resolve

    assert instances() == ["hf-cb:mistral"]
    assert resolve("hf-cb:mistral@sdpa").attns == ("sdpa",)
    with pytest.raises(TargetError, match="paged\\|eager"):
        make_hf_cb("mistral@flex_attention")
    with pytest.raises(TargetError, match="unknown family"):
        make_hf_cb("llama")


def test_campaign_reports_the_known_finding(tmp_path, capsys):
    """A short default campaign reaches W = 1 with a batched prefill (and, on 5.0-5.15, a request past W): it exits 1
    naming a finding as reproduced; --accept-known exits 0."""
    from fuzz.cli import main

    args = ["fuzz", "--target", "hf-cb:mistral", "--time", "8", "--seed", "0", "--plain", "--seeds-dir",
            str(tmp_path / "s"), "--db", str(tmp_path / "db")]
    rc = main(args)
    out = capsys.readouterr().out
    want = "hf-cb-sliding-ring-start" if RING else "hf-cb-window-1-prefill"
    assert rc == 1 and f"known finding {want} reproduced" in out, out
    assert main(args + ["--accept-known"]) == 0, capsys.readouterr().out


@past_w_ok
def test_gemma2_paged_eager_drops_soft_capping():
    """Like with like: ``paged|eager`` (5.25.0 integrations/eager_paged.py) takes no ``softcap``, so Gemma 2's
    reference for it drops attention soft-capping; against the capped reference the same requests disagree."""
    if cb.paged_eager_softcaps():
        pytest.skip("this release's paged|eager applies soft-capping: the twin reference is not used")
    t = HFCBTarget("gemma2", attns=["paged|eager"], strict=True)
    case = Case(6, [Chunk(12), Push(), Push(), Push(), Push()])  # capped vs not: 1.8e-3 apart in a logprob (tol 3.5e-4)
    t.run(case)
    assert t.cb.reference_family("paged|eager") is not t.family
    t.cb._nocap = t.family  # hold it to the capped reference instead
    with pytest.raises(Mismatch, match="log-probability"):
        t.run(case)


def test_a_request_the_loop_failed_is_a_mismatch_at_its_prompt(strict):
    """The manager's loop catches what a request raises and hands back ``GenerationOutput.error``: that is the
    implementation's failure on a spec-valid request (a Mismatch naming it), never silently a pass; a short output is
    one too."""
    req = requests_of(list(enumerate([Chunk(3), Push()])))[0]
    (err,) = strict._request("sdpa", 3, "[t]", 0, req, [5, 6, 7], Output([], [], "KeyError: 'sliding_attention'"))
    assert err.index == 0 and "failed inside the continuous batching loop: KeyError" in str(err)
    (err,) = strict._request("sdpa", 3, "[t]", 0, req, [5, 6, 7], Output([9], [-1.0], None))
    assert "returned 1 tokens / 1 logprobs for max_new_tokens=2" in str(err)


def test_the_mask_convention_against_the_spec():
    """The glue's own mask (``build_attention_mask``, 5.25.0 utils.py:115-191) over a request block as the sliding
    allocator lays it out (``min(past, W-1)`` cached keys, then the chunk: sliding_attention.py:77-79) is
    ``pyspec.in_window`` for every W >= 2; at W = 1 it is not (docs/findings/hf-cb-window-1-prefill.md)."""
    import torch

    import pyspec

    try:
        from transformers.generation.continuous_batching.utils import build_attention_mask
    except ImportError:
        from transformers.generation.continuous_batching.continuous_api import build_attention_mask
    for w in range(1, 7):
        for past in range(0, 9):
            for q in range(1, 6):
                cached = min(past, w - 1)
                k = cached + q
                m = torch.zeros(1, 1, q, k)
                build_attention_mask(m, [0, q], [0, k], sliding_window=w)
                got = (m[0, 0] == 0).tolist()
                want = [[pyspec.in_window(w, past + i, past - cached + j) and past - cached + j <= past + i
                         for j in range(k)] for i in range(q)]
                if w >= 2:
                    assert got == want, (w, past, q)
                elif q >= 2:
                    assert got != want, (w, past, q)  # the finding: a chunk of >= 2 at W = 1 is causal only
