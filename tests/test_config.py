"""``CampaignConfig``: one frozen value, JSON-plain for the report, validated where it is built."""

from __future__ import annotations

import dataclasses
import json

import pytest

from fuzz.config import CampaignConfig
from fuzz.workers import worker_seed


def test_frozen_and_replaced_not_mutated():
    c = CampaignConfig(targets=["pyring", "ring-c"], seconds=5, campaign_seed=3)
    assert c.targets == ("pyring", "ring-c")  # a list becomes a tuple: hashable, immutable
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.seconds = 1  # type: ignore[misc]
    d = c.replace(campaign_seed=worker_seed(c.campaign_seed, 1), max_examples=7)
    assert (c.campaign_seed, c.max_examples) == (3, None) and (d.campaign_seed, d.max_examples) == (3 + 7919, 7)


def test_json_form_is_plain_and_complete():
    c = CampaignConfig(targets=("pyring",), seconds=2.5, window_max=8, start_window=8, db="/tmp/db")
    doc = json.loads(json.dumps(c.to_json()))
    assert doc["targets"] == ["pyring"] and doc["start_window"] == 8 and doc["db"] == "/tmp/db"
    assert set(doc) == {f.name for f in dataclasses.fields(CampaignConfig)}
    assert CampaignConfig(**{**doc, "targets": tuple(doc["targets"])}) == c


def test_an_unknown_tester_is_refused():
    with pytest.raises(ValueError, match="tester must be one of biased, uniform"):
        CampaignConfig(tester="random")
