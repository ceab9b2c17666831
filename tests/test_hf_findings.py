"""The written-up disagreements (docs/findings/) still reproduce on the installed transformers.

If one of these starts passing, transformers changed: update the finding, its
predicate in fuzz/targets/hf/findings.py, and the supported-range note.
"""

import pytest

pytest.importorskip("transformers")

from fuzz.targets.hf.caches import HFCacheTarget, make_hf_dynamic  # noqa: E402
from fuzz.ops import Case, Chunk, Push  # noqa: E402
from fuzz.targets.base import Mismatch  # noqa: E402
from impl.hf import compat  # noqa: E402
from packaging.version import Version  # noqa: E402
from fuzz.targets.hf.models import HFModelTarget  # noqa: E402

API = compat.info().api
layers = pytest.mark.skipif(API != "layers", reason="finding is on the 5.x per-layer cache API")
legacy = pytest.mark.skipif(API != "legacy", reason="finding is on the 4.45 cache API")
# docs/findings/hf-445-sliding-cache.md part 1: the early eviction at W-1 is in 4.45-4.51 (fixed in 4.52).
EARLY_EVICTION = API == "legacy" and Version(compat.info().transformers) < Version("4.52")
early_eviction = pytest.mark.skipif(not EARLY_EVICTION, reason="early eviction at W-1 is 4.45-4.51's")


@layers
def test_window_1_dynamic_layer_keeps_everything():
    with pytest.raises(Mismatch, match=r"stores positions \[0\]"):
        HFCacheTarget("dynamic", strict=True).run(Case(1, [Push()]))


@layers
def test_window_1_mistral_decode_logits_are_wrong():
    t = HFModelTarget("mistral", strict=True, modes=["manual"])
    t._convention = lambda n, w: None  # look at the logits only
    with pytest.raises(Mismatch, match="logits at position 3"):
        t.run(Case(1, [Chunk(3), Push()]))


@layers
def test_static_empty_update_when_full():
    with pytest.raises(Mismatch):
        HFCacheTarget("static", strict=True).run(Case(2, [Chunk(2), Chunk(0)]))


@legacy
def test_445_static_empty_update_crashes():
    # docs/findings/hf-static-sliding-empty-update.md: 4.45-4.55 raise on any empty update; 4.56's
    # SlidingWindowLayer only once the window is full.
    if Version(compat.info().transformers) < Version("4.56"):
        with pytest.raises(Mismatch, match="raised IndexError"):
            HFCacheTarget("static", strict=True).run(Case(3, [Chunk(0)]))
    else:
        HFCacheTarget("static", strict=True).run(Case(3, [Chunk(0)]))
        with pytest.raises(Mismatch, match="raised RuntimeError"):
            HFCacheTarget("static", strict=True).run(Case(2, [Chunk(2), Chunk(0)]))


@early_eviction
def test_445_hybrid_cache_decoding_through_position_w_minus_1():
    # The third token's update returns [1, <zero slot>, 2]: position 0 was evicted one step early.
    with pytest.raises(Mismatch, match=r"returned rows for positions \[1, None, 2\].*also needs \[0\]"):
        HFCacheTarget("static", strict=True).run(Case(3, [Push(), Push(), Push()]))
    t = HFModelTarget("gemma2", strict=True, modes=["manual"], attns=["eager"])
    t._convention = lambda n, w: None
    with pytest.raises(Mismatch, match="logits at position 2"):
        t.run(Case(3, [Push(), Push(), Push()]))


@pytest.mark.skipif(API != "legacy" or EARLY_EVICTION, reason="legacy API releases after the 4.52 fix")
def test_decoding_through_position_w_minus_1_is_right_from_4_52():
    """The converse: on 4.52-4.56 the same case holds the spec (the finding's release range ends at 4.51)."""
    HFCacheTarget("static", strict=True).run(Case(3, [Push(), Push(), Push()]))
    t = HFModelTarget("gemma2", strict=True, modes=["manual"], attns=["eager"])
    t._convention = lambda n, w: None
    t.run(Case(3, [Push(), Push(), Push()]))


@legacy
def test_445_chunk_after_cached_tokens():
    # A chunk longer than W after cached tokens: only the chunk is returned (context lost).
    with pytest.raises(Mismatch, match=r"also needs \[0\]"):
        HFCacheTarget("static", strict=True).run(Case(3, [Push(), Chunk(5)]))


def test_non_strict_targets_leave_known_cases_out():
    t = make_hf_dynamic()
    reason = t.accepts(Case(1, [Push()]))
    if API == "layers":
        assert reason is not None and "hf-sliding-window-1" in reason
