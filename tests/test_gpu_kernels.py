"""``gpu:flash-attn`` and ``gpu:flashinfer`` (docs/kernels.md): without a CUDA device (or the package) each is
unavailable with one line naming what is missing, stays out of the default campaign, and ``kvwindow fuzz --target``
prints that reason and exits 2; the window conventions are the serving glue's; the paged description FlashInfer
takes is built from the same layout the Triton targets drive. On a device machine the campaigns run
(``scripts/gpu_check.sh``), and the last test drives each target through boundary cases."""

from __future__ import annotations

import numpy as np
import pytest

from fuzz.cli import main
from fuzz.ops import Case
from fuzz.targets import registry

NAMES = ("gpu:flash-attn", "gpu:flashinfer")


def _has_cuda() -> bool:
    try:
        import torch
        return bool(torch.cuda.is_available())
    except ImportError:
        return False


@pytest.mark.parametrize("name", NAMES)
def test_unavailable_without_a_device_says_why_in_one_line(name):
    target, why = registry.probe(name)
    if target is not None:
        pytest.skip(f"{name} runs here (a CUDA device and the package)")
    assert why and "\n" not in why
    assert ("no CUDA device" in why) == (not _has_cuda()), why
    listed = {t.name: t for t in registry.list_targets()}
    assert not listed[name].cpu and name not in registry.default_targets()


@pytest.mark.parametrize("name", NAMES)
def test_fuzz_prints_the_reason_and_exits_2(name, capsys):
    if registry.probe(name)[0] is not None:
        pytest.skip(f"{name} runs here")
    rc = main(["fuzz", "--target", name, "--time", "5"])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"target '{name}' is not available here:" in err and ("CUDA" in err or "not installed" in err)


def test_window_conventions_are_the_serving_glue():
    from impl.engines import gpu_attn as G

    # vLLM flash_attn.py:1096 (sliding_window - 1, 0); flashinfer.py:2069-2072 window_left = sliding_window[0]
    assert [G.window_size(w) for w in (1, 4, 4096)] == [(0, 0), (3, 0), (4095, 0)]
    assert [G.window_left(w) for w in (1, 4, 4096)] == [0, 3, 4095]


def test_flashinfer_pages_follow_the_layout():
    """indptr / indices / last_page_len of two sequences (5 and 7 keys, pages of 3): the pages in logical order,
    wholly evicted ones at the null page 0, the last page's fill."""
    from fuzz.targets.engines import gpu_kernels as K
    from fuzz.targets.engines import triton_paged as P

    seqs = P.sequences(Case.parse(2, "chunk:4 push push push"), 2, 1, 8, "float32")[2]
    two = [seqs[1], seqs[3]]  # keys 5 (needs 3 ..), 7 (needs 5 ..)
    lay = P.layout(two, 3, seed=1)
    indptr, indices, last = K.pages(lay, two)
    assert indptr.tolist() == [0, 2, 5] and last.tolist() == [2, 1]
    assert indices[:2].tolist() == lay.block_table[0, :2].tolist()
    assert indices[2] == 0 and indices[3] != 0  # 7 keys, window 2: block 0 (positions 0-2) is wholly evicted
    assert np.isnan(lay.k_cache[0]).all()


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_boundary_cases_on_a_device(name):
    target, why = registry.probe(name)
    if target is None:
        pytest.skip(f"{name} unavailable: {why}")
    for w, text, dtype in [(3, "chunk:5 push push chunk:4 push chunk:2", None), (1, "push push chunk:3 push", "bfloat16"),
                           (5, "chunk:12 push chunk:9 push reset:6 chunk:7 push", "float16")]:
        case = Case.parse(w, text, dtype=dtype)
        stats = target.run(case)
        assert stats.tokens == case.tokens and stats.calls >= 1
