"""llama:<arch>: llama.cpp through llama-cpp-python's low-level API on a GGUF written by the release's own
converter. Skips with the reason when llama-cpp-python (or its converter) is not installed:
scripts/ci_engines_heavy.sh builds it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fuzz.ops import Case
from fuzz.targets.base import Mismatch

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (scripts/ci_engines_heavy.sh builds it)")

from impl.engines import EngineUnavailable  # noqa: E402
from impl.engines import llama as adapter  # noqa: E402

try:
    adapter.check("gemma2")
except EngineUnavailable as e:  # e.g. the converter was not extracted
    pytest.skip(str(e), allow_module_level=True)

from fuzz.targets.engines.llama import LlamaTarget  # noqa: E402
from impl.hf import reference  # noqa: E402

warnings.filterwarnings("ignore")


@pytest.fixture(scope="module")
def gemma2():
    return LlamaTarget("gemma2", strict=True)


def test_converter_writes_n_swa_equal_to_hf_sliding_window(gemma2):
    assert gemma2.model(5).n_swa() == 5


def test_window_is_exact_not_off_by_one(gemma2):
    """One decode per token through and past W: equal to the reference at W, far from W +- 1."""
    m, t = gemma2.model(4), gemma2.tiny_for(4)
    ids = list(range(3, 17))
    m.clear()
    got = np.concatenate([m.decode([(tok, p, 0)]) for p, tok in enumerate(ids)])
    for w, close in ((4, True), (3, False), (5, False)):
        want = reference.forward(reference.ref_spec("gemma2", t.config, w), t.state, ids)[0].numpy()
        assert np.allclose(got, want, atol=1e-2, rtol=1e-3) is close, w


@pytest.mark.parametrize("path", ["chunks", "batch", "verify", "fork", "shift"])
def test_paths_agree_with_the_reference(path):
    t = LlamaTarget("gemma2", strict=True, paths=(path,))
    for w, text in ((3, "chunk:2 chunk:4 push chunk:3 push push"), (1, "chunk:3 push push chunk:2"),
                    (4, "chunk:9 push chunk:5 push")):
        t.run(Case.parse(w, text))


def test_two_threads_agree_with_the_reference():
    """Campaigns run one thread (llama.cpp's two-thread pool is ~1000x slower on this loaded machine); the
    multi-threaded kernels are driven here, on every path."""
    LlamaTarget("gemma2", strict=True, threads=2).run(Case.parse(3, "chunk:5 push chunk:3 push"))


def test_a_wrong_window_is_caught(gemma2, monkeypatch):
    """Negative control: the engine run with W + 1 (a GGUF converted from sliding_window = W + 1) against
    the reference at W must mismatch."""
    t = LlamaTarget("gemma2", strict=True, paths=("chunks",))
    monkeypatch.setattr(t, "model", lambda w: gemma2.model(w + 1))
    with pytest.raises(Mismatch):
        t.run(Case.parse(3, "chunk:6 push push"))


def test_registry_lists_llama_gemma2():
    from fuzz.targets import registry

    assert "llama:gemma2" in [n for n, _ in registry.listed_names()]


@pytest.mark.parametrize("path", ["chunks", "batch", "verify", "fork", "shift"])
def test_gemma3_paths_agree_with_the_reference(path):
    """llama:gemma3 (six layers, the published 5:1 pattern) on every path, W = 1 and past W."""
    t = LlamaTarget("gemma3", strict=True, paths=(path,))
    for w, text in ((3, "chunk:2 chunk:4 push chunk:3 push push"), (1, "chunk:3 push push chunk:2")):
        t.run(Case.parse(w, text))


def test_gemma3_converter_drops_layer_types():
    """docs/findings/llama-gemma3-layer-types-dropped.md: a 3-layer Gemma 3 (sliding, sliding, full) runs as
    llama.cpp's pattern 6 reads it (every layer sliding, RoPE base 10 000), not as the checkpoint says."""
    import dataclasses

    t = adapter_tiny().build("gemma3_text", 4, overrides={"tie_word_embeddings": True})
    assert t.layer_types() == ["sliding_attention", "sliding_attention", "full_attention"]
    ids = list(range(3, 15))
    m = adapter.LlamaModel(t, n_ctx=32, n_seq=1)
    m.clear()
    got = m.decode([(x, p, 0) for p, x in enumerate(ids)])
    spec = reference.ref_spec("gemma3_text", t.config, 4)
    as_checkpoint = reference.forward(spec, t.state, ids)[0].numpy()
    as_read = reference.forward(dataclasses.replace(spec, windows=(4, 4, 4), thetas=(1e4,) * 3), t.state, ids)[0].numpy()
    assert np.allclose(got, as_read, atol=1e-2, rtol=1e-3)
    assert np.abs(got - as_checkpoint)[1].max() > 1e-2  # position 1: the global layer's RoPE base
    m.close()


def test_gemma3_all_sliding_seq_add_aborts():
    """docs/findings/llama-swa-only-kshift-abort.md: seq_add then llama_decode on a Gemma 3 whose every layer
    slides aborts in set_input_k_shift (in a child); one global layer (6 layers) decodes."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    run = lambda n: subprocess.run([sys.executable, str(root / "scripts/repro/llama_shift_abort.py"), str(n)],  # noqa: E731
                                   cwd=root, env=env, capture_output=True, text=True, timeout=300)
    ok = run(6)
    assert ok.returncode == 0, ok.stderr[-2000:]
    bad = run(3)
    assert bad.returncode != 0 and "GGML_ASSERT(buffer)" in bad.stdout + bad.stderr, (
        f"llama-cpp-python {adapter.release()} no longer aborts (exit {bad.returncode}): update the note's releases")


def adapter_tiny():
    from impl.engines import tiny

    return tiny
