"""Short cuda-ring / cuda-decoder campaigns on a GPU. Skipped with the reason when no GPU (or no library)."""

from __future__ import annotations

import pytest

from tests.support.cuda import pytestmark  # noqa: F401 - skips without a GPU


@pytest.mark.parametrize("name", ["cuda-ring", "cuda-decoder"])
def test_short_gpu_campaign(name):
    from fuzz.campaign import fuzz_target
    from fuzz.config import CampaignConfig
    from fuzz.targets.registry import resolve

    res = fuzz_target(resolve(name), CampaignConfig(seconds=15, max_examples=60, campaign_seed=11))
    assert not res.failures, res.failures
    assert res.examples > 0
