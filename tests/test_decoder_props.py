"""Hypothesis properties of the ring-buffer cached decoder (fuzz.targets.decoder_props), and the
``decoder`` campaign target under the campaign loop."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.targets.decoder_props import configs, run_greedy_property, run_parity_property
from fuzz.targets.decoder import make_decoder
from fuzz.targets.pyring import PyRing


def test_cache_and_logits_match_full_forward():
    """Properties 1 and 2: random configs (GQA/MQA, sliding + global), streams up to 4W+3,
    random chunk schedules; float64 within 1e-10, float32 within 1e-4."""
    run_parity_property(max_examples=200)


def test_greedy_decoding_matches_full_recompute():
    """Property 3."""
    run_greedy_property(max_examples=60)


def test_properties_hold_with_a_protocol_ring_backend():
    run_parity_property(max_examples=50, backend="protocol", ring_factory=PyRing)


def test_properties_hold_with_the_c_ring_backend():
    pytest.importorskip("impl.ring")
    run_parity_property(max_examples=50, backend="c")


@pytest.mark.gpu
def test_properties_hold_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")

    cuda_cfgs = configs().map(lambda c: dataclasses.replace(c, device="cuda"))
    run_parity_property(max_examples=20, config_strategy=cuda_cfgs)


def test_decoder_campaign_target(tmp_path):
    res = fuzz_target(make_decoder(), CampaignConfig(seconds=60, max_examples=100, campaign_seed=3,
                                                     seeds_dir=str(tmp_path)))
    assert not res.failures, res.failures
    assert res.examples == 100
    assert all(res.phases[p] > 0 for p in ("not-yet-full", "exactly-full", "first-eviction",
                                           "steady-state", "chunk>W", "after-reset"))


def test_decoder_campaign_target_on_the_c_ring(tmp_path):
    pytest.importorskip("impl.ring")
    res = fuzz_target(make_decoder(backend="c"), CampaignConfig(seconds=60, max_examples=30, campaign_seed=4,
                                                                seeds_dir=str(tmp_path)))
    assert not res.failures, res.failures
