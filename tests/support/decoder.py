"""What the decoder's test modules share: a mixed config (GQA, sliding and global layers), token
streams, and one torch thread per test (tiny models: extra intra-op threads only spin on a shared CI
machine; import ``one_thread`` into a module and it applies to every test there)."""

from __future__ import annotations

import pytest
import torch

from impl.decoder import DecoderConfig, torch_threads

MIXED = DecoderConfig(vocab=50, d_model=32, layers=3, n_heads=4, n_kv_heads=1, head_dim=8,
                      window=(3, None, 5), dtype="float64", seed=1)


@pytest.fixture(autouse=True)
def one_thread():
    with torch_threads(1):
        yield


def toks(n: int, vocab: int = 50, seed: int = 0) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()
