"""Negative controls: every decoder mutant (impl.mutants.decoder_mutants) makes the
properties fail, and the campaign target ``decoder`` kills it."""

from __future__ import annotations

import pytest

from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.targets.decoder_props import configs, run_parity_property
from fuzz.targets.decoder import make_decoder
from impl.mutants.decoder_mutants import DECODER_MUTANTS

NAMES = sorted(DECODER_MUTANTS)


def test_catalogue_has_the_issue_controls():
    assert {"cache-length-position", "keeps-w-plus-1", "rope-at-slot", "full-mask-diagonal"} <= set(NAMES)
    for m in DECODER_MUTANTS.values():
        assert m.doc.startswith("Bug class:") or "Bug class:" in (m.cache_cls.__doc__ or "") + (m.model_cls.__doc__ or "")


@pytest.mark.parametrize("name", NAMES)
def test_mutant_fails_the_properties(name):
    m = DECODER_MUTANTS[name]
    with pytest.raises(AssertionError):
        run_parity_property(max_examples=100, model_cls=m.model_cls, cache_cls=m.cache_cls,
                            config_strategy=configs(need=m.needs), shrink=False)


@pytest.mark.parametrize("name", NAMES)
def test_campaign_target_kills_mutant(name, tmp_path):
    res = fuzz_target(make_decoder(name), CampaignConfig(seconds=30, max_examples=300, campaign_seed=0,
                                                         seeds_dir=str(tmp_path)))
    assert res.failures, f"mutant {name} survived {res.examples} examples"
    assert res.failures[0].error.startswith("Mismatch: mutant:decoder-" + name)


def test_unknown_mutant_is_named():
    with pytest.raises(KeyError, match="nope"):
        make_decoder("nope")
