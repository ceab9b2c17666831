"""What the GPU test modules share: why they skip (no GPU, no library), the dtypes, random tensors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from impl import cuda_ring  # noqa: E402

REASON = cuda_ring.unavailable_reason()
#: Import into a GPU test module: every test there is marked ``gpu`` and skipped with the reason.
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU run: {REASON}")]

DTYPES = ("fp32", "fp16", "bf16")


def tdt(name):
    return cuda_ring.torch_dtype(name)


def rand(shape, dtype, gen):
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(tdt(dtype))
