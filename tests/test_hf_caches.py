"""hf-dynamic / hf-static: transformers' sliding-window cache layers held to their pinned conventions."""

import pytest

pytest.importorskip("transformers")

from fuzz.campaign import fuzz_target  # noqa: E402
from fuzz.config import CampaignConfig  # noqa: E402
from fuzz.targets.hf.caches import HFCacheTarget, make_hf_dynamic, make_hf_static  # noqa: E402
from fuzz.ops import Case, Chunk, Push  # noqa: E402
from fuzz.targets.base import Mismatch  # noqa: E402
from impl.errors import Unavailable  # noqa: E402
from impl.hf import compat, conventions  # noqa: E402


def test_versions_reported():
    v = make_hf_dynamic().versions()
    assert v["transformers"] == compat.info().transformers and "torch" in v
    assert v["hf_cache_api"] in ("layers", "legacy")


@pytest.mark.parametrize("make", [make_hf_dynamic, make_hf_static], ids=["hf-dynamic", "hf-static"])
def test_campaign_runs_clean(make, tmp_path):
    res = fuzz_target(make(), CampaignConfig(seconds=20, max_examples=80, campaign_seed=0, seeds_dir=str(tmp_path)))
    assert not res.failures, res.failures
    assert res.examples >= 20
    assert res.phases["first-eviction"] > 0


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_adapter_shifting_the_window_by_one_is_caught(kind, tmp_path):
    """The adapter bug of converting a window convention wrongly (builds HF with W+1)."""
    if kind == "dynamic" and compat.info().api == "legacy":
        pytest.skip("4.45 DynamicCache never evicts (the window is the mask's job): caught at model level")
    target = HFCacheTarget(kind, window_shift=1, name=f"shifted-{kind}")
    res = fuzz_target(target, CampaignConfig(seconds=30, max_examples=200, campaign_seed=1, seeds_dir=str(tmp_path)))
    assert res.failures and "Mismatch" in res.failures[0].error


def test_convention_with_w_instead_of_w_minus_1_is_caught():
    """An adapter that asserted 'the dynamic layer stores lastWindow W' would be wrong on 5.x."""
    t = HFCacheTarget("dynamic", strict=True)
    if t.info.api != "layers":
        pytest.skip("the W-1 storage convention is the 5.x layer API's")
    import impl.hf.caches as caches

    class WrongConvention(caches.LayerDriver):
        def convention(self, n, k):
            return conventions.static_layer(n, k, self.window)[0][: n + k], \
                [p for p in conventions.static_layer(n, k, self.window)[1] if p is not None]

    t._driver = lambda w: WrongConvention("dynamic", w, t.width)
    with pytest.raises(Mismatch):
        t.run(Case(3, [Push(), Push(), Push(), Push()]))


def test_layer_that_keeps_one_more_is_caught(tmp_path):
    info = compat.info()
    if info.api != "layers":
        pytest.skip("layer subclasses are the 5.x API")
    from transformers.cache_utils import DynamicSlidingWindowLayer

    class KeepsOneMore(DynamicSlidingWindowLayer):
        def __init__(self, sliding_window, **kw):
            super().__init__(sliding_window=sliding_window + 1, **kw)

    t = HFCacheTarget("dynamic", layer_class=KeepsOneMore, name="keeps-one-more")
    res = fuzz_target(t, CampaignConfig(seconds=30, max_examples=200, campaign_seed=2, seeds_dir=str(tmp_path)))
    assert res.failures and "Mismatch" in res.failures[0].error


def test_static_not_yet_full_and_long_chunk_conventions():
    # Pinned examples (5.x layers API): W=3.
    assert conventions.static_layer(1, 1, 3) == ([0, 1, None], [0, 1, None])
    assert conventions.static_layer(1, 5, 3) == ([0, 1, 2, 3, 4, 5], [3, 4, 5])
    assert conventions.static_layer(4, 1, 3) == ([2, 3, 4], [2, 3, 4])
    assert conventions.static_layer(4, 2, 3) == ([2, 3, 4, 5], [3, 4, 5])
    assert conventions.dynamic_layer(4, 1, 3) == ([2, 3, 4], [3, 4])
    t = HFCacheTarget("static", strict=True)
    t.run(Case(3, [Chunk(7), Push(), Push()]))  # prefill longer than W, then decode: right on every release
    t.run(Case(4, [Chunk(2), Push()]))  # not yet full: W slots, zeros where unfilled
    if t.info.api == "layers":
        t.run(Case(3, [Push(), Chunk(7), Push(), Chunk(2), Chunk(3)]))
        t.run(Case(4, [Chunk(2), Chunk(1), Push(), Push(), Chunk(9)]))


def test_unavailable_without_transformers(monkeypatch):
    def missing():
        raise compat.HFUnavailable("transformers is not installed")

    monkeypatch.setattr(compat, "info", missing)
    with pytest.raises(Unavailable, match="transformers is not installed"):
        make_hf_dynamic()
