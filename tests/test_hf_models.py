"""hf-mistral / hf-gemma2: tiny random-weight models, every logit held to this project's own forward."""

import pytest

pytest.importorskip("transformers")

from fuzz.campaign import fuzz_target  # noqa: E402
from fuzz.config import CampaignConfig  # noqa: E402
from fuzz.ops import Case, Chunk, Push, Reset  # noqa: E402
from fuzz.targets.base import Mismatch  # noqa: E402
from fuzz.targets.hf.models import HFModelTarget, make_hf_gemma2, make_hf_mistral  # noqa: E402
from impl.hf import compat  # noqa: E402
from impl.hf.models import attn_impls  # noqa: E402

# Prefill longer than W, decode, reset to another window, again: supported by every release tested
# (4.45 Gemma 2 is wrong for other shapes: docs/findings/hf-445-sliding-cache.md).
CASE = (3, [Chunk(5), Push(), Push(), Push(), Reset(4), Chunk(6), Push(), Push()])
LAYERS_CASE = (3, [Chunk(5), Push(), Push(), Chunk(4), Push(), Reset(4), Chunk(6), Push(), Chunk(1), Push()])


@pytest.mark.parametrize("make", [make_hf_mistral, make_hf_gemma2], ids=["hf-mistral", "hf-gemma2"])
def test_campaign_runs_clean(make, tmp_path):
    t = make()
    res = fuzz_target(t, CampaignConfig(seconds=20, max_examples=20, campaign_seed=0, seeds_dir=str(tmp_path)))
    assert not res.failures, res.failures
    assert res.examples >= 5
    assert res.versions["transformers"] == compat.info().transformers


@pytest.mark.parametrize("arch", ["mistral", "gemma2"])
def test_eager_and_sdpa_each_match_the_reference(arch):
    impls = attn_impls(arch)
    assert "eager" in impls
    if arch == "mistral":
        assert impls == ["eager", "sdpa"]
    for attn in impls:
        for mode in ("manual", "generate"):
            t = HFModelTarget(arch, attns=[attn], modes=[mode])
            t.run(Case(*CASE))
            if t.info.api == "layers":
                t.run(Case(*LAYERS_CASE))


@pytest.mark.parametrize("arch", ["mistral", "gemma2"])
def test_model_with_window_shifted_by_one_is_caught(arch):
    t = HFModelTarget(arch, window_shift=1, name=f"shifted-{arch}", modes=["manual"], strict=True)
    with pytest.raises(Mismatch, match="logits|stores|row"):
        t.run(Case(*CASE))


def test_shifted_model_is_caught_by_a_campaign(tmp_path):
    t = HFModelTarget("mistral", window_shift=-1, name="narrowed-mistral", modes=["manual"], attns=["sdpa"])
    res = fuzz_target(t, CampaignConfig(seconds=30, max_examples=60, campaign_seed=0, seeds_dir=str(tmp_path),
                                        window_max=8))
    assert res.failures and "Mismatch" in res.failures[0].error


@pytest.mark.parametrize("text, push", [("chunk:3 chunk:0 push", 2), ("push chunk:0 push", 2),
                                         ("chunk:2 push chunk:0 chunk:0 push", 4)])
def test_generate_mode_checks_a_push_after_an_empty_chunk(monkeypatch, text, push):
    """An empty chunk feeds nothing: the push after it is a generated token, and its logits are checked."""
    checked = []
    check = HFModelTarget._check

    def spy(self, w, history, steps, snaps, tag, attn):
        checked.extend(i for i, *_ in steps)
        return check(self, w, history, steps, snaps, tag, attn)

    monkeypatch.setattr(HFModelTarget, "_check", spy)
    HFModelTarget("mistral", modes=["generate"], attns=["eager"]).run(Case.parse(3, text))
    assert push in checked, f"{text}: the push at op #{push} was not checked (checked ops: {checked})"
